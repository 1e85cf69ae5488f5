#include "common/node/node_host.h"

#include "common/base/cpu_time.h"
#include "common/base/logging.h"
#include "common/base/version.h"
#include "common/proto/messages.h"
#include "common/proto/kv_layout_convert.h"

namespace tandem::node {
namespace {

// Block hashes per heartbeat (34 bytes each on the wire): a full list of a big
// cache spreads over several heartbeats instead of one huge frame.
constexpr size_t kMaxCacheHashesPerHeartbeat = 8192;

}  // namespace

NodeHost::~NodeHost() { Stop(); }

Status NodeHost::Start(const NodeConfig& config, engine::Engine* engine, RoleHooks hooks) {
  config_ = config;
  engine_ = engine;
  hooks_ = std::move(hooks);
  metrics_ = std::make_unique<NodeMetrics>(NodeMetricsOptions::For(config_.role, *engine_));
  engine_->SetStepObserver([metrics = metrics_.get()](const scheduler::SchedulerOutput& step) {
    metrics->iteration_tokens->Observe(step.num_batched_tokens);
  });
  loop_ = std::make_unique<net::EventLoop>(2);
  net::RpcHandlers handlers;
  handlers.on_request = [this](const std::shared_ptr<net::RpcConnection>& conn, net::MessagePtr m, net::Responder r) {
    if (hooks_.on_request)
      hooks_.on_request(conn, std::move(m), std::move(r));
    else
      r.Fail(UnimplementedError("no handler"));
  };
  handlers.on_message = [this](const std::shared_ptr<net::RpcConnection>& conn, net::MessagePtr m) {
    if (hooks_.on_message) hooks_.on_message(conn, std::move(m));
  };
  handlers.on_close = [this](const std::shared_ptr<net::RpcConnection>& conn, const Status&) {
    if (hooks_.on_peer_close) hooks_.on_peer_close(conn);
  };
  TANDEM_ASSIGN_OR_RETURN(server_, net::RpcServer::Start(*loop_, config_.ServerConfig(), std::move(handlers)));
  address_ = config_.advertise_address.empty() ? server_->address() : config_.advertise_address;
  if (!config_.http_address.empty()) {
    TANDEM_ASSIGN_OR_RETURN(
        http_, AdminHttpServer::Start(config_.http_address, [this](const std::string& path) { return Serve(path); }));
  }
  if (!config_.router_address.empty()) {
    RouterLinkOptions options;
    options.router_address = config_.router_address;
    options.client = config_.ClientConfig();
    options.heartbeat_interval_ms = config_.heartbeat_interval_ms;
    options.reconnect_interval_ms = config_.reconnect_interval_ms;
    options.make_register = [this] { return MakeRegister(); };
    options.load = [this] { return Load(); };
    options.cache = [this](bool full) { return TakeCacheReport(full); };
    options.on_request = [this](const std::shared_ptr<net::RpcConnection>& conn, net::MessagePtr m, net::Responder r) {
      if (hooks_.on_request)
        hooks_.on_request(conn, std::move(m), std::move(r));
      else
        r.Fail(UnimplementedError("no handler"));
    };
    options.on_lost = [this] {
      if (hooks_.on_router_lost) hooks_.on_router_lost();
    };
    options.on_drain = [this](const std::string& reason) {
      TANDEM_LOG_INFO("the router asks this node to drain ({})", reason);
      BeginDrain();
    };
    link_ = std::make_unique<RouterLink>(*loop_, std::move(options));
    TANDEM_RETURN_IF_ERROR(link_->Start());
  }
  TANDEM_LOG_INFO("{} node {} listening on {} (http {})", config_.role, config_.node_name, address_, http_address());
  return Status::Ok();
}

void NodeHost::Stop() {
  if (link_) link_->Stop();
  if (http_) http_->Stop();
  if (server_) server_->Stop();
  if (loop_) loop_->Stop();
  link_.reset();
}

Status NodeHost::SendToRouter(const google::protobuf::Message& message) {
  if (!link_) return UnavailableError("no router configured");
  return link_->Send(message);
}

void NodeHost::BeginDrain() {
  if (draining_.exchange(true)) return;
  TANDEM_LOG_INFO("draining: readiness fails, no new admissions");
  if (link_) link_->SetDraining(true);
}

proto::RegisterRequest NodeHost::MakeRegister() const {
  // The router starts this node's cache view over: have the full list ready for the first heartbeat.
  engine_->RequestFullCacheReport();
  proto::RegisterRequest r;
  r.set_role(hooks_.role);
  r.set_address(address_);
  r.set_model_id(engine_->config().model_name);
  kv_cache::KvLayout layout = engine_->device_kv().layout();
  *r.mutable_kv_layout() = proto::ToKvLayoutInfo(layout);
  proto::NodeCapacity* cap = r.mutable_capacity();
  cap->set_num_gpu_blocks(layout.num_blocks);
  cap->set_num_host_blocks(engine_->config().num_host_blocks);
  cap->set_max_running_requests(engine_->config().scheduler.max_num_seqs);
  cap->set_max_model_len(engine_->max_model_len());
  cap->set_max_prefill_tokens(engine_->config().scheduler.max_num_batched_tokens);
  r.set_node_name(config_.node_name);
  r.set_kv_transport(hooks_.kv_transport);
  r.set_transport_descriptor(hooks_.transport_descriptor);
  r.set_build_version(BuildVersion());
  r.set_protocol_version(proto::kProtocolVersion);
  return r;
}

proto::LoadReport NodeHost::Load() const {
  scheduler::SchedulerCounters c = engine_->Counters();
  proto::LoadReport load;
  load.set_num_running(static_cast<int32_t>(c.num_running));
  load.set_num_waiting(static_cast<int32_t>(c.num_waiting + c.num_swapped));
  load.set_num_reservations(static_cast<int32_t>(c.reservations_active));
  if (hooks_.queued_prefill_tokens) load.set_queued_prefill_tokens(hooks_.queued_prefill_tokens());
  proto::TierUsage* gpu = load.add_tiers();
  gpu->set_tier(proto::KV_TIER_GPU);
  gpu->set_free_blocks(c.kv.device.free_blocks + c.kv.device.cached_blocks);
  gpu->set_total_blocks(c.kv.device.total_blocks);
  proto::TierUsage* host = load.add_tiers();
  host->set_tier(proto::KV_TIER_HOST);
  host->set_free_blocks(c.kv.host.free_blocks + c.kv.host.cached_blocks);
  host->set_total_blocks(c.kv.host.total_blocks);
  return load;
}

std::optional<proto::CacheReport> NodeHost::TakeCacheReport(bool full) const {
  if (full) engine_->RequestFullCacheReport();
  std::optional<kv_cache::CacheEvents> events = engine_->TakeCacheReport(kMaxCacheHashesPerHeartbeat);
  if (!events) return std::nullopt;
  proto::CacheReport report;
  report.set_reset(events->reset);
  auto bytes = [](const kv_cache::BlockHash& h) {
    return std::string(reinterpret_cast<const char*>(h.bytes.data()), h.bytes.size());
  };
  for (const kv_cache::BlockHash& h : events->stored) report.add_stored_hashes(bytes(h));
  for (const kv_cache::BlockHash& h : events->removed) report.add_removed_hashes(bytes(h));
  return report;
}

HttpReply NodeHost::Serve(const std::string& path) {
  if (path == "/health/live") return HttpReply{200, "text/plain; charset=utf-8", "ok\n"};
  if (path == "/health/ready") {
    if (ready()) return HttpReply{200, "text/plain; charset=utf-8", "ready\n"};
    if (draining()) return HttpReply{503, "text/plain; charset=utf-8", "draining\n"};
    // Say why the router has not taken this node (wrong token, version skew, refused registration).
    const std::string refusal = link_ ? link_->last_refusal() : std::string();
    return HttpReply{503, "text/plain; charset=utf-8",
                     refusal.empty() ? "not registered\n" : "not registered: " + refusal + "\n"};
  }
  if (path == "/metrics") {
    metrics_->ready->Set(ready() ? 1 : 0);
    metrics_->CollectCpu(engine_->CpuSeconds(), ThreadRunQueueWaitSeconds(engine_->ThreadId()));
    if (hooks_.refresh) hooks_.refresh(*metrics_);
    return HttpReply{200, metrics::kPrometheusContentType, metrics_->Render()};
  }
  return HttpReply{404, "text/plain; charset=utf-8", "not found\n"};
}

}  // namespace tandem::node
