#include "router/router_options.h"

#include "common/net/cluster_token_file.h"

namespace tandem::router {

void RouterOptions::Bind(config::ConfigBinder& b) {
  b.Field("model_dir", model_dir, "model directory with tokenizer.json (required)");
  b.Field("max_model_len", max_model_len, "context limit, prompt + completion tokens (0 = config.json's)");
  b.Choice("log_level", log_level,
           {{"trace", "trace"},
            {"debug", "debug"},
            {"info", "info"},
            {"warn", "warn"},
            {"error", "error"},
            {"critical", "critical"},
            {"off", "off"}},
           "log level");
  http.Bind(b);
  cluster.Bind(b);
}

Status RouterOptions::Validate() const {
  if (model_dir.empty()) return InvalidArgumentError("model_dir is required (--model-dir DIR)");
  if (max_model_len < 0) return InvalidArgumentError("max_model_len must be >= 0");
  TANDEM_RETURN_IF_ERROR(http.Validate());
  return cluster.Validate();
}

Status RouterOptions::ResolveAdminKey() {
  if (http.admin_key.empty() && !http.admin_key_file.empty()) {
    TANDEM_ASSIGN_OR_RETURN(http.admin_key, net::ReadSecretFile(http.admin_key_file, "admin_key_file"));
  }
  return http.Validate();
}

}  // namespace tandem::router
