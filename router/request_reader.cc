#include "router/request_reader.h"

#include <cmath>

namespace tandem::router {

using nlohmann::json;

const json* FindField(const json& body, const std::string& name) {
  auto it = body.find(name);
  if (it == body.end() || it->is_null()) return nullptr;
  return &*it;
}

ReadError ReadInt(const json& body, const std::string& name, int64_t lo, int64_t hi, std::optional<int64_t>* out) {
  const json* v = FindField(body, name);
  if (v == nullptr) return std::nullopt;
  if (!v->is_number_integer()) return BadRequest(name + " must be an integer", name);
  if (v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(hi)) {
    return BadRequest(name + " must be at most " + std::to_string(hi), name);
  }
  const int64_t x = v->get<int64_t>();
  if (x < lo || x > hi) {
    return BadRequest(
        name + " must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " + std::to_string(x), name);
  }
  *out = x;
  return std::nullopt;
}

ReadError ReadFloat(const json& body, const std::string& name, double lo, double hi, bool lo_open, float* out) {
  const json* v = FindField(body, name);
  if (v == nullptr) return std::nullopt;
  if (!v->is_number()) return BadRequest(name + " must be a number", name);
  const double x = v->get<double>();
  if (!std::isfinite(x) || x > hi || x < lo || (lo_open && x == lo)) {
    return BadRequest(
        name + " must be in " + (lo_open ? "(" : "[") + std::to_string(lo) + ", " + std::to_string(hi) + "]", name);
  }
  *out = static_cast<float>(x);
  return std::nullopt;
}

ReadError ReadBool(const json& body, const std::string& name, bool* out) {
  const json* v = FindField(body, name);
  if (v == nullptr) return std::nullopt;
  if (!v->is_boolean()) return BadRequest(name + " must be a boolean", name);
  *out = v->get<bool>();
  return std::nullopt;
}

ReadError ReadTokenId(const json& v, int32_t vocab_size, const std::string& param, TokenId* out) {
  if (!v.is_number_integer()) return BadRequest(param + " must be an integer token id", param);
  const bool in_range = !v.is_number_unsigned() || v.get<uint64_t>() < uint64_t{1} << 31;
  const int64_t id = in_range ? v.get<int64_t>() : -1;
  if (!in_range || id < 0 || id >= vocab_size) {
    return BadRequest(param + " is not a valid token id (vocabulary size " + std::to_string(vocab_size) + ")", param);
  }
  *out = static_cast<TokenId>(id);
  return std::nullopt;
}

ReadError ReadTokenList(const json& v, int32_t vocab_size, const std::string& param, std::vector<TokenId>* out,
                        bool allow_empty) {
  if (!v.is_array()) return BadRequest(param + " must be a list of token ids", param);
  if (v.empty() && !allow_empty) return BadRequest(param + " must not be empty", param);
  out->reserve(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    TokenId id = 0;
    if (ReadError e = ReadTokenId(v[i], vocab_size, param + "[" + std::to_string(i) + "]", &id)) return e;
    out->push_back(id);
  }
  return std::nullopt;
}

}  // namespace tandem::router
