// tandem-router: the OpenAI-compatible front door plus the cluster control
// plane. Config: RouterOptions (router_options.h) from --config router.yaml,
// then flags (see --help). SIGTERM drains first (RouterConfig::drain_timeout_ms:
// running requests finish, new ones get 503); SIGINT, a second signal or the
// drain deadline stop it: HTTP first (requests still running are cancelled at the
// nodes), then the control plane.
//
// Thread rule: main thread only; the servers run their own threads.
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "common/base/logging.h"
#include "common/metrics/metrics_registry.h"
#include "common/metrics/process_metrics.h"
#include "common/model/model_config.h"
#include "common/net/event_loop.h"
#include "common/tokenizer/chat_template.h"
#include "common/tokenizer/tokenizer.h"
#include "common/tokenizer/tokenizer_config.h"
#include "router/cluster/cluster_client.h"
#include "router/cluster/cluster_config.h"
#include "router/cluster/node_admin.h"
#include "router/http_server.h"
#include "router/router_options.h"
#include "router/tokenizer_text_codec.h"

namespace tandem::router {
namespace {

void SetLogLevel(const std::string& level) {
  spdlog::level::level_enum l = spdlog::level::from_str(level);
  spdlog::set_level(l);
}

int Run(int argc, char** argv) {
  // Block the termination signals before any thread starts; main takes them with sigwait.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  RouterOptions options;
  config::ConfigBinder binder;
  options.Bind(binder);
  if (std::optional<int> rc = binder.ParseCommandLine(
          "tandem-router", "OpenAI-compatible front door and cluster control plane", argc, argv)) {
    return *rc;
  }
  if (Status valid = options.Validate(); !valid.ok()) {
    std::fprintf(stderr, "tandem-router: %s\n", valid.ToString().c_str());
    return 2;
  }
  if (Status admin_key = options.ResolveAdminKey(); !admin_key.ok()) {
    std::fprintf(stderr, "tandem-router: %s\n", admin_key.ToString().c_str());
    return 2;
  }
  SetLogLevel(options.log_level);

  // Tokenizer, chat template, context limit.
  const std::string& dir = options.model_dir;
  auto tokenizer = tokenizer::Tokenizer::FromFile(dir + "/tokenizer.json");
  if (!tokenizer.ok()) {
    std::fprintf(stderr, "tandem-router: tokenizer: %s\n", tokenizer.status().ToString().c_str());
    return 1;
  }
  tokenizer::ChatRenderOptions render;
  if (auto tc = tokenizer::TokenizerConfig::FromModelDir(dir); tc.ok()) {
    render.bos_token = tc->bos_token;
    render.eos_token = tc->eos_token;
  }
  std::unique_ptr<tokenizer::ChatTemplate> chat_template;
  if (auto t = tokenizer::ChatTemplate::FromModelDir(dir); t.ok()) {
    chat_template = std::make_unique<tokenizer::ChatTemplate>(std::move(*t));
  } else {
    TANDEM_LOG_WARN("no chat template in {} ({}): chat completions answer 400", dir, t.status().ToString());
  }
  int32_t context = options.max_model_len;
  auto model_config = model::LoadModelConfig(dir);
  if (context == 0) {
    if (!model_config.ok()) {
      std::fprintf(stderr, "tandem-router: %s (or pass --max-model-len)\n", model_config.status().ToString().c_str());
      return 1;
    }
    context = model_config->max_position_embeddings;
  }
  // The EOS ids the nodes stop at (as the engine takes them): the output leaves their text out.
  std::vector<TokenId> eos_token_ids;
  if (model_config.ok()) eos_token_ids = model_config->eos_token_ids;
  if (auto generation = model::LoadGenerationConfig(dir); generation.ok()) {
    for (int id : generation->eos_token_ids) {
      if (std::find(eos_token_ids.begin(), eos_token_ids.end(), id) == eos_token_ids.end()) eos_token_ids.push_back(id);
    }
  }
  TokenizerTextCodec codec(tokenizer->get(), chat_template.get(), render);
  auto tool_call_format =
      ResolveToolCallFormat(options.http.tool_call_parser, chat_template ? chat_template->source() : "");
  if (!tool_call_format.ok()) {
    std::fprintf(stderr, "tandem-router: %s\n", tool_call_format.status().ToString().c_str());
    return 2;
  }
  TANDEM_LOG_INFO("tool calls (tool_choice auto) are parsed as {}", ToolCallFormatName(*tool_call_format));

  metrics::MetricsRegistry registry;
  net::EventLoop loop(options.cluster.num_control_threads);
  auto engine = cluster::ClusterClient::Start(loop, options.cluster, &registry);
  if (!engine.ok()) {
    std::fprintf(stderr, "tandem-router: control plane: %s\n", engine.status().ToString().c_str());
    return 1;
  }
  cluster::ClusterClient* cluster_client = engine->get();
  cluster::NodeAdmin node_admin(*cluster_client);

  RouterDeps deps;
  deps.engine = cluster_client;
  deps.codec = &codec;
  std::string model_id = std::filesystem::path(dir).filename().string();
  if (model_id.empty()) model_id = std::filesystem::path(dir).parent_path().filename().string();
  deps.model = {model_id, context, (*tokenizer)->VocabSize(), static_cast<int64_t>(std::time(nullptr)),
                std::move(eos_token_ids), *tool_call_format};
  deps.is_ready = [cluster_client] { return cluster_client->Ready(); };
  deps.metrics = &registry;
  metrics::ProcessMetrics process_metrics(registry);
  deps.metrics_text = [&registry, &process_metrics] {
    process_metrics.Collect();
    return registry.RenderText();
  };
  deps.admin = &node_admin;
  HttpServer server(options.http, std::move(deps));
  Status started = server.Start();
  if (!started.ok()) {
    std::fprintf(stderr, "tandem-router: http: %s\n", started.ToString().c_str());
    (*engine)->Stop();
    return 1;
  }
  // Machine-readable lines for launchers and tests.
  std::printf("http_address=%s:%u\ncontrol_address=%s\n", options.http.listen_host.c_str(),
              static_cast<unsigned>(server.port()), cluster_client->control_address().c_str());
  std::fflush(stdout);
  TANDEM_LOG_INFO("tandem-router serving model '{}' (context {}) on {}:{}", server.context().ModelName(), context,
                  options.http.listen_host, server.port());
  TANDEM_LOG_INFO("admin API (/admin/*): {}",
                  options.http.admin_key.empty() ? "off (no admin_key or admin_key_file)" : "on, behind the admin key");

  int sig = 0;
  sigwait(&signals, &sig);
  if (sig == SIGTERM && options.http.drain_timeout_ms > 0) {
    TANDEM_LOG_INFO("SIGTERM: draining (running requests finish, new ones get 503; up to {} ms)",
                    options.http.drain_timeout_ms);
    const timespec now{0, 0};
    const bool drained = server.Drain(std::chrono::milliseconds(options.http.drain_timeout_ms),
                                      [&] { return sigtimedwait(&signals, nullptr, &now) > 0; });
    TANDEM_LOG_INFO("{}", drained ? "drained: no request left" : "drain cut short: stopping with requests running");
  }
  TANDEM_LOG_INFO("signal {}: shutting down", sig);
  server.Stop();
  (*engine)->Stop();
  engine->reset();
  loop.Stop();
  return 0;
}

}  // namespace
}  // namespace tandem::router

int main(int argc, char** argv) { return tandem::router::Run(argc, argv); }
