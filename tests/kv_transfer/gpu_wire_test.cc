// The GPU backends' addresses and descriptors: round trips, and every malformed
// form refused before anything reaches CUDA. Runs without a GPU.
#include <gtest/gtest.h>

#include "kv_transfer/cuda_ipc/cuda_ipc_wire.h"

namespace tandem::kv_transfer {
namespace {

CudaIpcAddress SomeAddress() {
  return CudaIpcAddress{.process = {.boot_id = std::string(36, 'b'), .pid_namespace = 4026531836, .pid = 77},
                        .nonce = 0x1234,
                        .device_uuid = std::string(kDeviceUuidBytes, '\x11')};
}

CudaIpcRegion SomeRegion() {
  return CudaIpcRegion{.owner_nonce = 0x1234,
                       .ipc_handle = std::string(kCudaIpcHandleBytes, '\x22'),
                       .allocation_bytes = 1 << 20,
                       .offset = 4096,
                       .length = 8192};
}

TEST(CudaIpcWireTest, AddressRoundTripsAndMalformedOnesAreRefused) {
  std::string bytes = EncodeCudaIpcAddress(SomeAddress());
  auto back = DecodeCudaIpcAddress(bytes);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->process.boot_id, std::string(36, 'b'));
  EXPECT_EQ(back->process.pid, 77u);
  EXPECT_EQ(back->nonce, 0x1234u);
  EXPECT_EQ(back->device_uuid, std::string(kDeviceUuidBytes, '\x11'));
  for (size_t n = 0; n < bytes.size(); ++n) EXPECT_FALSE(DecodeCudaIpcAddress(bytes.substr(0, n)).ok()) << n;
  EXPECT_FALSE(DecodeCudaIpcAddress(bytes + "x").ok());
  CudaIpcAddress a = SomeAddress();
  a.device_uuid.pop_back();
  EXPECT_FALSE(DecodeCudaIpcAddress(EncodeCudaIpcAddress(a)).ok()) << "short uuid";
  a = SomeAddress();
  a.nonce = 0;
  EXPECT_FALSE(DecodeCudaIpcAddress(EncodeCudaIpcAddress(a)).ok()) << "no nonce";
  EXPECT_FALSE(DecodeCudaIpcRegion(bytes).ok()) << "an address is not a region";
  std::string other_version = bytes;
  other_version[4] = 9;
  EXPECT_EQ(DecodeCudaIpcAddress(other_version).status().code(), StatusCode::kFailedPrecondition);
}

TEST(CudaIpcWireTest, RegionRoundTripsAndIsBoundsChecked) {
  std::string bytes = EncodeCudaIpcRegion(SomeRegion());
  auto back = DecodeCudaIpcRegion(bytes);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->ipc_handle, std::string(kCudaIpcHandleBytes, '\x22'));
  EXPECT_EQ(back->allocation_bytes, 1u << 20);
  EXPECT_EQ(back->offset, 4096u);
  EXPECT_EQ(back->length, 8192u);
  for (size_t n = 0; n < bytes.size(); ++n) EXPECT_FALSE(DecodeCudaIpcRegion(bytes.substr(0, n)).ok()) << n;
  EXPECT_FALSE(DecodeCudaIpcAddress(bytes).ok()) << "a region is not an address";
  auto refused = [](CudaIpcRegion r) { return !DecodeCudaIpcRegion(EncodeCudaIpcRegion(r)).ok(); };
  CudaIpcRegion r = SomeRegion();
  r.length = 0;
  EXPECT_TRUE(refused(r)) << "empty";
  r = SomeRegion();
  r.offset = (1 << 20) - 100;
  EXPECT_TRUE(refused(r)) << "leaves the allocation";
  r = SomeRegion();
  r.offset = ~0ull - 10;
  EXPECT_TRUE(refused(r)) << "wraps";
  r = SomeRegion();
  r.ipc_handle.resize(63);
  EXPECT_TRUE(refused(r)) << "short handle";
  r = SomeRegion();
  r.owner_nonce = 0;
  EXPECT_TRUE(refused(r)) << "no owner";
}

}  // namespace
}  // namespace tandem::kv_transfer

#ifdef TANDEM_HAVE_NCCL
#include "kv_transfer/nccl/nccl_wire.h"

namespace tandem::kv_transfer {
namespace {

NcclToken SomeToken() {
  return NcclToken{.writer_nonce = 5,
                   .target_nonce = 6,
                   .writer = {.boot_id = std::string(36, 'c'), .pid_namespace = 1, .pid = 99},
                   .writer_device_uuid = std::string(kNcclDeviceUuidBytes, '\x33'),
                   .unique_id = std::string(kNcclUniqueIdBytes, '\x44'),
                   .chunk_bytes = 16 << 20};
}

TEST(NcclWireTest, AddressTokenAndRegionRoundTripAndAreValidated) {
  NcclAddress a{.process = {.boot_id = std::string(36, 'a'), .pid_namespace = 2, .pid = 7},
                .nonce = 9,
                .device_uuid = std::string(kNcclDeviceUuidBytes, '\x55')};
  std::string address = EncodeNcclAddress(a);
  auto a2 = DecodeNcclAddress(address);
  ASSERT_TRUE(a2.ok()) << a2.status().ToString();
  EXPECT_EQ(a2->nonce, 9u);
  EXPECT_EQ(a2->process.pid, 7u);
  std::string token = EncodeNcclToken(SomeToken());
  auto t2 = DecodeNcclToken(token);
  ASSERT_TRUE(t2.ok()) << t2.status().ToString();
  EXPECT_EQ(t2->unique_id, std::string(kNcclUniqueIdBytes, '\x44'));
  EXPECT_EQ(t2->chunk_bytes, 16u << 20);
  EXPECT_EQ(t2->target_nonce, 6u);
  std::string region = EncodeNcclRegion(NcclRegion{.owner_nonce = 9, .length = 4096});
  EXPECT_EQ(DecodeNcclRegion(region)->length, 4096u);
  for (const std::string& bytes : {address, token, region}) {
    for (size_t n = 0; n < bytes.size(); ++n) {
      EXPECT_FALSE(DecodeNcclAddress(bytes.substr(0, n)).ok() || DecodeNcclToken(bytes.substr(0, n)).ok() ||
                   DecodeNcclRegion(bytes.substr(0, n)).ok())
          << n;
    }
  }
  EXPECT_FALSE(DecodeNcclToken(address).ok()) << "kinds are not interchangeable";
  EXPECT_FALSE(DecodeNcclAddress(region).ok());
  EXPECT_FALSE(DecodeCudaIpcAddress(address).ok()) << "another backend's magic";
  NcclToken bad = SomeToken();
  bad.unique_id.pop_back();
  EXPECT_FALSE(DecodeNcclToken(EncodeNcclToken(bad)).ok()) << "short unique id";
  bad = SomeToken();
  bad.chunk_bytes = 0;
  EXPECT_FALSE(DecodeNcclToken(EncodeNcclToken(bad)).ok()) << "no chunk size";
  EXPECT_FALSE(DecodeNcclRegion(EncodeNcclRegion(NcclRegion{.owner_nonce = 9, .length = 0})).ok());
}

}  // namespace
}  // namespace tandem::kv_transfer
#endif  // TANDEM_HAVE_NCCL
