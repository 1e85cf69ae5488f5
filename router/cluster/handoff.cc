#include "router/cluster/handoff.h"

#include <algorithm>

namespace tandem::router::cluster {

using Kind = HandoffActionKind;
using State = HandoffState;

namespace {

HandoffAction Action(HandoffActionKind kind, NodeId node = 0, Epoch epoch = 0) {
  HandoffAction action;
  action.kind = kind;
  action.node = node;
  action.epoch = epoch;
  return action;
}

HandoffAction Finish(const GenerateResult& result) {
  HandoffAction finish = Action(HandoffActionKind::kFinish);
  finish.result = result;
  return finish;
}

}  // namespace

std::vector<HandoffAction> Handoff::Handle(const HandoffEvent& e) {
  out_.clear();
  switch (e.kind) {
    case HandoffEventKind::kStart: OnStart(e); break;
    case HandoffEventKind::kDecodePlaced: OnDecodePlaced(e); break;
    case HandoffEventKind::kPrefillPlaced: OnPrefillPlaced(e); break;
    case HandoffEventKind::kReserved: OnReserved(e); break;
    case HandoffEventKind::kReserveFailed: OnReserveFailed(e); break;
    case HandoffEventKind::kPrefillAcked:
    case HandoffEventKind::kLocalAcked:
      // A Cancel sent while this request was on its way may have reached the node
      // first and found nothing: the node would run a request nobody waits for.
      if (!Current(e)) Send(Kind::kSendCancel, e.node, e.epoch, "request ended");
      break;
    case HandoffEventKind::kPrefillFailed: OnPrefillFailed(e); break;
    case HandoffEventKind::kLocalFailed: OnLocalFailed(e); break;
    case HandoffEventKind::kTokens: OnTokens(e); break;
    case HandoffEventKind::kNodeDead: OnNodeDead(e); break;
    case HandoffEventKind::kNodeDraining: OnNodeDraining(e); break;
    case HandoffEventKind::kCancel:
      if (state_ != State::kEnded) EndAndCancel(e.status);
      break;
    case HandoffEventKind::kShutdown:
      if (state_ != State::kEnded) EndWithError(UnavailableError("router shutting down"));
      break;
    case HandoffEventKind::kTimerFired: OnTimerFired(e); break;
  }
  std::vector<HandoffAction> out;
  out.swap(out_);
  return out;
}

void Handoff::OnStart(const HandoffEvent&) {
  if (state_ == State::kNew) Place(Purpose::kDispatch);
}

void Handoff::OnDecodePlaced(const HandoffEvent& e) {
  if (state_ != State::kPlacing) return;
  if (purpose_ == Purpose::kMove) {
    if (e.node == 0) return EndAndCancel(UnavailableError("decode node " + std::to_string(moving_from_) + " died"));
    if (static_cast<int32_t>(generated_.size()) >= params_.max_tokens) {
      GenerateResult result;
      result.finish_reason = FinishReason::kLength;
      return End(Finish(result));
    }
    return MoveTo(e.node);
  }
  if (e.wait_for_room) {
    // Nothing was sent: the requests waiting for room go first, then this one.
    if (!WaitThenPlace(e.now_ns, /*for_room=*/true)) EndWithError(ResourceExhaustedError("no room on a decode node"));
    return;
  }
  if (e.node == 0) return EndWithError(UnavailableError("no live decode node"));
  decode_node_ = e.node;
  AddInflight(e.node, 1, 0);
  if (purpose_ == Purpose::kLocalOnly || e.local) {
    state_ = State::kLocal;
    SendLocal();
  } else {
    state_ = State::kReserving;
    Send(Kind::kSendReserve, decode_node_, epoch_);
    if (params_.prefill_with_reserve && retry_until_ == 0 && purpose_ == Purpose::kDispatch) {
      early_placing_ = true;
      Emit(Action(Kind::kPlacePrefill, decode_node_, epoch_));
    }
  }
}

// F1 (RELIABILITY.md): the request continues on `node` with prompt + the tokens so far.
void Handoff::MoveTo(NodeId node) {
  const NodeId left_prefill = prefill_node_;  // still computing the prompt for the dead node
  const Epoch left_epoch = epoch_;
  if (left_prefill != 0) AddInflight(left_prefill, 0, -prefill_tokens_);
  redispatches_++;
  decode_node_ = node;
  prefill_node_ = 0;
  prefill_tokens_ = 0;
  fell_back_ = true;
  state_ = State::kLocal;
  local_retries_ = 0;
  ++epoch_;
  AddInflight(node, 1, 0);
  Warn("request " + std::to_string(params_.request_id) + ": decode node " + std::to_string(moving_from_) +
       " died; continuing on decode node " + std::to_string(node) + " (epoch " + std::to_string(epoch_) + ")");
  if (left_prefill != 0) Send(Kind::kSendCancel, left_prefill, left_epoch, "decode node died");
  SendLocal();
}

void Handoff::OnPrefillPlaced(const HandoffEvent& e) {
  const bool early = state_ == State::kReserving && early_placing_;
  if (!early && state_ != State::kPlacingPrefill) return;
  early_placing_ = false;
  if (e.node == 0) {
    // Beside the Reserve: none now; one is chosen again once decode has answered.
    if (!early) ReleaseThenLocal();
    return;
  }
  state_ = early ? State::kReservingWithPrefill : State::kPrefilling;
  prefill_node_ = e.node;
  prefill_tokens_ = e.prefill_tokens;
  AddInflight(e.node, 0, e.prefill_tokens);
  HandoffAction send = Action(Kind::kSendPrefill, e.node, epoch_);
  send.decode_node = decode_node_;
  send.reply = std::move(reservation_);  // null beside the Reserve
  reservation_.reset();
  Emit(std::move(send));
}

void Handoff::OnReserved(const HandoffEvent& e) {
  if (!Current(e)) {
    // Abandoned meanwhile (cancel, node death, fallback): free what was reserved.
    return Send(Kind::kSendRelease, e.node, e.epoch);
  }
  if (state_ != State::kReserving && state_ != State::kReservingWithPrefill) return;
  early_placing_ = false;
  if (!e.reply || e.reply->needed_runs_size() == 0) {
    // The whole prompt is cached on decode: nothing to transfer.
    if (state_ == State::kReservingWithPrefill) CancelPrefill("whole prompt cached on decode");
    return ReleaseThenLocal();
  }
  if (state_ == State::kReservingWithPrefill) {
    state_ = State::kPrefilling;
    HandoffAction target = Action(Kind::kSendPrefillTarget, prefill_node_, epoch_);
    target.decode_node = decode_node_;
    target.reply = e.reply;
    return Emit(std::move(target));
  }
  state_ = State::kPlacingPrefill;
  reservation_ = e.reply;
  Emit(Action(Kind::kPlacePrefill, decode_node_, epoch_));
}

void Handoff::OnReserveFailed(const HandoffEvent& e) {
  if (!Current(e) || (state_ != State::kReserving && state_ != State::kReservingWithPrefill)) return;
  early_placing_ = false;
  if (state_ == State::kReservingWithPrefill) {
    CancelPrefill("reservation refused");
    state_ = State::kReserving;
  }
  if (PlaceAgainLater(e)) return;
  EndAndCancel(e.status);
}

void Handoff::OnPrefillFailed(const HandoffEvent& e) {
  if (!Current(e)) return;
  // A late failure from a prefill node left behind (dead, refused) is not the current one's.
  if (e.node != prefill_node_) return;
  if (state_ == State::kReservingWithPrefill) {
    Warn("request " + std::to_string(params_.request_id) + ": prefill node refused (" + e.status.ToString() +
         "); choosing one once decode has reserved");
    // Only after a timeout may the node hold it after all. A node that answered holds
    // nothing, and a Cancel would refuse the same epoch when it is chosen again.
    if (e.status.code() == StatusCode::kDeadlineExceeded) {
      CancelPrefill("prefill abandoned");
    } else {
      LeavePrefill();
    }
    state_ = State::kReserving;
    return;
  }
  if (state_ != State::kPrefilling) return;
  LeavePrefill();
  Warn("request " + std::to_string(params_.request_id) + ": prefill node refused (" + e.status.ToString() +
       "); prefilling on decode");
  // After a timeout the prefill node may hold it after all.
  Send(Kind::kSendCancel, e.node, e.epoch, "prefill abandoned");
  ReleaseThenLocal();
}

void Handoff::OnLocalFailed(const HandoffEvent& e) {
  if (!Current(e) || (state_ != State::kLocal && state_ != State::kDecoding)) return;
  // Tokens already came from the node: a late Ack changes nothing.
  if (state_ == State::kDecoding && e.status.code() == StatusCode::kDeadlineExceeded) return;
  if (e.status.code() == StatusCode::kAlreadyExists && ++local_retries_ <= kMaxLocalRetries) {
    // The decode node still holds the released epoch; it lets go within a step.
    state_ = State::kLocalRetry;
    return ArmTimer(kLocalRetryMs);
  }
  if (PlaceAgainLater(e)) return;
  EndAndCancel(e.status);
}

void Handoff::OnTokens(const HandoffEvent& e) {
  if (e.epoch != epoch_ || decode_node_ == 0 || e.node != decode_node_) return;
  const bool before_first = state_ == State::kReserving || state_ == State::kReservingWithPrefill ||
                            state_ == State::kPlacingPrefill || state_ == State::kPrefilling;
  if (!before_first && state_ != State::kLocal && state_ != State::kDecoding) return;
  // The remote prefill failed before the first token: prefill on decode instead, once.
  const bool fallback = e.finish == proto::FINISH_REASON_ERROR && before_first && e.tokens.empty() && !fell_back_;
  // Decode ended the request before its KV came (an abort, an error): the prefill node may
  // still hold the prompt, beside the Reserve waiting for a target that will not come.
  const bool prefill_unfinished = state_ == State::kReservingWithPrefill ||
                                  (before_first && e.tokens.empty() && e.finish != proto::FINISH_REASON_NONE);
  if (!fallback && (state_ != State::kLocal || !e.tokens.empty())) state_ = State::kDecoding;
  NodeId left_prefill = 0;  // a prefill node still holding the prompt when decode gave up
  if (prefill_node_ != 0 && (fallback || state_ == State::kDecoding)) {
    if (fallback || prefill_unfinished) left_prefill = prefill_node_;
    LeavePrefill();
  }
  if (!fallback && left_prefill != 0) Send(Kind::kSendCancel, left_prefill, e.epoch, "decode ended the request");
  if (fallback) {
    Warn("request " + std::to_string(params_.request_id) + ": remote prefill failed (" + e.status.message() +
         "); prefilling on decode");
    if (left_prefill != 0) Send(Kind::kSendCancel, left_prefill, e.epoch, "handoff failed");
    return ReleaseThenLocal();
  }
  if (e.cached_tokens > 0 && e.finish == proto::FINISH_REASON_NONE) {
    HandoffAction cached = Action(Kind::kDeliverCached);
    cached.cached_tokens = ClampCached(e.cached_tokens);
    Emit(std::move(cached));
  }
  if (!e.tokens.empty()) {
    generated_.insert(generated_.end(), e.tokens.begin(), e.tokens.end());
    HandoffAction deliver = Action(Kind::kDeliverTokens);
    deliver.tokens = e.tokens;
    deliver.logprobs = e.logprobs;
    deliver.prompt_logprobs = e.prompt_logprobs;
    deliver.stage_times = e.stage_times;
    Emit(std::move(deliver));
  }
  switch (e.finish) {
    case proto::FINISH_REASON_NONE: return;
    case proto::FINISH_REASON_STOP:
    case proto::FINISH_REASON_LENGTH: {
      GenerateResult result;
      result.finish_reason = e.finish == proto::FINISH_REASON_STOP ? FinishReason::kStop : FinishReason::kLength;
      // After a move the node's prompt includes generated tokens: only the client's prompt counts.
      result.num_cached_prompt_tokens = ClampCached(e.cached_tokens);
      return End(Finish(result));
    }
    case proto::FINISH_REASON_ABORT: return EndWithError(CancelledError("request aborted by the decode node"));
    default: return EndWithError(e.status.ok() ? InternalError("decode node reported an error") : e.status);
  }
}

void Handoff::OnNodeDead(const HandoffEvent& e) {
  if (e.node == 0 || state_ == State::kNew || state_ == State::kPlacing || state_ == State::kEnded) return;
  if (e.node == decode_node_) {
    if (redispatches_ >= kMaxRedispatches) {
      return EndAndCancel(UnavailableError("decode node " + std::to_string(e.node) + " died"));
    }
    moving_from_ = e.node;
    return Place(Purpose::kMove);
  }
  if (e.node == prefill_node_) {
    // Its prompt is gone; the node is gone from the router's counts too.
    prefill_node_ = 0;
    prefill_tokens_ = 0;
    if (state_ == State::kPrefilling) ReleaseThenLocal();
    if (state_ == State::kReservingWithPrefill) state_ = State::kReserving;
  }
}

// Drain moves work, it does not end it: a request the draining node has not started
// to stream is placed again (epoch + 1) while another decode node can take it; one
// that streams finishes there (the node exits once idle).
void Handoff::OnNodeDraining(const HandoffEvent& e) {
  if (!e.elsewhere || e.node == 0 || e.node != decode_node_) return;
  if (state_ != State::kReserving && state_ != State::kReservingWithPrefill && state_ != State::kPlacingPrefill &&
      state_ != State::kPrefilling && state_ != State::kLocal && state_ != State::kLocalRetry) {
    return;
  }
  const NodeId prefill = prefill_node_;
  const Epoch left = epoch_;
  AddInflight(decode_node_, -1, 0);
  if (prefill != 0) LeavePrefill();
  Warn("request " + std::to_string(params_.request_id) + ": decode node " + std::to_string(e.node) +
       " is draining; placing it again (epoch " + std::to_string(left + 1) + ")");
  Send(Kind::kSendCancel, e.node, left, "node draining");
  if (prefill != 0) Send(Kind::kSendCancel, prefill, left, "node draining");
  decode_node_ = 0;
  reservation_.reset();
  ++epoch_;
  Place(PurposeAgain());
}

void Handoff::OnTimerFired(const HandoffEvent& e) {
  if (e.timer_seq != timer_seq_) return;
  if (state_ == State::kBackoff) {
    Place(PurposeAgain());
  } else if (state_ == State::kLocalRetry) {
    state_ = State::kLocal;
    SendLocal();
  }
}

void Handoff::Place(Purpose purpose) {
  state_ = State::kPlacing;
  early_placing_ = false;
  purpose_ = purpose;
  HandoffAction place = Action(Kind::kPlaceDecode);
  place.local_only = purpose != Purpose::kDispatch;
  place.may_wait = purpose != Purpose::kMove;
  place.tokens = generated_;
  Emit(std::move(place));
}

void Handoff::ReleaseThenLocal() {
  fell_back_ = true;
  state_ = State::kLocal;
  reservation_.reset();
  const Epoch released = epoch_++;
  Send(Kind::kSendRelease, decode_node_, released);
  SendLocal();
}

bool Handoff::PlaceAgainLater(const HandoffEvent& e) {
  const StatusCode code = e.status.code();
  if (code != StatusCode::kResourceExhausted && code != StatusCode::kUnavailable &&
      code != StatusCode::kDeadlineExceeded) {
    return false;
  }
  if (!RetryWindowOpen(e.now_ns)) return false;
  // Unavailable: the node is draining or going (a closed connection was handled as a death
  // before this); a timeout: it is stopped or overloaded. Either way placement skips it
  // until its next heartbeat. A timeout may leave the request on the node: cancel it there.
  if (code != StatusCode::kResourceExhausted) Emit(Action(Kind::kAvoidNode, e.node));
  if (code == StatusCode::kDeadlineExceeded) Send(Kind::kSendCancel, e.node, e.epoch, "call timed out");
  AddInflight(decode_node_, -1, 0);  // the next placement counts its node
  decode_node_ = 0;
  local_retries_ = 0;
  ++epoch_;
  return WaitThenPlace(e.now_ns, code == StatusCode::kResourceExhausted);
}

bool Handoff::RetryWindowOpen(Nanos now_ns) {
  if (retry_until_ == 0) retry_until_ = now_ns + params_.no_room_retry_ms * 1'000'000;
  return now_ns < retry_until_;
}

bool Handoff::WaitThenPlace(Nanos now_ns, bool for_room) {
  if (!RetryWindowOpen(now_ns)) return false;
  backoff_ms_ = std::clamp<int64_t>(2 * backoff_ms_, kMinBackoffMs, kMaxBackoffMs);
  state_ = State::kBackoff;
  ArmTimer(backoff_ms_, for_room);
  return true;
}

Handoff::Purpose Handoff::PurposeAgain() const {
  // A request already on the local path (prefill failed, or moved with tokens delivered)
  // stays on it: prompt + tokens so far, to one decode node.
  return fell_back_ || !generated_.empty() ? Purpose::kLocalOnly : Purpose::kDispatch;
}

void Handoff::End(HandoffAction terminal) {
  AddInflight(decode_node_, -1, 0);
  if (prefill_node_ != 0) AddInflight(prefill_node_, 0, -prefill_tokens_);
  state_ = State::kEnded;
  reservation_.reset();
  Emit(std::move(terminal));
}

void Handoff::EndWithError(const Status& status) {
  HandoffAction fail = Action(Kind::kFail);
  fail.status = status;
  End(std::move(fail));
}

void Handoff::EndAndCancel(const Status& status) {
  // Ended before the nodes hear of it: a node's answer to this Cancel (a failed KV
  // handoff) must not look like a prefill failure and start a newer epoch.
  const NodeId decode = decode_node_;
  const NodeId prefill = prefill_node_;
  EndWithError(status);
  if (decode != 0) Send(Kind::kSendCancel, decode, epoch_, "cancelled by the router");
  if (prefill != 0) Send(Kind::kSendCancel, prefill, epoch_, "cancelled by the router");
}

void Handoff::LeavePrefill() {
  AddInflight(prefill_node_, 0, -prefill_tokens_);
  prefill_node_ = 0;
  prefill_tokens_ = 0;
}

void Handoff::CancelPrefill(std::string reason) {
  const NodeId prefill = prefill_node_;
  LeavePrefill();
  Send(Kind::kSendCancel, prefill, epoch_, std::move(reason));
}

void Handoff::ArmTimer(int64_t delay_ms, bool wait_for_room) {
  HandoffAction arm = Action(Kind::kArmTimer);
  arm.delay_ms = delay_ms;
  arm.wait_for_room = wait_for_room;
  arm.timer_seq = ++timer_seq_;
  Emit(std::move(arm));
}

int32_t Handoff::ClampCached(int32_t cached) const { return std::clamp(cached, 0, params_.prompt_len); }

void Handoff::SendLocal() {
  HandoffAction send = Action(Kind::kSendLocal, decode_node_, epoch_);
  send.tokens = generated_;
  Emit(std::move(send));
}

void Handoff::Send(HandoffActionKind kind, NodeId node, Epoch epoch, std::string reason) {
  HandoffAction send = Action(kind, node, epoch);
  send.text = std::move(reason);
  Emit(std::move(send));
}

void Handoff::AddInflight(NodeId node, int32_t requests, int64_t prefill_tokens) {
  if (node == 0) return;
  HandoffAction add = Action(Kind::kAddInflight, node);
  add.requests = requests;
  add.prefill_tokens = prefill_tokens;
  Emit(std::move(add));
}

void Handoff::Warn(std::string text) {
  HandoffAction warn = Action(Kind::kLogWarning);
  warn.text = std::move(text);
  Emit(std::move(warn));
}

}  // namespace tandem::router::cluster
