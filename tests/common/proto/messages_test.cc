#include "common/proto/messages.h"

#include <gtest/gtest.h>

namespace tandem::proto {
namespace {

TEST(MessagesTest, EveryKnownTypeRoundTripsThroughItsClass) {
  for (uint32_t type = 0; type < 64; ++type) {
    if (!IsKnownMessageType(type)) continue;
    auto message = NewMessage(static_cast<MessageType>(type));
    ASSERT_NE(message, nullptr) << type;
    EXPECT_EQ(static_cast<uint32_t>(TypeOf(*message)), type);
    EXPECT_NE(MessageTypeName(type).find("UNKNOWN"), 0u);
  }
  EXPECT_FALSE(IsKnownMessageType(0));
  EXPECT_FALSE(IsKnownMessageType(9999));
  EXPECT_EQ(NewMessage(static_cast<MessageType>(9999)), nullptr);
  EXPECT_EQ(MessageTypeName(9999), "UNKNOWN(9999)");
}

TEST(MessagesTest, ReserveReplySurvivesSerialization) {
  ReserveReply reply;
  reply.set_request_id(0xfeedbeefcafeULL);
  reply.set_epoch(7);
  auto* run = reply.add_needed_runs();
  run->set_first_block(12);
  run->set_num_blocks(3);
  reply.set_prefix_hit_tokens(32);
  reply.set_transport_descriptor(std::string("\x00\x01\xff", 3));
  reply.set_lease_deadline_ms(1700000000123);
  std::string bytes = reply.SerializeAsString();

  auto parsed = ParseMessage(MESSAGE_TYPE_RESERVE_REPLY, bytes, 1 << 20);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  const auto& got = static_cast<const ReserveReply&>(**parsed);
  EXPECT_EQ(got.request_id(), 0xfeedbeefcafeULL);
  EXPECT_EQ(got.epoch(), 7u);
  ASSERT_EQ(got.needed_runs_size(), 1);
  EXPECT_EQ(got.needed_runs(0).first_block(), 12);
  EXPECT_EQ(got.needed_runs(0).num_blocks(), 3);
  EXPECT_EQ(got.transport_descriptor(), std::string("\x00\x01\xff", 3));
  EXPECT_EQ(got.lease_deadline_ms(), 1700000000123);
}

TEST(MessagesTest, TokensBatchCarriesManyRequests) {
  Tokens tokens;
  tokens.set_step(99);
  for (int i = 0; i < 100; ++i) {
    auto* entry = tokens.add_entries();
    entry->set_request_id(i);
    entry->set_epoch(1);
    entry->add_token_ids(i * 3);
    if (i == 5) entry->set_finish_reason(FINISH_REASON_LENGTH);
  }
  auto parsed = ParseMessage(MESSAGE_TYPE_TOKENS, tokens.SerializeAsString(), 1 << 20);
  ASSERT_TRUE(parsed.ok());
  const auto& got = static_cast<const Tokens&>(**parsed);
  ASSERT_EQ(got.entries_size(), 100);
  EXPECT_EQ(got.entries(42).token_ids(0), 126);
  EXPECT_EQ(got.entries(5).finish_reason(), FINISH_REASON_LENGTH);
}

TEST(MessagesTest, ParseRejectsGarbageOversizeAndUnknownType) {
  // 0x0a = field 1, length-delimited, then a length running past the end.
  std::string truncated("\x0a\x7f\x01", 3);
  EXPECT_EQ(ParseMessage(MESSAGE_TYPE_HELLO, truncated, 1024).status().code(), StatusCode::kInvalidArgument);
  // Wire type 7 does not exist.
  EXPECT_FALSE(ParseMessage(MESSAGE_TYPE_CANCEL, std::string("\x0f", 1), 1024).ok());
  EXPECT_FALSE(ParseMessage(MESSAGE_TYPE_CANCEL, std::string(2048, '\0'), 1024).ok());
  EXPECT_FALSE(ParseMessage(MESSAGE_TYPE_UNSPECIFIED, "", 1024).ok());
}

TEST(MessagesTest, MessageAsChecksTheClass) {
  auto message = NewMessage(MESSAGE_TYPE_CANCEL);
  EXPECT_NE(MessageAs<Cancel>(*message), nullptr);
  EXPECT_EQ(MessageAs<Release>(*message), nullptr);
}

TEST(MessagesTest, StatusAndErrorInfoConvert) {
  Status status = ResourceExhaustedError("no free blocks");
  ErrorInfo info = ToErrorInfo(status);
  EXPECT_EQ(info.code(), static_cast<int>(StatusCode::kResourceExhausted));
  EXPECT_EQ(FromErrorInfo(info), status);
  EXPECT_TRUE(FromErrorInfo(ToErrorInfo(Status::Ok())).ok());
  info.set_code(12345);
  EXPECT_EQ(FromErrorInfo(info).code(), StatusCode::kInternal);
  info.set_code(-3);
  EXPECT_EQ(FromErrorInfo(info).code(), StatusCode::kInternal);
}

}  // namespace
}  // namespace tandem::proto
