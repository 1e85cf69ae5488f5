#include "planner/profile_io.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "common/model/json_fields.h"
#include "common/model/json_limits.h"
#include "nlohmann/json.hpp"

namespace tandem::planner {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

constexpr int kMaxDepth = 8;               // profile -> section -> points -> point is 4 deep
constexpr size_t kMaxArrayItems = 100000;  // points per list, and notes

// ---- writing (the key order here is the documented order) ----

ordered_json FitErrorJson(double r2, double max_relative, double mean_relative) {
  return {{"r2", r2}, {"max_relative_error", max_relative}, {"mean_relative_error", mean_relative}};
}

ordered_json HeaderJson(const Profile& p) {
  ordered_json j;
  j["format"] = kProfileFormatName;
  j["format_version"] = p.format_version;
  j["commit"] = p.commit;
  j["version"] = p.version;
  j["date"] = p.date;
  j["quick"] = p.quick;
  j["device"] = {{"backend", p.device.backend},
                 {"ordinal", p.device.ordinal},
                 {"name", p.device.name},
                 {"memory_bytes", p.device.memory_bytes},
                 {"compute_units", p.device.compute_units}};
  const ModelInfo& m = p.model;
  j["model"] = {{"id", m.id},
                {"architecture", m.architecture},
                {"num_layers", m.num_layers},
                {"hidden_size", m.hidden_size},
                {"intermediate_size", m.intermediate_size},
                {"num_heads", m.num_heads},
                {"num_kv_heads", m.num_kv_heads},
                {"head_dim", m.head_dim},
                {"vocab_size", m.vocab_size},
                {"max_position_embeddings", m.max_position_embeddings},
                {"kv_dtype", m.kv_dtype}};
  const EngineSettings& e = p.engine;
  j["engine"] = {{"block_size", e.block_size},           {"num_device_blocks", e.num_device_blocks},
                 {"num_host_blocks", e.num_host_blocks}, {"max_num_batched_tokens", e.max_num_batched_tokens},
                 {"max_num_seqs", e.max_num_seqs},       {"max_prefill_chunk_tokens", e.max_prefill_chunk_tokens},
                 {"max_model_len", e.max_model_len},     {"enable_prefix_caching", e.enable_prefix_caching}};
  j["kv_capacity"] = {{"bytes_per_token", p.kv_capacity.bytes_per_token},
                      {"device_tokens", p.kv_capacity.device_tokens},
                      {"host_tokens", p.kv_capacity.host_tokens}};
  return j;
}

ordered_json MeasuredJson(const Profile& p) {
  ordered_json j;
  ordered_json prefill = {{"repetitions", p.prefill.repetitions}, {"points", ordered_json::array()}};
  for (const PrefillPoint& x : p.prefill.points) {
    prefill["points"].push_back({{"prompt_tokens", x.prompt_tokens},
                                 {"requests", x.requests},
                                 {"steps", x.steps},
                                 {"seconds", x.seconds},
                                 {"spread", x.spread}});
  }
  prefill["capped"] = p.prefill.capped;
  j["prefill"] = std::move(prefill);
  ordered_json decode = {
      {"timed_steps", p.decode.timed_steps}, {"repetitions", p.decode.repetitions}, {"points", ordered_json::array()}};
  for (const DecodePoint& x : p.decode.points) {
    decode["points"].push_back({{"batch", x.batch},
                                {"context_tokens", x.context_tokens},
                                {"kv_tokens", x.kv_tokens},
                                {"step_seconds", x.step_seconds},
                                {"spread", x.spread}});
  }
  const DecodeFit& f = p.decode.fit;
  ordered_json fit = {{"intercept_seconds", f.intercept_seconds},
                      {"per_sequence_seconds", f.per_sequence_seconds},
                      {"per_kv_token_seconds", f.per_kv_token_seconds}};
  fit.update(FitErrorJson(f.r2, f.max_relative_error, f.mean_relative_error));
  decode["fit"] = std::move(fit);
  decode["capped"] = p.decode.capped;
  j["decode"] = std::move(decode);
  ordered_json paths = ordered_json::array();
  for (const TransferPath& path : p.transfer.paths) {
    ordered_json points = ordered_json::array();
    for (const TransferPoint& x : path.points) {
      points.push_back({{"blocks", x.blocks}, {"runs", x.runs}, {"bytes", x.bytes}, {"seconds", x.seconds}});
    }
    ordered_json pfit = {{"fixed_seconds", path.fit.fixed_seconds},
                         {"per_run_seconds", path.fit.per_run_seconds},
                         {"bytes_per_second", path.fit.bytes_per_second}};
    pfit.update(FitErrorJson(path.fit.r2, path.fit.max_relative_error, path.fit.mean_relative_error));
    paths.push_back({{"transport", path.transport},
                     {"options", path.options},
                     {"memory", path.memory},
                     {"note", path.note},
                     {"points", std::move(points)},
                     {"fit", std::move(pfit)}});
  }
  j["transfer"] = {{"paths", std::move(paths)}, {"left_out", p.transfer.left_out}};
  return j;
}

// ---- reading ----

class Reader {
 public:
  explicit Reader(std::string what) : what_(std::move(what)) {}

  // The object member `key` of `parent` (`where` names the parent).
  StatusOr<const json*> Object(const json& parent, const char* key, const std::string& where) const {
    return Member(parent, key, where, json::value_t::object);
  }
  StatusOr<const json*> Array(const json& parent, const char* key, const std::string& where) const {
    TANDEM_ASSIGN_OR_RETURN(const json* a, Member(parent, key, where, json::value_t::array));
    if (a->size() > kMaxArrayItems) return Error(where, key, "has more than 100000 items");
    for (const json& item : *a) {
      if (!item.is_object()) return Error(where, key, "must hold only objects");
    }
    return a;
  }
  // An optional list of strings (absent: empty).
  Status Strings(const json& parent, const char* key, const std::string& where, std::vector<std::string>* out) const {
    out->clear();
    auto it = parent.find(key);
    if (it == parent.end()) return Status::Ok();
    if (!it->is_array() || it->size() > kMaxArrayItems) return Error(where, key, "must be a list of strings");
    for (const json& s : *it) {
      if (!s.is_string()) return Error(where, key, "must be a list of strings");
      out->push_back(s.get<std::string>());
    }
    return Status::Ok();
  }
  model::JsonFields Fields(const json& object, const std::string& where) const {
    return model::JsonFields(object, what_ + ": " + where);
  }

 private:
  StatusOr<const json*> Member(const json& parent, const char* key, const std::string& where,
                               json::value_t type) const {
    auto it = parent.find(key);
    if (it == parent.end() || it->is_null()) return Error(where, key, "is missing");
    if (it->type() != type) {
      return Error(where, key, type == json::value_t::object ? "must be an object" : "must be a list");
    }
    return &*it;
  }
  Status Error(const std::string& where, const char* key, const char* problem) const {
    return InvalidArgumentError(what_ + ": " + where + ": field '" + key + "' " + problem);
  }

  std::string what_;
};

Status Get(const model::JsonFields& f, std::string_view key, int* out) {
  TANDEM_RETURN_IF_ERROR(f.Require(key));
  return f.Int(key, out);
}
Status Get(const model::JsonFields& f, std::string_view key, int64_t* out) {
  TANDEM_RETURN_IF_ERROR(f.Require(key));
  return f.Int64(key, out);
}
Status Get(const model::JsonFields& f, std::string_view key, double* out) {
  TANDEM_RETURN_IF_ERROR(f.Require(key));
  return f.Double(key, out);
}
Status Get(const model::JsonFields& f, std::string_view key, bool* out) {
  TANDEM_RETURN_IF_ERROR(f.Require(key));
  return f.Bool(key, out);
}
Status Get(const model::JsonFields& f, std::string_view key, std::string* out) {
  TANDEM_RETURN_IF_ERROR(f.Require(key));
  return f.String(key, out);
}

// A field later profiles carry and earlier ones lack: absent or null leaves the default.
template <typename T>
struct Optional {
  T* out;
};
Status Get(const model::JsonFields& f, std::string_view key, Optional<double> field) {
  return f.Has(key) ? f.Double(key, field.out) : Status::Ok();
}
Status Get(const model::JsonFields& f, std::string_view key, Optional<int> field) {
  return f.Has(key) ? f.Int(key, field.out) : Status::Ok();
}

// Reads every (key, field) pair of one object.
template <typename... Pairs>
Status GetAll(const model::JsonFields& f, Pairs... pairs) {
  Status status;
  ((status.ok() ? (status = Get(f, pairs.first, pairs.second), 0) : 0), ...);
  return status;
}

template <typename T>
std::pair<const char*, T*> Field(const char* key, T* out) {
  return {key, out};
}
template <typename T>
std::pair<const char*, Optional<T>> OptionalField(const char* key, T* out) {
  return {key, Optional<T>{out}};
}

Status ParseHeader(const Reader& r, const json& root, Profile* p) {
  TANDEM_RETURN_IF_ERROR(GetAll(r.Fields(root, "top level"), Field("commit", &p->commit), Field("version", &p->version),
                                Field("date", &p->date), Field("quick", &p->quick)));
  TANDEM_ASSIGN_OR_RETURN(const json* device, r.Object(root, "device", "top level"));
  DeviceInfo& d = p->device;
  TANDEM_RETURN_IF_ERROR(GetAll(r.Fields(*device, "device"), Field("backend", &d.backend), Field("ordinal", &d.ordinal),
                                Field("name", &d.name), Field("memory_bytes", &d.memory_bytes),
                                Field("compute_units", &d.compute_units)));
  TANDEM_ASSIGN_OR_RETURN(const json* model, r.Object(root, "model", "top level"));
  ModelInfo& m = p->model;
  TANDEM_RETURN_IF_ERROR(
      GetAll(r.Fields(*model, "model"), Field("id", &m.id), Field("architecture", &m.architecture),
             Field("num_layers", &m.num_layers), Field("hidden_size", &m.hidden_size),
             Field("intermediate_size", &m.intermediate_size), Field("num_heads", &m.num_heads),
             Field("num_kv_heads", &m.num_kv_heads), Field("head_dim", &m.head_dim), Field("vocab_size", &m.vocab_size),
             Field("max_position_embeddings", &m.max_position_embeddings), Field("kv_dtype", &m.kv_dtype)));
  TANDEM_ASSIGN_OR_RETURN(const json* engine, r.Object(root, "engine", "top level"));
  EngineSettings& e = p->engine;
  TANDEM_RETURN_IF_ERROR(GetAll(
      r.Fields(*engine, "engine"), Field("block_size", &e.block_size), Field("num_device_blocks", &e.num_device_blocks),
      Field("num_host_blocks", &e.num_host_blocks), Field("max_num_batched_tokens", &e.max_num_batched_tokens),
      Field("max_num_seqs", &e.max_num_seqs), Field("max_prefill_chunk_tokens", &e.max_prefill_chunk_tokens),
      Field("max_model_len", &e.max_model_len), Field("enable_prefix_caching", &e.enable_prefix_caching)));
  TANDEM_ASSIGN_OR_RETURN(const json* kv, r.Object(root, "kv_capacity", "top level"));
  return GetAll(r.Fields(*kv, "kv_capacity"), Field("bytes_per_token", &p->kv_capacity.bytes_per_token),
                Field("device_tokens", &p->kv_capacity.device_tokens),
                Field("host_tokens", &p->kv_capacity.host_tokens));
}

// The error figures of a fit object.
Status ParseFitError(const model::JsonFields& f, double* r2, double* max_relative, double* mean_relative) {
  return GetAll(f, Field("r2", r2), Field("max_relative_error", max_relative),
                Field("mean_relative_error", mean_relative));
}

Status ParsePrefill(const Reader& r, const json& root, PrefillProfile* prefill) {
  TANDEM_ASSIGN_OR_RETURN(const json* section, r.Object(root, "prefill", "top level"));
  TANDEM_RETURN_IF_ERROR(GetAll(r.Fields(*section, "prefill"), Field("repetitions", &prefill->repetitions)));
  TANDEM_ASSIGN_OR_RETURN(const json* points, r.Array(*section, "points", "prefill"));
  for (size_t i = 0; i < points->size(); ++i) {
    PrefillPoint& x = prefill->points.emplace_back();
    TANDEM_RETURN_IF_ERROR(GetAll(r.Fields((*points)[i], "prefill.points[" + std::to_string(i) + "]"),
                                  Field("prompt_tokens", &x.prompt_tokens), Field("requests", &x.requests),
                                  Field("steps", &x.steps), Field("seconds", &x.seconds),
                                  OptionalField("spread", &x.spread)));
  }
  return r.Strings(*section, "capped", "prefill", &prefill->capped);
}

Status ParseDecode(const Reader& r, const json& root, DecodeProfile* decode) {
  TANDEM_ASSIGN_OR_RETURN(const json* section, r.Object(root, "decode", "top level"));
  TANDEM_RETURN_IF_ERROR(GetAll(r.Fields(*section, "decode"), Field("timed_steps", &decode->timed_steps),
                                OptionalField("repetitions", &decode->repetitions)));
  TANDEM_ASSIGN_OR_RETURN(const json* points, r.Array(*section, "points", "decode"));
  for (size_t i = 0; i < points->size(); ++i) {
    DecodePoint& x = decode->points.emplace_back();
    TANDEM_RETURN_IF_ERROR(GetAll(r.Fields((*points)[i], "decode.points[" + std::to_string(i) + "]"),
                                  Field("batch", &x.batch), Field("context_tokens", &x.context_tokens),
                                  Field("kv_tokens", &x.kv_tokens), Field("step_seconds", &x.step_seconds),
                                  OptionalField("spread", &x.spread)));
  }
  TANDEM_ASSIGN_OR_RETURN(const json* fit, r.Object(*section, "fit", "decode"));
  DecodeFit& f = decode->fit;
  const model::JsonFields fields = r.Fields(*fit, "decode.fit");
  TANDEM_RETURN_IF_ERROR(GetAll(fields, Field("intercept_seconds", &f.intercept_seconds),
                                Field("per_sequence_seconds", &f.per_sequence_seconds),
                                Field("per_kv_token_seconds", &f.per_kv_token_seconds)));
  TANDEM_RETURN_IF_ERROR(ParseFitError(fields, &f.r2, &f.max_relative_error, &f.mean_relative_error));
  return r.Strings(*section, "capped", "decode", &decode->capped);
}

Status ParsePath(const Reader& r, const json& object, const std::string& where, TransferPath* path) {
  TANDEM_RETURN_IF_ERROR(GetAll(r.Fields(object, where), Field("transport", &path->transport),
                                Field("options", &path->options), Field("memory", &path->memory),
                                Field("note", &path->note)));
  TANDEM_ASSIGN_OR_RETURN(const json* points, r.Array(object, "points", where));
  for (size_t i = 0; i < points->size(); ++i) {
    TransferPoint& x = path->points.emplace_back();
    TANDEM_RETURN_IF_ERROR(GetAll(r.Fields((*points)[i], where + ".points[" + std::to_string(i) + "]"),
                                  Field("blocks", &x.blocks), Field("runs", &x.runs), Field("bytes", &x.bytes),
                                  Field("seconds", &x.seconds)));
  }
  TANDEM_ASSIGN_OR_RETURN(const json* fit, r.Object(object, "fit", where));
  const model::JsonFields fields = r.Fields(*fit, where + ".fit");
  TransferFit& f = path->fit;
  TANDEM_RETURN_IF_ERROR(GetAll(fields, Field("fixed_seconds", &f.fixed_seconds),
                                Field("per_run_seconds", &f.per_run_seconds),
                                Field("bytes_per_second", &f.bytes_per_second)));
  return ParseFitError(fields, &f.r2, &f.max_relative_error, &f.mean_relative_error);
}

Status ParseTransfer(const Reader& r, const json& root, TransferProfile* transfer) {
  TANDEM_ASSIGN_OR_RETURN(const json* section, r.Object(root, "transfer", "top level"));
  TANDEM_ASSIGN_OR_RETURN(const json* paths, r.Array(*section, "paths", "transfer"));
  for (size_t i = 0; i < paths->size(); ++i) {
    TANDEM_RETURN_IF_ERROR(
        ParsePath(r, (*paths)[i], "transfer.paths[" + std::to_string(i) + "]", &transfer->paths.emplace_back()));
  }
  return r.Strings(*section, "left_out", "transfer", &transfer->left_out);
}

}  // namespace

std::string SerializeProfile(const Profile& profile) {
  ordered_json j = HeaderJson(profile);
  j.update(MeasuredJson(profile));
  return j.dump(2) + "\n";
}

StatusOr<Profile> ParseProfile(std::string_view text, std::string_view what) {
  const std::string name(what);
  TANDEM_ASSIGN_OR_RETURN(json root, model::ParseJsonText(text, kMaxProfileBytes, kMaxDepth, name));
  if (!root.is_object()) return InvalidArgumentError(name + ": a profile is a JSON object");
  const Reader r(name);
  Profile p;
  std::string format;
  TANDEM_RETURN_IF_ERROR(GetAll(r.Fields(root, "top level"), Field("format", &format)));
  if (format != kProfileFormatName) {
    return InvalidArgumentError(name + ": format '" + format + "' is not a " + std::string(kProfileFormatName));
  }
  TANDEM_RETURN_IF_ERROR(GetAll(r.Fields(root, "top level"), Field("format_version", &p.format_version)));
  if (p.format_version != kProfileFormatVersion) {
    return FailedPreconditionError(name + ": profile format_version " + std::to_string(p.format_version) +
                                   "; this build reads version " + std::to_string(kProfileFormatVersion) +
                                   " (profile again with this build's tandem-profile)");
  }
  TANDEM_RETURN_IF_ERROR(ParseHeader(r, root, &p));
  TANDEM_RETURN_IF_ERROR(ParsePrefill(r, root, &p.prefill));
  TANDEM_RETURN_IF_ERROR(ParseDecode(r, root, &p.decode));
  TANDEM_RETURN_IF_ERROR(ParseTransfer(r, root, &p.transfer));
  if (Status valid = ValidateProfile(p); !valid.ok()) return valid.WithContext(name);
  return p;
}

StatusOr<Profile> LoadProfile(const std::string& path) {
  TANDEM_ASSIGN_OR_RETURN(std::string text, model::ReadFileToString(path, kMaxProfileBytes));
  return ParseProfile(text, path);
}

Status SaveProfile(const Profile& profile, const std::string& path) {
  TANDEM_RETURN_IF_ERROR(ValidateProfile(profile));
  const std::string text = SerializeProfile(profile);
  const std::string temporary = path + ".tmp";
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    out << text;
    out.close();
    if (!out) return UnavailableError(temporary + ": write failed: " + std::strerror(errno));
  }
  std::error_code error;
  std::filesystem::rename(temporary, path, error);
  if (error) return UnavailableError(path + ": rename failed: " + error.message());
  return Status::Ok();
}

}  // namespace tandem::planner
