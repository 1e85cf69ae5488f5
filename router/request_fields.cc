#include "router/request_fields.h"

#include <algorithm>

namespace tandem::router {
namespace {

using nlohmann::json;

ReadError TypeError(const RequestField& field, const char* what) {
  return BadRequest(std::string(field.name) + " must be " + what, field.name);
}

ReadError Unsupported(const RequestField& field) {
  return BadRequest(std::string(field.name) + " is not supported by this server: " + field.note, field.name,
                    "unsupported_parameter");
}

// Metadata checks: the type only.
ReadError IsString(const RequestField& f, const json& v) {
  return v.is_string() ? std::nullopt : TypeError(f, "a string");
}
ReadError IsBool(const RequestField& f, const json& v) {
  return v.is_boolean() ? std::nullopt : TypeError(f, "a boolean");
}
ReadError IsObject(const RequestField& f, const json& v) {
  return v.is_object() ? std::nullopt : TypeError(f, "an object");
}

// Unsupported fields: each passes its no-op values only.
ReadError AnyValue(const RequestField& f, const json&) { return Unsupported(f); }
ReadError OnlyFalse(const RequestField& f, const json& v) {
  if (!v.is_boolean()) return TypeError(f, "a boolean");
  return v.get<bool>() ? Unsupported(f) : std::nullopt;
}
ReadError OnlyTrue(const RequestField& f, const json& v) {
  if (!v.is_boolean()) return TypeError(f, "a boolean");
  return v.get<bool>() ? std::nullopt : Unsupported(f);
}
ReadError OnlyOne(const RequestField& f, const json& v) {
  if (!v.is_number()) return TypeError(f, "a number");
  return v.get<double>() == 1.0 ? std::nullopt : Unsupported(f);
}
ReadError OnlyEmptyList(const RequestField& f, const json& v) {
  if (!v.is_array()) return TypeError(f, "a list");
  return v.empty() ? std::nullopt : Unsupported(f);
}
ReadError OnlyEmptyObject(const RequestField& f, const json& v) {
  if (!v.is_object()) return TypeError(f, "an object");
  return v.empty() ? std::nullopt : Unsupported(f);
}
ReadError OnlyEmptyString(const RequestField& f, const json& v) {
  if (!v.is_string()) return TypeError(f, "a string");
  return v.get_ref<const std::string&>().empty() ? std::nullopt : Unsupported(f);
}
// function_call (the deprecated form of tool_choice): "none", or "auto" (no
// functions are accepted, so it chooses nothing); the rest needs `functions`.
ReadError ChoiceOff(const RequestField& f, const json& v) {
  if (v.is_object()) return Unsupported(f);
  if (!v.is_string()) return TypeError(f, "\"none\", \"auto\", \"required\" or an object naming a function");
  const std::string& s = v.get_ref<const std::string&>();
  if (s == "none" || s == "auto") return std::nullopt;
  if (s == "required") return Unsupported(f);
  return TypeError(f, "\"none\", \"auto\", \"required\" or an object naming a function");
}
ReadError OnlyTextModality(const RequestField& f, const json& v) {
  if (!v.is_array()) return TypeError(f, "a list of strings");
  for (const json& m : v) {
    if (!m.is_string()) return TypeError(f, "a list of strings");
    if (m != "text") return Unsupported(f);
  }
  return std::nullopt;
}
ReadError StandardServiceTier(const RequestField& f, const json& v) {
  if (!v.is_string()) return TypeError(f, "a string");
  return v == "auto" || v == "default" ? std::nullopt : Unsupported(f);
}

constexpr uint8_t kGenerate = kCompletionsBody | kChatBody;
constexpr uint8_t kTokenizers = kTokenizeBody | kDetokenizeBody;
constexpr FieldUse kImpl = FieldUse::kImplemented;
constexpr FieldUse kMeta = FieldUse::kMetadata;
constexpr FieldUse kNo = FieldUse::kUnsupported;

// clang-format off
constexpr RequestField kFields[] = {
    // --- implemented ---------------------------------------------------------------------------------------------
    {"model", kImpl, kGenerate | kTokenizers, nullptr, "the served model name; another name is a 404 model_not_found"},
    {"prompt", kImpl, kCompletionsBody | kTokenizeBody, nullptr,
     "completions: text, texts, token ids or lists of them; tokenize: text"},
    {"messages", kImpl, kChatBody | kTokenizeBody, nullptr, "text content; rendered with the model's chat template"},
    {"add_generation_prompt", kImpl, kChatBody | kTokenizeBody, nullptr, "template variable (default true)"},
    {"chat_template_kwargs", kImpl, kChatBody | kTokenizeBody, nullptr, "extra template variables (object)"},
    {"add_special_tokens", kImpl, kGenerate | kTokenizeBody, nullptr,
     "tokenizer post-processing, e.g. BOS (default: true for prompts, false for chat)"},
    {"tokens", kImpl, kDetokenizeBody, nullptr, "token ids to decode"},
    {"max_tokens", kImpl, kGenerate, nullptr, "most output tokens (completions default 16, chat the context left)"},
    {"max_completion_tokens", kImpl, kGenerate, nullptr, "wins over max_tokens"},
    {"min_tokens", kImpl, kGenerate, nullptr, "EOS, stop_token_ids and stop strings cannot end output before it"},
    {"n", kImpl, kGenerate, nullptr, "choices per prompt (seed + i each)"},
    {"best_of", kImpl, kGenerate, nullptr, "accepted only equal to n"},
    {"seed", kImpl, kGenerate, nullptr, "sampling seed"},
    {"temperature", kImpl, kGenerate, nullptr, "[0, 2]; 0 = greedy"},
    {"top_p", kImpl, kGenerate, nullptr, "(0, 1]"},
    {"top_k", kImpl, kGenerate, nullptr, "-1 or 0 = off"},
    {"min_p", kImpl, kGenerate, nullptr, "[0, 1]"},
    {"presence_penalty", kImpl, kGenerate, nullptr, "[-2, 2]"},
    {"frequency_penalty", kImpl, kGenerate, nullptr, "[-2, 2]"},
    {"repetition_penalty", kImpl, kGenerate, nullptr, "(0, 2]"},
    {"stop", kImpl, kGenerate, nullptr, "stop strings, matched across token boundaries"},
    {"stop_token_ids", kImpl, kGenerate, nullptr, "extra token ids that end the output"},
    {"ignore_eos", kImpl, kGenerate, nullptr, "generate past EOS"},
    {"include_stop_str_in_output", kImpl, kGenerate, nullptr,
     "keep the matched stop string (or stop token's text) at the end of the output"},
    {"skip_special_tokens", kImpl, kGenerate, nullptr, "drop special tokens' text from the output (default true)"},
    {"spaces_between_special_tokens", kImpl, kGenerate, nullptr,
     "true (default): the tokenizer's own decoding; false only with skip_special_tokens true (400 otherwise)"},
    {"stream", kImpl, kGenerate, nullptr, "server-sent events"},
    {"stream_options", kImpl, kGenerate, nullptr,
     "include_usage; continuous_usage_stats true is a 400 (stream_options.continuous_usage_stats)"},
    {"request_id", kImpl, kGenerate, nullptr, "the response id becomes cmpl-<request_id> / chatcmpl-<request_id>"},
    {"logprobs", kImpl, kGenerate, nullptr,
     "completions: an integer k in [0, 20]; chat: a boolean (with top_logprobs = k): each output token's logprob "
     "and the k most likely tokens'"},
    {"top_logprobs", kImpl, kChatBody, nullptr, "chat: the k in [0, 20] of logprobs; needs logprobs true"},
    {"logit_bias", kImpl, kGenerate, nullptr, "token id -> bias in [-100, 100], added to the logits before sampling"},
    {"include_timing", kImpl, kGenerate, nullptr,
     "an extension: where the request's time went, in usage.timing and the server-timing header"},
    {"echo", kImpl, kGenerate, nullptr,
     "completions: the prompt before the completion (with logprobs, the prompt tokens' too; the first one's is "
     "null); max_tokens 0 returns the prompt alone. Chat: a 400"},
    {"response_format", kImpl, kGenerate, nullptr,
     "text, json_object or json_schema (a subset of JSON Schema: common/grammar/README.md), enforced by "
     "constrained decoding"},
    {"guided_json", kImpl, kGenerate, nullptr, "vLLM's form of json_schema: a JSON Schema object or its JSON text"},
    {"priority", kImpl, kGenerate, nullptr,
     "an integer, lower = more urgent (default: the API key's, else 0); <= 0 interactive, > 0 batch class"},
    {"tools", kImpl, kChatBody, nullptr,
     "function tools: passed to the chat template; the output is parsed into tool_calls (tool_parser.h)"},
    {"tool_choice", kImpl, kChatBody, nullptr,
     "none, auto (parsed from the output), required or a named function (forced by structured output)"},
    {"parallel_tool_calls", kImpl, kChatBody, nullptr, "false: at most one tool call"},
    // --- accepted metadata: type-checked, no effect is expected ---------------------------------------------------
    {"user", kMeta, kGenerate, IsString, "end-user id, for the client's records"},
    {"metadata", kMeta, kGenerate, IsObject, "client key/values (OpenAI stores them with `store`)"},
    {"safety_identifier", kMeta, kGenerate, IsString, "end-user id, for the client's records"},
    {"prompt_cache_key", kMeta, kGenerate, IsString, "a caching hint; the prefix cache needs none"},
    {"prediction", kMeta, kGenerate, IsObject, "predicted output: a latency hint; the output does not depend on it"},
    // --- unsupported: a 400 unless the value is the no-op ---------------------------------------------------------
    {"functions", kNo, kGenerate, OnlyEmptyList, "function calling is not implemented"},
    {"function_call", kNo, kGenerate, ChoiceOff, "function calling is not implemented (\"none\" and \"auto\" pass)"},
    {"guided_regex", kNo, kGenerate, AnyValue, "guided decoding is not implemented"},
    {"guided_choice", kNo, kGenerate, AnyValue, "guided decoding is not implemented"},
    {"guided_grammar", kNo, kGenerate, AnyValue, "guided decoding is not implemented"},
    {"guided_decoding_backend", kNo, kGenerate, AnyValue, "guided decoding is not implemented"},
    {"guided_whitespace_pattern", kNo, kGenerate, AnyValue, "guided decoding is not implemented"},
    {"structural_tag", kNo, kGenerate, AnyValue, "guided decoding is not implemented"},
    {"structured_outputs", kNo, kGenerate, AnyValue, "guided decoding is not implemented"},
    {"prompt_logprobs", kNo, kGenerate, AnyValue, "prompt logprobs are not implemented"},
    {"return_tokens_as_token_ids", kNo, kGenerate, OnlyFalse, "logprobs show token text, not ids"},
    {"suffix", kNo, kGenerate, OnlyEmptyString, "suffix (insertion) is not implemented"},
    {"allowed_token_ids", kNo, kGenerate, AnyValue, "allowed_token_ids is not implemented"},
    {"bad_words", kNo, kGenerate, OnlyEmptyList, "bad_words is not implemented"},
    {"logits_processors", kNo, kGenerate, OnlyEmptyList, "custom logits processors are not implemented"},
    {"use_beam_search", kNo, kGenerate, OnlyFalse, "beam search is not implemented"},
    {"length_penalty", kNo, kGenerate, OnlyOne, "beam search is not implemented (1 passes)"},
    {"truncate_prompt_tokens", kNo, kGenerate, AnyValue, "prompt truncation is not implemented"},
    {"service_tier", kNo, kGenerate, StandardServiceTier, "service tiers are not implemented (auto, default pass)"},
    {"cache_salt", kNo, kGenerate, AnyValue, "the prefix-cache salt comes from the API key's tenant"},
    {"continue_final_message", kNo, kGenerate | kTokenizeBody, OnlyFalse, "continue_final_message is not implemented"},
    {"chat_template", kNo, kGenerate | kTokenizeBody, AnyValue, "per-request chat templates are not accepted"},
    {"documents", kNo, kGenerate | kTokenizeBody, AnyValue, "documents (RAG templates) are not implemented"},
    {"return_token_strs", kNo, kTokenizeBody, OnlyFalse, "token strings are not implemented"},
    {"mm_processor_kwargs", kNo, kGenerate, OnlyEmptyObject, "multimodal input is not implemented"},
    {"modalities", kNo, kGenerate, OnlyTextModality, "only text output is implemented"},
    {"audio", kNo, kGenerate, AnyValue, "audio output is not implemented"},
    {"web_search_options", kNo, kGenerate, AnyValue, "web search is not implemented"},
    {"reasoning_effort", kNo, kGenerate, AnyValue, "reasoning controls are not implemented"},
    {"verbosity", kNo, kGenerate, AnyValue, "verbosity controls are not implemented"},
    {"include_reasoning", kNo, kGenerate, OnlyTrue, "reasoning is not parsed out of the output (true passes)"},
    {"store", kNo, kGenerate, OnlyFalse, "nothing is stored (false passes)"},
    {"kv_transfer_params", kNo, kGenerate, AnyValue, "KV transfer is the cluster's own business"},
    {"vllm_xargs", kNo, kGenerate, OnlyEmptyObject, "no extensions take extra arguments"},
};
// clang-format on

bool PrintableName(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
           c == '-' || c == '[' || c == ']';
  });
}

}  // namespace

std::span<const RequestField> RequestFieldTable() { return kFields; }

const RequestField* FindRequestField(std::string_view name) {
  for (const RequestField& f : kFields) {
    if (name == f.name) return &f;
  }
  return nullptr;
}

ReadError CheckRequestFields(const json& body, RequestBody body_kind, std::vector<std::string>* ignored) {
  for (auto it = body.begin(); it != body.end(); ++it) {
    const RequestField* field = FindRequestField(it.key());
    if (field == nullptr || (field->bodies & body_kind) == 0) {
      ignored->push_back(it.key());
      continue;
    }
    if (field->check == nullptr || it->is_null()) continue;
    if (ReadError e = field->check(*field, *it)) return e;
  }
  return std::nullopt;
}

std::string IgnoredFieldsHeaderValue(const std::vector<std::string>& names) {
  constexpr size_t kMaxNames = 16;
  std::string out;
  size_t shown = 0;
  for (const std::string& name : names) {
    if (shown == kMaxNames || !PrintableName(name)) continue;
    if (!out.empty()) out += ", ";
    out += name;
    ++shown;
  }
  if (const size_t more = names.size() - shown; more > 0) {
    out += (out.empty() ? "" : ", ") + std::to_string(more) + " more";
  }
  return out;
}

}  // namespace tandem::router
