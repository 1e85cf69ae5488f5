#include "tools/profile/transfer_probe.h"

#include <algorithm>
#include <chrono>
#include <deque>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "common/base/clock.h"
#include "kv_transfer/kv_receiver.h"
#include "kv_transfer/kv_sender.h"
#include "kv_transfer/local/local_transport.h"
#include "kv_transfer/transport_factory.h"
#include "planner/linear_fit.h"

namespace tandem::tools {
namespace {

using kv_transfer::KvReceiver;
using kv_transfer::KvSender;
using Seconds = std::chrono::duration<double>;

// A session that has not ended after this long is stuck.
constexpr double kSessionTimeoutSeconds = 60;

double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

// One sender and one receiver over the two transports, with source and landing
// pools of `layout` in host memory and the control plane as two in-order queues.
class SessionPair {
 public:
  SessionPair(kv_transfer::Transport& send, kv_transfer::Transport& receive, const kv_cache::KvLayout& layout)
      : send_(send), layout_(layout), source_(layout.TotalBytes()), landing_(layout.TotalBytes()) {
    // Bytes that are not all alike, so no layer of the stack can shortcut them.
    uint32_t x = 12345;
    for (uint8_t& b : source_) b = static_cast<uint8_t>((x = x * 1664525u + 1013904223u) >> 24);
    sender_ =
        std::make_unique<KvSender>(kv_transfer::KvSenderConfig{.model_id = "profile", .layout = layout}, send, clock_,
                                   [this](RequestId, std::string m) { to_receiver_.push_back(std::move(m)); });
    receiver_.emplace(kv_transfer::KvReceiverConfig{.model_id = "profile", .layout = layout}, receive, clock_,
                      [this](RequestId, std::string m) { to_sender_.push_back(std::move(m)); });
  }
  ~SessionPair() {
    // A session left by a failed Move ends before the sender goes (it must hold none).
    sender_->CancelAll(CancelledError("the transfer probe is ending"));
    const auto start = std::chrono::steady_clock::now();
    while (sender_->num_sessions() > 0 && Seconds(std::chrono::steady_clock::now() - start).count() < 10) {
      sender_->Poll();
    }
    receiver_.reset();
    if (sender_->num_sessions() > 0) {
      // A hung transport still reads the source: leak the sender and the pool on the
      // way out of a failed run rather than abort (~KvSender requires no session).
      sender_.release();
      new std::vector<uint8_t>(std::move(source_));
      return;
    }
    sender_.reset();
    if (source_region_ != kv_transfer::kInvalidHandle) send_.UnregisterMemory(source_region_).IgnoreError();
  }

  Status Register() {
    TANDEM_RETURN_IF_ERROR(receiver_->RegisterLanding(landing_.data(), kv_transfer::MemoryKind::kHost));
    TANDEM_ASSIGN_OR_RETURN(kv_transfer::RegisteredRegion region,
                            send_.RegisterMemory(source_.data(), source_.size(), kv_transfer::MemoryKind::kHost));
    source_region_ = region.id;
    return Status::Ok();
  }

  // Moves every layer of source blocks `source` into landing blocks `target`;
  // returns the seconds from Open until both ends were done.
  StatusOr<double> Move(const std::vector<BlockId>& source, const std::vector<BlockId>& target) {
    const RequestId id = next_id_++;
    std::optional<Status> sent, received;
    const auto start = std::chrono::steady_clock::now();
    kv_transfer::ReceiveParams receive;
    receive.request_id = id;
    receive.epoch = 1;
    receive.blocks = target;
    receive.lease_ms = 60'000;
    receive.on_done = [&](const Status& s) { received = s; };
    TANDEM_ASSIGN_OR_RETURN(std::string target_bytes, receiver_->Open(std::move(receive)));
    kv_transfer::SendParams send;
    send.target = std::move(target_bytes);
    send.source_blocks = source;
    send.on_done = [&](const Status& s) { sent = s; };
    TANDEM_RETURN_IF_ERROR(sender_->Open(std::move(send)));
    for (int layer = 0; layer < layout_.num_layers; ++layer) {
      TANDEM_RETURN_IF_ERROR(sender_->SendLayer(id, layer, {source_region_, layout_.BlockOffset(layer, 0)}));
    }
    while (!sent || !received) {
      sender_->Poll();
      receiver_->Poll();
      for (; !to_receiver_.empty(); to_receiver_.pop_front()) receiver_->OnControlMessage(to_receiver_.front());
      for (; !to_sender_.empty(); to_sender_.pop_front()) sender_->OnControlMessage(to_sender_.front());
      if (Seconds(std::chrono::steady_clock::now() - start).count() > kSessionTimeoutSeconds) {
        return DeadlineExceededError("a transfer session did not end within 60 s");
      }
    }
    const double seconds = Seconds(std::chrono::steady_clock::now() - start).count();
    TANDEM_RETURN_IF_ERROR(sent->WithContext("sender"));
    TANDEM_RETURN_IF_ERROR(received->WithContext("receiver"));
    return seconds;
  }

  uint64_t writes_posted() const { return sender_->stats().writes_posted; }

 private:
  kv_transfer::Transport& send_;
  const kv_cache::KvLayout layout_;
  SystemClock clock_;
  std::vector<uint8_t> source_, landing_;
  kv_transfer::RegionId source_region_ = kv_transfer::kInvalidHandle;
  std::unique_ptr<KvSender> sender_;
  std::optional<KvReceiver> receiver_;
  std::deque<std::string> to_receiver_, to_sender_;
  RequestId next_id_ = 1;
};

}  // namespace

StatusOr<planner::TransferPath> MeasureTransferPath(kv_transfer::Transport& sender_transport,
                                                    kv_transfer::Transport& receiver_transport,
                                                    const kv_cache::KvLayout& layout,
                                                    const TransferProbeOptions& options, planner::TransferPath path) {
  kv_cache::KvLayout pools = layout;
  pools.num_blocks = 2 * options.max_blocks;  // room for every other block of the largest request
  SessionPair pair(sender_transport, receiver_transport, pools);
  TANDEM_RETURN_IF_ERROR(pair.Register());
  std::vector<std::vector<double>> rows;
  std::vector<double> seconds;
  for (int blocks = 1; blocks <= options.max_blocks; blocks *= 4) {
    std::vector<BlockId> source(blocks), contiguous(blocks), scattered(blocks);
    for (int i = 0; i < blocks; ++i) source[i] = contiguous[i] = i, scattered[i] = 2 * i;
    for (const std::vector<BlockId>* target : {&contiguous, &scattered}) {
      if (blocks == 1 && target == &scattered) continue;            // one block is one run either way
      TANDEM_RETURN_IF_ERROR(pair.Move(source, *target).status());  // warm-up (the first connects)
      const uint64_t writes_before = pair.writes_posted();
      std::vector<double> times;
      for (int rep = 0; rep < options.repetitions; ++rep) {
        TANDEM_ASSIGN_OR_RETURN(double t, pair.Move(source, *target));
        times.push_back(t);
      }
      planner::TransferPoint point{
          .blocks = blocks,
          .runs = static_cast<int>((pair.writes_posted() - writes_before) / options.repetitions),
          .bytes = static_cast<int64_t>(blocks) * layout.num_layers * static_cast<int64_t>(layout.BytesPerBlockLayer()),
          .seconds = Median(times)};
      path.points.push_back(point);
      rows.push_back({1.0, static_cast<double>(point.runs), static_cast<double>(point.bytes)});
      seconds.push_back(point.seconds);
    }
  }
  StatusOr<planner::LinearFit> fit = planner::FitLeastSquares(rows, seconds, {.non_negative = true});
  if (!fit.ok()) return fit.status().WithContext(path.transport + ": the transfer-time fit");
  if (fit->coefficients[2] <= 0) {
    return FailedPreconditionError(path.transport +
                                   ": the bytes of the grid cost no measurable time; raise transfer.max_blocks");
  }
  path.fit = planner::TransferFit{.fixed_seconds = fit->coefficients[0],
                                  .per_run_seconds = fit->coefficients[1],
                                  .bytes_per_second = 1 / fit->coefficients[2],
                                  .r2 = fit->r2,
                                  .max_relative_error = fit->max_relative_error,
                                  .mean_relative_error = fit->mean_relative_error};
  return path;
}

StatusOr<planner::TransferProfile> MeasureTransfers(const kv_cache::KvLayout& layout,
                                                    const std::vector<std::string>& transports,
                                                    const std::string& ucx_transports, const std::string& backend,
                                                    const TransferProbeOptions& options) {
  planner::TransferProfile profile;
  for (const std::string& name : transports) {
    planner::TransferPath path;
    path.transport = name;
    path.memory = "host to host";
    if (name == "local") {
      path.note = "in-process transport (memcpy in Poll): the floor of the session protocol's own cost";
      kv_transfer::LocalFabric fabric;
      kv_transfer::LocalTransport send(fabric), receive(fabric);
      TANDEM_ASSIGN_OR_RETURN(path, MeasureTransferPath(send, receive, layout, options, std::move(path)));
    } else {
      path.options = ucx_transports;
      path.note = "both ends in the profiling process, each with its own UCX worker";
      kv_transfer::TransportOptions transport_options{.ucx_transports = ucx_transports};
      StatusOr<std::unique_ptr<kv_transfer::Transport>> send = kv_transfer::MakeTransport(name, transport_options);
      if (send.status().code() == StatusCode::kUnimplemented) {
        profile.left_out.push_back(name + ": " + send.status().message());
        continue;
      }
      TANDEM_RETURN_IF_ERROR(send.status());
      TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<kv_transfer::Transport> receive,
                              kv_transfer::MakeTransport(name, transport_options));
      TANDEM_ASSIGN_OR_RETURN(path, MeasureTransferPath(**send, *receive, layout, options, std::move(path)));
    }
    profile.paths.push_back(std::move(path));
  }
  profile.left_out.push_back(
      "cuda_ipc, nccl (device memory, between processes or GPUs): not measured by tandem-profile yet; "
      "bench/kv_transfer/kv_transfer_gpu_bench measures them");
  if (backend == "cuda") {
    profile.left_out.push_back(
        "ucx staged from a CUDA engine (pinned D2H, put, H2D per layer): not measured yet; the host-to-host put is");
  }
  return profile;
}

}  // namespace tandem::tools
