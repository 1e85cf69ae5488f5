// tandem-profile: measures one node configuration with the real engine and the
// project's own KV transports, and writes the profile the capacity planner reads
// (planner/profile.h; docs/planner.md).
//
//   tandem-profile --config /etc/tandem/decode-0.yaml --output h200.json
//   tandem-profile --model-dir build/models/tiny --quick --output tiny-cpu.json
//
// It takes a node's config file or flags as they are (every NodeConfig key; the
// engine's — backend, device, KV blocks, block size, scheduler limits — are what
// it profiles, ucx_transports picks the UCX path) plus its own grid options.
#include <ctime>
#include <cstdio>
#include <memory>

#include "common/base/build_info.h"
#include "common/base/version.h"
#include "common/base/logging.h"
#include "common/engine/backend_factory.h"
#include "common/engine/engine.h"
#include "common/node/node_config.h"
#include "planner/profile_io.h"
#include "tools/profile/device_info.h"
#include "tools/profile/engine_probe.h"
#include "tools/profile/profile_options.h"
#include "tools/profile/profile_report.h"
#include "tools/profile/transfer_probe.h"

namespace tandem::tools {
namespace {

std::string UtcNow() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char text[32];
  std::strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

// Everything but the measurements: stamp, device, model, engine settings, KV capacity.
planner::Profile Describe(engine::Engine& engine, planner::DeviceInfo device, const ProfileOptions& options) {
  planner::Profile p;
  p.commit = BuildCommit();
  p.version = BuildVersion();
  p.date = UtcNow();
  p.quick = options.quick;
  p.device = std::move(device);
  const engine::EngineConfig& config = engine.config();
  const model::ModelConfig& m = engine.model_config();
  const kv_cache::KvLayout& layout = engine.device_kv().layout();
  p.model = {.id = config.model_name,
             .architecture = m.architecture,
             .num_layers = m.num_layers,
             .hidden_size = m.hidden_size,
             .intermediate_size = m.intermediate_size,
             .num_heads = m.num_heads,
             .num_kv_heads = m.num_kv_heads,
             .head_dim = m.head_dim,
             .vocab_size = m.vocab_size,
             .max_position_embeddings = m.max_position_embeddings,
             .kv_dtype = std::string(DTypeName(layout.dtype))};
  p.engine = {.block_size = config.block_size,
              .num_device_blocks = layout.num_blocks,
              .num_host_blocks = config.num_host_blocks,
              .max_num_batched_tokens = config.scheduler.max_num_batched_tokens,
              .max_num_seqs = config.scheduler.max_num_seqs,
              .max_prefill_chunk_tokens = config.scheduler.max_prefill_chunk_tokens,
              .max_model_len = config.scheduler.max_model_len,
              .enable_prefix_caching = config.enable_prefix_caching};
  p.kv_capacity = {.bytes_per_token = static_cast<int64_t>(layout.BytesPerToken()),
                   .device_tokens = int64_t{layout.num_blocks} * config.block_size,
                   .host_tokens = int64_t{config.num_host_blocks} * config.block_size};
  return p;
}

Status Run(const node::NodeConfig& node, const ProfileOptions& options) {
  TANDEM_RETURN_IF_ERROR(InitLogging(options.log_level));
  TANDEM_RETURN_IF_ERROR(node.engine.Validate());
  TANDEM_ASSIGN_OR_RETURN(planner::DeviceInfo device, DescribeDevice(node.engine.backend, node.engine.device));
  TANDEM_ASSIGN_OR_RETURN(auto backend, engine::MakeBackend(node.engine.backend, node.engine.device));
  TANDEM_ASSIGN_OR_RETURN(auto engine, engine::Engine::Create(node.engine, std::move(backend)));
  planner::Profile profile = Describe(*engine, std::move(device), options);
  PrintHeader(profile);
  EngineProbe probe(*engine, options);
  TANDEM_ASSIGN_OR_RETURN(profile.prefill, probe.MeasurePrefill());
  PrintPrefill(profile.prefill);
  TANDEM_ASSIGN_OR_RETURN(profile.decode, probe.MeasureDecode());
  PrintDecode(profile.decode);
  PrintSpread(profile);
  const kv_cache::KvLayout layout = engine->device_kv().layout();
  engine.reset();  // its memory back before the transfer pools
  TANDEM_ASSIGN_OR_RETURN(
      profile.transfer,
      MeasureTransfers(layout, options.transfer_transports, node.ucx_transports, node.engine.backend,
                       node.engine.device, {.max_blocks = options.transfer_max_blocks, .repetitions = options.transfer_repetitions}));
  PrintTransfer(profile.transfer);
  TANDEM_RETURN_IF_ERROR(planner::SaveProfile(profile, options.output));
  std::printf("wrote %s\n", options.output.c_str());
  return Status::Ok();
}

}  // namespace
}  // namespace tandem::tools

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "--transfer-peer") {
    return tandem::tools::RunTransferPeer(std::vector<std::string>(argv + 2, argv + argc));
  }
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // tables in order with the engine's log lines (stderr)
  tandem::node::NodeConfig node;
  tandem::tools::ProfileOptions options;
  tandem::config::ConfigBinder binder;
  node.Bind(binder);
  options.Bind(binder);
  if (auto code = binder.ParseCommandLine(
          "tandem-profile",
          "Measures one node configuration with the real engine and writes the capacity planner's profile "
          "(docs/planner.md). Takes a node's config file or flags (the engine fields are profiled; ucx_transports "
          "picks the UCX path; the node's other fields are accepted and unused) plus the grid options.",
          argc, argv, [&options](CLI::App& app) {
            app.add_flag("--quick", options.quick,
                         "small grids (seconds on the CPU with the tiny model): tests and CI, not planning");
          })) {
    return *code;
  }
  options.ApplyQuick();
  tandem::Status status = options.Validate();
  if (status.ok()) status = tandem::tools::Run(node, options);
  if (!status.ok()) {
    std::fprintf(stderr, "tandem-profile: %s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}
