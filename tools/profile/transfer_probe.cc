#include "tools/profile/transfer_probe.h"

#include <algorithm>
#include <cstdio>
#include <sstream>
#include <thread>
#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "common/base/clock.h"
#include "common/base/line_pipe.h"
#include "common/node/poll_thread.h"
#include "kv_transfer/kv_receiver.h"
#include "kv_transfer/kv_sender.h"
#include "kv_transfer/local/local_transport.h"
#include "kv_transfer/transport_factory.h"
#include "planner/linear_fit.h"
#include "planner/statistics.h"

#ifdef TANDEM_PROFILE_CUDA
#include <cuda_runtime.h>

#include "common/cuda/device_buffer.h"
#endif

namespace tandem::tools {
namespace {

using kv_transfer::KvReceiver;
using kv_transfer::KvSender;
using Seconds = std::chrono::duration<double>;

// A session that has not ended after this long is stuck.
constexpr double kSessionTimeoutSeconds = 60;
// Between polls where a node would not spin (node::MaySpin): its busy cadence.
constexpr std::chrono::microseconds kPollInterval{200};

using planner::Median;

// The probe's memory: a host vector, or (CUDA builds) a cudaMalloc allocation, as
// the nodes' pools are; filled with bytes that are not all alike, so no layer of
// the stack can shortcut them.
class ProbeMemory {
 public:
  static StatusOr<ProbeMemory> Allocate(kv_transfer::MemoryKind kind, size_t bytes) {
    ProbeMemory m;
    m.kind_ = kind;
    std::vector<uint8_t> pattern(bytes);
    uint32_t x = 12345;
    for (uint8_t& b : pattern) b = static_cast<uint8_t>((x = x * 1664525u + 1013904223u) >> 24);
    if (kind == kv_transfer::MemoryKind::kHost) {
      m.host_ = std::move(pattern);
      return m;
    }
#ifdef TANDEM_PROFILE_CUDA
    TANDEM_ASSIGN_OR_RETURN(m.device_, cuda::DeviceBuffer::Allocate(bytes));
    if (cudaMemcpy(m.device_.data(), pattern.data(), bytes, cudaMemcpyHostToDevice) != cudaSuccess) {
      return InternalError("cudaMemcpy into the probe's device pool failed");
    }
    return m;
#else
    return UnimplementedError("device memory needs a CUDA build");
#endif
  }
  void* data() {
#ifdef TANDEM_PROFILE_CUDA
    if (kind_ == kv_transfer::MemoryKind::kDevice) return device_.data();
#endif
    return host_.data();
  }
  kv_transfer::MemoryKind kind() const { return kind_; }

 private:
  kv_transfer::MemoryKind kind_ = kv_transfer::MemoryKind::kHost;
  std::vector<uint8_t> host_;
#ifdef TANDEM_PROFILE_CUDA
  cuda::DeviceBuffer device_;
#endif
};

// The receiving side of the probe's sessions: a KvReceiver in this process or in a
// peer process (RunTransferPeer). Control messages for the sender go to `to_sender`.
class ReceiverEnd {
 public:
  virtual ~ReceiverEnd() = default;
  // Opens session `id` landing in `blocks`; the target the sender needs.
  virtual StatusOr<std::string> Open(RequestId id, const std::vector<BlockId>& blocks,
                                     std::function<void(const Status&)> on_done) = 0;
  virtual void OnControlMessage(const std::string& message) = 0;
  virtual void Poll() = 0;
  std::deque<std::string> to_sender;
};

class LocalReceiver : public ReceiverEnd {
 public:
  LocalReceiver(kv_transfer::Transport& transport, const kv_cache::KvLayout& layout)
      : receiver_(kv_transfer::KvReceiverConfig{.model_id = "profile", .layout = layout}, transport, clock_,
                  [this](RequestId, std::string m) { to_sender.push_back(std::move(m)); }),
        landing_(layout.TotalBytes()) {}
  Status Register() { return receiver_.RegisterLanding(landing_.data(), kv_transfer::MemoryKind::kHost); }

  StatusOr<std::string> Open(RequestId id, const std::vector<BlockId>& blocks,
                             std::function<void(const Status&)> on_done) override {
    kv_transfer::ReceiveParams receive;
    receive.request_id = id;
    receive.epoch = 1;
    receive.blocks = blocks;
    receive.lease_ms = 60'000;
    receive.on_done = std::move(on_done);
    return receiver_.Open(std::move(receive));
  }
  void OnControlMessage(const std::string& message) override { receiver_.OnControlMessage(message); }
  void Poll() override { receiver_.Poll(); }

 private:
  SystemClock clock_;
  KvReceiver receiver_;
  std::vector<uint8_t> landing_;
};

// A KvReceiver in a child process (this program with --transfer-peer), its landing
// pool in its own memory, as a decode node's: the path crosses processes as it does
// between nodes. Lines over the child's stdin and stdout carry the control plane.
class PeerReceiver : public ReceiverEnd {
 public:
  explicit PeerReceiver(const std::vector<std::string>& args) : peer_(SelfPath(), args) {}  // ~PeerProcess: "exit", wait

  Status WaitReady() {
    const std::string line = peer_.ReadLine(60'000);
    if (line != "ready") return UnavailableError("the transfer peer did not start: '" + line + "'");
    return Status::Ok();
  }
  StatusOr<std::string> Open(RequestId id, const std::vector<BlockId>& blocks,
                             std::function<void(const Status&)> on_done) override {
    std::string command = "open " + std::to_string(id) + " " + std::to_string(blocks.size());
    for (BlockId b : blocks) command += " " + std::to_string(b);
    peer_.Command(command);
    on_done_[id] = std::move(on_done);
    while (true) {
      std::optional<std::string> line = peer_.TryReadLine(60'000);
      if (!line) return UnavailableError("the transfer peer did not answer an open");
      if (line->rfind("target ", 0) == 0) return line_pipe::Unhex(line->substr(7));
      if (line->rfind("error ", 0) == 0) return UnavailableError("transfer peer: " + line->substr(6));
      Handle(*line);
    }
  }
  void OnControlMessage(const std::string& message) override {
    peer_.Command("msg " + line_pipe::Hex(message));
  }
  void Poll() override {
    while (std::optional<std::string> line = peer_.TryReadLine(0)) Handle(*line);
  }

 private:
  static std::string SelfPath() {
    char exe[4096];
    const ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    return n > 0 ? std::string(exe, static_cast<size_t>(n)) : "tandem-profile";
  }
  // "tosender <hex>" or "done <id> <status>".
  void Handle(const std::string& line) {
    if (line.rfind("tosender ", 0) == 0) {
      to_sender.push_back(line_pipe::Unhex(line.substr(9)));
    } else if (line.rfind("done ", 0) == 0) {
      const RequestId id = std::stoull(line.substr(5));
      const std::string status = line.substr(line.find(' ', 5) + 1);
      auto it = on_done_.find(id);
      if (it == on_done_.end()) return;
      auto done = std::move(it->second);
      on_done_.erase(it);
      done(status == "OK" ? Status::Ok() : UnavailableError("receiver: " + status));
    }
  }
  line_pipe::PeerProcess peer_;
  std::map<RequestId, std::function<void(const Status&)>> on_done_;
};

// One sender on `send` (source pool of `layout` in `memory`) and a receiver end,
// the control plane as in-order queues (the nodes' RPC streams).
class SessionPair {
 public:
  // `spin`: poll back to back, else every ~200 us, as a node's poll thread does (PollThread).
  SessionPair(kv_transfer::Transport& send, const kv_cache::KvLayout& layout, ProbeMemory source,
              std::unique_ptr<ReceiverEnd> receiver, bool spin)
      : send_(send), layout_(layout), source_(std::move(source)), receiver_(std::move(receiver)), spin_(spin) {
    sender_ =
        std::make_unique<KvSender>(kv_transfer::KvSenderConfig{.model_id = "profile", .layout = layout}, send, clock_,
                                   [this](RequestId, std::string m) { to_receiver_.push_back(std::move(m)); });
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
      new ProbeMemory(std::move(source_));
      return;
    }
    sender_.reset();
    if (source_region_ != kv_transfer::kInvalidHandle) send_.UnregisterMemory(source_region_).IgnoreError();
  }

  Status Register() {
    TANDEM_ASSIGN_OR_RETURN(kv_transfer::RegisteredRegion region,
                            send_.RegisterMemory(source_.data(), layout_.TotalBytes(), source_.kind()));
    source_region_ = region.id;
    return Status::Ok();
  }

  // Moves every layer of source blocks `source` into landing blocks `target`;
  // returns the seconds from Open until both ends were done.
  StatusOr<double> Move(const std::vector<BlockId>& source, const std::vector<BlockId>& target) {
    const RequestId id = next_id_++;
    std::optional<Status> sent, received;
    const auto start = std::chrono::steady_clock::now();
    TANDEM_ASSIGN_OR_RETURN(std::string target_bytes,
                            receiver_->Open(id, target, [&](const Status& s) { received = s; }));
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
      for (; !receiver_->to_sender.empty(); receiver_->to_sender.pop_front()) {
        sender_->OnControlMessage(receiver_->to_sender.front());
      }
      if (Seconds(std::chrono::steady_clock::now() - start).count() > kSessionTimeoutSeconds) {
        return DeadlineExceededError("a transfer session did not end within 60 s");
      }
      if (!spin_) std::this_thread::sleep_for(kPollInterval);
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
  ProbeMemory source_;
  kv_transfer::RegionId source_region_ = kv_transfer::kInvalidHandle;
  std::unique_ptr<KvSender> sender_;
  std::unique_ptr<ReceiverEnd> receiver_;
  bool spin_;
  std::deque<std::string> to_receiver_;
  RequestId next_id_ = 1;
};

// The probe's pools: room for every other block of the largest request.
kv_cache::KvLayout PoolLayout(const kv_cache::KvLayout& layout, int max_blocks) {
  kv_cache::KvLayout pools = layout;
  pools.num_blocks = 2 * max_blocks;
  return pools;
}

// The grid through `pair`: points and fit into `path`.
StatusOr<planner::TransferPath> MeasureGrid(SessionPair& pair, const kv_cache::KvLayout& layout,
                                            const TransferProbeOptions& options, planner::TransferPath path) {
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

}  // namespace

StatusOr<planner::TransferPath> MeasureTransferPath(kv_transfer::Transport& sender_transport,
                                                    kv_transfer::Transport& receiver_transport,
                                                    const kv_cache::KvLayout& layout,
                                                    const TransferProbeOptions& options, planner::TransferPath path) {
  const kv_cache::KvLayout pools = PoolLayout(layout, options.max_blocks);
  TANDEM_ASSIGN_OR_RETURN(ProbeMemory source, ProbeMemory::Allocate(kv_transfer::MemoryKind::kHost, pools.TotalBytes()));
  auto receiver = std::make_unique<LocalReceiver>(receiver_transport, pools);
  TANDEM_RETURN_IF_ERROR(receiver->Register());
  SessionPair pair(sender_transport, pools, std::move(source), std::move(receiver), /*spin=*/true);
  return MeasureGrid(pair, layout, options, std::move(path));
}

namespace {

// The peer's command line: transport, UCX list, device, memory, then the layout.
std::vector<std::string> PeerArgs(const std::string& transport, const std::string& ucx_transports, int device,
                                  kv_transfer::MemoryKind memory, bool spin, const kv_cache::KvLayout& pools) {
  return {"--transfer-peer",
          transport,
          spin ? "spin" : "paced",
          ucx_transports.empty() ? "-" : ucx_transports,
          std::to_string(device),
          memory == kv_transfer::MemoryKind::kDevice ? "device" : "host",
          std::to_string(pools.num_layers),
          std::to_string(pools.num_kv_heads),
          std::to_string(pools.head_dim),
          std::to_string(pools.block_size),
          std::to_string(pools.num_blocks),
          std::to_string(static_cast<int>(pools.dtype))};
}

// One path across two processes: this one sends from `memory`, a peer receives into its own.
// Both ends poll as the nodes' poll threads would for an engine on `backend`.
StatusOr<planner::TransferPath> MeasureAcrossProcesses(const std::string& transport,
                                                       const kv_transfer::TransportOptions& transport_options,
                                                       kv_transfer::MemoryKind memory, const std::string& backend,
                                                       const kv_cache::KvLayout& layout,
                                                       const TransferProbeOptions& options, planner::TransferPath path) {
  TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<kv_transfer::Transport> send,
                          kv_transfer::MakeTransport(transport, transport_options));
  const bool spin = node::MaySpin(backend == "cpu");
  const kv_cache::KvLayout pools = PoolLayout(layout, options.max_blocks);
  TANDEM_ASSIGN_OR_RETURN(ProbeMemory source, ProbeMemory::Allocate(memory, pools.TotalBytes()));
  auto receiver = std::make_unique<PeerReceiver>(
      PeerArgs(transport, transport_options.ucx_transports, transport_options.cuda_device, memory, spin, pools));
  TANDEM_RETURN_IF_ERROR(receiver->WaitReady());
  SessionPair pair(*send, pools, std::move(source), std::move(receiver), spin);
  return MeasureGrid(pair, layout, options, std::move(path));
}

}  // namespace

StatusOr<planner::TransferProfile> MeasureTransfers(const kv_cache::KvLayout& layout,
                                                    const std::vector<std::string>& transports,
                                                    const std::string& ucx_transports, const std::string& backend,
                                                    int device_ordinal, const TransferProbeOptions& options) {
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
    } else if (name == "cuda_ipc" && backend != "cuda") {
      profile.left_out.push_back("cuda_ipc: moves device memory, and this engine's KV is in host memory");
      continue;
    } else if (name == "nccl") {
      profile.left_out.push_back(
          "nccl: moves KV between two GPUs, and a profile is of one device (kv_transfer_gpu_bench measures it)");
      continue;
    } else {
      // Both ends as the nodes have them: two processes, each with its own transport.
      const bool device = name == "cuda_ipc";
      path.memory = device ? "device to device (one GPU)" : "host to host";
      if (name == "ucx") path.options = ucx_transports;
      path.note = "KvSender in the profiling process, KvReceiver in a second one (tandem-profile --transfer-peer)";
      kv_transfer::TransportOptions transport_options{.ucx_transports = ucx_transports, .cuda_device = device_ordinal};
      StatusOr<std::unique_ptr<kv_transfer::Transport>> available = kv_transfer::MakeTransport(name, transport_options);
      if (available.status().code() == StatusCode::kUnimplemented) {
        profile.left_out.push_back(name + ": " + available.status().message());
        continue;
      }
      TANDEM_RETURN_IF_ERROR(available.status());
      available->reset();
      TANDEM_ASSIGN_OR_RETURN(
          path, MeasureAcrossProcesses(name, transport_options,
                                       device ? kv_transfer::MemoryKind::kDevice : kv_transfer::MemoryKind::kHost,
                                       backend, layout, options, std::move(path)));
    }
    profile.paths.push_back(std::move(path));
  }
  if (backend == "cuda") {
    if (std::find(transports.begin(), transports.end(), "cuda_ipc") == transports.end()) {
      profile.left_out.push_back("cuda_ipc: not asked for (--transfer-transports)");
    }
    profile.left_out.push_back(
        "ucx staged from a CUDA engine (pinned D2H, put, H2D per layer): not measured yet; the host-to-host put is");
  }
  return profile;
}

int RunTransferPeer(const std::vector<std::string>& args) {
  using line_pipe::Hex;
  using line_pipe::Unhex;
  auto fail = [](const std::string& why) {
    std::printf("error %s\n", why.c_str());
    return 2;
  };
  if (args.size() != 11) {
    return fail("usage: --transfer-peer TRANSPORT spin|paced UCX DEVICE host|device LAYERS HEADS DIM BLOCK BLOCKS DTYPE");
  }
  const std::string& transport = args[0];
  const bool spin = args[1] == "spin";
  const kv_transfer::TransportOptions transport_options{.ucx_transports = args[2] == "-" ? "" : args[2],
                                                        .cuda_device = std::stoi(args[3])};
  const kv_transfer::MemoryKind memory =
      args[4] == "device" ? kv_transfer::MemoryKind::kDevice : kv_transfer::MemoryKind::kHost;
  kv_cache::KvLayout layout;
  layout.num_layers = std::stoi(args[5]);
  layout.num_kv_heads = std::stoi(args[6]);
  layout.head_dim = std::stoi(args[7]);
  layout.block_size = std::stoi(args[8]);
  layout.num_blocks = std::stoi(args[9]);
  layout.dtype = static_cast<DType>(std::stoi(args[10]));
#ifdef TANDEM_PROFILE_CUDA
  if (memory == kv_transfer::MemoryKind::kDevice && cudaSetDevice(transport_options.cuda_device) != cudaSuccess) {
    return fail("cudaSetDevice");
  }
#endif
  StatusOr<std::unique_ptr<kv_transfer::Transport>> t = kv_transfer::MakeTransport(transport, transport_options);
  if (!t.ok()) return fail(t.status().ToString());
  StatusOr<ProbeMemory> landing = ProbeMemory::Allocate(memory, layout.TotalBytes());
  if (!landing.ok()) return fail(landing.status().ToString());
  SystemClock clock;
  KvReceiver receiver(kv_transfer::KvReceiverConfig{.model_id = "profile", .layout = layout}, **t, clock,
                      [](RequestId, std::string m) { std::printf("tosender %s\n", Hex(m).c_str()); });
  if (Status s = receiver.RegisterLanding(landing->data(), memory); !s.ok()) return fail(s.ToString());
  std::printf("ready\n");
  std::fflush(stdout);
  line_pipe::StdinLines lines;
  std::string line;
  bool eof = false;
  while (!eof) {
    receiver.Poll();
    std::fflush(stdout);
    if (!lines.Next(&line, &eof)) {
      if (!spin) std::this_thread::sleep_for(kPollInterval);
      continue;
    }
    if (line == "exit") break;
    if (line.rfind("msg ", 0) == 0) {
      receiver.OnControlMessage(Unhex(line.substr(4)));
    } else if (line.rfind("open ", 0) == 0) {
      std::istringstream in(line.substr(5));
      kv_transfer::ReceiveParams p;
      size_t n = 0;
      in >> p.request_id >> n;
      p.blocks.resize(n);
      for (BlockId& b : p.blocks) in >> b;
      p.epoch = 1;
      p.lease_ms = 60'000;
      p.on_done = [id = p.request_id](const Status& s) {
        std::printf("done %llu %s\n", static_cast<unsigned long long>(id), s.ok() ? "OK" : s.ToString().c_str());
      };
      StatusOr<std::string> target = receiver.Open(std::move(p));
      if (target.ok()) {
        std::printf("target %s\n", Hex(*target).c_str());
      } else {
        std::printf("error %s\n", target.status().ToString().c_str());
      }
    }
  }
  std::fflush(stdout);
  return 0;
}

}  // namespace tandem::tools
