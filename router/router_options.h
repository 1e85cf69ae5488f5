// RouterOptions: everything tandem-router is configured with, bound once to a
// ConfigBinder as the nodes' NodeConfig is: the model directory and context
// limit, the log level, the HTTP front door (RouterConfig) and the cluster side
// (ClusterConfig). Every field is a top-level key of the --config YAML file
// (deploy/router.yaml lists them all) and a flag (`tandem-router --help`); flags
// override the file. Thread rule: a plain value; bind and parse at startup.
#pragma once

#include <string>

#include "common/base/status.h"
#include "common/config/config_binder.h"
#include "router/cluster/cluster_config.h"
#include "router/router_config.h"

namespace tandem::router {

struct RouterOptions {
  // Model directory with tokenizer.json (and optionally tokenizer_config.json,
  // chat_template.jinja, config.json). Required.
  std::string model_dir;
  // Context limit, prompt + completion tokens; 0 = config.json's max_position_embeddings.
  int max_model_len = 0;
  // trace | debug | info | warn | error | critical | off.
  std::string log_level = "info";
  // The HTTP front door.
  RouterConfig http;
  // The control plane, node registry and placement.
  cluster::ClusterConfig cluster;

  // Binds every field above (RouterConfig's and ClusterConfig's keys unprefixed).
  void Bind(config::ConfigBinder& b);
  // InvalidArgument naming the first bad field (model_dir, max_model_len, then
  // each part's Validate). Does not read the model directory or the token file.
  Status Validate() const;
  // Reads http.admin_key_file into http.admin_key when admin_key is empty and a
  // file is named (net::ReadSecretFile), then validates the key. InvalidArgument
  // naming the file; the key never appears in an error.
  Status ResolveAdminKey();
};

}  // namespace tandem::router
