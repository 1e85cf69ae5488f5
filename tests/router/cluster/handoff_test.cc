// The router's Handoff state machine without sockets or threads: every
// (state, event) pair of docs/protocol.md's transition table, then the paths
// that span several events (epochs, backoff, moves, accounting).
#include "router/cluster/handoff.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

namespace tandem::router::cluster {
namespace {

using A = HandoffActionKind;
using E = HandoffEventKind;
using S = HandoffState;

constexpr NodeId kDecode = 1;
constexpr NodeId kOther = 2;  // another decode node
constexpr NodeId kPrefill = 3;
constexpr int32_t kPromptLen = 5;
constexpr Nanos kMs = 1'000'000;

HandoffParams Params(int64_t no_room_retry_ms = 30000, bool prefill_with_reserve = true) {
  return HandoffParams{.request_id = 42,
                       .prompt_len = kPromptLen,
                       .max_tokens = 8,
                       .no_room_retry_ms = no_room_retry_ms,
                       .prefill_with_reserve = prefill_with_reserve};
}

HandoffEvent PrefillPlaced(NodeId node, int64_t tokens = 10) {
  HandoffEvent e;
  e.kind = HandoffEventKind::kPrefillPlaced;
  e.node = node;
  e.prefill_tokens = tokens;
  return e;
}

std::shared_ptr<const proto::ReserveReply> Reservation(int runs) {
  auto reply = std::make_shared<proto::ReserveReply>();
  for (int i = 0; i < runs; ++i) {
    proto::BlockRun* run = reply->add_needed_runs();
    run->set_first_block(i);
    run->set_num_blocks(1);
  }
  return reply;
}

HandoffEvent Ev(E kind, NodeId node = 0, Epoch epoch = 0) {
  HandoffEvent e;
  e.kind = kind;
  e.node = node;
  e.epoch = epoch;
  return e;
}

HandoffEvent Failed(E kind, NodeId node, Epoch epoch, Status status, Nanos now_ns = 0) {
  HandoffEvent e = Ev(kind, node, epoch);
  e.status = std::move(status);
  e.now_ns = now_ns;
  return e;
}

HandoffEvent Placed(NodeId node, bool local) {
  HandoffEvent e = Ev(E::kDecodePlaced, node);
  e.local = local;
  return e;
}

HandoffEvent Tokens(NodeId node, Epoch epoch, std::vector<TokenId> tokens,
                    proto::FinishReason finish = proto::FINISH_REASON_NONE, int32_t cached = 0) {
  HandoffEvent e = Ev(E::kTokens, node, epoch);
  e.tokens = std::move(tokens);
  e.finish = finish;
  e.cached_tokens = cached;
  return e;
}

std::vector<A> Kinds(const std::vector<HandoffAction>& actions) {
  std::vector<A> kinds;
  for (const HandoffAction& a : actions) kinds.push_back(a.kind);
  return kinds;
}

std::string Names(const std::vector<A>& kinds) {
  std::string s = "[";
  for (A k : kinds) s += std::string(s.size() > 1 ? " " : "") + HandoffActionName(k);
  return s + "]";
}

// A machine brought into `state` through the events that lead there.
Handoff MachineIn(S state) {
  Handoff m(Params());
  auto step = [&m](const HandoffEvent& e) { m.Handle(e); };
  if (state == S::kNew) return m;
  step(Ev(E::kStart));
  if (state == S::kPlacing) return m;
  const bool local = state == S::kLocal || state == S::kLocalRetry || state == S::kDecoding || state == S::kEnded;
  step(Placed(kDecode, local));
  if (state == S::kReserving || state == S::kLocal) return m;
  if (state == S::kReservingWithPrefill) {
    step(PrefillPlaced(kPrefill));  // the prefill node chosen beside the Reserve
    EXPECT_EQ(m.state(), state);
    return m;
  }
  if (state == S::kLocalRetry) {
    step(Failed(E::kLocalFailed, kDecode, 1, AlreadyExistsError("older epoch")));
  } else if (state == S::kDecoding) {
    step(Tokens(kDecode, 1, {7}));
  } else if (state == S::kEnded) {
    step(Failed(E::kCancel, 0, 0, CancelledError("client left")));
  } else if (state == S::kBackoff) {
    step(Failed(E::kReserveFailed, kDecode, 1, ResourceExhaustedError("no room")));
  } else {
    HandoffEvent reserved = Ev(E::kReserved, kDecode, 1);
    reserved.reply = Reservation(1);
    step(reserved);
    if (state == S::kPrefilling) {
      HandoffEvent placed = Ev(E::kPrefillPlaced, kPrefill);
      placed.prefill_tokens = 10;
      step(placed);
    }
  }
  EXPECT_EQ(m.state(), state) << "the path to " << HandoffStateName(state);
  return m;
}

// The event of `kind` addressed to the machine as it stands: its epoch, its decode node
// (kDecode while it has none), the prefill node for prefill events; failures are Unavailable
// (the node cannot take it now: it is placed again elsewhere).
HandoffEvent EventFor(E kind, const Handoff& m) {
  const NodeId decode = m.decode_node() != 0 ? m.decode_node() : kDecode;
  switch (kind) {
    case E::kDecodePlaced: return Placed(kDecode, false);
    case E::kPrefillPlaced: {
      HandoffEvent e = Ev(kind, kPrefill);
      e.prefill_tokens = 10;
      return e;
    }
    case E::kReserved: {
      HandoffEvent e = Ev(kind, decode, m.epoch());
      e.reply = Reservation(1);
      return e;
    }
    case E::kPrefillAcked: return Ev(kind, kPrefill, m.epoch());
    case E::kPrefillFailed: return Failed(kind, kPrefill, m.epoch(), UnavailableError("refused"));
    case E::kReserveFailed:
    case E::kLocalFailed: return Failed(kind, decode, m.epoch(), UnavailableError("refused"));
    case E::kLocalAcked: return Ev(kind, decode, m.epoch());
    case E::kTokens: return Tokens(decode, m.epoch(), {7});
    case E::kNodeDead: return Ev(kind, kDecode);
    case E::kNodeDraining: {
      HandoffEvent e = Ev(kind, kDecode);
      e.elsewhere = true;
      return e;
    }
    case E::kCancel: return Failed(kind, 0, 0, CancelledError("client left"));
    case E::kTimerFired: {
      HandoffEvent e = Ev(kind);
      e.timer_seq = 1;
      return e;
    }
    default: return Ev(kind);
  }
}

struct Row {
  S state;
  E event;
  S next;
  std::vector<A> actions;
};

// docs/protocol.md "Router handoff": one row per (state, event).
const std::vector<Row>& TransitionTable() {
  static const std::vector<Row> rows = {
      // kNew: only start and the ends do anything.
      {S::kNew, E::kStart, S::kPlacing, {A::kPlaceDecode}},
      {S::kNew, E::kDecodePlaced, S::kNew, {}},
      {S::kNew, E::kPrefillPlaced, S::kNew, {}},
      {S::kNew, E::kReserved, S::kNew, {}},
      {S::kNew, E::kReserveFailed, S::kNew, {}},
      {S::kNew, E::kPrefillAcked, S::kNew, {}},
      {S::kNew, E::kPrefillFailed, S::kNew, {}},
      {S::kNew, E::kLocalAcked, S::kNew, {}},
      {S::kNew, E::kLocalFailed, S::kNew, {}},
      {S::kNew, E::kTokens, S::kNew, {}},
      {S::kNew, E::kNodeDead, S::kNew, {}},
      {S::kNew, E::kNodeDraining, S::kNew, {}},
      {S::kNew, E::kCancel, S::kEnded, {A::kFail}},
      {S::kNew, E::kShutdown, S::kEnded, {A::kFail}},
      {S::kNew, E::kTimerFired, S::kNew, {}},
      // kPlacing: waits for its placement.
      {S::kPlacing, E::kStart, S::kPlacing, {}},
      {S::kPlacing, E::kDecodePlaced, S::kReserving, {A::kAddInflight, A::kSendReserve, A::kPlacePrefill}},
      {S::kPlacing, E::kPrefillPlaced, S::kPlacing, {}},
      {S::kPlacing, E::kReserved, S::kPlacing, {}},
      {S::kPlacing, E::kReserveFailed, S::kPlacing, {}},
      {S::kPlacing, E::kPrefillAcked, S::kPlacing, {}},
      {S::kPlacing, E::kPrefillFailed, S::kPlacing, {}},
      {S::kPlacing, E::kLocalAcked, S::kPlacing, {}},
      {S::kPlacing, E::kLocalFailed, S::kPlacing, {}},
      {S::kPlacing, E::kTokens, S::kPlacing, {}},
      {S::kPlacing, E::kNodeDead, S::kPlacing, {}},
      {S::kPlacing, E::kNodeDraining, S::kPlacing, {}},
      {S::kPlacing, E::kCancel, S::kEnded, {A::kFail}},
      {S::kPlacing, E::kShutdown, S::kEnded, {A::kFail}},
      {S::kPlacing, E::kTimerFired, S::kPlacing, {}},
      // kReserving: Reserve at the decode node.
      {S::kReserving, E::kStart, S::kReserving, {}},
      {S::kReserving, E::kDecodePlaced, S::kReserving, {}},
      {S::kReserving, E::kPrefillPlaced, S::kReservingWithPrefill, {A::kAddInflight, A::kSendPrefill}},
      {S::kReserving, E::kReserved, S::kPlacingPrefill, {A::kPlacePrefill}},
      {S::kReserving, E::kReserveFailed, S::kBackoff, {A::kAvoidNode, A::kAddInflight, A::kArmTimer}},
      {S::kReserving, E::kPrefillAcked, S::kReserving, {}},
      {S::kReserving, E::kPrefillFailed, S::kReserving, {}},
      {S::kReserving, E::kLocalAcked, S::kReserving, {}},
      {S::kReserving, E::kLocalFailed, S::kReserving, {}},
      {S::kReserving, E::kTokens, S::kDecoding, {A::kDeliverTokens}},
      {S::kReserving, E::kNodeDead, S::kPlacing, {A::kPlaceDecode}},
      {S::kReserving,
       E::kNodeDraining,
       S::kPlacing,
       {A::kAddInflight, A::kLogWarning, A::kSendCancel, A::kPlaceDecode}},
      {S::kReserving, E::kCancel, S::kEnded, {A::kAddInflight, A::kFail, A::kSendCancel}},
      {S::kReserving, E::kShutdown, S::kEnded, {A::kAddInflight, A::kFail}},
      {S::kReserving, E::kTimerFired, S::kReserving, {}},
      // kReservingWithPrefill: Reserve at the decode node, the PrefillRequest (reservation
      // follows) at the prefill node.
      {S::kReservingWithPrefill, E::kStart, S::kReservingWithPrefill, {}},
      {S::kReservingWithPrefill, E::kDecodePlaced, S::kReservingWithPrefill, {}},
      {S::kReservingWithPrefill, E::kPrefillPlaced, S::kReservingWithPrefill, {}},
      {S::kReservingWithPrefill, E::kReserved, S::kPrefilling, {A::kSendPrefillTarget}},
      {S::kReservingWithPrefill,
       E::kReserveFailed,
       S::kBackoff,
       {A::kAddInflight, A::kSendCancel, A::kAvoidNode, A::kAddInflight, A::kArmTimer}},
      {S::kReservingWithPrefill, E::kPrefillAcked, S::kReservingWithPrefill, {}},
      {S::kReservingWithPrefill, E::kPrefillFailed, S::kReserving, {A::kLogWarning, A::kAddInflight}},
      {S::kReservingWithPrefill, E::kLocalAcked, S::kReservingWithPrefill, {}},
      {S::kReservingWithPrefill, E::kLocalFailed, S::kReservingWithPrefill, {}},
      {S::kReservingWithPrefill, E::kTokens, S::kDecoding, {A::kAddInflight, A::kSendCancel, A::kDeliverTokens}},
      {S::kReservingWithPrefill, E::kNodeDead, S::kPlacing, {A::kPlaceDecode}},
      {S::kReservingWithPrefill,
       E::kNodeDraining,
       S::kPlacing,
       {A::kAddInflight, A::kAddInflight, A::kLogWarning, A::kSendCancel, A::kSendCancel, A::kPlaceDecode}},
      {S::kReservingWithPrefill,
       E::kCancel,
       S::kEnded,
       {A::kAddInflight, A::kAddInflight, A::kFail, A::kSendCancel, A::kSendCancel}},
      {S::kReservingWithPrefill, E::kShutdown, S::kEnded, {A::kAddInflight, A::kAddInflight, A::kFail}},
      {S::kReservingWithPrefill, E::kTimerFired, S::kReservingWithPrefill, {}},
      // kPlacingPrefill: the reservation is held, a prefill node is being chosen.
      {S::kPlacingPrefill, E::kStart, S::kPlacingPrefill, {}},
      {S::kPlacingPrefill, E::kDecodePlaced, S::kPlacingPrefill, {}},
      {S::kPlacingPrefill, E::kPrefillPlaced, S::kPrefilling, {A::kAddInflight, A::kSendPrefill}},
      {S::kPlacingPrefill, E::kReserved, S::kPlacingPrefill, {}},
      {S::kPlacingPrefill, E::kReserveFailed, S::kPlacingPrefill, {}},
      {S::kPlacingPrefill, E::kPrefillAcked, S::kPlacingPrefill, {}},
      {S::kPlacingPrefill, E::kPrefillFailed, S::kPlacingPrefill, {}},
      {S::kPlacingPrefill, E::kLocalAcked, S::kPlacingPrefill, {}},
      {S::kPlacingPrefill, E::kLocalFailed, S::kPlacingPrefill, {}},
      {S::kPlacingPrefill, E::kTokens, S::kDecoding, {A::kDeliverTokens}},
      {S::kPlacingPrefill, E::kNodeDead, S::kPlacing, {A::kPlaceDecode}},
      {S::kPlacingPrefill,
       E::kNodeDraining,
       S::kPlacing,
       {A::kAddInflight, A::kLogWarning, A::kSendCancel, A::kPlaceDecode}},
      {S::kPlacingPrefill, E::kCancel, S::kEnded, {A::kAddInflight, A::kFail, A::kSendCancel}},
      {S::kPlacingPrefill, E::kShutdown, S::kEnded, {A::kAddInflight, A::kFail}},
      {S::kPlacingPrefill, E::kTimerFired, S::kPlacingPrefill, {}},
      // kPrefilling: the prefill node computes, the first tokens come from decode.
      {S::kPrefilling, E::kStart, S::kPrefilling, {}},
      {S::kPrefilling, E::kDecodePlaced, S::kPrefilling, {}},
      {S::kPrefilling, E::kPrefillPlaced, S::kPrefilling, {}},
      {S::kPrefilling, E::kReserved, S::kPrefilling, {}},
      {S::kPrefilling, E::kReserveFailed, S::kPrefilling, {}},
      {S::kPrefilling, E::kPrefillAcked, S::kPrefilling, {}},
      {S::kPrefilling,
       E::kPrefillFailed,
       S::kLocal,
       {A::kAddInflight, A::kLogWarning, A::kSendCancel, A::kSendRelease, A::kSendLocal}},
      {S::kPrefilling, E::kLocalAcked, S::kPrefilling, {}},
      {S::kPrefilling, E::kLocalFailed, S::kPrefilling, {}},
      {S::kPrefilling, E::kTokens, S::kDecoding, {A::kAddInflight, A::kDeliverTokens}},
      {S::kPrefilling, E::kNodeDead, S::kPlacing, {A::kPlaceDecode}},
      {S::kPrefilling,
       E::kNodeDraining,
       S::kPlacing,
       {A::kAddInflight, A::kAddInflight, A::kLogWarning, A::kSendCancel, A::kSendCancel, A::kPlaceDecode}},
      {S::kPrefilling,
       E::kCancel,
       S::kEnded,
       {A::kAddInflight, A::kAddInflight, A::kFail, A::kSendCancel, A::kSendCancel}},
      {S::kPrefilling, E::kShutdown, S::kEnded, {A::kAddInflight, A::kAddInflight, A::kFail}},
      {S::kPrefilling, E::kTimerFired, S::kPrefilling, {}},
      // kLocal: the decode node prefills itself.
      {S::kLocal, E::kStart, S::kLocal, {}},
      {S::kLocal, E::kDecodePlaced, S::kLocal, {}},
      {S::kLocal, E::kPrefillPlaced, S::kLocal, {}},
      {S::kLocal, E::kReserved, S::kLocal, {}},
      {S::kLocal, E::kReserveFailed, S::kLocal, {}},
      {S::kLocal, E::kPrefillAcked, S::kLocal, {}},
      {S::kLocal, E::kPrefillFailed, S::kLocal, {}},
      {S::kLocal, E::kLocalAcked, S::kLocal, {}},
      {S::kLocal, E::kLocalFailed, S::kBackoff, {A::kAvoidNode, A::kAddInflight, A::kArmTimer}},
      {S::kLocal, E::kTokens, S::kDecoding, {A::kDeliverTokens}},
      {S::kLocal, E::kNodeDead, S::kPlacing, {A::kPlaceDecode}},
      {S::kLocal, E::kNodeDraining, S::kPlacing, {A::kAddInflight, A::kLogWarning, A::kSendCancel, A::kPlaceDecode}},
      {S::kLocal, E::kCancel, S::kEnded, {A::kAddInflight, A::kFail, A::kSendCancel}},
      {S::kLocal, E::kShutdown, S::kEnded, {A::kAddInflight, A::kFail}},
      {S::kLocal, E::kTimerFired, S::kLocal, {}},
      // kLocalRetry: the local request goes again when the timer fires.
      {S::kLocalRetry, E::kStart, S::kLocalRetry, {}},
      {S::kLocalRetry, E::kDecodePlaced, S::kLocalRetry, {}},
      {S::kLocalRetry, E::kPrefillPlaced, S::kLocalRetry, {}},
      {S::kLocalRetry, E::kReserved, S::kLocalRetry, {}},
      {S::kLocalRetry, E::kReserveFailed, S::kLocalRetry, {}},
      {S::kLocalRetry, E::kPrefillAcked, S::kLocalRetry, {}},
      {S::kLocalRetry, E::kPrefillFailed, S::kLocalRetry, {}},
      {S::kLocalRetry, E::kLocalAcked, S::kLocalRetry, {}},
      {S::kLocalRetry, E::kLocalFailed, S::kLocalRetry, {}},
      {S::kLocalRetry, E::kTokens, S::kLocalRetry, {}},
      {S::kLocalRetry, E::kNodeDead, S::kPlacing, {A::kPlaceDecode}},
      {S::kLocalRetry,
       E::kNodeDraining,
       S::kPlacing,
       {A::kAddInflight, A::kLogWarning, A::kSendCancel, A::kPlaceDecode}},
      {S::kLocalRetry, E::kCancel, S::kEnded, {A::kAddInflight, A::kFail, A::kSendCancel}},
      {S::kLocalRetry, E::kShutdown, S::kEnded, {A::kAddInflight, A::kFail}},
      {S::kLocalRetry, E::kTimerFired, S::kLocal, {A::kSendLocal}},
      // kBackoff: no node held; placed again when the timer fires.
      {S::kBackoff, E::kStart, S::kBackoff, {}},
      {S::kBackoff, E::kDecodePlaced, S::kBackoff, {}},
      {S::kBackoff, E::kPrefillPlaced, S::kBackoff, {}},
      {S::kBackoff, E::kReserved, S::kBackoff, {}},
      {S::kBackoff, E::kReserveFailed, S::kBackoff, {}},
      {S::kBackoff, E::kPrefillAcked, S::kBackoff, {}},
      {S::kBackoff, E::kPrefillFailed, S::kBackoff, {}},
      {S::kBackoff, E::kLocalAcked, S::kBackoff, {}},
      {S::kBackoff, E::kLocalFailed, S::kBackoff, {}},
      {S::kBackoff, E::kTokens, S::kBackoff, {}},
      {S::kBackoff, E::kNodeDead, S::kBackoff, {}},
      {S::kBackoff, E::kNodeDraining, S::kBackoff, {}},
      {S::kBackoff, E::kCancel, S::kEnded, {A::kFail}},
      {S::kBackoff, E::kShutdown, S::kEnded, {A::kFail}},
      {S::kBackoff, E::kTimerFired, S::kPlacing, {A::kPlaceDecode}},
      // kDecoding: tokens flow.
      {S::kDecoding, E::kStart, S::kDecoding, {}},
      {S::kDecoding, E::kDecodePlaced, S::kDecoding, {}},
      {S::kDecoding, E::kPrefillPlaced, S::kDecoding, {}},
      {S::kDecoding, E::kReserved, S::kDecoding, {}},
      {S::kDecoding, E::kReserveFailed, S::kDecoding, {}},
      {S::kDecoding, E::kPrefillAcked, S::kDecoding, {}},
      {S::kDecoding, E::kPrefillFailed, S::kDecoding, {}},
      {S::kDecoding, E::kLocalAcked, S::kDecoding, {}},
      {S::kDecoding, E::kLocalFailed, S::kBackoff, {A::kAvoidNode, A::kAddInflight, A::kArmTimer}},
      {S::kDecoding, E::kTokens, S::kDecoding, {A::kDeliverTokens}},
      {S::kDecoding, E::kNodeDead, S::kPlacing, {A::kPlaceDecode}},
      {S::kDecoding, E::kNodeDraining, S::kDecoding, {}},
      {S::kDecoding, E::kCancel, S::kEnded, {A::kAddInflight, A::kFail, A::kSendCancel}},
      {S::kDecoding, E::kShutdown, S::kEnded, {A::kAddInflight, A::kFail}},
      {S::kDecoding, E::kTimerFired, S::kDecoding, {}},
      // kEnded: absorbs everything; late acceptances are undone.
      {S::kEnded, E::kStart, S::kEnded, {}},
      {S::kEnded, E::kDecodePlaced, S::kEnded, {}},
      {S::kEnded, E::kPrefillPlaced, S::kEnded, {}},
      {S::kEnded, E::kReserved, S::kEnded, {A::kSendRelease}},
      {S::kEnded, E::kReserveFailed, S::kEnded, {}},
      {S::kEnded, E::kPrefillAcked, S::kEnded, {A::kSendCancel}},
      {S::kEnded, E::kPrefillFailed, S::kEnded, {}},
      {S::kEnded, E::kLocalAcked, S::kEnded, {A::kSendCancel}},
      {S::kEnded, E::kLocalFailed, S::kEnded, {}},
      {S::kEnded, E::kTokens, S::kEnded, {}},
      {S::kEnded, E::kNodeDead, S::kEnded, {}},
      {S::kEnded, E::kNodeDraining, S::kEnded, {}},
      {S::kEnded, E::kCancel, S::kEnded, {}},
      {S::kEnded, E::kShutdown, S::kEnded, {}},
      {S::kEnded, E::kTimerFired, S::kEnded, {}},
  };
  return rows;
}

TEST(HandoffTest, TableCoversEveryStateEventPair) {
  std::map<std::pair<int, int>, int> seen;
  for (const Row& row : TransitionTable()) seen[{static_cast<int>(row.state), static_cast<int>(row.event)}]++;
  EXPECT_EQ(seen.size(), static_cast<size_t>(kNumHandoffStates * kNumHandoffEventKinds));
  for (const auto& [pair, count] : seen) EXPECT_EQ(count, 1) << pair.first << " x " << pair.second;
}

TEST(HandoffTest, EveryStateEventPairFollowsTheTable) {
  for (const Row& row : TransitionTable()) {
    Handoff m = MachineIn(row.state);
    const std::vector<HandoffAction> actions = m.Handle(EventFor(row.event, m));
    EXPECT_EQ(m.state(), row.next) << HandoffStateName(row.state) << " x " << HandoffEventName(row.event);
    EXPECT_EQ(Names(Kinds(actions)), Names(row.actions))
        << HandoffStateName(row.state) << " x " << HandoffEventName(row.event);
  }
}

// Events of another epoch or from another node change nothing (except that a late
// acceptance at an old epoch is undone at the node that sent it).
TEST(HandoffTest, StaleEventsAreFenced) {
  for (S state : {S::kReserving, S::kPrefilling, S::kLocal, S::kDecoding}) {
    for (E kind : {E::kReserveFailed, E::kPrefillFailed, E::kLocalFailed, E::kTokens}) {
      Handoff m = MachineIn(state);
      HandoffEvent old = EventFor(kind, m);
      old.epoch = m.epoch() + 1;
      EXPECT_TRUE(m.Handle(old).empty()) << HandoffStateName(state) << " x " << HandoffEventName(kind);
      EXPECT_EQ(m.state(), state);
    }
    Handoff m = MachineIn(state);
    EXPECT_TRUE(m.Handle(Tokens(kOther, m.epoch(), {7})).empty()) << "tokens from a node it is not on";
  }
  Handoff m = MachineIn(S::kLocal);
  m.Handle(Failed(E::kNodeDead, kDecode, 0, Status::Ok()));
  m.Handle(Placed(kOther, true));  // moved: epoch 2 on kOther
  HandoffEvent late = Ev(E::kReserved, kDecode, 1);
  late.reply = Reservation(1);
  std::vector<HandoffAction> out = m.Handle(late);
  ASSERT_EQ(Kinds(out), (std::vector<A>{A::kSendRelease}));
  EXPECT_EQ(out[0].node, kDecode);
  EXPECT_EQ(out[0].epoch, 1u);
  out = m.Handle(Ev(E::kLocalAcked, kDecode, 1));
  ASSERT_EQ(Kinds(out), (std::vector<A>{A::kSendCancel}));
  EXPECT_EQ(out[0].node, kDecode);
  HandoffEvent stale_timer = Ev(E::kTimerFired);
  stale_timer.timer_seq = 99;
  EXPECT_TRUE(MachineIn(S::kBackoff).Handle(stale_timer).empty());
}

TEST(HandoffTest, DisaggregatedPathSendsEachStepAtEpochOne) {
  Handoff m(Params(30000, /*prefill_with_reserve=*/false));
  EXPECT_EQ(Kinds(m.Handle(Ev(E::kStart))), (std::vector<A>{A::kPlaceDecode}));
  std::vector<HandoffAction> out = m.Handle(Placed(kDecode, false));
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].node, kDecode);
  EXPECT_EQ(out[0].requests, 1);
  EXPECT_EQ(out[1].kind, A::kSendReserve);
  EXPECT_EQ(out[1].epoch, 1u);
  HandoffEvent reserved = Ev(E::kReserved, kDecode, 1);
  reserved.reply = Reservation(2);
  out = m.Handle(reserved);
  ASSERT_EQ(Kinds(out), (std::vector<A>{A::kPlacePrefill}));
  EXPECT_EQ(out[0].node, kDecode);
  HandoffEvent placed = Ev(E::kPrefillPlaced, kPrefill);
  placed.prefill_tokens = 4;
  out = m.Handle(placed);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].prefill_tokens, 4);
  EXPECT_EQ(out[1].node, kPrefill);
  EXPECT_EQ(out[1].decode_node, kDecode);
  EXPECT_EQ(out[1].reply->needed_runs_size(), 2);
  EXPECT_TRUE(m.Handle(Ev(E::kPrefillAcked, kPrefill, 1)).empty());
  // The first tokens: the prefill node is no longer counted; cached tokens reported early.
  out = m.Handle(Tokens(kDecode, 1, {9}, proto::FINISH_REASON_NONE, 3));
  ASSERT_EQ(Kinds(out), (std::vector<A>{A::kAddInflight, A::kDeliverCached, A::kDeliverTokens}));
  EXPECT_EQ(out[0].node, kPrefill);
  EXPECT_EQ(out[0].prefill_tokens, -4);
  EXPECT_EQ(out[1].cached_tokens, 3);
  out = m.Handle(Tokens(kDecode, 1, {10}, proto::FINISH_REASON_STOP, 99));
  ASSERT_EQ(Kinds(out), (std::vector<A>{A::kDeliverTokens, A::kAddInflight, A::kFinish}));
  EXPECT_EQ(out[1].requests, -1);
  EXPECT_EQ(out[2].result.finish_reason, FinishReason::kStop);
  EXPECT_EQ(out[2].result.num_cached_prompt_tokens, kPromptLen) << "clamped to the client's prompt";
  EXPECT_EQ(m.generated(), (std::vector<TokenId>{9, 10}));
}

// The PrefillRequest goes beside the Reserve; the reservation follows it to the same
// prefill node once decode has answered.
TEST(HandoffTest, PrefillBesideTheReserveGetsTheReservationAfter) {
  Handoff m(Params());
  m.Handle(Ev(E::kStart));
  std::vector<HandoffAction> out = m.Handle(Placed(kDecode, false));
  ASSERT_EQ(Kinds(out), (std::vector<A>{A::kAddInflight, A::kSendReserve, A::kPlacePrefill}));
  EXPECT_EQ(out[2].node, kDecode);
  out = m.Handle(PrefillPlaced(kPrefill, 4));
  ASSERT_EQ(Kinds(out), (std::vector<A>{A::kAddInflight, A::kSendPrefill}));
  EXPECT_EQ(out[0].node, kPrefill);
  EXPECT_EQ(out[0].prefill_tokens, 4);
  EXPECT_EQ(out[1].node, kPrefill);
  EXPECT_EQ(out[1].epoch, 1u);
  EXPECT_EQ(out[1].decode_node, kDecode);
  EXPECT_EQ(out[1].reply, nullptr) << "the reservation follows";
  EXPECT_EQ(m.state(), S::kReservingWithPrefill);
  EXPECT_TRUE(m.Handle(Ev(E::kPrefillAcked, kPrefill, 1)).empty());
  HandoffEvent reserved = Ev(E::kReserved, kDecode, 1);
  reserved.reply = Reservation(2);
  out = m.Handle(reserved);
  ASSERT_EQ(Kinds(out), (std::vector<A>{A::kSendPrefillTarget}));
  EXPECT_EQ(out[0].node, kPrefill);
  EXPECT_EQ(out[0].epoch, 1u);
  EXPECT_EQ(out[0].decode_node, kDecode);
  EXPECT_EQ(out[0].reply->needed_runs_size(), 2);
  EXPECT_EQ(m.state(), S::kPrefilling);
  EXPECT_TRUE(m.Handle(Ev(E::kPrefillAcked, kPrefill, 1)).empty());
  out = m.Handle(Tokens(kDecode, 1, {9}));
  ASSERT_EQ(Kinds(out), (std::vector<A>{A::kAddInflight, A::kDeliverTokens}));
  EXPECT_EQ(out[0].prefill_tokens, -4);
  // The target refused (the prefill failed meanwhile): prefill on decode, as any failed prefill.
  Handoff refused = MachineIn(S::kReservingWithPrefill);
  refused.Handle(reserved);
  out = refused.Handle(Failed(E::kPrefillFailed, kPrefill, 1, NotFoundError("gone")));
  ASSERT_EQ(Kinds(out),
            (std::vector<A>{A::kAddInflight, A::kLogWarning, A::kSendCancel, A::kSendRelease, A::kSendLocal}));
  EXPECT_EQ(refused.state(), S::kLocal);
}

// What goes wrong beside the Reserve: the prefill node is cancelled where the reservation
// failed or is not needed; where the prefill node failed or died, one is chosen once decode
// has answered, as without the early request.
TEST(HandoffTest, PrefillBesideTheReserveUndoneWhereTheReserveSaysSo) {
  Handoff cached = MachineIn(S::kReservingWithPrefill);
  HandoffEvent whole = Ev(E::kReserved, kDecode, 1);
  whole.reply = Reservation(0);
  std::vector<HandoffAction> out = cached.Handle(whole);
  ASSERT_EQ(Kinds(out), (std::vector<A>{A::kAddInflight, A::kSendCancel, A::kSendRelease, A::kSendLocal}));
  EXPECT_EQ(out[1].node, kPrefill);
  EXPECT_EQ(out[1].epoch, 1u);
  EXPECT_EQ(cached.prefill_node(), 0u);

  Handoff no_room = MachineIn(S::kReservingWithPrefill);
  out = no_room.Handle(Failed(E::kReserveFailed, kDecode, 1, ResourceExhaustedError("no room")));
  ASSERT_EQ(Kinds(out), (std::vector<A>{A::kAddInflight, A::kSendCancel, A::kAddInflight, A::kArmTimer}));
  EXPECT_EQ(out[0].node, kPrefill);
  EXPECT_EQ(out[1].node, kPrefill);
  EXPECT_EQ(out[1].epoch, 1u);
  HandoffEvent fired = Ev(E::kTimerFired);
  fired.timer_seq = out[3].timer_seq;
  no_room.Handle(fired);
  out = no_room.Handle(Placed(kOther, false));
  EXPECT_EQ(Kinds(out), (std::vector<A>{A::kAddInflight, A::kSendReserve}))
      << "after a refusal the prompt waits for the reservation";

  // The prefill node refused, timed out or died: one is chosen again after the reservation,
  // the same node at the same epoch if it is the best. Only after a timeout may the node hold
  // the request: a Cancel there, none where it answered (a Cancel of an epoch a node does
  // not hold makes it refuse that epoch when it is asked again).
  for (int how : {0, 1, 2}) {
    Handoff m = MachineIn(S::kReservingWithPrefill);
    out = how == 0   ? m.Handle(Ev(E::kNodeDead, kPrefill))
          : how == 1 ? m.Handle(Failed(E::kPrefillFailed, kPrefill, 1, ResourceExhaustedError("prefill queue full")))
                     : m.Handle(Failed(E::kPrefillFailed, kPrefill, 1, DeadlineExceededError("no answer")));
    EXPECT_EQ(m.state(), S::kReserving) << how;
    EXPECT_EQ(m.prefill_node(), 0u);
    const size_t cancels =
        std::count_if(out.begin(), out.end(), [](const HandoffAction& a) { return a.kind == A::kSendCancel; });
    EXPECT_EQ(cancels, how == 2 ? 1u : 0u) << how;
    HandoffEvent reserved = Ev(E::kReserved, kDecode, 1);
    reserved.reply = Reservation(1);
    EXPECT_EQ(Kinds(m.Handle(reserved)), (std::vector<A>{A::kPlacePrefill}));
    EXPECT_EQ(m.state(), S::kPlacingPrefill);
    const NodeId again = how == 0 ? kOther : kPrefill;  // (kOther stands for another prefill node)
    out = m.Handle(PrefillPlaced(again, 4));
    ASSERT_EQ(Kinds(out), (std::vector<A>{A::kAddInflight, A::kSendPrefill}));
    EXPECT_EQ(out[1].node, again);
    EXPECT_EQ(out[1].epoch, 1u);
    EXPECT_NE(out[1].reply, nullptr) << "with the reservation";
    if (how == 0) {
      // The dead node's call fails late, at the same epoch: not the new node's failure.
      EXPECT_TRUE(m.Handle(Failed(E::kPrefillFailed, kPrefill, 1, UnavailableError("went away"))).empty());
      EXPECT_EQ(m.state(), S::kPrefilling);
    }
  }

  // Decode ended the request before its KV came (an abort): the prefill node waiting for its
  // target is cancelled.
  Handoff aborted = MachineIn(S::kReservingWithPrefill);
  HandoffEvent abort = Tokens(kDecode, 1, {});
  abort.finish = proto::FINISH_REASON_ABORT;
  out = aborted.Handle(abort);
  ASSERT_EQ(Kinds(out), (std::vector<A>{A::kAddInflight, A::kSendCancel, A::kAddInflight, A::kFail}));
  EXPECT_EQ(out[1].node, kPrefill);
  EXPECT_EQ(out[1].epoch, 1u);

  // No prefill node beside the Reserve: one is chosen after it.
  Handoff none = MachineIn(S::kReserving);
  EXPECT_TRUE(none.Handle(PrefillPlaced(0)).empty());
  EXPECT_EQ(none.state(), S::kReserving);

  // Turned off: the Reserve goes alone, and a stray placement answer changes nothing.
  Handoff off(Params(30000, /*prefill_with_reserve=*/false));
  off.Handle(Ev(E::kStart));
  EXPECT_EQ(Kinds(off.Handle(Placed(kDecode, false))), (std::vector<A>{A::kAddInflight, A::kSendReserve}));
  EXPECT_TRUE(off.Handle(PrefillPlaced(kPrefill)).empty());
  EXPECT_EQ(off.state(), S::kReserving);
}

TEST(HandoffTest, LogprobsTravelWithTheirTokens) {
  Handoff m(Params());
  m.Handle(Ev(E::kStart));
  m.Handle(Placed(kDecode, /*local=*/true));
  HandoffEvent tokens = Tokens(kDecode, 1, {9, 10});
  tokens.logprobs = {{-0.5f, {{9, -0.5f}}}, {-1.5f, {}}};
  std::vector<HandoffAction> out = m.Handle(tokens);
  ASSERT_EQ(Kinds(out), (std::vector<A>{A::kDeliverTokens}));
  ASSERT_EQ(out[0].logprobs.size(), 2u);
  EXPECT_EQ(out[0].logprobs[0].top[0].token_id, 9);
  EXPECT_EQ(out[0].logprobs[1].logprob, -1.5f);
}

TEST(HandoffTest, StageTimesTravelWithTheFirstTokens) {
  Handoff m(Params());
  m.Handle(Ev(E::kStart));
  m.Handle(Placed(kDecode, /*local=*/true));
  HandoffEvent tokens = Tokens(kDecode, 1, {9});
  tokens.stage_times = NodeStageTimes{0.001, 0.002, 0.003, 0.004, 0.005};
  std::vector<HandoffAction> out = m.Handle(tokens);
  ASSERT_EQ(Kinds(out), (std::vector<A>{A::kDeliverTokens}));
  ASSERT_TRUE(out[0].stage_times.has_value());
  EXPECT_EQ(out[0].stage_times->kv_wait, 0.005);
  out = m.Handle(Tokens(kDecode, 1, {10}));
  ASSERT_EQ(Kinds(out), (std::vector<A>{A::kDeliverTokens}));
  EXPECT_FALSE(out[0].stage_times.has_value());
}

TEST(HandoffTest, WholePromptCachedReleasesAndGoesLocal) {
  Handoff m = MachineIn(S::kReserving);
  HandoffEvent reserved = Ev(E::kReserved, kDecode, 1);
  reserved.reply = Reservation(0);
  std::vector<HandoffAction> out = m.Handle(reserved);
  ASSERT_EQ(Kinds(out), (std::vector<A>{A::kSendRelease, A::kSendLocal}));
  EXPECT_EQ(out[0].epoch, 1u);
  EXPECT_EQ(out[1].epoch, 2u);
  EXPECT_EQ(out[1].node, kDecode);
  EXPECT_EQ(m.state(), S::kLocal);
}

TEST(HandoffTest, RemotePrefillErrorFallsBackOnceThenFails) {
  Handoff m = MachineIn(S::kPrefilling);
  HandoffEvent error = Tokens(kDecode, 1, {}, proto::FINISH_REASON_ERROR);
  error.status = UnavailableError("transfer failed");
  std::vector<HandoffAction> out = m.Handle(error);
  ASSERT_EQ(Kinds(out),
            (std::vector<A>{A::kAddInflight, A::kLogWarning, A::kSendCancel, A::kSendRelease, A::kSendLocal}));
  EXPECT_EQ(out[2].node, kPrefill);
  EXPECT_EQ(out[2].text, "handoff failed");
  EXPECT_EQ(out[4].epoch, 2u);
  error.epoch = 2;
  out = m.Handle(error);
  ASSERT_EQ(Kinds(out), (std::vector<A>{A::kAddInflight, A::kFail}));
  EXPECT_EQ(out[1].status.code(), StatusCode::kUnavailable);
  // ABORT ends with Cancelled; an ERROR without a status is Internal.
  Handoff a = MachineIn(S::kDecoding);
  out = a.Handle(Tokens(kDecode, 1, {}, proto::FINISH_REASON_ABORT));
  EXPECT_EQ(out.back().status.code(), StatusCode::kCancelled);
  Handoff b = MachineIn(S::kDecoding);
  out = b.Handle(Tokens(kDecode, 1, {}, proto::FINISH_REASON_ERROR));
  EXPECT_EQ(out.back().status.code(), StatusCode::kInternal);
}

TEST(HandoffTest, NoRoomBacksOffDoublingThenFailsAfterTheWindow) {
  Handoff m(Params(/*no_room_retry_ms=*/500));
  m.Handle(Ev(E::kStart));
  m.Handle(Placed(kDecode, false));
  std::vector<int64_t> delays;
  Nanos now = 0;
  for (int i = 0; i < 100 && m.state() != S::kEnded; ++i) {
    std::vector<HandoffAction> out =
        m.Handle(Failed(E::kReserveFailed, kDecode, m.epoch(), ResourceExhaustedError("full"), now));
    if (m.state() == S::kEnded) {
      EXPECT_EQ(Kinds(out), (std::vector<A>{A::kAddInflight, A::kFail, A::kSendCancel}));
      EXPECT_EQ(out[1].status.code(), StatusCode::kResourceExhausted);
      break;
    }
    ASSERT_EQ(Kinds(out), (std::vector<A>{A::kAddInflight, A::kArmTimer}));
    EXPECT_EQ(out[0].requests, -1) << "the next placement counts its node";
    EXPECT_EQ(m.decode_node(), 0u);
    delays.push_back(out[1].delay_ms);
    now += out[1].delay_ms * kMs;
    HandoffEvent fired = Ev(E::kTimerFired);
    fired.timer_seq = out[1].timer_seq;
    EXPECT_EQ(Kinds(m.Handle(fired)), (std::vector<A>{A::kPlaceDecode}));
    m.Handle(Placed(kDecode, false));
  }
  ASSERT_GE(delays.size(), 6u);
  EXPECT_EQ((std::vector<int64_t>(delays.begin(), delays.begin() + 6)), (std::vector<int64_t>{2, 4, 8, 16, 32, 50}));
  EXPECT_EQ(delays.back(), 50);
  EXPECT_EQ(m.state(), S::kEnded);
  EXPECT_EQ(m.epoch(), static_cast<Epoch>(delays.size() + 1)) << "a new epoch per try";
}

// The router held the placement back (requests waiting for room go first): nothing was
// sent, so the machine waits for room as after a refusal, at the same epoch, with no node
// counted; past the retry window the request ends as one refused for room.
TEST(HandoffTest, PlacementBehindRequestsWaitingForRoomWaitsWithoutANode) {
  Handoff m(Params(/*no_room_retry_ms=*/100));
  std::vector<HandoffAction> out = m.Handle(Ev(E::kStart));
  ASSERT_EQ(Kinds(out), (std::vector<A>{A::kPlaceDecode}));
  EXPECT_TRUE(out[0].may_wait);
  HandoffEvent held = Placed(0, false);
  held.wait_for_room = true;
  held.now_ns = 10 * kMs;
  out = m.Handle(held);
  ASSERT_EQ(Kinds(out), (std::vector<A>{A::kArmTimer}));
  EXPECT_TRUE(out[0].wait_for_room);
  EXPECT_EQ(out[0].delay_ms, Handoff::kMinBackoffMs);
  EXPECT_EQ(m.state(), S::kBackoff);
  EXPECT_EQ(m.epoch(), 1u) << "nothing was sent at epoch 1";
  HandoffEvent fired = Ev(E::kTimerFired);
  fired.timer_seq = out[0].timer_seq;
  ASSERT_EQ(Kinds(m.Handle(fired)), (std::vector<A>{A::kPlaceDecode}));
  // Placed at last: the Reserve goes alone (no prompt computed beside it once room was short).
  out = m.Handle(Placed(kDecode, false));
  EXPECT_EQ(Kinds(out), (std::vector<A>{A::kAddInflight, A::kSendReserve}));
  EXPECT_EQ(out[1].epoch, 1u);

  Handoff late(Params(/*no_room_retry_ms=*/100));
  late.Handle(Ev(E::kStart));
  held.now_ns = 0;
  out = late.Handle(held);
  fired.timer_seq = out[0].timer_seq;
  late.Handle(fired);
  held.now_ns = 100 * kMs;  // the window is over
  out = late.Handle(held);
  ASSERT_EQ(Kinds(out), (std::vector<A>{A::kFail}));
  EXPECT_EQ(out[0].status.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(late.state(), S::kEnded);
}

TEST(HandoffTest, LocalPathRetriesAlreadyExistsThenFails) {
  Handoff m = MachineIn(S::kLocal);
  for (int i = 0; i < Handoff::kMaxLocalRetries; ++i) {
    std::vector<HandoffAction> out = m.Handle(Failed(E::kLocalFailed, kDecode, 1, AlreadyExistsError("old epoch")));
    ASSERT_EQ(Kinds(out), (std::vector<A>{A::kArmTimer})) << i;
    EXPECT_EQ(out[0].delay_ms, Handoff::kLocalRetryMs);
    HandoffEvent fired = Ev(E::kTimerFired);
    fired.timer_seq = out[0].timer_seq;
    out = m.Handle(fired);
    ASSERT_EQ(Kinds(out), (std::vector<A>{A::kSendLocal}));
    EXPECT_EQ(out[0].epoch, 1u) << "the same epoch goes again";
  }
  EXPECT_EQ(Kinds(m.Handle(Failed(E::kLocalFailed, kDecode, 1, AlreadyExistsError("old epoch")))),
            (std::vector<A>{A::kAddInflight, A::kFail, A::kSendCancel}));
}

TEST(HandoffTest, DecodeDeathMovesWithTheTokensSoFar) {
  Handoff m = MachineIn(S::kDecoding);  // generated {7}
  m.Handle(Tokens(kDecode, 1, {8}));
  std::vector<HandoffAction> out = m.Handle(Ev(E::kNodeDead, kDecode));
  ASSERT_EQ(Kinds(out), (std::vector<A>{A::kPlaceDecode}));
  EXPECT_FALSE(out[0].may_wait) << "a stream moving after a death does not queue for room";
  out = m.Handle(Placed(kOther, true));
  ASSERT_EQ(Kinds(out), (std::vector<A>{A::kAddInflight, A::kLogWarning, A::kSendLocal}));
  EXPECT_EQ(out[0].node, kOther);
  EXPECT_EQ(out[2].node, kOther);
  EXPECT_EQ(out[2].epoch, 2u);
  EXPECT_EQ(out[2].tokens, (std::vector<TokenId>{7, 8}));
  // A second death moves it again; the third ends it.
  m.Handle(Ev(E::kNodeDead, kOther));
  m.Handle(Placed(kDecode, true));
  EXPECT_EQ(m.epoch(), 3u);
  out = m.Handle(Ev(E::kNodeDead, kDecode));
  ASSERT_EQ(Kinds(out), (std::vector<A>{A::kAddInflight, A::kFail, A::kSendCancel}));
  EXPECT_EQ(out[1].status.message(), "decode node 1 died");
}

TEST(HandoffTest, DecodeDeathWithoutAnotherNodeOrWithEveryTokenOut) {
  Handoff none = MachineIn(S::kLocal);
  none.Handle(Ev(E::kNodeDead, kDecode));
  std::vector<HandoffAction> out = none.Handle(Placed(0, true));
  ASSERT_EQ(Kinds(out), (std::vector<A>{A::kAddInflight, A::kFail, A::kSendCancel}));
  EXPECT_EQ(out[1].status.code(), StatusCode::kUnavailable);
  Handoff done = MachineIn(S::kDecoding);
  done.Handle(Tokens(kDecode, 1, {1, 2, 3, 4, 5, 6, 7}));  // 8 = max_tokens
  done.Handle(Ev(E::kNodeDead, kDecode));
  out = done.Handle(Placed(kOther, true));
  ASSERT_EQ(Kinds(out), (std::vector<A>{A::kAddInflight, A::kFinish}));
  EXPECT_EQ(out[1].result.finish_reason, FinishReason::kLength);
}

TEST(HandoffTest, DeathDuringRemotePrefillCancelsThePrefill) {
  Handoff m = MachineIn(S::kPrefilling);
  m.Handle(Ev(E::kNodeDead, kDecode));
  std::vector<HandoffAction> out = m.Handle(Placed(kOther, true));
  ASSERT_EQ(Kinds(out),
            (std::vector<A>{A::kAddInflight, A::kAddInflight, A::kLogWarning, A::kSendCancel, A::kSendLocal}));
  EXPECT_EQ(out[0].node, kPrefill);
  EXPECT_EQ(out[0].prefill_tokens, -10);
  EXPECT_EQ(out[3].node, kPrefill);
  EXPECT_EQ(out[3].epoch, 1u);
  // The prefill node dying instead: release the reservation, prefill on decode.
  Handoff p = MachineIn(S::kPrefilling);
  out = p.Handle(Ev(E::kNodeDead, kPrefill));
  ASSERT_EQ(Kinds(out), (std::vector<A>{A::kSendRelease, A::kSendLocal}));
  EXPECT_EQ(out[1].node, kDecode);
  EXPECT_EQ(p.prefill_node(), 0u);
}

// What a failed Reserve (or local PrefillRequest) does depends on why it failed: no room,
// an unavailable (draining) node and a timeout place the request again at a new epoch;
// anything else ends it.
TEST(HandoffTest, RefusalsThatAnotherNodeOrLaterCanServeArePlacedAgain) {
  struct Case {
    Status status;
    std::vector<A> actions;
  };
  const std::vector<Case> cases = {
      {ResourceExhaustedError("no room"), {A::kAddInflight, A::kArmTimer}},
      {UnavailableError("draining"), {A::kAvoidNode, A::kAddInflight, A::kArmTimer}},
      {DeadlineExceededError("timed out"), {A::kAvoidNode, A::kSendCancel, A::kAddInflight, A::kArmTimer}},
      {InvalidArgumentError("bad prompt"), {A::kAddInflight, A::kFail, A::kSendCancel}},
  };
  for (const Case& c : cases) {
    for (E kind : {E::kReserveFailed, E::kLocalFailed}) {
      Handoff m = MachineIn(kind == E::kReserveFailed ? S::kReserving : S::kLocal);
      std::vector<HandoffAction> out = m.Handle(Failed(kind, kDecode, 1, c.status));
      EXPECT_EQ(Names(Kinds(out)), Names(c.actions)) << c.status.ToString();
      if (c.actions.back() == A::kArmTimer) {
        EXPECT_EQ(m.state(), S::kBackoff);
        EXPECT_EQ(m.epoch(), 2u);
        EXPECT_EQ(out.back().wait_for_room, c.status.code() == StatusCode::kResourceExhausted)
            << "only a refusal for room waits in the router's room queue";
        for (const HandoffAction& a : out) {
          if (a.kind == A::kAvoidNode || a.kind == A::kSendCancel) {
            EXPECT_EQ(a.node, kDecode);
          }
          if (a.kind == A::kSendCancel) {
            EXPECT_EQ(a.epoch, 1u) << "the timed-out epoch is cancelled";
          }
        }
      }
    }
  }
  // Tokens already came: a late Ack that timed out changes nothing.
  Handoff streaming = MachineIn(S::kDecoding);
  EXPECT_TRUE(streaming.Handle(Failed(E::kLocalFailed, kDecode, 1, DeadlineExceededError("late"))).empty());
  EXPECT_EQ(streaming.state(), S::kDecoding);
}

// A draining decode node keeps what it streams; what it has not begun is placed again,
// unless no other decode node could take it.
TEST(HandoffTest, DrainingNodeLosesOnlyWhatItHasNotBegun) {
  HandoffEvent draining = Ev(E::kNodeDraining, kDecode);
  draining.elsewhere = true;
  Handoff reserved = MachineIn(S::kPrefilling);
  std::vector<HandoffAction> out = reserved.Handle(draining);
  ASSERT_EQ(out.size(), 6u);
  EXPECT_EQ(out[3].node, kDecode);
  EXPECT_EQ(out[3].epoch, 1u);
  EXPECT_EQ(out[4].node, kPrefill);
  EXPECT_FALSE(out[5].local_only) << "nothing generated yet: a fresh placement";
  EXPECT_EQ(reserved.epoch(), 2u);
  out = reserved.Handle(Placed(kOther, false));
  ASSERT_EQ(Kinds(out), (std::vector<A>{A::kAddInflight, A::kSendReserve, A::kPlacePrefill}));
  EXPECT_EQ(out[1].node, kOther);
  EXPECT_EQ(out[1].epoch, 2u);
  // A request moved before (tokens out) goes on the local path with them.
  Handoff moved = MachineIn(S::kDecoding);
  moved.Handle(Ev(E::kNodeDead, kDecode));
  moved.Handle(Placed(kOther, true));  // kLocal on kOther at epoch 2, token 7 out
  draining.node = kOther;
  out = moved.Handle(draining);
  ASSERT_EQ(out.back().kind, A::kPlaceDecode);
  EXPECT_TRUE(out.back().local_only);
  EXPECT_EQ(out.back().tokens, (std::vector<TokenId>{7}));
  // No other decode node: it stays where it is.
  draining.elsewhere = false;
  draining.node = kDecode;
  Handoff alone = MachineIn(S::kLocal);
  EXPECT_TRUE(alone.Handle(draining).empty());
  EXPECT_EQ(alone.state(), S::kLocal);
  // Draining of a node it is not on, or of its prefill node: nothing.
  draining.elsewhere = true;
  Handoff other = MachineIn(S::kPrefilling);
  draining.node = kPrefill;
  EXPECT_TRUE(other.Handle(draining).empty());
}

// Random event sequences: at most one end, nothing delivered after it, and every node the
// machine counted work on is un-counted by then (dead nodes left the registry instead).
TEST(HandoffTest, RandomEventsKeepTheInvariants) {
  std::mt19937 rng(11);
  const std::vector<E> kinds = {E::kDecodePlaced, E::kPrefillPlaced, E::kReserved,   E::kReserveFailed,
                                E::kPrefillAcked, E::kPrefillFailed, E::kLocalAcked, E::kLocalFailed,
                                E::kTokens,       E::kNodeDead,      E::kCancel,     E::kTimerFired,
                                E::kNodeDraining};
  const std::vector<Status> failures = {ResourceExhaustedError("full"), AlreadyExistsError("old"),
                                        UnavailableError("gone"), DeadlineExceededError("slow")};
  for (int run = 0; run < 2000; ++run) {
    Handoff m(Params(/*no_room_retry_ms=*/50));
    std::map<NodeId, int64_t> requests, tokens;
    std::set<NodeId> dead;
    int ends = 0;
    Nanos now = 0;
    auto apply = [&](const HandoffEvent& e) {
      for (const HandoffAction& a : m.Handle(e)) {
        if (a.kind == A::kFinish || a.kind == A::kFail) ++ends;
        if (ends > 0 && (a.kind == A::kDeliverTokens || a.kind == A::kDeliverCached)) ++ends;  // counts as a bug
        if (a.kind == A::kAddInflight) {
          requests[a.node] += a.requests;
          tokens[a.node] += a.prefill_tokens;
        }
      }
    };
    apply(Ev(E::kStart));
    for (int step = 0; step < 40; ++step) {
      now += kMs * static_cast<Nanos>(rng() % 20);
      HandoffEvent e = EventFor(kinds[rng() % kinds.size()], m);
      e.now_ns = now;
      if (e.kind == E::kDecodePlaced) e = Placed(rng() % 3 == 0 ? 0 : (rng() % 2 ? kDecode : kOther), rng() % 2);
      if (e.kind == E::kNodeDead) e.node = (rng() % 2) ? m.decode_node() : kPrefill;
      if (e.kind == E::kNodeDraining) e.elsewhere = rng() % 2;
      if (e.kind == E::kTokens) e.finish = static_cast<proto::FinishReason>(rng() % 5);
      if (!e.status.ok()) e.status = failures[rng() % failures.size()];
      if (e.kind == E::kTimerFired) e.timer_seq = rng() % 4;
      if (e.kind == E::kNodeDead) dead.insert(e.node);
      apply(e);
    }
    apply(Failed(E::kCancel, 0, 0, CancelledError("end")));
    ASSERT_EQ(ends, 1) << "run " << run;
    for (const auto& [node, count] : requests) {
      if (dead.count(node) == 0) {
        EXPECT_EQ(count, 0) << "run " << run << " node " << node;
      }
    }
    for (const auto& [node, count] : tokens) {
      if (dead.count(node) == 0) {
        EXPECT_EQ(count, 0) << "run " << run << " node " << node;
      }
    }
  }
}

}  // namespace
}  // namespace tandem::router::cluster
