#include "router/router_flags.h"

#include <CLI/CLI.hpp>

namespace tandem::router {

StatusOr<RouterCommandLine> ParseRouterFlags(int argc, const char* const* argv) {
  CLI::App app("tandem-router: OpenAI-compatible front door");
  std::string config_path;
  RouterConfig o;  // override values; applied only when the flag was given
  RouterCommandLine result;
  app.add_option("--config", config_path, "YAML file with RouterConfig fields");
  app.add_option("--listen-host", o.listen_host, "address to listen on");
  app.add_option("--listen-port", o.listen_port, "TCP port (0 = any free port)");
  app.add_option("--io-threads", o.num_io_threads, "I/O threads");
  app.add_option("--max-concurrent-requests", o.max_concurrent_requests, "running requests");
  app.add_option("--max-queued-requests", o.max_queued_requests, "queued requests before 429");
  app.add_option("--request-timeout-ms", o.request_timeout_ms, "per-request deadline (0 = none)");
  app.add_option("--served-model-name", o.served_model_name, "model name on the API");
  app.add_option("--log-level", result.log_level, "trace|debug|info|warn|error|off");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    result.help_requested = true;
    result.help = app.help();
    return result;
  } catch (const CLI::Error& e) {
    return InvalidArgumentError(std::string("command line: ") + e.what());
  }
  if (!config_path.empty()) {
    TANDEM_ASSIGN_OR_RETURN(result.config, LoadRouterConfigFile(config_path));
  }
  RouterConfig& c = result.config;
  if (app.count("--listen-host")) c.listen_host = o.listen_host;
  if (app.count("--listen-port")) c.listen_port = o.listen_port;
  if (app.count("--io-threads")) c.num_io_threads = o.num_io_threads;
  if (app.count("--max-concurrent-requests")) c.max_concurrent_requests = o.max_concurrent_requests;
  if (app.count("--max-queued-requests")) c.max_queued_requests = o.max_queued_requests;
  if (app.count("--request-timeout-ms")) c.request_timeout_ms = o.request_timeout_ms;
  if (app.count("--served-model-name")) c.served_model_name = o.served_model_name;
  TANDEM_RETURN_IF_ERROR(c.Validate());
  return result;
}

}  // namespace tandem::router
