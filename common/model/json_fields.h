// JsonFields: typed, exception-free reads of optional fields of a JSON object,
// with errors naming the field ("config.json: field 'hidden_size' must be an
// integer"). A field that is absent or null leaves the output untouched.
// Thread rule: a short-lived helper over a JSON value the caller owns.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "nlohmann/json.hpp"

#include "common/base/status.h"

namespace tandem::model {

class JsonFields {
 public:
  // REQUIRES: `object` is a JSON object and outlives this helper.
  JsonFields(const nlohmann::json& object, std::string what) : object_(object), what_(std::move(what)) {}

  // True when `key` exists and is not null.
  bool Has(std::string_view key) const;
  // InvalidArgument naming `key` unless Has(key).
  Status Require(std::string_view key) const;

  Status Int(std::string_view key, int* out) const;
  Status Int(std::string_view key, std::optional<int>* out) const;
  Status Int64(std::string_view key, int64_t* out) const;
  Status Double(std::string_view key, double* out) const;
  Status Double(std::string_view key, std::optional<double>* out) const;
  Status Bool(std::string_view key, bool* out) const;
  Status String(std::string_view key, std::string* out) const;
  // An integer or a list of integers (as HF writes eos_token_id).
  Status IntList(std::string_view key, std::vector<int>* out) const;

  // "<what>: field '<key>' <problem>".
  Status Error(std::string_view key, std::string_view problem) const;

 private:
  const nlohmann::json* Find(std::string_view key) const;

  const nlohmann::json& object_;
  std::string what_;
};

}  // namespace tandem::model
