// Safetensors reader and writer: round trips checked against hand-computed
// bytes and an independent JSON parse, and every header error case.
#include <cstring>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

#include "common/model/safetensors_file.h"
#include "common/model/safetensors_header.h"
#include "common/model/safetensors_writer.h"
#include "tests/common/model/test_util.h"

namespace tandem::model {
namespace {

using testing::RawSafetensors;
using testing::ScratchDir;
using testing::WriteAll;

StatusOr<SafetensorsHeader> Parse(const std::string& bytes) {
  return ParseSafetensorsHeader(reinterpret_cast<const std::byte*>(bytes.data()), bytes.size(), "f.safetensors");
}

void ExpectInvalid(const std::string& bytes, std::string_view needle) {
  StatusOr<SafetensorsHeader> header = Parse(bytes);
  ASSERT_FALSE(header.ok()) << "accepted";
  EXPECT_EQ(header.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(header.status().message().find("f.safetensors"), std::string::npos) << header.status().message();
  EXPECT_NE(header.status().message().find(needle), std::string::npos)
      << "message '" << header.status().message() << "' lacks '" << needle << "'";
}

TEST(SafetensorsHeaderTest, ParsesValidHeaderWithMetadata) {
  std::string bytes = RawSafetensors(
      R"({"__metadata__": {"format": "pt"},
          "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]},
          "a": {"dtype": "BF16", "shape": [2], "data_offsets": [0, 4]},
          "empty": {"dtype": "I64", "shape": [0, 3], "data_offsets": [12, 12]}})",
      12);
  StatusOr<SafetensorsHeader> header = Parse(bytes);
  ASSERT_TRUE(header.ok()) << header.status().ToString();
  EXPECT_EQ(header->metadata.at("format"), "pt");
  ASSERT_EQ(header->tensors.size(), 3u);
  EXPECT_EQ(header->tensors[0].name, "a");  // sorted by offset, not by key
  EXPECT_EQ(header->tensors[0].dtype, DType::kBF16);
  EXPECT_EQ(header->tensors[1].name, "b");
  EXPECT_EQ(header->tensors[1].begin, 4u);
  EXPECT_EQ(header->tensors[2].shape, (std::vector<int64_t>{0, 3}));
  EXPECT_EQ(header->data_offset, bytes.size() - 12);
}

TEST(SafetensorsHeaderTest, RejectsTruncation) {
  ExpectInvalid("", "truncated");
  ExpectInvalid(std::string("\x10\0\0", 3), "truncated");
  std::string full = RawSafetensors(R"({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}})", 16);
  ExpectInvalid(full.substr(0, 20), "truncated");               // cut inside the header
  ExpectInvalid(full.substr(0, full.size() - 1), "truncated");  // cut inside the data
}

TEST(SafetensorsHeaderTest, RejectsOversizedHeaderLength) {
  std::string bytes(8, '\0');
  uint64_t n = kMaxSafetensorsHeaderBytes + 1;
  std::memcpy(bytes.data(), &n, 8);
  bytes += "{}";
  ExpectInvalid(bytes, "over the limit");
  n = ~0ull;  // would overflow 8 + n
  std::memcpy(bytes.data(), &n, 8);
  ExpectInvalid(bytes, "over the limit");
}

TEST(SafetensorsHeaderTest, RejectsNonJsonAndNonObject) {
  ExpectInvalid(RawSafetensors("{not json", 0), "not valid JSON");
  ExpectInvalid(RawSafetensors("[1, 2]", 0), "not a JSON object");
  ExpectInvalid(RawSafetensors(std::string(64, '[') + std::string(64, ']'), 0), "nests deeper");
  ExpectInvalid(RawSafetensors(R"({"a": 5})", 0), "'a'");
  ExpectInvalid(RawSafetensors(R"({"__metadata__": {"format": 1}})", 0), "__metadata__");
  ExpectInvalid(RawSafetensors(R"({"__metadata__": []})", 0), "__metadata__");
}

TEST(SafetensorsHeaderTest, RejectsUnknownAndUnsupportedDtypes) {
  ExpectInvalid(RawSafetensors(R"({"w": {"dtype": "Q4_K", "shape": [1], "data_offsets": [0, 1]}})", 1),
                "unknown dtype 'Q4_K'");
  ExpectInvalid(RawSafetensors(R"({"w": {"dtype": "F64", "shape": [1], "data_offsets": [0, 8]}})", 8), "not supported");
  ExpectInvalid(RawSafetensors(R"({"w": {"dtype": 3, "shape": [1], "data_offsets": [0, 4]}})", 4), "'w'");
}

TEST(SafetensorsHeaderTest, RejectsBadShapes) {
  ExpectInvalid(RawSafetensors(R"({"w": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}})", 4), "shape");
  ExpectInvalid(RawSafetensors(R"({"w": {"dtype": "F32", "shape": [1.5], "data_offsets": [0, 4]}})", 4), "shape");
  ExpectInvalid(RawSafetensors(R"({"w": {"dtype": "F32", "data_offsets": [0, 4]}})", 4), "shape");
  ExpectInvalid(RawSafetensors(R"({"w": {"dtype": "F32", "shape": [281474976710656, 281474976710656],
                                   "data_offsets": [0, 4]}})",
                               4),
                "too many elements");
}

TEST(SafetensorsHeaderTest, RejectsOffsetsOutOfRangeOrInconsistent) {
  ExpectInvalid(RawSafetensors(R"({"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}})", 8),
                "past the data section");
  ExpectInvalid(RawSafetensors(R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [8, 0]}})", 8), "begin > end");
  ExpectInvalid(RawSafetensors(R"({"w": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}})", 8),
                "dtype x shape needs 12");
  ExpectInvalid(RawSafetensors(R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0]}})", 8), "data_offsets");
  ExpectInvalid(RawSafetensors(R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [-8, 0]}})", 8), "data_offsets");
}

TEST(SafetensorsHeaderTest, RejectsOverlapsGapsAndUncoveredBytes) {
  ExpectInvalid(RawSafetensors(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                                   "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})",
                               12),
                "overlap");
  ExpectInvalid(RawSafetensors(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
                                   "b": {"dtype": "F32", "shape": [1], "data_offsets": [8, 12]}})",
                               12),
                "gap");
  ExpectInvalid(RawSafetensors(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})", 12), "cover");
}

TEST(SafetensorsWriterTest, RoundTripsThroughReaderWithExactBytes) {
  std::string path = ScratchDir() + "/t.safetensors";
  std::vector<TensorData> tensors = {
      {{"x.bf16", DType::kBF16, {2, 2}}, EncodeFloats({1.0f, -2.0f, 0.5f, 3.0f}, DType::kBF16)},
      {{"y.f16", DType::kF16, {3}}, EncodeFloats({1.0f, -0.5f, 65504.0f}, DType::kF16)},
      {{"z.f32", DType::kF32, {1}}, EncodeFloats({0.1f}, DType::kF32)},
      {{"ids", DType::kI32, {2}}, std::vector<std::byte>(8, std::byte{1})},
  };
  ASSERT_TRUE(WriteSafetensorsFile(path, tensors).ok());
  std::string bytes = testing::ReadAll(path);

  // Independent check of the layout: parse the header with nlohmann directly.
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  EXPECT_EQ((8 + n) % 8, 0u) << "data section not 8-byte aligned";
  nlohmann::json header = nlohmann::json::parse(bytes.substr(8, n));
  EXPECT_EQ(header["__metadata__"]["format"], "pt");
  EXPECT_EQ(header["x.bf16"]["data_offsets"], nlohmann::json::array({0, 8}));
  EXPECT_EQ(header["y.f16"]["dtype"], "F16");
  EXPECT_EQ(header["y.f16"]["data_offsets"], nlohmann::json::array({8, 14}));
  EXPECT_EQ(header["ids"]["data_offsets"], nlohmann::json::array({18, 26}));
  // bf16(1.0) = 0x3f80, bf16(-2.0) = 0xc000 (little-endian bytes).
  const unsigned char* data = reinterpret_cast<const unsigned char*>(bytes.data()) + 8 + n;
  EXPECT_EQ(data[0], 0x80);
  EXPECT_EQ(data[1], 0x3f);
  EXPECT_EQ(data[2], 0x00);
  EXPECT_EQ(data[3], 0xc0);
  // f16(65504) = 0x7bff.
  EXPECT_EQ(data[12], 0xff);
  EXPECT_EQ(data[13], 0x7b);

  StatusOr<std::unique_ptr<SafetensorsFile>> file = SafetensorsFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  EXPECT_EQ((*file)->Names(), (std::vector<std::string>{"x.bf16", "y.f16", "z.f32", "ids"}));
  StatusOr<TensorView> x = (*file)->Get("x.bf16");
  ASSERT_TRUE(x.ok());
  EXPECT_EQ(x->shape, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(x->NumElements(), 4);
  EXPECT_EQ(x->GetFloat(1), -2.0f);
  EXPECT_EQ(x->GetFloat(3), 3.0f);
  StatusOr<TensorView> y = (*file)->Get("y.f16");
  ASSERT_TRUE(y.ok());
  EXPECT_EQ(y->GetFloat(2), 65504.0f);
  EXPECT_EQ((*file)->Get("z.f32")->GetFloat(0), 0.1f);
  StatusOr<TensorView> missing = (*file)->Get("nope");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("nope"), std::string::npos);
  EXPECT_NE(missing.status().message().find(path), std::string::npos);
}

TEST(SafetensorsWriterTest, StreamsInChunksAndChecksByteCount) {
  std::string path = ScratchDir() + "/s.safetensors";
  auto writer = SafetensorsWriter::Create(path, {{"a", DType::kF32, {3}}, {"b", DType::kU8, {5}}});
  ASSERT_TRUE(writer.ok()) << writer.status().ToString();
  EXPECT_EQ((*writer)->data_bytes(), 17u);
  std::vector<char> chunk(10, 7);
  ASSERT_TRUE((*writer)->Append(chunk.data(), 10).ok());
  EXPECT_EQ((*writer)->Finish().code(), StatusCode::kFailedPrecondition);  // 7 bytes missing

  writer = SafetensorsWriter::Create(path, {{"a", DType::kF32, {3}}, {"b", DType::kU8, {5}}});
  ASSERT_TRUE(writer.ok());
  ASSERT_TRUE((*writer)->Append(chunk.data(), 10).ok());
  EXPECT_FALSE((*writer)->Append(chunk.data(), 8).ok());  // one byte too many
  ASSERT_TRUE((*writer)->Append(chunk.data(), 7).ok());
  ASSERT_TRUE((*writer)->Finish().ok());
  StatusOr<std::unique_ptr<SafetensorsFile>> file = SafetensorsFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  EXPECT_EQ((*file)->Get("b")->num_bytes, 5u);
  EXPECT_EQ(static_cast<int>((*file)->Get("b")->data[4]), 7);

  EXPECT_FALSE(SafetensorsWriter::Create(path, {{"a", DType::kF32, {1}}, {"a", DType::kF32, {1}}}).ok());
  EXPECT_FALSE(WriteSafetensorsFile(path, {{{"a", DType::kF32, {2}}, std::vector<std::byte>(4)}}).ok());
}

TEST(SafetensorsFileTest, ErrorsNameTheFile) {
  std::string dir = ScratchDir();
  StatusOr<std::unique_ptr<SafetensorsFile>> missing = SafetensorsFile::Open(dir + "/none.safetensors");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  WriteAll(dir + "/empty.safetensors", "");
  StatusOr<std::unique_ptr<SafetensorsFile>> empty = SafetensorsFile::Open(dir + "/empty.safetensors");
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.status().message().find("empty.safetensors"), std::string::npos);
  EXPECT_NE(empty.status().message().find("truncated"), std::string::npos);
}

}  // namespace
}  // namespace tandem::model
