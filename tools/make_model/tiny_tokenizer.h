// A small byte-level BPE tokenizer in the Hugging Face `tokenizer.json`
// format, trained at build time on a short built-in English text, so the tiny
// model ships a tokenizer that turns common words into one or two tokens.
//
// Layout of ids: 0..255 are the 256 byte tokens (GPT-2 byte-to-unicode map,
// id = byte value), then the learned merges in order, then the special tokens
// <|begin_of_text|>, <|end_of_text|>, <|start_header_id|>, <|end_header_id|>,
// <|eot_id|>. Deterministic: same `num_merges`, same files.
// Thread rule: free functions, no state.
#pragma once

#include <string>
#include <vector>

namespace tandem::tools {

struct TinyTokenizer {
  std::string tokenizer_json;           // tokenizer.json text
  std::string tokenizer_config_json;    // tokenizer_config.json (chat_template, bos/eos)
  std::string special_tokens_map_json;  // special_tokens_map.json
  int num_tokens = 0;                   // highest id + 1; config vocab_size must be >= this
  int bos_token_id = 0;                 // <|begin_of_text|>
  std::vector<int> eos_token_ids;       // <|eot_id|>, <|end_of_text|>
};

// Learns up to `num_merges` merges (fewer if the text runs out of pairs that
// occur twice). `model_max_length` goes into tokenizer_config.json.
TinyTokenizer BuildTinyTokenizer(int num_merges, int model_max_length);

// The GPT-2 byte-to-unicode map: byte b is written as the UTF-8 of this code point.
int ByteToUnicode(unsigned char byte);

}  // namespace tandem::tools
