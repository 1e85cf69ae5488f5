#include "prefill_node/prefill_handoff.h"

#include <algorithm>

namespace tandem::prefill_node {

using A = PrefillAction;
using E = PrefillEventKind;
using S = PrefillState;

std::string_view PrefillStateName(PrefillState state) {
  switch (state) {
    case S::kAccepted: return "accepted";
    case S::kConnected: return "connected";
    case S::kStaged: return "staged";
    case S::kSending: return "sending";
    case S::kSent: return "sent";
    case S::kDone: return "done";
    case S::kFailed: return "failed";
    case S::kErased: return "erased";
  }
  return "?";
}

std::string_view PrefillEventName(PrefillEventKind kind) {
  switch (kind) {
    case E::kConnected: return "connected";
    case E::kConnectFailed: return "connect_failed";
    case E::kStepBegan: return "step_began";
    case E::kStageFailed: return "stage_failed";
    case E::kStepFailed: return "step_failed";
    case E::kSendDone: return "send_done";
    case E::kFirstToken: return "first_token";
    case E::kEngineFinished: return "engine_finished";
    case E::kCancel: return "cancel";
    case E::kDecodeClosed: return "decode_closed";
  }
  return "?";
}

bool PrefillActions::Has(PrefillAction a) const {
  return std::find(actions.begin(), actions.end(), a) != actions.end();
}

PrefillHandoff PrefillHandoff::InState(PrefillState state, bool source_held, bool sender_holds, bool engine_done) {
  PrefillHandoff request;
  request.state_ = state;
  request.source_held_ = source_held;
  request.sender_holds_ = sender_holds;
  request.engine_done_ = engine_done;
  return request;
}

void PrefillHandoff::Release(PrefillActions* out) {
  if (!source_held_) return;
  source_held_ = false;
  out->actions.push_back(A::kReleaseSource);
}

void PrefillHandoff::Fail(const Status& status, PrefillActions* out) {
  out->status = status;
  if (sender_holds_) {
    out->actions.push_back(A::kCancelSession);  // its SendDone releases the source
  } else {
    Release(out);
  }
  if (!engine_done_) out->actions.push_back(A::kEngineCancel);
  out->actions.push_back(A::kSendKvDone);
  state_ = S::kFailed;
}

void PrefillHandoff::MaybeErase(PrefillActions* out) {
  if ((state_ != S::kDone && state_ != S::kFailed) || !engine_done_ || sender_holds_) return;
  Release(out);
  out->actions.push_back(A::kErase);
  state_ = S::kErased;
}

PrefillActions PrefillHandoff::Handle(const PrefillEvent& event) {
  PrefillActions out;
  if (state_ == S::kErased) return out;
  const bool live = state_ != S::kDone && state_ != S::kFailed;
  auto open = [&] {
    state_ = S::kSending;
    sender_holds_ = true;
    out.actions.push_back(A::kOpenSession);
  };
  switch (event.kind) {
    case E::kConnected:
      if (state_ == S::kAccepted)
        state_ = S::kConnected;
      else if (state_ == S::kStaged)
        open();
      break;
    case E::kStepBegan:
      if (state_ != S::kAccepted && state_ != S::kConnected) break;
      source_held_ = true;
      if (state_ == S::kAccepted)
        state_ = S::kStaged;
      else
        open();
      break;
    case E::kConnectFailed:
    case E::kStageFailed:
    case E::kStepFailed:
    case E::kCancel:
    case E::kDecodeClosed:
      if (live) Fail(event.status, &out);
      break;
    case E::kSendDone:
      if (!sender_holds_) break;
      sender_holds_ = false;
      Release(&out);
      if (state_ != S::kSending) break;
      if (!event.status.ok()) {
        Fail(event.status, &out);
      } else if (first_token_) {
        state_ = S::kDone;
        out.actions.push_back(A::kSendKvDone);
      } else {
        state_ = S::kSent;
      }
      break;
    case E::kFirstToken:
      if (first_token_) break;
      first_token_ = event.token;
      if (state_ == S::kSent) {
        state_ = S::kDone;
        out.actions.push_back(A::kSendKvDone);
      }
      break;
    case E::kEngineFinished:
      if (engine_done_) break;
      engine_done_ = true;
      if (live && !first_token_) {
        Fail(event.status.ok() ? InternalError("the engine ended the prefill without a token") : event.status, &out);
      }
      break;
  }
  MaybeErase(&out);
  return out;
}

}  // namespace tandem::prefill_node
