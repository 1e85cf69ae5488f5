#include "router/cluster/node_messages.h"

namespace tandem::router::cluster {

proto::RequestPriority ToProtoPriority(PriorityClass priority) {
  return priority == PriorityClass::kBatch ? proto::REQUEST_PRIORITY_BATCH : proto::REQUEST_PRIORITY_INTERACTIVE;
}

proto::SamplingParams ToProtoSampling(const GenerateRequest& request) {
  proto::SamplingParams s;
  s.set_temperature(request.sampling.temperature);
  s.set_top_p(request.sampling.top_p);
  s.set_top_k(request.sampling.top_k);
  s.set_min_p(request.sampling.min_p);
  s.set_presence_penalty(request.sampling.presence_penalty);
  s.set_frequency_penalty(request.sampling.frequency_penalty);
  s.set_repetition_penalty(request.sampling.repetition_penalty);
  if (request.sampling.seed) {
    s.set_has_seed(true);
    s.set_seed(*request.sampling.seed);
  }
  s.set_max_tokens(request.max_tokens);
  // Counts every output token, also those a moved request carries in its prompt.
  s.set_min_tokens(request.min_tokens);
  s.set_ignore_eos(request.ignore_eos);
  for (TokenId id : request.stop_token_ids) s.add_stop_token_ids(id);
  for (const auto& [id, bias] : request.logit_bias) {
    proto::LogitBias* b = s.add_logit_bias();
    b->set_token_id(id);
    b->set_bias(bias);
  }
  if (request.logprobs >= 0) {
    s.set_logprobs(true);
    s.set_top_logprobs(request.logprobs);
  }
  s.set_structured_output(request.structured_output);
  if (request.prompt_logprobs >= 0) {
    s.set_prompt_logprobs(true);
    s.set_top_prompt_logprobs(request.prompt_logprobs);
  }
  return s;
}

proto::ReserveRequest MakeReserveRequest(const GenerateRequest& request, Epoch epoch, const std::string& tenant_salt,
                                         int32_t lease_ms) {
  proto::ReserveRequest reserve;
  reserve.set_request_id(request.request_id);
  reserve.set_epoch(epoch);
  reserve.set_prompt_len(static_cast<int32_t>(request.prompt_token_ids.size()));
  reserve.set_max_tokens(request.max_tokens);
  for (TokenId t : request.prompt_token_ids) reserve.add_token_ids(t);
  *reserve.mutable_sampling() = ToProtoSampling(request);
  reserve.set_tenant_salt(tenant_salt);
  reserve.set_lease_ms(static_cast<uint32_t>(lease_ms));
  reserve.set_priority(ToProtoPriority(request.priority));
  reserve.set_trace_timing(request.trace_timing);
  return reserve;
}

proto::PrefillRequest MakeRemotePrefillRequest(const GenerateRequest& request, Epoch epoch,
                                               const std::string& tenant_salt, const proto::ReserveReply* reservation,
                                               const std::string& decode_address) {
  proto::PrefillRequest prefill;
  prefill.set_request_id(request.request_id);
  prefill.set_epoch(epoch);
  for (TokenId t : request.prompt_token_ids) prefill.add_token_ids(t);
  *prefill.mutable_sampling() = ToProtoSampling(request);
  if (reservation != nullptr) {
    *prefill.mutable_reservation() = *reservation;
  } else {
    prefill.set_reservation_follows(true);
  }
  prefill.set_decode_address(decode_address);
  prefill.set_tenant_salt(tenant_salt);
  prefill.set_priority(ToProtoPriority(request.priority));
  prefill.set_trace_timing(request.trace_timing);
  return prefill;
}

proto::PrefillTarget MakePrefillTarget(RequestId request_id, Epoch epoch, const proto::ReserveReply& reservation) {
  proto::PrefillTarget target;
  target.set_request_id(request_id);
  target.set_epoch(epoch);
  *target.mutable_reservation() = reservation;
  return target;
}

proto::PrefillRequest MakeLocalPrefillRequest(const GenerateRequest& request, Epoch epoch,
                                              const std::string& tenant_salt, std::span<const TokenId> generated) {
  proto::PrefillRequest prefill;
  prefill.set_request_id(request.request_id);
  prefill.set_epoch(epoch);
  for (TokenId t : request.prompt_token_ids) prefill.add_token_ids(t);
  for (TokenId t : generated) prefill.add_token_ids(t);
  *prefill.mutable_sampling() = ToProtoSampling(request);
  prefill.mutable_sampling()->set_max_tokens(request.max_tokens - static_cast<int32_t>(generated.size()));
  // The node samples them as output (draw positions, penalties), continuing the same draws.
  prefill.mutable_sampling()->set_num_output_tokens_in_prompt(static_cast<int32_t>(generated.size()));
  prefill.set_tenant_salt(tenant_salt);
  prefill.set_priority(ToProtoPriority(request.priority));
  prefill.set_trace_timing(request.trace_timing);
  return prefill;
}

}  // namespace tandem::router::cluster
