// Wire encodings: round trips, and hostile input refused with a Status.
#include "kv_transfer/messages.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <iterator>

#include "kv_transfer/wire.h"
#include "tests/kv_transfer/session_harness.h"

namespace tandem::kv_transfer {
namespace {

KvTarget SampleTarget() {
  KvTarget t;
  t.request_id = 0x1122334455667788ull;
  t.epoch = 9;
  t.model_id = "llama-tiny";
  t.layout = testing::SmallLayout(100);
  t.worker_address = std::string("\x00\x01worker", 8);
  t.region_descriptor = "desc";
  t.region_offset = 4096;
  t.blocks = {5, 6, 7, 99, 0};
  t.lease_ms = 2500;
  return t;
}

TEST(MessagesTest, KvTargetRoundTrips) {
  KvTarget t = SampleTarget();
  StatusOr<KvTarget> back = DecodeKvTarget(EncodeKvTarget(t));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->request_id, t.request_id);
  EXPECT_EQ(back->epoch, 9u);
  EXPECT_EQ(back->model_id, "llama-tiny");
  EXPECT_EQ(back->layout.DebugString(), t.layout.DebugString());
  EXPECT_EQ(back->worker_address, t.worker_address);
  EXPECT_EQ(back->region_descriptor, "desc");
  EXPECT_EQ(back->region_offset, 4096u);
  EXPECT_EQ(back->blocks, t.blocks);
  EXPECT_EQ(back->lease_ms, 2500u);
}

TEST(MessagesTest, KvTargetEncodingIsLittleEndianAsDocumented) {
  std::string b = EncodeKvTarget(SampleTarget());
  // magic "TVKT" little-endian 0x544b5654 -> bytes 54 56 4b 54, then version 1, kind 1.
  ASSERT_GE(b.size(), 15u);
  EXPECT_EQ(b.substr(0, 4), "TVKT");
  EXPECT_EQ(static_cast<uint8_t>(b[4]), 1);
  EXPECT_EQ(static_cast<uint8_t>(b[5]), 0);
  EXPECT_EQ(static_cast<uint8_t>(b[6]), 1);
  EXPECT_EQ(static_cast<uint8_t>(b[7]), 0x88);  // request id, lowest byte first
}

TEST(MessagesTest, EveryTruncationIsRefused) {
  std::string b = EncodeKvTarget(SampleTarget());
  for (size_t n = 0; n < b.size(); ++n) {
    EXPECT_FALSE(DecodeKvTarget(b.substr(0, n)).ok()) << n;
  }
  EXPECT_FALSE(DecodeKvTarget(b + "x").ok());  // trailing bytes
}

TEST(MessagesTest, OutOfRangeFieldsAreRefused) {
  KvTarget t = SampleTarget();
  t.blocks.push_back(100);  // == num_blocks
  EXPECT_EQ(DecodeKvTarget(EncodeKvTarget(t)).status().code(), StatusCode::kInvalidArgument);
  t = SampleTarget();
  t.lease_ms = 0;
  EXPECT_FALSE(DecodeKvTarget(EncodeKvTarget(t)).ok());
  t = SampleTarget();
  t.layout.block_size = 12;  // not a power of two
  EXPECT_FALSE(DecodeKvTarget(EncodeKvTarget(t)).ok());
  t = SampleTarget();
  t.blocks.clear();
  EXPECT_FALSE(DecodeKvTarget(EncodeKvTarget(t)).ok());
  t = SampleTarget();
  t.model_id = std::string(kMaxModelIdBytes + 1, 'm');
  EXPECT_FALSE(DecodeKvTarget(EncodeKvTarget(t)).ok());
}

TEST(MessagesTest, HugeDeclaredLengthsDoNotAllocate) {
  // A block count of 2^32-1 with nothing behind it.
  ByteWriter w;
  WriteHeader(w, {0x544b5654, kProtocolVersion, 1});
  w.U64(1);
  w.U32(1);
  w.U32(0xffffffffu);  // model id length
  EXPECT_EQ(DecodeKvTarget(w.data()).status().code(), StatusCode::kInvalidArgument);
}

TEST(MessagesTest, OtherVersionIsFailedPrecondition) {
  std::string b = EncodeKvTarget(SampleTarget());
  b[4] = 2;
  EXPECT_EQ(DecodeKvTarget(b).status().code(), StatusCode::kFailedPrecondition);
}

TEST(MessagesTest, ControlMessagesRoundTrip) {
  ControlMessage hello = MakeMessage(MessageType::kHello, 3, 4);
  hello.model_id = "m";
  hello.layout = testing::SmallLayout(10);
  ControlMessage layer = MakeMessage(MessageType::kLayerDone, 3, 4);
  layer.layer = 17;
  layer.bytes = 1ull << 40;
  ControlMessage done = MakeMessage(MessageType::kKvDone, 3, 4);
  done.num_layers = 32;
  ControlMessage abort = MakeMessage(MessageType::kAbort, 3, 4);
  abort.status = DeadlineExceededError("too slow");
  ControlMessage posted = MakeMessage(MessageType::kLayerPosted, 3, 4);
  posted.layer = 5;
  posted.bytes = 1 << 20;
  posted.seq = 1ull << 33;
  posted.connection = "token";
  for (const ControlMessage& m : {hello, layer, done, abort, posted}) {
    std::string bytes = EncodeControlMessage(m);
    StatusOr<ControlMessage> back = DecodeControlMessage(bytes);
    ASSERT_TRUE(back.ok()) << MessageTypeName(m.type) << back.status().ToString();
    EXPECT_EQ(back->type, m.type);
    EXPECT_EQ(back->request_id, 3u);
    EXPECT_EQ(back->epoch, 4u);
    for (size_t n = 0; n < bytes.size(); ++n) EXPECT_FALSE(DecodeControlMessage(bytes.substr(0, n)).ok());
  }
  EXPECT_EQ(DecodeControlMessage(EncodeControlMessage(hello))->layout.num_blocks, 10);
  EXPECT_EQ(DecodeControlMessage(EncodeControlMessage(layer))->bytes, 1ull << 40);
  EXPECT_EQ(DecodeControlMessage(EncodeControlMessage(layer))->layer, 17u);
  EXPECT_EQ(DecodeControlMessage(EncodeControlMessage(done))->num_layers, 32u);
  EXPECT_EQ(DecodeControlMessage(EncodeControlMessage(abort))->status, DeadlineExceededError("too slow"));
  StatusOr<ControlMessage> back = DecodeControlMessage(EncodeControlMessage(posted));
  EXPECT_EQ(back->layer, 5u);
  EXPECT_EQ(back->bytes, 1u << 20);
  EXPECT_EQ(back->seq, 1ull << 33);
  EXPECT_EQ(back->connection, "token");
  posted.connection.clear();
  EXPECT_FALSE(DecodeControlMessage(EncodeControlMessage(posted)).ok()) << "LayerPosted without a connection";
}

TEST(MessagesTest, AbortWithOkOrUnknownCodeIsRefused) {
  std::string b = EncodeControlMessage([] {
    ControlMessage m = MakeMessage(MessageType::kAbort, 1, 1);
    m.status = InternalError("x");
    return m;
  }());
  std::string ok_code = b;
  ok_code[19] = 0;  // header 7 + request 8 + epoch 4 = offset 19: the code byte
  EXPECT_FALSE(DecodeControlMessage(ok_code).ok());
  std::string big = b;
  big[19] = 99;
  EXPECT_FALSE(DecodeControlMessage(big).ok());
  std::string type = b;
  type[6] = 9;
  EXPECT_FALSE(DecodeControlMessage(type).ok());
}

// The seed corpus was written by a Python encoder following README.md, so it is
// an independent check of the documented byte format.
std::string CorpusFile(const char* name) {
  const char* root = std::getenv("TANDEM_SOURCE_DIR");
  std::ifstream in(std::string(root ? root : ".") + "/tests/kv_transfer/fuzz/wire_corpus/" + name, std::ios::binary);
  std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return s.empty() ? s : s.substr(1);  // first byte selects the fuzz parser
}

TEST(MessagesTest, DecodesTheDocumentedFormat) {
  StatusOr<KvTarget> t = DecodeKvTarget(CorpusFile("target"));
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->model_id, "m");
  EXPECT_EQ(t->blocks, (std::vector<BlockId>{0, 3}));
  EXPECT_EQ(t->layout.num_layers, 2);
  EXPECT_EQ(t->layout.head_dim, 4);
  EXPECT_EQ(t->layout.dtype, DType::kBF16);
  EXPECT_EQ(t->lease_ms, 1000u);
  EXPECT_FALSE(DecodeKvTarget(CorpusFile("target_bad_block")).ok());
  StatusOr<ControlMessage> layer = DecodeControlMessage(CorpusFile("layer_done"));
  ASSERT_TRUE(layer.ok()) << layer.status().ToString();
  EXPECT_EQ(layer->type, MessageType::kLayerDone);
  EXPECT_EQ(layer->layer, 1u);
  EXPECT_EQ(layer->bytes, 64u);
  StatusOr<ControlMessage> abort = DecodeControlMessage(CorpusFile("abort"));
  ASSERT_TRUE(abort.ok());
  EXPECT_EQ(abort->status, DeadlineExceededError("too late"));
  EXPECT_TRUE(DecodeControlMessage(CorpusFile("hello")).ok());
  EXPECT_EQ(DecodeControlMessage(CorpusFile("kv_done"))->num_layers, 2u);
  StatusOr<ControlMessage> posted = DecodeControlMessage(CorpusFile("layer_posted"));
  ASSERT_TRUE(posted.ok()) << posted.status().ToString();
  EXPECT_EQ(posted->type, MessageType::kLayerPosted);
  EXPECT_EQ(posted->layer, 1u);
  EXPECT_EQ(posted->bytes, 64u);
  EXPECT_EQ(posted->seq, 7u);
  EXPECT_EQ(posted->connection, "conn");
}

TEST(MessagesTest, CompatibilityCheck) {
  kv_cache::KvLayout a = testing::SmallLayout(10), b = testing::SmallLayout(999);
  EXPECT_TRUE(CheckCompatible("m", a, "m", b).ok());  // pool sizes may differ
  EXPECT_EQ(CheckCompatible("m", a, "n", b).code(), StatusCode::kFailedPrecondition);
  b.dtype = DType::kF16;
  Status st = CheckCompatible("m", a, "m", b);
  EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(st.message().find("float16"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace tandem::kv_transfer
