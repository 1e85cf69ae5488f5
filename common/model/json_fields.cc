#include "common/model/json_fields.h"

#include <cmath>
#include <limits>

namespace tandem::model {
namespace {

using nlohmann::json;

// Integers in int range only; 4096.0 is rejected (real configs write integers).
bool ToInt(const json& value, int* out) {
  if (value.is_number_unsigned()) {
    uint64_t v = value.get<uint64_t>();
    if (v > static_cast<uint64_t>(std::numeric_limits<int>::max())) return false;
    *out = static_cast<int>(v);
    return true;
  }
  if (value.is_number_integer()) {
    int64_t v = value.get<int64_t>();
    if (v < std::numeric_limits<int>::min() || v > std::numeric_limits<int>::max()) return false;
    *out = static_cast<int>(v);
    return true;
  }
  return false;
}

}  // namespace

const json* JsonFields::Find(std::string_view key) const {
  auto it = object_.find(key);
  if (it == object_.end() || it->is_null()) return nullptr;
  return &*it;
}

bool JsonFields::Has(std::string_view key) const { return Find(key) != nullptr; }

Status JsonFields::Require(std::string_view key) const {
  if (Has(key)) return Status::Ok();
  return Error(key, "is missing");
}

Status JsonFields::Error(std::string_view key, std::string_view problem) const {
  return InvalidArgumentError(what_ + ": field '" + std::string(key) + "' " + std::string(problem));
}

Status JsonFields::Int(std::string_view key, int* out) const {
  const json* value = Find(key);
  if (value == nullptr) return Status::Ok();
  if (!ToInt(*value, out)) return Error(key, "must be an integer in 32-bit range");
  return Status::Ok();
}

Status JsonFields::Int(std::string_view key, std::optional<int>* out) const {
  if (!Has(key)) return Status::Ok();
  int v = 0;
  TANDEM_RETURN_IF_ERROR(Int(key, &v));
  *out = v;
  return Status::Ok();
}

Status JsonFields::Int64(std::string_view key, int64_t* out) const {
  const json* value = Find(key);
  if (value == nullptr) return Status::Ok();
  if (value->is_number_unsigned()) {
    if (value->get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return Error(key, "must be an integer in 64-bit range");
    }
    *out = static_cast<int64_t>(value->get<uint64_t>());
    return Status::Ok();
  }
  if (!value->is_number_integer()) return Error(key, "must be an integer");
  *out = value->get<int64_t>();
  return Status::Ok();
}

Status JsonFields::Double(std::string_view key, double* out) const {
  const json* value = Find(key);
  if (value == nullptr) return Status::Ok();
  if (!value->is_number()) return Error(key, "must be a number");
  double v = value->get<double>();
  if (!std::isfinite(v)) return Error(key, "must be finite");
  *out = v;
  return Status::Ok();
}

Status JsonFields::Double(std::string_view key, std::optional<double>* out) const {
  if (!Has(key)) return Status::Ok();
  double v = 0;
  TANDEM_RETURN_IF_ERROR(Double(key, &v));
  *out = v;
  return Status::Ok();
}

Status JsonFields::Bool(std::string_view key, bool* out) const {
  const json* value = Find(key);
  if (value == nullptr) return Status::Ok();
  if (!value->is_boolean()) return Error(key, "must be true or false");
  *out = value->get<bool>();
  return Status::Ok();
}

Status JsonFields::String(std::string_view key, std::string* out) const {
  const json* value = Find(key);
  if (value == nullptr) return Status::Ok();
  if (!value->is_string()) return Error(key, "must be a string");
  *out = value->get<std::string>();
  return Status::Ok();
}

Status JsonFields::IntList(std::string_view key, std::vector<int>* out) const {
  const json* value = Find(key);
  if (value == nullptr) return Status::Ok();
  out->clear();
  int v = 0;
  if (ToInt(*value, &v)) {
    out->push_back(v);
    return Status::Ok();
  }
  if (!value->is_array() || value->size() > 1024) {
    return Error(key, "must be an integer or a list of at most 1024 integers");
  }
  for (const json& item : *value) {
    if (!ToInt(item, &v)) return Error(key, "must contain only integers");
    out->push_back(v);
  }
  return Status::Ok();
}

}  // namespace tandem::model
