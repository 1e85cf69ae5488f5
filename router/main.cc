// tandem-router: the OpenAI-compatible front door plus the cluster control
// plane. Config: --config router.yaml (RouterConfig keys at the top level, the
// ClusterConfig under `cluster:`, the tokenizer's model directory as
// `model_dir`), then flags (see --help). SIGINT/SIGTERM stop it cleanly:
// HTTP first (in-flight requests are cancelled at the nodes), then the control
// plane.
//
// Thread rule: main thread only; the servers run their own threads.
#include <signal.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "common/base/logging.h"
#include "common/metrics/metrics_registry.h"
#include "common/model/model_config.h"
#include "common/net/event_loop.h"
#include "common/tokenizer/chat_template.h"
#include "common/tokenizer/tokenizer.h"
#include "common/tokenizer/tokenizer_config.h"
#include "router/cluster/cluster_backend.h"
#include "router/cluster/cluster_config.h"
#include "router/http_server.h"
#include "router/router_flags.h"
#include "router/tokenizer_text_codec.h"

namespace tandem::router {
namespace {

constexpr size_t kMaxConfigFileBytes = 1 << 20;

// What main reads itself (RouterConfig's own flags go to ParseRouterFlags).
struct MainOptions {
  std::string config_path;
  std::string model_dir;
  int32_t max_model_len = 0;  // 0 = config.json's max_position_embeddings
  cluster::ClusterConfig cluster;
  std::vector<std::string> router_args;  // everything else, for ParseRouterFlags
  bool help = false;
};

constexpr char kMainHelp[] =
    "Router-level options (also in the YAML file):\n"
    "  --model-dir DIR                 model directory with tokenizer.json (+ tokenizer_config.json,\n"
    "                                  chat template, config.json); YAML: model_dir\n"
    "  --max-model-len N               context limit (default: config.json max_position_embeddings)\n"
    "  --control-address HOST:PORT     control plane for nodes; YAML: cluster.control_address\n"
    "  --cluster-token TOKEN           shared secret (>= 16 bytes); YAML: cluster.cluster_token\n"
    "  --cluster-token-file PATH       file holding the token; YAML: cluster.cluster_token_file\n"
    "  --mode disaggregated|colocated  YAML: cluster.mode\n"
    "  --local-prefill-max-tokens N    prompts this short prefill on decode; YAML: cluster.local_prefill_max_tokens\n"
    "  --heartbeat-interval-ms N       YAML: cluster.heartbeat_interval_ms\n"
    "  --node-dead-after-ms N          a node silent this long is dead; YAML: cluster.node_dead_after_ms\n"
    "  --control-tls-enabled BOOL      mutual TLS for nodes; YAML: cluster.tls.enabled\n"
    "  --control-tls-cert-file PATH    router certificate (PEM); YAML: cluster.tls.cert_file\n"
    "  --control-tls-key-file PATH     its private key (PEM); YAML: cluster.tls.key_file\n"
    "  --control-tls-ca-file PATH      CA verifying node certificates; YAML: cluster.tls.ca_file\n";

StatusOr<int32_t> ParseInt(const std::string& flag, const std::string& value) {
  char* end = nullptr;
  errno = 0;
  long v = std::strtol(value.c_str(), &end, 10);
  if (value.empty() || *end != '\0' || errno != 0 || v < 0 || v > (1 << 30)) {
    return InvalidArgumentError(flag + ": not a valid non-negative integer: " + value);
  }
  return static_cast<int32_t>(v);
}

// Splits the YAML file: our keys out, RouterConfig's keys into `router_yaml`.
Status LoadConfigFile(const std::string& path, MainOptions* options, std::string* router_yaml) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) return NotFoundError("cannot read config " + path + ": " + ec.message());
  if (size > kMaxConfigFileBytes) return InvalidArgumentError("config " + path + " is larger than 1 MiB");
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const std::exception& e) {
    return InvalidArgumentError("config " + path + ": " + e.what());
  }
  if (root.IsNull()) return Status::Ok();
  if (!root.IsMap()) return InvalidArgumentError("config " + path + " must be a map");
  YAML::Node rest(YAML::NodeType::Map);
  try {
    for (const auto& kv : root) {
      const std::string key = kv.first.as<std::string>();
      if (key == "cluster") {
        TANDEM_ASSIGN_OR_RETURN(options->cluster, cluster::ParseClusterConfig(kv.second));
      } else if (key == "model_dir") {
        options->model_dir = kv.second.as<std::string>();
      } else if (key == "max_model_len") {
        options->max_model_len = kv.second.as<int32_t>();
      } else {
        rest[key] = kv.second;
      }
    }
  } catch (const std::exception& e) {
    return InvalidArgumentError("config " + path + ": " + e.what());
  }
  YAML::Emitter out;
  out << rest;
  *router_yaml = out.c_str();
  return Status::Ok();
}

StatusOr<MainOptions> ParseMainArgs(int argc, char** argv) {
  MainOptions o;
  // Flags given on the command line, applied after the file.
  std::vector<std::pair<std::string, std::string>> flags;
  static const char* const kOurs[] = {"--config",        "--model-dir",          "--max-model-len",
                                      "--control-address", "--cluster-token",    "--cluster-token-file",
                                      "--mode",          "--local-prefill-max-tokens", "--heartbeat-interval-ms",
                                      "--node-dead-after-ms",
                                      "--control-tls-enabled", "--control-tls-cert-file", "--control-tls-key-file",
                                      "--control-tls-ca-file"};
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") o.help = true;
    std::string name = arg, value;
    bool has_value = false;
    if (size_t eq = arg.find('='); arg.rfind("--", 0) == 0 && eq != std::string::npos) {
      name = arg.substr(0, eq);
      value = arg.substr(eq + 1);
      has_value = true;
    }
    bool ours = false;
    for (const char* f : kOurs) ours |= name == f;
    if (!ours) {
      o.router_args.push_back(arg);
      continue;
    }
    if (!has_value) {
      if (i + 1 >= argc) return InvalidArgumentError(name + " needs a value");
      value = argv[++i];
    }
    flags.emplace_back(name, value);
  }
  for (const auto& [name, value] : flags) {
    if (name == "--config") o.config_path = value;
  }
  std::string router_yaml;
  if (!o.config_path.empty()) TANDEM_RETURN_IF_ERROR(LoadConfigFile(o.config_path, &o, &router_yaml));
  if (!router_yaml.empty() && router_yaml != "{}") {
    char tmpl[] = "/tmp/tandem-router-XXXXXX.yaml";
    int fd = mkstemps(tmpl, 5);
    if (fd < 0) return InternalError("cannot create a temporary config file");
    const bool written = write(fd, router_yaml.data(), router_yaml.size()) == static_cast<ssize_t>(router_yaml.size());
    close(fd);
    if (!written) return InternalError("cannot write a temporary config file");
    o.router_args.insert(o.router_args.begin(), {"--config", tmpl});
  }
  for (const auto& [name, value] : flags) {
    if (name == "--model-dir") {
      o.model_dir = value;
    } else if (name == "--max-model-len") {
      TANDEM_ASSIGN_OR_RETURN(o.max_model_len, ParseInt(name, value));
    } else if (name == "--control-address") {
      o.cluster.control_address = value;
    } else if (name == "--cluster-token") {
      o.cluster.cluster_token = value;
    } else if (name == "--cluster-token-file") {
      o.cluster.cluster_token_file = value;
    } else if (name == "--mode") {
      if (value == "disaggregated") {
        o.cluster.mode = cluster::ServingMode::kDisaggregated;
      } else if (value == "colocated") {
        o.cluster.mode = cluster::ServingMode::kColocated;
      } else {
        return InvalidArgumentError("--mode must be disaggregated or colocated");
      }
    } else if (name == "--local-prefill-max-tokens") {
      TANDEM_ASSIGN_OR_RETURN(o.cluster.local_prefill_max_tokens, ParseInt(name, value));
    } else if (name == "--heartbeat-interval-ms") {
      TANDEM_ASSIGN_OR_RETURN(o.cluster.heartbeat_interval_ms, ParseInt(name, value));
    } else if (name == "--node-dead-after-ms") {
      TANDEM_ASSIGN_OR_RETURN(o.cluster.node_dead_after_ms, ParseInt(name, value));
    } else if (name == "--control-tls-enabled") {
      if (value != "true" && value != "false") return InvalidArgumentError(name + " must be true or false");
      o.cluster.tls.enabled = value == "true";
    } else if (name == "--control-tls-cert-file") {
      o.cluster.tls.cert_file = value;
    } else if (name == "--control-tls-key-file") {
      o.cluster.tls.key_file = value;
    } else if (name == "--control-tls-ca-file") {
      o.cluster.tls.ca_file = value;
    }
  }
  return o;
}

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

  StatusOr<MainOptions> options = ParseMainArgs(argc, argv);
  if (!options.ok()) {
    std::fprintf(stderr, "tandem-router: %s\n", options.status().ToString().c_str());
    return 2;
  }
  std::vector<const char*> router_argv = {argv[0]};
  for (const std::string& a : options->router_args) router_argv.push_back(a.c_str());
  StatusOr<RouterCommandLine> cmd = ParseRouterFlags(static_cast<int>(router_argv.size()), router_argv.data());
  if (router_argv.size() > 2 && std::string(router_argv[1]) == "--config" &&
      std::string(router_argv[2]).rfind("/tmp/tandem-router-", 0) == 0) {
    std::remove(router_argv[2]);
  }
  if (!cmd.ok()) {
    std::fprintf(stderr, "tandem-router: %s\n", cmd.status().ToString().c_str());
    return 2;
  }
  if (cmd->help_requested || options->help) {
    std::printf("%s\n%s", cmd->help.c_str(), kMainHelp);
    return 0;
  }
  SetLogLevel(cmd->log_level);
  if (options->model_dir.empty()) {
    std::fprintf(stderr, "tandem-router: --model-dir (or model_dir in the config) is required\n");
    return 2;
  }
  Status valid = options->cluster.Validate();
  if (!valid.ok()) {
    std::fprintf(stderr, "tandem-router: %s\n", valid.ToString().c_str());
    return 2;
  }

  // Tokenizer, chat template, context limit.
  const std::string& dir = options->model_dir;
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
  int32_t context = options->max_model_len;
  if (context == 0) {
    auto model_config = model::LoadModelConfig(dir);
    if (!model_config.ok()) {
      std::fprintf(stderr, "tandem-router: %s (or pass --max-model-len)\n", model_config.status().ToString().c_str());
      return 1;
    }
    context = model_config->max_position_embeddings;
  }
  TokenizerTextCodec codec(tokenizer->get(), chat_template.get(), render);

  metrics::MetricsRegistry registry;
  net::EventLoop loop(options->cluster.num_control_threads);
  auto backend = cluster::ClusterBackend::Start(loop, options->cluster, &registry);
  if (!backend.ok()) {
    std::fprintf(stderr, "tandem-router: control plane: %s\n", backend.status().ToString().c_str());
    return 1;
  }
  cluster::ClusterBackend* cluster_backend = backend->get();

  RouterDeps deps;
  deps.backend = cluster_backend;
  deps.codec = &codec;
  std::string model_id = std::filesystem::path(dir).filename().string();
  if (model_id.empty()) model_id = std::filesystem::path(dir).parent_path().filename().string();
  deps.model = {model_id, context, (*tokenizer)->VocabSize(), static_cast<int64_t>(std::time(nullptr))};
  deps.is_ready = [cluster_backend] { return cluster_backend->Ready(); };
  deps.metrics = &registry;
  deps.metrics_text = [&registry] { return registry.RenderText(); };
  HttpServer server(cmd->config, std::move(deps));
  Status started = server.Start();
  if (!started.ok()) {
    std::fprintf(stderr, "tandem-router: http: %s\n", started.ToString().c_str());
    (*backend)->Stop();
    return 1;
  }
  // Machine-readable lines for launchers and tests.
  std::printf("http_address=%s:%u\ncontrol_address=%s\n", cmd->config.listen_host.c_str(),
              static_cast<unsigned>(server.port()), cluster_backend->control_address().c_str());
  std::fflush(stdout);
  TANDEM_LOG_INFO("tandem-router serving model '{}' (context {}) on {}:{}", server.context().ModelName(), context,
                  cmd->config.listen_host, server.port());

  int sig = 0;
  sigwait(&signals, &sig);
  TANDEM_LOG_INFO("signal {}: shutting down", sig);
  server.Stop();
  (*backend)->Stop();
  backend->reset();
  loop.Stop();
  return 0;
}

}  // namespace
}  // namespace tandem::router

int main(int argc, char** argv) { return tandem::router::Run(argc, argv); }
