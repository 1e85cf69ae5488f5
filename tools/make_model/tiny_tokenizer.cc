#include "tools/make_model/tiny_tokenizer.h"

#include <cctype>
#include <map>
#include <string_view>
#include <utility>

#include "nlohmann/json.hpp"

#include "tools/make_model/tiny_corpus.h"

namespace tandem::tools {
namespace {

using nlohmann::ordered_json;

constexpr const char* kSpecialTokens[] = {"<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>",
                                          "<|end_header_id|>", "<|eot_id|>"};

// Llama-3-style chat format: each message framed by header ids and ended by
// <|eot_id|>; bos first; an open assistant header when a reply is wanted.
constexpr const char* kChatTemplate =
    "{{- bos_token }}"
    "{%- for message in messages %}"
    "{{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' + message['content'] | trim + "
    "'<|eot_id|>' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}"
    "{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}"
    "{%- endif %}";

std::string CodePointToUtf8(int cp) {
  std::string out;
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else {  // the byte map stays below U+0800
    out.push_back(static_cast<char>(0xc0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  }
  return out;
}

bool IsLetter(char c) { return std::isalpha(static_cast<unsigned char>(c)) != 0; }
bool IsDigit(char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; }
bool IsSpace(char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; }

// An ASCII approximation of the GPT-2 pre-tokenizer pattern: contractions,
// optional space + letters / digits / punctuation, then runs of whitespace.
size_t NextPiece(std::string_view text, size_t i) {
  for (std::string_view c : {"'s", "'t", "'re", "'ve", "'m", "'ll", "'d"}) {
    if (text.substr(i, c.size()) == c) return i + c.size();
  }
  size_t j = i;
  if (text[j] == ' ' && j + 1 < text.size() && !IsSpace(text[j + 1])) ++j;
  if (!IsSpace(text[j])) {
    auto same_class = [&](char c) {
      if (IsLetter(text[j])) return IsLetter(c);
      if (IsDigit(text[j])) return IsDigit(c);
      return !IsSpace(c) && !IsLetter(c) && !IsDigit(c);
    };
    size_t k = j + 1;
    while (k < text.size() && same_class(text[k])) ++k;
    return k;
  }
  size_t k = j;
  while (k < text.size() && IsSpace(text[k])) ++k;
  // Leave the last space to prefix the next word, as the GPT-2 pattern does.
  if (k < text.size() && k - j > 1 && text[k - 1] == ' ') --k;
  return k;
}

struct Learned {
  std::vector<std::string> tokens;                          // id -> byte-level string
  std::vector<std::pair<std::string, std::string>> merges;  // in priority order
};

Learned Train(int num_merges) {
  Learned out;
  std::map<std::string, int> token_ids;
  for (int b = 0; b < 256; ++b) {
    out.tokens.push_back(CodePointToUtf8(ByteToUnicode(static_cast<unsigned char>(b))));
    token_ids[out.tokens.back()] = b;
  }
  std::map<std::string, int> piece_counts;
  std::string_view text(kTinyCorpus);
  for (size_t i = 0; i < text.size();) {
    size_t next = NextPiece(text, i);
    ++piece_counts[std::string(text.substr(i, next - i))];
    i = next;
  }
  std::vector<std::pair<std::vector<int>, int>> words;
  for (const auto& [piece, count] : piece_counts) {
    std::vector<int> ids;
    for (unsigned char c : piece) ids.push_back(c);
    words.emplace_back(std::move(ids), count);
  }
  for (int m = 0; m < num_merges; ++m) {
    std::map<std::pair<int, int>, int> pair_counts;
    for (const auto& [ids, count] : words) {
      for (size_t k = 0; k + 1 < ids.size(); ++k) pair_counts[{ids[k], ids[k + 1]}] += count;
    }
    std::pair<int, int> best{-1, -1};
    int best_count = 1;  // a merge must occur at least twice
    for (const auto& [pair, count] : pair_counts) {
      if (count > best_count) best = pair, best_count = count;  // ties: first (smallest) pair wins
    }
    if (best.first < 0) break;
    // Two merge paths can spell the same string ("ab"+"c", "a"+"bc"): one id.
    std::string merged_text = out.tokens[best.first] + out.tokens[best.second];
    auto [it, inserted] = token_ids.emplace(merged_text, static_cast<int>(out.tokens.size()));
    if (inserted) out.tokens.push_back(merged_text);
    int new_id = it->second;
    out.merges.emplace_back(out.tokens[best.first], out.tokens[best.second]);
    for (auto& [ids, count] : words) {
      std::vector<int> merged;
      for (size_t k = 0; k < ids.size(); ++k) {
        if (k + 1 < ids.size() && ids[k] == best.first && ids[k + 1] == best.second) {
          merged.push_back(new_id);
          ++k;
        } else {
          merged.push_back(ids[k]);
        }
      }
      ids = std::move(merged);
    }
  }
  return out;
}

ordered_json ByteLevel(bool add_prefix_space) {
  return {{"type", "ByteLevel"}, {"add_prefix_space", add_prefix_space}, {"trim_offsets", true}, {"use_regex", true}};
}

ordered_json AddedToken(int id, const std::string& content) {
  return {{"id", id},        {"content", content},  {"single_word", false}, {"lstrip", false},
          {"rstrip", false}, {"normalized", false}, {"special", true}};
}

ordered_json PostProcessor(int bos_id) {
  const std::string bos = kSpecialTokens[0];
  auto special = [&](int type_id) { return ordered_json{{"SpecialToken", {{"id", bos}, {"type_id", type_id}}}}; };
  auto sequence = [](const char* id, int type_id) {
    return ordered_json{{"Sequence", {{"id", id}, {"type_id", type_id}}}};
  };
  return {{"type", "TemplateProcessing"},
          {"single", {special(0), sequence("A", 0)}},
          {"pair", {special(0), sequence("A", 0), special(1), sequence("B", 1)}},
          {"special_tokens", {{bos, {{"id", bos}, {"ids", {bos_id}}, {"tokens", {bos}}}}}}};
}

std::string TokenizerJson(const Learned& learned, int first_special) {
  ordered_json vocab = ordered_json::object();
  for (size_t id = 0; id < learned.tokens.size(); ++id) vocab[learned.tokens[id]] = id;
  ordered_json merges = ordered_json::array();
  for (const auto& [a, b] : learned.merges) merges.push_back(a + " " + b);
  ordered_json added = ordered_json::array();
  for (int i = 0; i < 5; ++i) added.push_back(AddedToken(first_special + i, kSpecialTokens[i]));
  ordered_json model = {{"type", "BPE"},
                        {"dropout", nullptr},
                        {"unk_token", nullptr},
                        {"continuing_subword_prefix", nullptr},
                        {"end_of_word_suffix", nullptr},
                        {"fuse_unk", false},
                        {"byte_fallback", false},
                        {"ignore_merges", false},
                        {"vocab", vocab},
                        {"merges", merges}};
  ordered_json root = {{"version", "1.0"},
                       {"truncation", nullptr},
                       {"padding", nullptr},
                       {"added_tokens", added},
                       {"normalizer", nullptr},
                       {"pre_tokenizer", ByteLevel(false)},
                       {"post_processor", PostProcessor(first_special)},
                       {"decoder", ByteLevel(true)},
                       {"model", model}};
  return root.dump(2);
}

std::string TokenizerConfigJson(int first_special, int model_max_length) {
  ordered_json decoder = ordered_json::object();
  for (int i = 0; i < 5; ++i) {
    ordered_json token = AddedToken(first_special + i, kSpecialTokens[i]);
    token.erase("id");
    decoder[std::to_string(first_special + i)] = token;
  }
  ordered_json root = {{"added_tokens_decoder", decoder},      {"bos_token", kSpecialTokens[0]},
                       {"chat_template", kChatTemplate},       {"clean_up_tokenization_spaces", false},
                       {"eos_token", kSpecialTokens[4]},       {"model_input_names", {"input_ids", "attention_mask"}},
                       {"model_max_length", model_max_length}, {"tokenizer_class", "PreTrainedTokenizerFast"}};
  return root.dump(2);
}

}  // namespace

int ByteToUnicode(unsigned char byte) {
  // Printable Latin-1 bytes stand for themselves; the rest move to U+0100.. in byte order.
  auto printable = [](int b) { return (b >= '!' && b <= '~') || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff); };
  if (printable(byte)) return byte;
  int shifted = 0;
  for (int b = 0; b < byte; ++b) shifted += printable(b) ? 0 : 1;
  return 256 + shifted;
}

TinyTokenizer BuildTinyTokenizer(int num_merges, int model_max_length) {
  Learned learned = Train(num_merges);
  int first_special = static_cast<int>(learned.tokens.size());
  TinyTokenizer out;
  out.tokenizer_json = TokenizerJson(learned, first_special);
  out.tokenizer_config_json = TokenizerConfigJson(first_special, model_max_length);
  out.special_tokens_map_json =
      ordered_json{{"bos_token", kSpecialTokens[0]}, {"eos_token", kSpecialTokens[4]}}.dump(2);
  out.num_tokens = first_special + 5;
  out.bos_token_id = first_special;
  out.eos_token_ids = {first_special + 4, first_special + 1};
  return out;
}

}  // namespace tandem::tools
