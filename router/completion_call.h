// CompletionCall: one POST /v1/completions or /v1/chat/completions, from the
// request body to the last byte of the response.
//
// Steps: parse and validate -> model and readiness checks -> tokenize and
// context-length check -> admission (run, queue or 429) -> GenerationJob ->
// a JSON body or an SSE stream. Every path ends with exactly one terminal
// outcome on the ResponseSink. Thread rule: runs on its connection's strand
// only; the admission callback and timers are posted there.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/steady_timer.hpp>

#include <memory>
#include <optional>
#include <string>

#include "router/api_error.h"
#include "router/chat_tool_calls.h"
#include "router/generation_job.h"
#include "router/openai_request.h"
#include "router/router_context.h"

namespace tandem::router {

// The connection side of a call. Exactly one of Respond() or BeginStream() ..
// EndStream() is used per call. Thread rule: called on the connection's strand.
class ResponseSink {
 public:
  virtual ~ResponseSink() = default;
  // One more header on this call's response (the JSON one or the stream head);
  // before Respond()/BeginStream(). `value` must be printable ASCII.
  virtual void AddHeader(std::string name, std::string value) = 0;
  // A complete JSON response. retry_after_s >= 0 adds a Retry-After header.
  virtual void Respond(int http_status, std::string json_body, int retry_after_s) = 0;
  // 200 with Content-Type text/event-stream; then WriteStream(), then EndStream().
  virtual void BeginStream() = 0;
  virtual void WriteStream(std::string data) = 0;
  // Ends the stream; close_connection after an error event.
  virtual void EndStream(bool close_connection) = 0;
};

class CompletionCall : public std::enable_shared_from_this<CompletionCall> {
 public:
  CompletionCall(RouterContext* context, std::shared_ptr<ResponseSink> sink, boost::asio::any_io_executor strand,
                 ApiKind kind, ApiKeyGrant grant);

  // Handles the request body; everything after is asynchronous.
  void Run(const std::string& body);
  // The client went away: cancel everywhere, give the admission slot back.
  // No more output is written.
  void OnClientGone();

 private:
  enum class State { kNew, kQueued, kRunning, kDone };

  std::optional<ApiError> Prepare(const std::string& body);
  std::optional<ApiError> Tokenize(const ApiRequest& request);
  void Admit();
  void OnAdmitted();
  void StartJob();
  // Sends the 200 event-stream head (and chat role chunks) with the first output,
  // so a request refused before any output gets its own HTTP status.
  void BeginStream();
  void OnJobDone(const Status& status);
  void Fail(const ApiError& error, int retry_after_s = -1);
  // Leaves kRunning/kQueued: returns the slot, stops timers.
  void Finish();
  void RecordTokens(int32_t index, int32_t count);
  // A stream's text or end for choice `index` when tool calls are parsed: the
  // deltas the parser releases, with the logprob entries no chunk carried yet.
  void StreamToolText(int32_t index, const std::string& text, std::vector<ChoiceLogprob> entries);
  void StreamToolEnd(int32_t index, FinishReason reason, std::vector<ChoiceLogprob> entries);
  void UpdateLoad() const;
  // Where the request's time went so far (include_timing); `end_ns` 0 while it runs.
  RequestTiming Timing(Nanos end_ns) const;

  RouterContext* const context_;
  std::shared_ptr<ResponseSink> sink_;  // reset at the terminal outcome
  boost::asio::any_io_executor strand_;
  const ApiKind kind_;
  const ApiKeyGrant grant_;  // the caller's tenant and priority policy
  State state_ = State::kNew;
  bool holds_slot_ = false;
  bool streaming_ = false;  // the event stream has begun (bytes may have been sent)
  AdmissionController::Ticket ticket_ = 0;
  ApiRequest request_;
  JobSpec spec_;
  ResponseMeta meta_;
  ChatToolCalls tool_calls_;                               // chat: tools parsed out of the output
  std::vector<std::vector<ChoiceLogprob>> held_logprobs_;  // per choice: entries of text the parser holds
  std::shared_ptr<GenerationJob> job_;
  Nanos arrival_ns_ = 0;   // Run() began
  Nanos queued_ns_ = 0;    // admission was asked
  Nanos admitted_ns_ = 0;  // admission was granted
  Nanos deadline_ns_ = 0;  // Clock::Real() time the request must end by; 0 = none
  bool first_token_seen_ = false;
  Nanos first_token_ns_ = 0;          // when the first token of any choice arrived
  std::vector<Nanos> last_batch_ns_;  // per choice: when its previous tokens arrived
  Nanos second_token_ns_ = 0;         // when the first choice's second token arrived
  boost::asio::steady_timer queue_timer_;
  boost::asio::steady_timer deadline_timer_;
};

}  // namespace tandem::router
