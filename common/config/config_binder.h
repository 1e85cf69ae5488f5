// ConfigBinder: one list of a component's config fields, bound once, read from
// a YAML file and overridden by command-line flags.
//
//   struct NodeConfig { int port = 9000; ... ; template <class B> void Bind(B& b) {
//       b.Field("port", port, "TCP port to listen on"); ... } };
//   ConfigBinder binder;  config.Bind(binder);
//   CLI::App app;  binder.AddFlags(app);     // --port, --config
//   app.parse(argc, argv);                    // (CLI11 throws: catch at the call site)
//   TANDEM_RETURN_IF_ERROR(binder.Apply());  // file first, then flags set on the command line
//
// or, in a binary's main, all three steps at once with ParseCommandLine().
//
// Field types: bool, int, int64_t, double, std::string, std::vector<std::string>, an
// enum with named choices (Choice), and a list of string records (Records).
// YAML keys are the field names (nested maps flatten with '.': `limits.max_body_bytes`);
// an unknown key or a wrong type is InvalidArgument naming the key. The binder holds
// pointers into the config struct: it must not outlive it. Thread rule: startup only.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/base/status.h"

namespace tandem::config {

class ConfigBinder {
 public:
  void Field(const std::string& name, bool& value, const std::string& help);
  void Field(const std::string& name, int& value, const std::string& help);
  void Field(const std::string& name, int64_t& value, const std::string& help);
  void Field(const std::string& name, double& value, const std::string& help);
  void Field(const std::string& name, std::string& value, const std::string& help);
  void Field(const std::string& name, std::vector<std::string>& value, const std::string& help);
  // A string field holding a secret (a token, a key): --help and Dump() show
  // "(hidden)" when it is set, never the value.
  void Secret(const std::string& name, std::string& value, const std::string& help);

  // An enum field written as one of the names in `choices` (YAML and flag alike);
  // any other text is InvalidArgument listing the choices.
  template <typename E>
  void Choice(const std::string& name, E& value, std::vector<std::pair<std::string, E>> choices,
              const std::string& help);

  // A list of records whose members are strings. In YAML each item is a map of
  // member keys (`- {key: k, tenant: t}`); on the command line each item is one
  // value `key=k,tenant=t` (repeat the flag for more items). Every one of `members`
  // is required; `optional_members` may be left out (they keep their default, so
  // the field's Validate tells an empty value from a given one). Any other key is
  // an error. The current value shows as a count only (members may be secrets).
  template <typename T>
  void Records(const std::string& name, std::vector<T>& value,
               std::vector<std::pair<std::string, std::string T::*>> members, const std::string& help,
               std::vector<std::pair<std::string, std::string T::*>> optional_members = {});

  // Adds `--<name>` for every field (FlagName) and `--config FILE`.
  void AddFlags(CLI::App& app);
  // Applies the YAML file named by --config (if any), then every flag given on the command line.
  Status Apply();
  // Applies YAML text (used by Apply and by tests).
  Status ApplyYaml(const std::string& yaml_text, const std::string& origin);
  // The start of a binary's main: AddFlags on an app named `program` (then
  // `add_more`, for flags that are no config field, such as a bare --quick), parse
  // argv, Apply. Returns the code to exit with (0 after printing --help; 2 after
  // printing a command-line or config error to stderr), or nullopt to go on.
  std::optional<int> ParseCommandLine(const std::string& program, const std::string& description, int argc,
                                      const char* const* argv,
                                      const std::function<void(CLI::App&)>& add_more = nullptr);
  // "name: value" lines of the current values, for logging at startup.
  std::string Dump() const;
  // The field names (YAML keys) in the order they were bound.
  std::vector<std::string> Names() const;

  // The flag of a field: `--` + the name with dots and underscores as dashes
  // (`limits.max_body_bytes` -> `--limits-max-body-bytes`).
  static std::string FlagName(const std::string& name);

 private:
  using Record = std::map<std::string, std::string>;
  struct Entry {
    std::string name;
    std::string help;
    bool is_list = false;
    std::vector<std::string> record_keys;           // non-empty: a Records field (its required keys)
    std::vector<std::string> optional_record_keys;  // a Records field's keys that may be left out
    std::function<Status(const std::string&)> set;  // from one scalar
    std::function<void(const std::vector<std::string>&)> set_list;
    std::function<void(const std::vector<Record>&)> set_records;
    std::function<std::string()> get;
    std::vector<std::string> flag_values;  // CLI storage
    CLI::Option* option = nullptr;
  };
  Entry& Add(const std::string& name, const std::string& help);
  Entry* Find(const std::string& name);
  // InvalidArgument naming the field unless `text` is one of `names`.
  static Status UnknownChoice(const std::string& name, const std::string& text, const std::vector<std::string>& names);
  // Parses one command-line item `k=v,k=v` of a Records field.
  static StatusOr<Record> ParseRecordFlag(const Entry& e, const std::string& text);
  // Checks that `record` has exactly the keys of a Records field.
  static Status CheckRecord(const Entry& e, const Record& record, const std::string& where);

  std::vector<Entry> entries_;
  std::string config_path_;
};

// A config struct T (with `void Bind(ConfigBinder&)`) from `value` with the YAML
// text applied; `origin` names the text in errors. Not validated.
template <typename T>
StatusOr<T> FromYaml(const std::string& yaml_text, T value = T{}, const std::string& origin = "yaml") {
  ConfigBinder binder;
  value.Bind(binder);
  TANDEM_RETURN_IF_ERROR(binder.ApplyYaml(yaml_text, origin));
  return value;
}

template <typename E>
void ConfigBinder::Choice(const std::string& name, E& value, std::vector<std::pair<std::string, E>> choices,
                          const std::string& help) {
  Entry& e = Add(name, help);
  e.set = [&value, name, choices](const std::string& s) {
    std::vector<std::string> names;
    for (const auto& [text, v] : choices) {
      if (text == s) {
        value = v;
        return Status::Ok();
      }
      names.push_back(text);
    }
    return UnknownChoice(name, s, names);
  };
  e.get = [&value, choices] {
    for (const auto& [text, v] : choices) {
      if (v == value) return text;
    }
    return std::string("?");
  };
}

template <typename T>
void ConfigBinder::Records(const std::string& name, std::vector<T>& value,
                           std::vector<std::pair<std::string, std::string T::*>> members, const std::string& help,
                           std::vector<std::pair<std::string, std::string T::*>> optional_members) {
  Entry& e = Add(name, help);
  e.is_list = true;
  for (const auto& m : members) e.record_keys.push_back(m.first);
  for (const auto& m : optional_members) e.optional_record_keys.push_back(m.first);
  e.set_records = [&value, members, optional_members](const std::vector<Record>& items) {
    value.clear();
    for (const Record& item : items) {
      T record{};
      for (const auto& [key, member] : members) record.*member = item.at(key);
      for (const auto& [key, member] : optional_members) {
        if (auto it = item.find(key); it != item.end()) record.*member = it->second;
      }
      value.push_back(std::move(record));
    }
  };
  e.get = [&value] { return value.empty() ? std::string() : std::to_string(value.size()) + " items"; };
}

}  // namespace tandem::config
