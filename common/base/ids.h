// Identifiers shared across modules. Request ids are chosen by the router and
// are unique per router process; epochs fence stale messages about a request.
#pragma once

#include <cstdint>
#include <string>

namespace tandem {

using RequestId = uint64_t;
using Epoch = uint32_t;
using NodeId = uint32_t;
using TokenId = int32_t;
using BlockId = int32_t;

inline constexpr BlockId kInvalidBlock = -1;

// A random 128-bit id as 32 hex characters (for OpenAI response ids such as
// "cmpl-<hex>"). Thread-safe.
std::string RandomHexId();

}  // namespace tandem
