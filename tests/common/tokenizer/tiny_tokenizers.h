// Small hand-made tokenizer.json documents for unit and fuzz tests, so their
// expected ids can be derived by hand from the vocabulary and merges below.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace tandem::tokenizer::test_data {

// GPT-2 byte -> char table, written out independently of the library's.
inline std::string ByteChar(int b) {
  int n = 0;
  int cp = -1;
  for (int x = 0; x < 256; ++x) {
    const bool printable = (x >= 33 && x <= 126) || (x >= 161 && x <= 172) || (x >= 174);
    const int mapped = printable ? x : 256 + n++;
    if (x == b) cp = mapped;
  }
  std::string out;
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
  return out;
}

// Byte-level BPE: ids 0..255 are the byte chars (id == byte value), then
// 256 "Ġt", 257 "he", 258 "Ġthe", 259 "ll", 260 "Ġa". Added: 300 <|end|>
// (special), 301 <tool> (not special), 302 <mask> (special, lstrip), and the
// post-processor adds 303 <|begin|>.
inline std::string TinyByteLevelJson() {
  nlohmann::json vocab = nlohmann::json::object();
  for (int b = 0; b < 256; ++b) vocab[ByteChar(b)] = b;
  const std::string g = ByteChar(' ');  // "Ġ"
  vocab[g + "t"] = 256;
  vocab["he"] = 257;
  vocab[g + "the"] = 258;
  vocab["ll"] = 259;
  vocab[g + "a"] = 260;
  nlohmann::json merges = nlohmann::json::array({nlohmann::json::array({g, "t"}), nlohmann::json::array({"h", "e"}),
                                                 nlohmann::json::array({g + "t", "he"}),
                                                 nlohmann::json::array({"l", "l"}), nlohmann::json::array({g, "a"})});
  nlohmann::json added = nlohmann::json::array();
  auto add = [&](int id, const char* content, bool special, bool lstrip) {
    added.push_back({{"id", id},
                     {"content", content},
                     {"single_word", false},
                     {"lstrip", lstrip},
                     {"rstrip", false},
                     {"normalized", false},
                     {"special", special}});
  };
  add(300, "<|end|>", true, false);
  add(301, "<tool>", false, false);
  add(302, "<mask>", true, true);
  add(303, "<|begin|>", true, false);
  nlohmann::json j = {
      {"version", "1.0"},
      {"added_tokens", added},
      {"normalizer", nullptr},
      {"pre_tokenizer",
       {{"type", "Sequence"},
        {"pretokenizers",
         nlohmann::json::array(
             {{{"type", "Split"},
               {"pattern",
                {{"Regex",
                  R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"}}},
               {"behavior", "Isolated"},
               {"invert", false}},
              {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}})}}},
      {"post_processor",
       {{"type", "TemplateProcessing"},
        {"single", nlohmann::json::array({{{"SpecialToken", {{"id", "<|begin|>"}, {"type_id", 0}}}},
                                          {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}})},
        {"special_tokens", {{"<|begin|>", {{"id", "<|begin|>"}, {"ids", {303}}, {"tokens", {"<|begin|>"}}}}}}}},
      {"decoder", {{"type", "ByteLevel"}}},
      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merges}, {"byte_fallback", false}}}};
  return j.dump();
}

// SentencePiece-style BPE with byte fallback: 0 <unk>, 1 <s>, 2 </s>,
// 3 + b for <0xBB>, 259 "▁", 260 "a", 261 "b", 262 "▁a", 263 "▁ab".
inline std::string TinySentencePieceJson() {
  const std::string sp = "\xE2\x96\x81";
  nlohmann::json vocab = {{"<unk>", 0}, {"<s>", 1}, {"</s>", 2}};
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    vocab[name] = 3 + b;
  }
  vocab[sp] = 259;
  vocab["a"] = 260;
  vocab["b"] = 261;
  vocab[sp + "a"] = 262;
  vocab[sp + "ab"] = 263;
  nlohmann::json added = nlohmann::json::array();
  for (auto [id, content] : {std::pair{0, "<unk>"}, std::pair{1, "<s>"}, std::pair{2, "</s>"}}) {
    added.push_back({{"id", id},
                     {"content", content},
                     {"single_word", false},
                     {"lstrip", false},
                     {"rstrip", false},
                     {"normalized", false},
                     {"special", true}});
  }
  nlohmann::json j = {
      {"added_tokens", added},
      {"normalizer",
       {{"type", "Sequence"},
        {"normalizers",
         nlohmann::json::array({{{"type", "Prepend"}, {"prepend", sp}},
                                {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", sp}}})}}},
      {"pre_tokenizer", nullptr},
      {"post_processor",
       {{"type", "TemplateProcessing"},
        {"single", nlohmann::json::array({{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}},
                                          {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}})},
        {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {1}}, {"tokens", {"<s>"}}}}}}}},
      {"decoder",
       {{"type", "Sequence"},
        {"decoders", nlohmann::json::array({{{"type", "Replace"}, {"pattern", {{"String", sp}}}, {"content", " "}},
                                            {{"type", "ByteFallback"}},
                                            {{"type", "Fuse"}},
                                            {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}})}}},
      {"model",
       {{"type", "BPE"},
        {"vocab", vocab},
        {"merges", nlohmann::json::array({sp + " a", sp + "a b"})},
        {"unk_token", "<unk>"},
        {"fuse_unk", true},
        {"byte_fallback", true}}}};
  return j.dump();
}

}  // namespace tandem::tokenizer::test_data
