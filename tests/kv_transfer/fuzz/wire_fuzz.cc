// Fuzz target for every kv_transfer parser a peer can reach: KvTarget,
// ControlMessage, the local backend's address/descriptor, and the receiver and
// sender state machines fed with the message. The first byte picks the parser.
// Property: no crash, and a successful decode re-encodes to the same bytes.
#include <cstdint>
#include <string>
#include <string_view>

#include "common/base/clock.h"
#include "kv_transfer/kv_receiver.h"
#include "kv_transfer/kv_sender.h"
#include "kv_transfer/local/local_transport.h"
#include "kv_transfer/messages.h"

namespace tandem::kv_transfer {
namespace {

kv_cache::KvLayout Layout() {
  kv_cache::KvLayout l;
  l.num_layers = 2;
  l.num_kv_heads = 1;
  l.head_dim = 4;
  l.block_size = 2;
  l.num_blocks = 4;
  return l;
}

void FeedStateMachines(std::string_view bytes) {
  FakeClock clock;
  LocalFabric fabric;
  LocalTransport send_t(fabric), recv_t(fabric);
  std::vector<uint8_t> pool(Layout().TotalBytes());
  KvReceiver receiver(KvReceiverConfig{.model_id = "m", .layout = Layout()}, recv_t, clock,
                      [](RequestId, std::string) {});
  TANDEM_CHECK_OK(receiver.RegisterLanding(pool.data(), MemoryKind::kHost));
  ReceiveParams rp;
  rp.request_id = 1;
  rp.epoch = 1;
  rp.blocks = {0, 3};
  StatusOr<std::string> target = receiver.Open(std::move(rp));
  TANDEM_CHECK_OK(target.status());
  receiver.OnControlMessage(bytes);
  KvSender sender(KvSenderConfig{.model_id = "m", .layout = Layout()}, send_t, clock, [](RequestId, std::string) {});
  SendParams sp;
  sp.target = *target;
  sp.source_blocks = {1, 2};
  TANDEM_CHECK_OK(sender.Open(std::move(sp)));
  sender.OnControlMessage(bytes);
  sender.Cancel(1, CancelledError("fuzz"));
  sender.Poll();
  TANDEM_CHECK(sender.num_sessions() == 0);
  // Also as a target from a hostile decode node.
  SendParams hostile;
  hostile.target = std::string(bytes);
  hostile.source_blocks = {0};
  sender.Open(std::move(hostile)).IgnoreError();
  sender.Cancel(1, CancelledError("fuzz"));
  for (int i = 0; i < 3 && sender.num_sessions() > 0; ++i) sender.Poll();
  if (sender.num_sessions() > 0) {  // a valid hostile target for a different request id
    StatusOr<KvTarget> t = DecodeKvTarget(bytes);
    TANDEM_CHECK(t.ok());
    sender.Cancel(t->request_id, CancelledError("fuzz"));
    sender.Poll();
  }
}

}  // namespace
}  // namespace tandem::kv_transfer

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tandem::kv_transfer;
  if (size == 0) return 0;
  std::string_view bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 4) {
    case 0: {
      auto t = DecodeKvTarget(bytes);
      if (t.ok()) TANDEM_CHECK(EncodeKvTarget(*t) == bytes) << "KvTarget re-encoding differs";
      break;
    }
    case 1: {
      auto m = DecodeControlMessage(bytes);
      if (m.ok()) TANDEM_CHECK(EncodeControlMessage(*m) == bytes) << "message re-encoding differs";
      break;
    }
    case 2: {
      LocalFabric fabric;
      LocalTransport t(fabric);
      auto peer = t.Connect(bytes);
      auto self = t.Connect(t.WorkerAddress());
      TANDEM_CHECK(self.ok());
      t.LoadRemoteRegion(*self, bytes).status().IgnoreError();
      (void)peer;
      break;
    }
    case 3: FeedStateMachines(bytes); break;
  }
  return 0;
}
