// DecodeHandoff: every (state, event) pair against a written transition table.
// Pairs the table does not list must leave the state alone and do nothing.
#include "decode_node/decode_handoff.h"

#include <gtest/gtest.h>

#include <map>
#include <utility>

namespace tandem::decode_node {
namespace {

using A = DecodeAction;
using E = DecodeEventKind;
using S = DecodeState;

struct Expect {
  S next;
  std::vector<A> actions;
};

// The transition table of decode_handoff.h, written out pair by pair.
std::map<std::pair<S, E>, Expect> Table() {
  std::map<std::pair<S, E>, Expect> t;
  const std::vector<A> abandon_open = {A::kEngineCancel, A::kCancelSession, A::kReleaseLanding};
  const std::vector<A> lease_open = {A::kCancelSession, A::kReleaseLanding, A::kForwardOutput, A::kErase};
  // kReserving
  t[{S::kReserving, E::kReserved}] = {S::kOpening, {A::kOpenSession}};
  t[{S::kReserving, E::kReservedCached}] = {S::kWholeCached, {A::kReplyReserved}};
  t[{S::kReserving, E::kReserveFailed}] = {S::kErased, {A::kReplyError, A::kErase}};
  t[{S::kReserving, E::kCancel}] = {S::kCancelled, {A::kEngineCancel}};
  t[{S::kReserving, E::kSuperseded}] = {S::kEnded, {A::kEngineCancel}};
  t[{S::kReserving, E::kEngineFinished}] = {S::kErased, {A::kForwardOutput, A::kErase}};
  // kOpening
  t[{S::kOpening, E::kOpened}] = {S::kReceiving, {A::kReplyReserved}};
  t[{S::kOpening, E::kOpenFailed}] = {S::kEnded, {A::kReplyError, A::kEngineCancel}};
  t[{S::kOpening, E::kCancel}] = {S::kCancelled, abandon_open};
  t[{S::kOpening, E::kSuperseded}] = {S::kEnded, abandon_open};
  t[{S::kOpening, E::kEngineFinished}] = {S::kErased, lease_open};
  // kWholeCached
  t[{S::kWholeCached, E::kCancel}] = {S::kCancelled, {A::kEngineCancel}};
  t[{S::kWholeCached, E::kSuperseded}] = {S::kEnded, {A::kEngineCancel}};
  t[{S::kWholeCached, E::kEngineFinished}] = {S::kErased, {A::kForwardOutput, A::kErase}};
  // kReceiving, kLanded, kFirstToken
  for (S s : {S::kReceiving, S::kLanded, S::kFirstToken}) {
    std::vector<A> fail = abandon_open;
    fail.push_back(A::kSendError);
    t[{s, E::kKvFailed}] = {S::kEnded, fail};
    t[{s, E::kKvDoneFailed}] = {S::kEnded, fail};
    t[{s, E::kPeerClosed}] = {S::kEnded, fail};
    t[{s, E::kCancel}] = {S::kCancelled, abandon_open};
    t[{s, E::kSuperseded}] = {S::kEnded, abandon_open};
    t[{s, E::kEngineFinished}] = {S::kErased, lease_open};
  }
  t[{S::kReceiving, E::kKvLanded}] = {S::kLanded, {}};
  t[{S::kReceiving, E::kKvDone}] = {S::kFirstToken, {}};
  t[{S::kLanded, E::kKvDone}] = {S::kJoining, {A::kCompleteReservation}};
  t[{S::kFirstToken, E::kKvLanded}] = {S::kJoining, {A::kCompleteReservation}};
  // kJoining, kRunning
  for (S s : {S::kJoining, S::kRunning}) {
    t[{s, E::kEngineOutput}] = {S::kRunning, {A::kForwardOutput}};
    t[{s, E::kEngineFinished}] = {S::kErased, {A::kForwardOutput, A::kErase}};
    t[{s, E::kCancel}] = {S::kCancelled, {A::kEngineCancel}};
    t[{s, E::kSuperseded}] = {S::kEnded, {A::kEngineCancel}};
  }
  // kCancelled, kEnded: answer late replies, close late sessions, wait for the engine.
  for (S s : {S::kCancelled, S::kEnded}) {
    t[{s, E::kReserved}] = {s, {A::kReplyError}};
    t[{s, E::kReservedCached}] = {s, {A::kReplyError}};
    t[{s, E::kReserveFailed}] = {S::kErased, {A::kReplyError, A::kErase}};
    t[{s, E::kOpened}] = {s, {A::kReplyError, A::kCancelSession}};
    t[{s, E::kOpenFailed}] = {s, {A::kReplyError}};
    t[{s, E::kSuperseded}] = {S::kEnded, {}};
  }
  t[{S::kCancelled, E::kEngineFinished}] = {S::kErased, {A::kForwardOutput, A::kErase}};
  t[{S::kEnded, E::kEngineFinished}] = {S::kErased, {A::kErase}};
  return t;
}

TEST(DecodeHandoffTest, EveryStateEventPairFollowsTheTable) {
  const auto table = Table();
  int checked = 0;
  for (int si = 0; si < kNumDecodeStates; ++si) {
    for (int ei = 0; ei < kNumDecodeEvents; ++ei) {
      const S s = static_cast<S>(si);
      const E e = static_cast<E>(ei);
      DecodeHandoff r = DecodeHandoff::InState(s);
      DecodeActions out = r.Handle({e, InternalError("why")});
      auto it = table.find({s, e});
      const Expect expect = it != table.end() ? it->second : Expect{s, {}};
      EXPECT_EQ(r.state(), expect.next) << DecodeStateName(s) << " x " << DecodeEventName(e) << " -> "
                                        << DecodeStateName(r.state());
      EXPECT_EQ(out.actions, expect.actions) << DecodeStateName(s) << " x " << DecodeEventName(e);
      ++checked;
    }
  }
  EXPECT_EQ(checked, kNumDecodeStates * kNumDecodeEvents);
}

TEST(DecodeHandoffTest, RemoteHappyPathInEitherOrder) {
  for (bool landed_first : {true, false}) {
    DecodeHandoff r = DecodeHandoff::Remote();
    EXPECT_EQ(r.state(), S::kReserving);
    EXPECT_TRUE(r.Handle({E::kReserved}).Has(A::kOpenSession));
    EXPECT_TRUE(r.transfer_open());
    EXPECT_TRUE(r.Handle({E::kOpened}).Has(A::kReplyReserved));
    DecodeActions first = r.Handle({landed_first ? E::kKvLanded : E::kKvDone});
    EXPECT_TRUE(first.actions.empty());
    DecodeActions second = r.Handle({landed_first ? E::kKvDone : E::kKvLanded});
    EXPECT_EQ(second.actions, std::vector<A>{A::kCompleteReservation});
    EXPECT_FALSE(r.transfer_open());
    EXPECT_TRUE(r.Handle({E::kEngineOutput}).Has(A::kForwardOutput));
    EXPECT_EQ(r.Handle({E::kEngineFinished}).actions, (std::vector<A>{A::kForwardOutput, A::kErase}));
    EXPECT_EQ(r.state(), S::kErased);
  }
}

TEST(DecodeHandoffTest, LateRepliesCarryTheReasonTheRequestEnded) {
  DecodeHandoff r = DecodeHandoff::Remote();
  r.Handle({E::kReserved});
  DecodeActions cancel = r.Handle({E::kCancel, CancelledError("client went away")});
  EXPECT_TRUE(cancel.Has(A::kCancelSession));
  EXPECT_EQ(cancel.status.code(), StatusCode::kCancelled);
  // The session opens after the cancel: the router hears the cancel, the session closes.
  DecodeActions late = r.Handle({E::kOpened});
  EXPECT_EQ(late.actions, (std::vector<A>{A::kReplyError, A::kCancelSession}));
  EXPECT_EQ(late.status.message(), "client went away");
  EXPECT_TRUE(r.owes_entry());  // the engine's ABORT record ends it
  EXPECT_EQ(r.Handle({E::kEngineFinished}).actions, (std::vector<A>{A::kForwardOutput, A::kErase}));
}

TEST(DecodeHandoffTest, FailedHandoffOwesNoFurtherEntry) {
  DecodeHandoff r = DecodeHandoff::InState(S::kFirstToken);
  DecodeActions fail = r.Handle({E::kPeerClosed, UnavailableError("prefill connection closed")});
  EXPECT_TRUE(fail.Has(A::kSendError));
  EXPECT_EQ(fail.status.code(), StatusCode::kUnavailable);
  EXPECT_FALSE(r.owes_entry());
  // The engine's record of the cancelled reservation is swallowed.
  EXPECT_EQ(r.Handle({E::kEngineFinished}).actions, std::vector<A>{A::kErase});
}

TEST(DecodeHandoffTest, LocalRequestsStartRunning) {
  DecodeHandoff r = DecodeHandoff::Local();
  EXPECT_EQ(r.state(), S::kRunning);
  EXPECT_FALSE(r.transfer_open());
  EXPECT_TRUE(r.Handle({E::kKvDone}).actions.empty());  // a stray KvDone changes nothing
  EXPECT_EQ(r.state(), S::kRunning);
}

}  // namespace
}  // namespace tandem::decode_node
