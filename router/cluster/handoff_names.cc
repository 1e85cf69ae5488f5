// Names of the Handoff's states, events and actions (logs, tests).
#include "router/cluster/handoff.h"

namespace tandem::router::cluster {

using Kind = HandoffActionKind;
using State = HandoffState;

const char* HandoffStateName(HandoffState state) {
  switch (state) {
    case State::kNew: return "new";
    case State::kPlacing: return "placing";
    case State::kReserving: return "reserving";
    case State::kReservingWithPrefill: return "reserving_with_prefill";
    case State::kPlacingPrefill: return "placing_prefill";
    case State::kPrefilling: return "prefilling";
    case State::kLocal: return "local";
    case State::kLocalRetry: return "local_retry";
    case State::kBackoff: return "backoff";
    case State::kDecoding: return "decoding";
    case State::kEnded: return "ended";
  }
  return "?";
}

const char* HandoffEventName(HandoffEventKind kind) {
  switch (kind) {
    case HandoffEventKind::kStart: return "start";
    case HandoffEventKind::kDecodePlaced: return "decode_placed";
    case HandoffEventKind::kPrefillPlaced: return "prefill_placed";
    case HandoffEventKind::kReserved: return "reserved";
    case HandoffEventKind::kReserveFailed: return "reserve_failed";
    case HandoffEventKind::kPrefillAcked: return "prefill_acked";
    case HandoffEventKind::kPrefillFailed: return "prefill_failed";
    case HandoffEventKind::kLocalAcked: return "local_acked";
    case HandoffEventKind::kLocalFailed: return "local_failed";
    case HandoffEventKind::kTokens: return "tokens";
    case HandoffEventKind::kNodeDead: return "node_dead";
    case HandoffEventKind::kNodeDraining: return "node_draining";
    case HandoffEventKind::kCancel: return "cancel";
    case HandoffEventKind::kShutdown: return "shutdown";
    case HandoffEventKind::kTimerFired: return "timer_fired";
  }
  return "?";
}

const char* HandoffActionName(HandoffActionKind kind) {
  switch (kind) {
    case Kind::kPlaceDecode: return "place_decode";
    case Kind::kPlacePrefill: return "place_prefill";
    case Kind::kSendReserve: return "send_reserve";
    case Kind::kSendPrefill: return "send_prefill";
    case Kind::kSendPrefillTarget: return "send_prefill_target";
    case Kind::kSendLocal: return "send_local";
    case Kind::kSendRelease: return "send_release";
    case Kind::kSendCancel: return "send_cancel";
    case Kind::kDeliverTokens: return "deliver_tokens";
    case Kind::kDeliverCached: return "deliver_cached";
    case Kind::kFinish: return "finish";
    case Kind::kFail: return "fail";
    case Kind::kArmTimer: return "arm_timer";
    case Kind::kAddInflight: return "add_inflight";
    case Kind::kAvoidNode: return "avoid_node";
    case Kind::kLogWarning: return "log_warning";
  }
  return "?";
}

}  // namespace tandem::router::cluster
