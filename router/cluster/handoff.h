// Handoff: one request's way through the cluster, as a pure state machine
// (docs/protocol.md, "Router handoff"). The router feeds it events (a node's
// reply, a Tokens entry, a node's death, a cancel, a timer) and runs the
// actions it returns (send a message to node N at epoch E, deliver tokens,
// finish, arm a timer, count in-flight work). It holds no lock, does no I/O and
// reads no clock: time comes in the events. How the KV travels between nodes
// is the nodes' business; the machine only sees Reserve, Prefill and Tokens.
//
//   kNew ─start─► kPlacing ─placed─┬─► kLocal ──────────────┐
//                                  └─► kReserving ─reserved─► kPlacingPrefill
//                                        ─placed─► kPrefilling ──first tokens──► kDecoding ─finish─► kEnded
//   kReserving ─prefill placed─► kReservingWithPrefill ─reserved─► kPrefilling (the prompt is
//     computed while decode reserves: PrefillRequest beside the Reserve, the reservation after it)
//   kLocal ──tokens──► kDecoding;  refusals (no room, unavailable, timeout) ──► kBackoff ─timer─► kPlacing;
//   kPlacing ─placed, wait_for_room─► kBackoff (requests refused for room go first: RoomQueue);
//   AlreadyExists ──► kLocalRetry ─timer─► kLocal;  decode node dead ──► kPlacing (moved, local path);
//   decode node draining before the first token ──► kPlacing (placed again, epoch + 1)
//
// Thread rule: not thread-safe; the owner serializes Handle() calls per request.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/base/clock.h"
#include "common/base/ids.h"
#include "common/base/status.h"
#include "common/proto/control.pb.h"
#include "router/engine_client.h"

namespace tandem::router::cluster {

enum class HandoffState : uint8_t {
  kNew,             // created; waits for kStart
  kPlacing,         // a decode node is being chosen (kPlaceDecode out, kDecodePlaced next)
  kReserving,       // Reserve sent to the decode node; its reply is awaited
  kReservingWithPrefill,  // and a PrefillRequest (reservation follows) at a prefill node
  kPlacingPrefill,  // the decode node holds a reservation; a prefill node is being chosen
  kPrefilling,      // PrefillRequest at the prefill node; the first tokens come from decode
  kLocal,           // PrefillRequest with an empty reservation at the decode node (local path)
  kLocalRetry,      // the decode node still held an older epoch: the local request goes again later
  kBackoff,         // a decode node had no room: placed again (new epoch) when the timer fires
  kDecoding,        // tokens flow from the decode node
  kEnded,           // finished or failed; absorbs every event (late acks get a Cancel)
};
inline constexpr int kNumHandoffStates = 11;

enum class HandoffEventKind : uint8_t {
  kStart,          // the request was submitted
  kDecodePlaced,   // answer to kPlaceDecode: node (0 = none), local
  kPrefillPlaced,  // answer to kPlacePrefill: node (0 = none), prefill_tokens
  kReserved,       // ReserveReply from node at epoch
  kReserveFailed,  // the Reserve call to node at epoch failed: status
  kPrefillAcked,   // the prefill node accepted the PrefillRequest of epoch
  kPrefillFailed,  // the PrefillRequest call to the prefill node failed: status
  kLocalAcked,     // the decode node accepted the local PrefillRequest of epoch
  kLocalFailed,    // the local PrefillRequest call failed: status
  kTokens,         // a Tokens entry from node at epoch: tokens, finish, error, cached
  kNodeDead,       // node's connection closed or it fell silent
  kNodeDraining,   // node began draining (heartbeat, or it refused work); elsewhere: another decode node is up
  kCancel,         // the client left, a stop string matched or the deadline passed: status
  kShutdown,       // the router stops
  kTimerFired,     // the timer of timer_seq fired
};
inline constexpr int kNumHandoffEventKinds = 15;

// One input. Fields not named by the kind are unused.
struct HandoffEvent {
  HandoffEventKind kind = HandoffEventKind::kStart;
  Nanos now_ns = 0;                                        // the owner's clock when the event happened
  NodeId node = 0;                                         // the node it came from / is about
  Epoch epoch = 0;                                         // the epoch of the call or entry
  Status status;                                           // failures; a Tokens entry's error; the cancel reason
  bool local = false;                                      // kDecodePlaced: prefill on the decode node
  bool wait_for_room = false;  // kDecodePlaced: not placed, requests waiting for decode room go first
  bool elsewhere = false;                                  // kNodeDraining: another decode node takes work
  int64_t prefill_tokens = 0;                              // kPrefillPlaced: tokens the prefill node will compute
  std::shared_ptr<const proto::ReserveReply> reply;        // kReserved
  std::vector<TokenId> tokens;                             // kTokens
  std::vector<TokenLogprobs> logprobs;                     // kTokens: one per token when asked for
  std::vector<TokenLogprobs> prompt_logprobs;              // kTokens: with the first token, when asked for
  std::optional<NodeStageTimes> stage_times;               // kTokens: the entry's, with the first token
  proto::FinishReason finish = proto::FINISH_REASON_NONE;  // kTokens
  int32_t cached_tokens = 0;                               // kTokens: the entry's num_cached_tokens
  uint64_t timer_seq = 0;                                  // kTimerFired
};

enum class HandoffActionKind : uint8_t {
  kPlaceDecode,        // choose a decode node (local_only: for the local path); answer kDecodePlaced
  kPlacePrefill,       // choose a prefill node for the reservation on node; answer kPrefillPlaced
  kSendReserve,        // ReserveRequest to node at epoch
  kSendPrefill,        // PrefillRequest to node at epoch: with reply (the reservation on decode_node),
                       // or without (reply null: sent beside the Reserve, the reservation follows)
  kSendPrefillTarget,  // PrefillTarget: reply (the reservation on decode_node) to node at epoch
  kSendLocal,          // PrefillRequest, empty reservation, prompt + tokens, to node at epoch
  kSendRelease,        // Release to node at epoch
  kSendCancel,         // Cancel to node at epoch (text: the reason)
  kDeliverTokens,      // StreamCallbacks::on_tokens(tokens)
  kDeliverCached,      // StreamCallbacks::on_cached(cached_tokens)
  kFinish,             // StreamCallbacks::on_finish(result); the request is over
  kFail,               // StreamCallbacks::on_error(status); the request is over
  kArmTimer,           // fire kTimerFired{timer_seq} after delay_ms (wait_for_room: or when room may have freed)
  kAddInflight,        // the router's count of work on node: += requests, += prefill_tokens
  kAvoidNode,          // node refused work as unavailable or timed out: placement passes it over for a while
  kLogWarning,         // log text
};

// One output. Fields not named by the kind are unused.
struct HandoffAction {
  HandoffActionKind kind = HandoffActionKind::kLogWarning;
  NodeId node = 0;
  Epoch epoch = 0;
  NodeId decode_node = 0;                            // kSendPrefill, kSendPrefillTarget
  bool local_only = false;                           // kPlaceDecode
  bool may_wait = false;                             // kPlaceDecode: behind requests waiting for room
  std::shared_ptr<const proto::ReserveReply> reply;  // kSendPrefill (null: follows), kSendPrefillTarget
  std::vector<TokenId> tokens;                       // kSendLocal: generated so far; kDeliverTokens
  std::vector<TokenLogprobs> logprobs;               // kDeliverTokens, when the request asked for them
  std::vector<TokenLogprobs> prompt_logprobs;        // kDeliverTokens: with the first tokens, when asked for
  std::optional<NodeStageTimes> stage_times;         // kDeliverTokens: the entry's node stage times
  int32_t cached_tokens = 0;                         // kDeliverCached
  GenerateResult result;                             // kFinish
  Status status;                                     // kFail
  int64_t delay_ms = 0;                              // kArmTimer
  uint64_t timer_seq = 0;                            // kArmTimer
  bool wait_for_room = false;                        // kArmTimer: a wait for decode room (RoomQueue)
  int32_t requests = 0;                              // kAddInflight
  int64_t prefill_tokens = 0;                        // kAddInflight
  std::string text;                                  // kSendCancel reason; kLogWarning
};

// What the machine needs to know of its request and the router's policy.
struct HandoffParams {
  RequestId request_id = 0;
  int32_t prompt_len = 0;            // the client's prompt, tokens
  int32_t max_tokens = 16;           // the client's limit
  int64_t no_room_retry_ms = 30000;  // ClusterConfig::no_room_retry_ms: how long refusals are retried
  // ClusterConfig::prefill_with_reserve: a request's first dispatch sends the PrefillRequest
  // beside the Reserve (not after a refusal: a decode node short of room would have
  // prompts computed for nothing).
  bool prefill_with_reserve = true;
};

class Handoff {
 public:
  // Moves to another decode node after a death at most this often.
  static constexpr int kMaxRedispatches = 2;
  // The local path re-sends after AlreadyExists this often, this far apart (2 s in all).
  static constexpr int kMaxLocalRetries = 100;
  static constexpr int64_t kLocalRetryMs = 20;
  // Backoff before placing again after a refusal: doubles from min to max.
  static constexpr int64_t kMinBackoffMs = 2;
  static constexpr int64_t kMaxBackoffMs = 50;

  explicit Handoff(HandoffParams params) : params_(params) {}

  // Applies `event`; returns the actions to run, in order.
  std::vector<HandoffAction> Handle(const HandoffEvent& event);

  HandoffState state() const { return state_; }
  Epoch epoch() const { return epoch_; }
  NodeId decode_node() const { return decode_node_; }
  NodeId prefill_node() const { return prefill_node_; }
  // Tokens delivered so far.
  const std::vector<TokenId>& generated() const { return generated_; }

 private:
  // Why a decode node is being chosen.
  enum class Purpose : uint8_t { kDispatch, kLocalOnly, kMove };

  void OnStart(const HandoffEvent& e);
  void OnDecodePlaced(const HandoffEvent& e);
  void OnPrefillPlaced(const HandoffEvent& e);
  void OnReserved(const HandoffEvent& e);
  void OnReserveFailed(const HandoffEvent& e);
  void OnPrefillFailed(const HandoffEvent& e);
  void OnLocalFailed(const HandoffEvent& e);
  void OnTokens(const HandoffEvent& e);
  void OnNodeDead(const HandoffEvent& e);
  void OnNodeDraining(const HandoffEvent& e);
  void OnTimerFired(const HandoffEvent& e);

  bool Current(const HandoffEvent& e) const { return state_ != HandoffState::kEnded && e.epoch == epoch_; }
  void Place(Purpose purpose);
  // The moved request continues on `node` (local path, epoch + 1).
  void MoveTo(NodeId node);
  // Releases the reservation at this epoch and prefills on the same decode node at epoch + 1.
  void ReleaseThenLocal();
  // After a refusal the decode node may not repeat elsewhere or later (no room,
  // unavailable, a timeout): places again after a backoff at epoch + 1. False for
  // other failures, and once no_room_retry_ms has passed since the first refusal.
  bool PlaceAgainLater(const HandoffEvent& e);
  // Until no_room_retry_ms since the first refusal (now, if this is the first one).
  bool RetryWindowOpen(Nanos now_ns);
  // kBackoff until the timer (or, waiting for room, room freeing) places it again; false
  // once the retry window has closed.
  bool WaitThenPlace(Nanos now_ns, bool for_room);
  // Where a placement after a refusal or a drain goes: the local path once tokens are out.
  Purpose PurposeAgain() const;
  // Ends the request: un-counts its nodes, then kFinish / kFail (`terminal`).
  void End(HandoffAction terminal);
  void EndWithError(const Status& status);
  // EndWithError, then Cancel at the nodes that held the request.
  void EndAndCancel(const Status& status);
  void LeavePrefill();
  // LeavePrefill, then Cancel at the prefill node (this epoch).
  void CancelPrefill(std::string reason);
  void ArmTimer(int64_t delay_ms, bool wait_for_room = false);
  int32_t ClampCached(int32_t cached) const;

  void Emit(HandoffAction action) { out_.push_back(std::move(action)); }
  void SendLocal();
  void Send(HandoffActionKind kind, NodeId node, Epoch epoch, std::string reason = {});
  void AddInflight(NodeId node, int32_t requests, int64_t prefill_tokens);
  void Warn(std::string text);

  const HandoffParams params_;
  HandoffState state_ = HandoffState::kNew;
  Purpose purpose_ = Purpose::kDispatch;  // while kPlacing
  NodeId moving_from_ = 0;                // while kPlacing for kMove: the dead decode node
  Epoch epoch_ = 1;
  NodeId decode_node_ = 0;
  NodeId prefill_node_ = 0;     // while kReservingWithPrefill, kPrefilling
  bool early_placing_ = false;  // while kReserving: a prefill node is being chosen beside the Reserve
  int64_t prefill_tokens_ = 0;  // counted on prefill_node_
  bool fell_back_ = false;      // on the local path after a failed handoff or a move
  int local_retries_ = 0;
  int redispatches_ = 0;
  std::vector<TokenId> generated_;
  std::shared_ptr<const proto::ReserveReply> reservation_;  // while kPlacingPrefill
  Nanos retry_until_ = 0;                                   // set at the first refusal: retries end then
  int64_t backoff_ms_ = 0;
  uint64_t timer_seq_ = 0;          // of the last kArmTimer
  std::vector<HandoffAction> out_;  // built by Handle()
};

const char* HandoffStateName(HandoffState state);
const char* HandoffEventName(HandoffEventKind kind);
const char* HandoffActionName(HandoffActionKind kind);

}  // namespace tandem::router::cluster
