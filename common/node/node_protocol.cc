#include "common/node/node_protocol.h"

#include <fmt/format.h>

#include <string>

#include "common/base/logging.h"
#include "common/proto/messages.h"

namespace tandem::node {

StatusOr<runtime::SamplingParams> SamplingFromProto(const proto::SamplingParams& s, int max_tokens) {
  runtime::SamplingParams p;
  p.temperature = s.temperature();
  p.top_k = s.top_k();
  p.top_p = s.top_p() == 0.0f ? 1.0f : s.top_p();
  p.min_p = s.min_p();
  if (s.has_seed()) p.seed = s.seed();
  p.repetition_penalty = s.repetition_penalty() == 0.0f ? 1.0f : s.repetition_penalty();
  p.presence_penalty = s.presence_penalty();
  p.frequency_penalty = s.frequency_penalty();
  if (s.stop_token_ids_size() > 1024) return InvalidArgumentError("too many stop_token_ids");
  p.stop_token_ids.assign(s.stop_token_ids().begin(), s.stop_token_ids().end());
  p.ignore_eos = s.ignore_eos();
  p.max_tokens = max_tokens > 0 ? max_tokens : s.max_tokens();
  p.min_tokens = s.min_tokens();
  p.num_output_tokens_in_prompt = s.num_output_tokens_in_prompt();
  if (s.logit_bias_size() > runtime::kMaxLogitBias) return InvalidArgumentError("logit_bias: too many tokens");
  for (const proto::LogitBias& b : s.logit_bias()) p.logit_bias.emplace_back(b.token_id(), b.bias());
  if (s.logprobs()) p.logprobs = s.top_logprobs();
  p.structured_output = s.structured_output();
  if (s.prompt_logprobs()) p.prompt_logprobs = s.top_prompt_logprobs();
  TANDEM_RETURN_IF_ERROR(p.Validate());
  return p;
}

void LogprobsToProto(const runtime::SampledLogprobs& logprobs, proto::TokenLogprobs* out) {
  out->set_logprob(logprobs.logprob);
  for (const runtime::TokenLogprob& t : logprobs.top) {
    proto::TokenLogprob* entry = out->add_top();
    entry->set_token_id(t.token);
    entry->set_logprob(t.logprob);
  }
}

runtime::SampledLogprobs LogprobsFromProto(const proto::TokenLogprobs& logprobs) {
  runtime::SampledLogprobs out;
  out.logprob = logprobs.logprob();
  for (const proto::TokenLogprob& t : logprobs.top()) out.top.push_back({t.token_id(), t.logprob()});
  return out;
}

void LogStageTimes(uint64_t request_id, Epoch epoch, const proto::StageTimes& t, bool trace_timing) {
  const std::string line = fmt::format(
      "request {} epoch {} stages (ms): decode_queue {:.3f} prefill_queue {:.3f} prefill {:.3f} kv_transfer {:.3f} "
      "kv_wait {:.3f}",
      request_id, epoch, t.decode_queue_s() * 1e3, t.prefill_queue_s() * 1e3, t.prefill_s() * 1e3,
      t.kv_transfer_s() * 1e3, t.kv_wait_s() * 1e3);
  if (trace_timing) {
    TANDEM_LOG_INFO("{}", line);
  } else {
    TANDEM_LOG_DEBUG("{}", line);
  }
}

StatusOr<scheduler::Priority> PriorityFromProto(proto::RequestPriority priority) {
  switch (priority) {
    case proto::REQUEST_PRIORITY_INTERACTIVE: return scheduler::Priority::kInteractive;
    case proto::REQUEST_PRIORITY_BATCH: return scheduler::Priority::kBatch;
    default: break;  // a value of a newer peer, or garbage
  }
  return InvalidArgumentError("unknown request priority " + std::to_string(static_cast<int>(priority)));
}

Status ValidatePrompt(const google::protobuf::RepeatedField<int32_t>& ids, int vocab_size, int max_model_len) {
  if (ids.empty()) return InvalidArgumentError("empty prompt");
  if (ids.size() >= max_model_len) {
    return InvalidArgumentError("prompt of " + std::to_string(ids.size()) + " tokens leaves no room within " +
                                std::to_string(max_model_len));
  }
  for (int32_t id : ids) {
    if (id < 0 || id >= vocab_size) return InvalidArgumentError("token id out of range: " + std::to_string(id));
  }
  return Status::Ok();
}

Status ValidateRequestHeader(uint64_t request_id, Epoch epoch, const std::string& tenant_salt) {
  if (request_id == 0) return InvalidArgumentError("request_id must be set");
  if (epoch == 0) return InvalidArgumentError("epoch must be >= 1");
  if (tenant_salt.size() > kMaxTenantSaltBytes) return InvalidArgumentError("tenant_salt too long");
  return Status::Ok();
}

std::optional<std::pair<uint64_t, Epoch>> CancelTarget(const google::protobuf::Message& message) {
  if (const auto* cancel = proto::MessageAs<proto::Cancel>(message)) {
    return std::make_pair(cancel->request_id(), cancel->epoch());
  }
  if (const auto* release = proto::MessageAs<proto::Release>(message)) {
    return std::make_pair(release->request_id(), release->epoch());
  }
  return std::nullopt;
}

void ReplyAck(const net::Responder& responder, uint64_t request_id, Epoch epoch) {
  proto::Ack ack;
  ack.set_request_id(request_id);
  ack.set_epoch(epoch);
  responder.Reply(ack);
}

proto::FinishReason FinishReasonToProto(scheduler::FinishReason reason) {
  switch (reason) {
    case scheduler::FinishReason::kStop: return proto::FINISH_REASON_STOP;
    case scheduler::FinishReason::kLength: return proto::FINISH_REASON_LENGTH;
    case scheduler::FinishReason::kCancelled: return proto::FINISH_REASON_ABORT;
    case scheduler::FinishReason::kLeaseExpired:
    case scheduler::FinishReason::kRejected:
    case scheduler::FinishReason::kAborted: return proto::FINISH_REASON_ERROR;
  }
  return proto::FINISH_REASON_ERROR;
}

engine::EngineRequest MakeEngineRequest(uint64_t request_id, const google::protobuf::RepeatedField<int32_t>& ids,
                                        const std::string& tenant_salt, scheduler::Priority priority,
                                        runtime::SamplingParams sampling) {
  engine::EngineRequest r;
  r.id = request_id;
  r.tenant_salt = tenant_salt;
  r.priority = priority;
  r.prompt_tokens.assign(ids.begin(), ids.end());
  r.sampling = std::move(sampling);
  return r;
}

}  // namespace tandem::node
