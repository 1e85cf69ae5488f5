// PrefillHandoff: the prefill node's state for one router request, as a state
// machine with no locks, no I/O and no clocks. The node feeds it events and
// runs the actions it returns (prefill_node.cc). docs/protocol.md ("Prefill
// node") has the same table.
//
//   kAccepted --Connected--> kConnected --StepBegan--+
//       |                                            +--> kSending (OpenSession) --SendDone OK--> kSent
//       +------StepBegan---> kStaged ----Connected---+        |                                    |
//                                                             +--FirstToken recorded ...           |
//   kSent + FirstToken, or SendDone OK with the token in hand --> kDone: KvDone(OK) to decode.
//   Any failure before kDone (connect, staging, the forward, the transfer, the
//   engine ending it without a token, decode's connection closing, the router's
//   Cancel) --> kFailed: KvDone(error) to decode, the session cancelled.
//   kDone / kFailed --> kErased once the engine has finished it and the sender has
//   let go of the source (staging blocks, or the engine's held blocks).
//
// The first token is data, not a state: it arrives at the end of the step that
// began the transfer, before or after the decode connection is up and the
// layers are sent.
//
// Thread rule: not thread-safe; the node's mutex guards each instance.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "common/base/ids.h"
#include "common/base/status.h"

namespace tandem::prefill_node {

enum class PrefillState : uint8_t {
  kAccepted,   // in the engine; decode not dialed yet; the final chunk's step not begun
  kConnected,  // the decode connection is up; the final chunk's step not begun
  kStaged,     // the final chunk's step began (layers are being readied); decode not dialed yet
  kSending,    // the sender session is open: layers go out as they are ready
  kSent,       // every layer is in decode's memory; the first token is still to come
  kDone,       // KvDone(OK, first token) went to decode
  kFailed,     // KvDone(error) went to decode (when it was reachable)
  kErased,     // gone: the node removes the record
};
inline constexpr int kNumPrefillStates = 8;

enum class PrefillEventKind : uint8_t {
  kConnected,       // the connection to the decode node is up
  kConnectFailed,   // it could not be dialed
  kStepBegan,       // the step holding the prompt's final chunk began; its layers will be ready
  kStageFailed,     // that step could not prepare the source (no staging, short block table)
  kStepFailed,      // that step's forward failed
  kSendDone,        // the sender session ended with `status` and let go of the source
  kFirstToken,      // the engine sampled the first token
  kEngineFinished,  // the engine ended the request (`status` OK for a normal finish)
  kCancel,          // the router cancelled it, or its connection is gone
  kDecodeClosed,    // the decode node's connection closed
};
inline constexpr int kNumPrefillEvents = 10;

std::string_view PrefillStateName(PrefillState state);
std::string_view PrefillEventName(PrefillEventKind kind);

enum class PrefillAction : uint8_t {
  kOpenSession,    // open the sender session (the source is the staged or held blocks)
  kCancelSession,  // cancel the sender session with `status`; SendDone follows
  kEngineCancel,   // cancel the request in the engine
  kReleaseSource,  // free the staging blocks / release the engine's held blocks
  kSendKvDone,     // KvDone to decode: OK with the first token, or `status`
  kErase,          // drop the record
};

struct PrefillEvent {
  PrefillEventKind kind{};
  Status status{};    // for failures, kSendDone and kEngineFinished
  TokenId token = 0;  // for kFirstToken
};

struct PrefillActions {
  std::vector<PrefillAction> actions;
  Status status;  // for kCancelSession and kSendKvDone
  bool Has(PrefillAction a) const;
};

class PrefillHandoff {
 public:
  PrefillHandoff() = default;
  // For tests: a request in `state` with the given resources.
  static PrefillHandoff InState(PrefillState state, bool source_held, bool sender_holds, bool engine_done);

  PrefillActions Handle(const PrefillEvent& event);

  PrefillState state() const { return state_; }
  std::optional<TokenId> first_token() const { return first_token_; }
  // Source blocks (staging or held) are allocated for it.
  bool source_held() const { return source_held_; }
  // The KV sender may still read the source.
  bool sender_holds() const { return sender_holds_; }
  bool engine_done() const { return engine_done_; }

 private:
  void Fail(const Status& status, PrefillActions* out);
  void Release(PrefillActions* out);
  void MaybeErase(PrefillActions* out);

  PrefillState state_ = PrefillState::kAccepted;
  std::optional<TokenId> first_token_;
  bool source_held_ = false;
  bool sender_holds_ = false;
  bool engine_done_ = false;
};

}  // namespace tandem::prefill_node
