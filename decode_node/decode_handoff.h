// DecodeHandoff: the decode node's state for one epoch of one router request,
// as a state machine with no locks, no I/O and no clocks. The node feeds it
// events and runs the actions it returns (decode_node.cc). docs/protocol.md
// ("Decode node") has the same table.
//
// A request is remote (the router reserved blocks; a prefill node sends the KV)
// or local (the node prefills it itself, which starts in kRunning).
//
//   kReserving --Reserved--> kOpening --Opened--> kReceiving --+--KvLanded--> kLanded --KvDone--+
//       |  (nothing to fill: kWholeCached,                      |                              +--> kJoining
//       |   until the router's Release)                         +--KvDone---> kFirstToken -KvLanded+   |
//       +--ReserveFailed--> (erased)                                                         Output  |
//                                                                                       kRunning <---+
//   Any state --Cancel (router cancel/release, router lost)--> kCancelled: the engine's finish
//       record becomes the request's last entry (ABORT).
//   Any state before kJoining --KvFailed / KvDoneFailed / PeerClosed--> kEnded: an error entry
//       goes to the router now; the engine's finish record is swallowed.
//   Any state --Superseded (a newer epoch of the id)--> kEnded, no entry (the newer epoch owns it).
//   --EngineFinished--> erased (from kEnded/kCancelled after the engine let go; in the other
//       states the engine ended it itself: lease expiry, stop, length).
//
// While the KV transfer may still write (kOpening .. kFirstToken), leaving
// early also cancels the receiver session and quarantines landing memory.
//
// Thread rule: not thread-safe; the node's mutex guards each instance.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "common/base/ids.h"
#include "common/base/status.h"

namespace tandem::decode_node {

enum class DecodeState : uint8_t {
  kReserving,    // remote: the engine is reserving blocks for the prompt
  kOpening,      // remote: blocks reserved; the KV receiver session is opening
  kWholeCached,  // remote: every prompt block was cached here; waiting for the router's Release
  kReceiving,    // remote: KV arriving; neither every layer nor the first token (KvDone) is in
  kLanded,       // remote: every layer landed; KvDone still to come
  kFirstToken,   // remote: KvDone brought the first token; layers still landing
  kJoining,      // remote: CompleteReservation posted; the engine adds it to the batch
  kRunning,      // in the engine's batch: tokens flow to the router
  kCancelled,    // cancelled by the router: the engine's finish record is the last entry
  kEnded,        // an error entry went out (or none is owed); waiting for the engine to let go
  kErased,       // gone: the node removes the record
};
inline constexpr int kNumDecodeStates = 11;

enum class DecodeEventKind : uint8_t {
  kReserved,        // the engine reserved blocks and some need remote data
  kReservedCached,  // the engine reserved blocks and every prompt block was cached
  kReserveFailed,   // the engine refused the reservation (it keeps nothing)
  kOpened,          // the receiver session is open (the Reserve reply can go)
  kOpenFailed,      // the receiver session could not open
  kKvLanded,        // every layer is in the reserved device blocks
  kKvFailed,        // the receiver session failed (abort, lease, protocol error, transport)
  kKvDone,          // KvDone OK from the prefill node with the first token
  kKvDoneFailed,    // KvDone with an error from the prefill node
  kPeerClosed,      // the prefill node's connection closed
  kEngineOutput,    // the engine produced tokens for it (not finished)
  kEngineFinished,  // the engine ended it (stop, length, lease expiry, cancel, error)
  kCancel,          // the router cancelled or released it, or the router connection is gone
  kSuperseded,      // a newer epoch of the same id arrived
};
inline constexpr int kNumDecodeEvents = 14;

std::string_view DecodeStateName(DecodeState state);
std::string_view DecodeEventName(DecodeEventKind kind);

// What the node must do, in order.
enum class DecodeAction : uint8_t {
  kOpenSession,          // open the receiver session for the reserved blocks
  kReplyReserved,        // answer the router's Reserve with the reservation
  kReplyError,           // answer the router's Reserve with `status`
  kEngineCancel,         // cancel it in the engine (its finish record follows)
  kCancelSession,        // cancel the receiver session with `status`
  kReleaseLanding,       // quarantine landing memory the sender may still write
  kCompleteReservation,  // the engine takes the first token and joins the batch
  kSendError,            // send the router a finish entry with error `status`
  kForwardOutput,        // pass the engine's output (tokens, or the finish) to the router
  kErase,                // drop the record (and run waiting newer epochs)
};

struct DecodeEvent {
  DecodeEventKind kind{};
  Status status{};  // the failure, for the *Failed events, kCancel and kSuperseded
};

struct DecodeActions {
  std::vector<DecodeAction> actions;
  Status status;  // for kReplyError, kCancelSession and kSendError
  bool Has(DecodeAction a) const;
};

class DecodeHandoff {
 public:
  static DecodeHandoff Remote() { return DecodeHandoff(DecodeState::kReserving); }
  static DecodeHandoff Local() { return DecodeHandoff(DecodeState::kRunning); }
  // For tests: a request already in `state`.
  static DecodeHandoff InState(DecodeState state) { return DecodeHandoff(state); }

  DecodeActions Handle(const DecodeEvent& event);

  DecodeState state() const { return state_; }
  // The KV transfer may still write into this request's blocks.
  bool transfer_open() const;
  // The router waits for tokens or a finish entry of this epoch.
  bool owes_entry() const { return state_ != DecodeState::kEnded && state_ != DecodeState::kErased; }

 private:
  explicit DecodeHandoff(DecodeState state) : state_(state) {}
  // Leaves a remote request early: engine cancel, and the session while it may write.
  void Abandon(DecodeActions* out) const;

  DecodeState state_;
  Status reason_;  // why it was cancelled or ended early (replies to a late Reserve)
};

}  // namespace tandem::decode_node
