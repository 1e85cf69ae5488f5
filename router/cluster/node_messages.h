// The router's requests to nodes (docs/protocol.md, "Request flow"), built from
// a GenerateRequest: plain functions, no I/O.
// Thread rule: free functions over values; thread-safe.
#pragma once

#include <span>
#include <string>

#include "common/base/ids.h"
#include "common/proto/control.pb.h"
#include "router/engine_client.h"

namespace tandem::router::cluster {

// The request's class on the wire (every Reserve and PrefillRequest carries it).
proto::RequestPriority ToProtoPriority(PriorityClass priority);

// Router -> protocol sampling params (max_tokens, ignore_eos, stop ids included).
proto::SamplingParams ToProtoSampling(const GenerateRequest& request);

// Reserve on a decode node: the whole prompt, a lease of `lease_ms` (0 = the node's default).
proto::ReserveRequest MakeReserveRequest(const GenerateRequest& request, Epoch epoch, const std::string& tenant_salt,
                                         int32_t lease_ms);

// PrefillRequest to a prefill node: compute the prompt, send its KV to the reservation
// on the decode node at `decode_address`; `reservation` null: it follows in a PrefillTarget
// (reservation_follows: sent beside the Reserve).
proto::PrefillRequest MakeRemotePrefillRequest(const GenerateRequest& request, Epoch epoch,
                                               const std::string& tenant_salt, const proto::ReserveReply* reservation,
                                               const std::string& decode_address);

// The reservation for a PrefillRequest sent with reservation_follows.
proto::PrefillTarget MakePrefillTarget(RequestId request_id, Epoch epoch, const proto::ReserveReply& reservation);

// PrefillRequest with an empty reservation to a decode node (local path). After a move the
// tokens generated so far extend the prompt, count against max_tokens and sample as output
// (num_output_tokens_in_prompt), so the node continues the same seeded draws.
proto::PrefillRequest MakeLocalPrefillRequest(const GenerateRequest& request, Epoch epoch,
                                              const std::string& tenant_salt, std::span<const TokenId> generated);

}  // namespace tandem::router::cluster
