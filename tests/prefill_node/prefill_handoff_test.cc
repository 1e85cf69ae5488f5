// PrefillHandoff: every (state, event) pair against a written transition table,
// each state holding the resources it normally holds; plus the paths where
// the order of events or the resources matter.
#include "prefill_node/prefill_handoff.h"

#include <gtest/gtest.h>

#include <map>
#include <utility>

namespace tandem::prefill_node {
namespace {

using A = PrefillAction;
using E = PrefillEventKind;
using S = PrefillState;

struct Expect {
  S next;
  std::vector<A> actions;
};

// What each state holds in the table test: (source_held, sender_holds, engine_done).
PrefillHandoff Canonical(S s) {
  switch (s) {
    case S::kStaged: return PrefillHandoff::InState(s, true, false, false);
    case S::kSending: return PrefillHandoff::InState(s, true, true, false);
    case S::kFailed: return PrefillHandoff::InState(s, true, true, true);  // a session still draining
    default: return PrefillHandoff::InState(s, false, false, false);
  }
}

// Every event carries the status InternalError("why"); kSendDone is therefore a failed send.
std::map<std::pair<S, E>, Expect> Table() {
  std::map<std::pair<S, E>, Expect> t;
  const std::vector<E> failures = {E::kConnectFailed, E::kStageFailed, E::kStepFailed, E::kCancel, E::kDecodeClosed};
  for (E e : failures) {
    t[{S::kAccepted, e}] = {S::kFailed, {A::kEngineCancel, A::kSendKvDone}};
    t[{S::kConnected, e}] = {S::kFailed, {A::kEngineCancel, A::kSendKvDone}};
    t[{S::kStaged, e}] = {S::kFailed, {A::kReleaseSource, A::kEngineCancel, A::kSendKvDone}};
    t[{S::kSending, e}] = {S::kFailed, {A::kCancelSession, A::kEngineCancel, A::kSendKvDone}};
    t[{S::kSent, e}] = {S::kFailed, {A::kEngineCancel, A::kSendKvDone}};
  }
  t[{S::kAccepted, E::kConnected}] = {S::kConnected, {}};
  t[{S::kAccepted, E::kStepBegan}] = {S::kStaged, {}};
  t[{S::kConnected, E::kStepBegan}] = {S::kSending, {A::kOpenSession}};
  t[{S::kStaged, E::kConnected}] = {S::kSending, {A::kOpenSession}};
  // The engine ends the request before the first token: a failure, erased at once when nothing is held.
  t[{S::kAccepted, E::kEngineFinished}] = {S::kErased, {A::kSendKvDone, A::kErase}};
  t[{S::kConnected, E::kEngineFinished}] = {S::kErased, {A::kSendKvDone, A::kErase}};
  t[{S::kStaged, E::kEngineFinished}] = {S::kErased, {A::kReleaseSource, A::kSendKvDone, A::kErase}};
  t[{S::kSending, E::kEngineFinished}] = {S::kFailed, {A::kCancelSession, A::kSendKvDone}};
  t[{S::kSent, E::kEngineFinished}] = {S::kErased, {A::kSendKvDone, A::kErase}};
  t[{S::kSending, E::kSendDone}] = {S::kFailed, {A::kReleaseSource, A::kEngineCancel, A::kSendKvDone}};
  t[{S::kSent, E::kFirstToken}] = {S::kDone, {A::kSendKvDone}};
  t[{S::kDone, E::kEngineFinished}] = {S::kErased, {A::kErase}};
  t[{S::kFailed, E::kSendDone}] = {S::kErased, {A::kReleaseSource, A::kErase}};
  return t;
}

TEST(PrefillHandoffTest, EveryStateEventPairFollowsTheTable) {
  const auto table = Table();
  int checked = 0;
  for (int si = 0; si < kNumPrefillStates; ++si) {
    for (int ei = 0; ei < kNumPrefillEvents; ++ei) {
      const S s = static_cast<S>(si);
      const E e = static_cast<E>(ei);
      PrefillHandoff request = Canonical(s);
      PrefillActions out = request.Handle({e, InternalError("why"), 7});
      auto it = table.find({s, e});
      const Expect expect = it != table.end() ? it->second : Expect{s, {}};
      EXPECT_EQ(request.state(), expect.next)
          << PrefillStateName(s) << " x " << PrefillEventName(e) << " -> " << PrefillStateName(request.state());
      EXPECT_EQ(out.actions, expect.actions) << PrefillStateName(s) << " x " << PrefillEventName(e);
      ++checked;
    }
  }
  EXPECT_EQ(checked, kNumPrefillStates * kNumPrefillEvents);
}

TEST(PrefillHandoffTest, HappyPathTokenBeforeTheLastLayer) {
  PrefillHandoff request;
  EXPECT_TRUE(request.Handle({E::kConnected}).actions.empty());
  EXPECT_EQ(request.Handle({E::kStepBegan}).actions, std::vector<A>{A::kOpenSession});
  EXPECT_TRUE(request.source_held() && request.sender_holds());
  // max_tokens = 1: the token and the engine's finish come together, before the transfer ends.
  EXPECT_TRUE(request.Handle({E::kFirstToken, Status::Ok(), 42}).actions.empty());
  EXPECT_TRUE(request.Handle({E::kEngineFinished}).actions.empty());
  PrefillActions done = request.Handle({E::kSendDone, Status::Ok()});
  EXPECT_EQ(done.actions, (std::vector<A>{A::kReleaseSource, A::kSendKvDone, A::kErase}));
  EXPECT_TRUE(done.status.ok());
  EXPECT_EQ(request.first_token(), 42);
  EXPECT_EQ(request.state(), S::kErased);
}

TEST(PrefillHandoffTest, HappyPathLastLayerBeforeTheToken) {
  PrefillHandoff request;
  request.Handle({E::kStepBegan});
  EXPECT_EQ(request.state(), S::kStaged);
  EXPECT_EQ(request.Handle({E::kConnected}).actions, std::vector<A>{A::kOpenSession});
  EXPECT_EQ(request.Handle({E::kSendDone, Status::Ok()}).actions, std::vector<A>{A::kReleaseSource});
  EXPECT_EQ(request.state(), S::kSent);
  EXPECT_EQ(request.Handle({E::kFirstToken, Status::Ok(), 3}).actions, std::vector<A>{A::kSendKvDone});
  EXPECT_EQ(request.Handle({E::kEngineFinished}).actions, std::vector<A>{A::kErase});
}

TEST(PrefillHandoffTest, CancelWhileSendingWaitsForTheSenderToLetGo) {
  PrefillHandoff request;
  request.Handle({E::kConnected});
  request.Handle({E::kStepBegan});
  PrefillActions cancel = request.Handle({E::kCancel, CancelledError("cancelled by the router")});
  EXPECT_EQ(cancel.actions, (std::vector<A>{A::kCancelSession, A::kEngineCancel, A::kSendKvDone}));
  EXPECT_EQ(cancel.status.code(), StatusCode::kCancelled);
  // The source stays until the sender lets go, even after the engine let go.
  EXPECT_TRUE(request.Handle({E::kEngineFinished, CancelledError("cancelled")}).actions.empty());
  EXPECT_TRUE(request.source_held());
  EXPECT_EQ(request.Handle({E::kSendDone, CancelledError("cancelled")}).actions,
            (std::vector<A>{A::kReleaseSource, A::kErase}));
}

TEST(PrefillHandoffTest, EngineEndingWithTheTokenIsNoFailure) {
  PrefillHandoff request;
  request.Handle({E::kConnected});
  request.Handle({E::kStepBegan});
  request.Handle({E::kFirstToken, Status::Ok(), 9});
  // A finish that carries an error after the token was sampled does not fail the handoff.
  EXPECT_TRUE(request.Handle({E::kEngineFinished, InternalError("late")}).actions.empty());
  EXPECT_EQ(request.state(), S::kSending);
}

}  // namespace
}  // namespace tandem::prefill_node
