// libFuzzer target: arbitrary bytes as a whole safetensors file. The parser
// must return a Status, never crash; when it accepts, every entry must lie
// inside the input and agree with dtype x shape (checked here independently).
#include <cstddef>
#include <cstdint>

#include "common/base/check.h"
#include "common/model/safetensors_header.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tandem;
  using namespace tandem::model;
  StatusOr<SafetensorsHeader> header =
      ParseSafetensorsHeader(reinterpret_cast<const std::byte*>(data), size, "fuzz.safetensors");
  if (!header.ok()) {
    TANDEM_CHECK(!header.status().message().empty());
    return 0;
  }
  TANDEM_CHECK(header->data_offset >= 8 && header->data_offset <= size);
  uint64_t data_size = size - header->data_offset;
  for (const SafetensorsEntry& entry : header->tensors) {
    TANDEM_CHECK(entry.begin <= entry.end && entry.end <= data_size) << entry.name;
    unsigned __int128 bytes = DTypeSize(entry.dtype);
    for (int64_t dim : entry.shape) bytes *= static_cast<unsigned __int128>(dim);
    TANDEM_CHECK(bytes == entry.end - entry.begin) << entry.name;
  }
  return 0;
}
