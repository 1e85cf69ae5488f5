// Typed reads of request-body fields. A field that is missing or JSON null
// counts as absent (clients send explicit nulls); every failure is an ApiError
// naming the field. Thread rule: pure functions.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/base/ids.h"
#include "router/api_error.h"

namespace tandem::router {

using ReadError = std::optional<ApiError>;

// The field's value, or nullptr when it is missing or null.
const nlohmann::json* FindField(const nlohmann::json& body, const std::string& name);

// An integer in [lo, hi] into *out when present.
ReadError ReadInt(const nlohmann::json& body, const std::string& name, int64_t lo, int64_t hi,
                  std::optional<int64_t>* out);
// A number in [lo, hi] (lo excluded when lo_open) into *out when present.
ReadError ReadFloat(const nlohmann::json& body, const std::string& name, double lo, double hi, bool lo_open,
                    float* out);
ReadError ReadBool(const nlohmann::json& body, const std::string& name, bool* out);

// One token id in [0, vocab_size); `param` names it in the error.
ReadError ReadTokenId(const nlohmann::json& v, int32_t vocab_size, const std::string& param, TokenId* out);
// A JSON array of token ids; empty is an error unless allow_empty.
ReadError ReadTokenList(const nlohmann::json& v, int32_t vocab_size, const std::string& param,
                        std::vector<TokenId>* out, bool allow_empty = false);

}  // namespace tandem::router
