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
// Field types: bool, int, int64_t, double, std::string, std::vector<std::string>.
// YAML keys are the field names (nested maps flatten with '.': `limits.max_body_bytes`);
// an unknown key or a wrong type is InvalidArgument naming the key. The binder holds
// pointers into the config struct: it must not outlive it. Thread rule: startup only.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <functional>
#include <string>
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

  // Adds `--<name>` for every field (dots become dashes: --limits-max-body-bytes) and `--config FILE`.
  void AddFlags(CLI::App& app);
  // Applies the YAML file named by --config (if any), then every flag given on the command line.
  Status Apply();
  // Applies YAML text (used by Apply and by tests).
  Status ApplyYaml(const std::string& yaml_text, const std::string& origin);
  // "name: value" lines of the current values, for logging at startup.
  std::string Dump() const;

 private:
  struct Entry {
    std::string name;
    std::string help;
    bool is_list = false;
    std::function<Status(const std::string&)> set;       // from one scalar
    std::function<void(const std::vector<std::string>&)> set_list;
    std::function<std::string()> get;
    std::vector<std::string> flag_values;  // CLI storage
    CLI::Option* option = nullptr;
  };
  Entry& Add(const std::string& name, const std::string& help);
  Entry* Find(const std::string& name);

  std::vector<Entry> entries_;
  std::string config_path_;
};

}  // namespace tandem::config
