// Conversions and checks between the control protocol and the engine that
// both node roles use: sampling params, priority, prompt validation, finish reasons.
// Thread rule: free functions; thread-safe.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/base/status.h"
#include "common/engine/engine.h"
#include "common/net/rpc_connection.h"
#include "common/proto/control.pb.h"

namespace tandem::node {

// proto -> runtime SamplingParams. Unset proto3 zeros mean "off" (top_p 0 -> 1,
// repetition_penalty 0 -> 1). max_tokens > 0 overrides sampling.max_tokens.
// InvalidArgument when a value is out of range.
StatusOr<runtime::SamplingParams> SamplingFromProto(const proto::SamplingParams& sampling, int max_tokens);

// runtime <-> proto logprobs of one sampled token.
void LogprobsToProto(const runtime::SampledLogprobs& logprobs, proto::TokenLogprobs* out);
runtime::SampledLogprobs LogprobsFromProto(const proto::TokenLogprobs& logprobs);

// The request's stage times on this node's log, under its id: at info when the
// client asked for them (trace_timing), else at debug.
void LogStageTimes(uint64_t request_id, Epoch epoch, const proto::StageTimes& times, bool trace_timing);

// proto -> the scheduler's class; InvalidArgument for a value this node does not know.
StatusOr<scheduler::Priority> PriorityFromProto(proto::RequestPriority priority);

// A prompt the engine can take: non-empty, ids in [0, vocab_size), room for one
// output token within max_model_len.
Status ValidatePrompt(const google::protobuf::RepeatedField<int32_t>& token_ids, int vocab_size, int max_model_len);

// The fields every router request (Reserve, PrefillRequest) carries: a non-zero
// id, an epoch >= 1, a tenant salt of at most kMaxTenantSaltBytes.
inline constexpr size_t kMaxTenantSaltBytes = 1024;
Status ValidateRequestHeader(uint64_t request_id, Epoch epoch, const std::string& tenant_salt);

// The (request id, epoch) a Cancel or Release message names; nullopt for other messages.
std::optional<std::pair<uint64_t, Epoch>> CancelTarget(const google::protobuf::Message& message);
// Answers a Cancel/Release with its Ack.
void ReplyAck(const net::Responder& responder, uint64_t request_id, Epoch epoch);

// Engine finish reason ("stop", "length", "cancelled", ...) -> protocol value.
proto::FinishReason FinishReasonToProto(scheduler::FinishReason reason);

// The EngineRequest for a protocol request.
engine::EngineRequest MakeEngineRequest(uint64_t request_id, const google::protobuf::RepeatedField<int32_t>& ids,
                                        const std::string& tenant_salt, scheduler::Priority priority,
                                        runtime::SamplingParams sampling);

}  // namespace tandem::node
