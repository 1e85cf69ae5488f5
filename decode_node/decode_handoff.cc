#include "decode_node/decode_handoff.h"

#include <algorithm>

namespace tandem::decode_node {

using A = DecodeAction;
using E = DecodeEventKind;
using S = DecodeState;

std::string_view DecodeStateName(DecodeState state) {
  switch (state) {
    case S::kReserving: return "reserving";
    case S::kOpening: return "opening";
    case S::kWholeCached: return "whole_cached";
    case S::kReceiving: return "receiving";
    case S::kLanded: return "landed";
    case S::kFirstToken: return "first_token";
    case S::kJoining: return "joining";
    case S::kRunning: return "running";
    case S::kCancelled: return "cancelled";
    case S::kEnded: return "ended";
    case S::kErased: return "erased";
  }
  return "?";
}

std::string_view DecodeEventName(DecodeEventKind kind) {
  switch (kind) {
    case E::kReserved: return "reserved";
    case E::kReservedCached: return "reserved_cached";
    case E::kReserveFailed: return "reserve_failed";
    case E::kOpened: return "opened";
    case E::kOpenFailed: return "open_failed";
    case E::kKvLanded: return "kv_landed";
    case E::kKvFailed: return "kv_failed";
    case E::kKvDone: return "kv_done";
    case E::kKvDoneFailed: return "kv_done_failed";
    case E::kPeerClosed: return "peer_closed";
    case E::kEngineOutput: return "engine_output";
    case E::kEngineFinished: return "engine_finished";
    case E::kCancel: return "cancel";
    case E::kSuperseded: return "superseded";
  }
  return "?";
}

bool DecodeActions::Has(DecodeAction a) const { return std::find(actions.begin(), actions.end(), a) != actions.end(); }

bool DecodeHandoff::transfer_open() const {
  return state_ == S::kOpening || state_ == S::kReceiving || state_ == S::kLanded || state_ == S::kFirstToken;
}

void DecodeHandoff::Abandon(DecodeActions* out) const {
  out->actions.push_back(A::kEngineCancel);
  if (transfer_open()) {
    out->actions.push_back(A::kCancelSession);
    out->actions.push_back(A::kReleaseLanding);
  }
}

DecodeActions DecodeHandoff::Handle(const DecodeEvent& event) {
  DecodeActions out;
  out.status = event.status;
  auto to = [&](S next, std::initializer_list<A> actions) {
    state_ = next;
    out.actions.insert(out.actions.end(), actions);
  };
  // A request that already left (cancelled or ended) still answers the router's
  // Reserve, closes a session that opened late, and waits for the engine's record.
  if (state_ == S::kCancelled || state_ == S::kEnded) {
    const bool cancelled = state_ == S::kCancelled;
    switch (event.kind) {
      case E::kReserved:
      case E::kReservedCached:
        out.status = reason_;
        to(state_, {A::kReplyError});
        break;
      case E::kReserveFailed:  // the engine never held it: no finish record comes
        to(S::kErased, {A::kReplyError, A::kErase});
        break;
      case E::kOpened:
        out.status = reason_;
        to(state_, {A::kReplyError, A::kCancelSession});
        break;
      case E::kOpenFailed: to(state_, {A::kReplyError}); break;
      case E::kEngineFinished:
        if (cancelled) {
          to(S::kErased, {A::kForwardOutput, A::kErase});
        } else {
          to(S::kErased, {A::kErase});
        }
        break;
      case E::kSuperseded:
        reason_ = event.status;
        state_ = S::kEnded;
        break;
      default: break;  // the transfer and the engine's tokens no longer matter
    }
    return out;
  }

  switch (event.kind) {
    case E::kCancel:
    case E::kSuperseded:
      if (state_ == S::kErased) break;
      reason_ = event.status;
      Abandon(&out);
      state_ = event.kind == E::kCancel ? S::kCancelled : S::kEnded;
      return out;
    case E::kEngineFinished:
      if (state_ == S::kErased) break;
      if (transfer_open()) {  // the lease expired while KV was landing
        out.actions.push_back(A::kCancelSession);
        out.actions.push_back(A::kReleaseLanding);
      }
      to(S::kErased, {A::kForwardOutput, A::kErase});
      return out;
    default: break;
  }

  switch (state_) {
    case S::kReserving:
      if (event.kind == E::kReserved) to(S::kOpening, {A::kOpenSession});
      if (event.kind == E::kReservedCached) to(S::kWholeCached, {A::kReplyReserved});
      if (event.kind == E::kReserveFailed) to(S::kErased, {A::kReplyError, A::kErase});
      break;
    case S::kOpening:
      if (event.kind == E::kOpened) to(S::kReceiving, {A::kReplyReserved});
      if (event.kind == E::kOpenFailed) {
        reason_ = event.status;
        to(S::kEnded, {A::kReplyError, A::kEngineCancel});
      }
      break;
    case S::kReceiving:
    case S::kLanded:
    case S::kFirstToken:
      switch (event.kind) {
        case E::kKvLanded:
          if (state_ == S::kReceiving) to(S::kLanded, {});
          if (state_ == S::kFirstToken) to(S::kJoining, {A::kCompleteReservation});
          break;
        case E::kKvDone:
          if (state_ == S::kReceiving) to(S::kFirstToken, {});
          if (state_ == S::kLanded) to(S::kJoining, {A::kCompleteReservation});
          break;
        case E::kKvFailed:
        case E::kKvDoneFailed:
        case E::kPeerClosed:
          reason_ = event.status;
          Abandon(&out);
          to(S::kEnded, {A::kSendError});
          break;
        default: break;
      }
      break;
    case S::kJoining:
    case S::kRunning:
      if (event.kind == E::kEngineOutput) to(S::kRunning, {A::kForwardOutput});
      break;
    default: break;  // kWholeCached waits for the router; kErased takes nothing
  }
  return out;
}

}  // namespace tandem::decode_node
