#include "common/net/frame.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "common/proto/messages.h"

namespace tandem::net {
namespace {

// The header bytes written out by hand from the layout in frame.h (the oracle).
std::string HandHeader(uint8_t kind, uint16_t type, uint64_t correlation_id, uint32_t length) {
  std::string h = "TNDM";
  h.push_back(static_cast<char>(proto::kProtocolVersion));
  h.push_back(static_cast<char>(kind));
  h.push_back(static_cast<char>(type >> 8));
  h.push_back(static_cast<char>(type & 0xff));
  for (int i = 7; i >= 0; --i) h.push_back(static_cast<char>((correlation_id >> (8 * i)) & 0xff));
  for (int i = 3; i >= 0; --i) h.push_back(static_cast<char>((length >> (8 * i)) & 0xff));
  h.append(4, '\0');
  return h;
}

proto::Cancel SampleCancel() {
  proto::Cancel cancel;
  cancel.set_request_id(77);
  cancel.set_epoch(3);
  cancel.set_reason("client disconnect");
  return cancel;
}

TEST(FrameTest, EncodeMatchesTheDocumentedLayout) {
  proto::Cancel cancel = SampleCancel();
  auto frame = EncodeFrame(FrameKind::kRequest, 0x0102030405060708ULL, cancel, 1 << 20);
  ASSERT_TRUE(frame.ok());
  std::string payload = cancel.SerializeAsString();
  EXPECT_EQ(*frame,
            HandHeader(0, proto::MESSAGE_TYPE_CANCEL, 0x0102030405060708ULL, static_cast<uint32_t>(payload.size())) +
                payload);
}

TEST(FrameTest, RoundTripsWhateverTheSplit) {
  std::string stream;
  for (uint64_t id = 1; id <= 3; ++id) {
    proto::Cancel cancel = SampleCancel();
    cancel.set_request_id(id);
    stream += *EncodeFrame(FrameKind::kOneWay, id, cancel, 1 << 20);
  }
  stream += *EncodeFrame(FrameKind::kOneWay, 9, proto::Ping(), 1 << 20);  // empty payload
  for (size_t chunk : {size_t{1}, size_t{5}, size_t{24}, size_t{1000}}) {
    FrameDecoder decoder(1 << 20);
    std::vector<Frame> frames;
    for (size_t at = 0; at < stream.size(); at += chunk) {
      decoder.Append(stream.data() + at, std::min(chunk, stream.size() - at));
      while (true) {
        auto next = decoder.Next();
        ASSERT_TRUE(next.ok()) << next.status().ToString();
        if (!next->has_value()) break;
        frames.push_back(std::move(**next));
      }
    }
    ASSERT_EQ(frames.size(), 4u) << "chunk " << chunk;
    for (uint64_t id = 1; id <= 3; ++id) {
      EXPECT_EQ(frames[id - 1].header.correlation_id, id);
      EXPECT_EQ(frames[id - 1].header.type, proto::MESSAGE_TYPE_CANCEL);
      auto parsed = proto::ParseMessage(proto::MESSAGE_TYPE_CANCEL, frames[id - 1].payload, 1 << 20);
      ASSERT_TRUE(parsed.ok());
      EXPECT_EQ(static_cast<const proto::Cancel&>(**parsed).request_id(), id);
    }
    EXPECT_EQ(frames[3].header.type, proto::MESSAGE_TYPE_PING);
    EXPECT_TRUE(frames[3].payload.empty());
    EXPECT_EQ(decoder.buffered_bytes(), 0u);
  }
}

// Feeds `bytes` and returns the decoder's first error (OK if none).
Status FirstError(const std::string& bytes, uint32_t cap = 1024) {
  FrameDecoder decoder(cap);
  decoder.Append(bytes.data(), bytes.size());
  while (true) {
    auto next = decoder.Next();
    if (!next.ok()) {
      // Sticky: the same error again, even after more bytes.
      decoder.Append("TNDM", 4);
      EXPECT_EQ(decoder.Next().status(), next.status());
      return next.status();
    }
    if (!next->has_value()) return Status::Ok();
  }
}

TEST(FrameTest, RejectsEveryGarbledHeaderField) {
  std::string good = HandHeader(2, proto::MESSAGE_TYPE_PING, 0, 0);
  EXPECT_TRUE(FirstError(good).ok());

  std::string bad_magic = good;
  bad_magic[0] = 'X';
  EXPECT_EQ(FirstError(bad_magic).code(), StatusCode::kInvalidArgument);
  std::string http = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
  EXPECT_EQ(FirstError(http).code(), StatusCode::kInvalidArgument);

  std::string bad_version = good;
  bad_version[4] = static_cast<char>(proto::kProtocolVersion + 1);
  EXPECT_NE(FirstError(bad_version).message().find("version"), std::string::npos);

  std::string bad_kind = good;
  bad_kind[5] = 3;
  EXPECT_EQ(FirstError(bad_kind).code(), StatusCode::kInvalidArgument);

  EXPECT_EQ(FirstError(HandHeader(2, 0, 0, 0)).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(FirstError(HandHeader(2, 4000, 0, 0)).code(), StatusCode::kInvalidArgument);

  std::string reserved = good;
  reserved[23] = 1;
  EXPECT_EQ(FirstError(reserved).code(), StatusCode::kInvalidArgument);
}

TEST(FrameTest, RejectsOversizedPayloadFromTheHeaderAlone) {
  // Only the header arrives: the cap is enforced before any payload is buffered.
  EXPECT_EQ(FirstError(HandHeader(2, proto::MESSAGE_TYPE_TOKENS, 0, 1025)).code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(FirstError(HandHeader(2, proto::MESSAGE_TYPE_TOKENS, 0, 0xffffffffu)).code(),
            StatusCode::kResourceExhausted);
  EXPECT_TRUE(FirstError(HandHeader(2, proto::MESSAGE_TYPE_TOKENS, 0, 1024)).ok());
}

TEST(FrameTest, TruncatedFrameWaitsForMoreBytes) {
  std::string frame = *EncodeFrame(FrameKind::kOneWay, 0, SampleCancel(), 1 << 20);
  FrameDecoder decoder(1 << 20);
  decoder.Append(frame.data(), frame.size() - 1);
  auto next = decoder.Next();
  ASSERT_TRUE(next.ok());
  EXPECT_FALSE(next->has_value());
  decoder.Append(frame.data() + frame.size() - 1, 1);
  next = decoder.Next();
  ASSERT_TRUE(next.ok());
  EXPECT_TRUE(next->has_value());
}

TEST(FrameTest, EncodeRefusesForeignAndOversizedMessages) {
  proto::BlockRun not_a_frame_type;  // a sub-message, not a control message
  EXPECT_EQ(EncodeFrame(FrameKind::kOneWay, 0, not_a_frame_type, 1024).status().code(), StatusCode::kInvalidArgument);
  proto::Tokens big;
  for (int i = 0; i < 1000; ++i) big.add_entries()->add_token_ids(i);
  EXPECT_EQ(EncodeFrame(FrameKind::kOneWay, 0, big, 1024).status().code(), StatusCode::kInvalidArgument);
}

TEST(FrameTest, HeaderDecodesWhatEncodeWrote) {
  FrameHeader header;
  header.kind = FrameKind::kReply;
  header.type = proto::MESSAGE_TYPE_RESERVE_REPLY;
  header.correlation_id = ~0ULL;
  header.payload_bytes = 1000;
  uint8_t bytes[kFrameHeaderBytes];
  EncodeFrameHeader(header, bytes);
  auto decoded = DecodeFrameHeader(bytes, 1000);
  ASSERT_TRUE(decoded.ok());
  EXPECT_EQ(decoded->kind, FrameKind::kReply);
  EXPECT_EQ(decoded->type, proto::MESSAGE_TYPE_RESERVE_REPLY);
  EXPECT_EQ(decoded->correlation_id, ~0ULL);
  EXPECT_EQ(decoded->payload_bytes, 1000u);
  EXPECT_EQ(DecodeFrameHeader(bytes, 999).status().code(), StatusCode::kResourceExhausted);
}

}  // namespace
}  // namespace tandem::net
