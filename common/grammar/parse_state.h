// ParseState: where a byte-level parse of a document stands. It is a set of
// stacks (several while anyOf alternatives are still undecided); each stack is
// a run of Frames, the bottom one the document, the top one the innermost
// value. Frames are plain 16-byte values, so a state hashes and compares as
// bytes (the mask caches key on it).
// Thread rule: a value; not shared.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace tandem::grammar {

enum class FrameKind : uint8_t { kDocument, kObject, kKey, kArray, kString, kNumber, kLiteral };

// One level of a stack. Fields by kind:
//   kDocument: sub 0 = expecting the value, 1 = done.
//   kObject:   sub = ObjectStep, ws = whitespace run, a = index of the next property that may
//              appear, b = property whose value comes next (-1: an additional property).
//   kKey:      node = the object's node, sub = StringStep, a = listed key still matched (-1:
//              free text), b = bytes of it matched.
//   kArray:    sub = ArrayStep, ws = whitespace run, a = items so far (clamped, see stepper).
//   kString:   sub = StringStep, a = code points so far (clamped, see stepper).
//   kNumber:   sub = NumberStep, a = digits in the current part.
//   kLiteral:  a = bytes matched, b = first literal with that prefix.
struct Frame {
  int32_t node = 0;
  FrameKind kind = FrameKind::kDocument;
  uint8_t sub = 0;
  uint16_t ws = 0;
  int32_t a = 0;
  int32_t b = 0;
};
static_assert(sizeof(Frame) == 16, "Frame must have no padding: states compare as bytes");

class ParseState {
 public:
  bool empty() const { return ends_.empty(); }
  int num_stacks() const { return static_cast<int>(ends_.size()); }
  // Frames of stack i, bottom first.
  const Frame* stack_begin(int i) const { return frames_.data() + (i == 0 ? 0 : ends_[i - 1]); }
  const Frame* stack_end(int i) const { return frames_.data() + ends_[i]; }
  int stack_size(int i) const { return static_cast<int>(stack_end(i) - stack_begin(i)); }

  void Clear() {
    frames_.clear();
    ends_.clear();
  }
  // The bytes of the state, for map keys.
  std::string Key() const {
    std::string key(reinterpret_cast<const char*>(ends_.data()), ends_.size() * sizeof(uint32_t));
    key.append(reinterpret_cast<const char*>(frames_.data()), frames_.size() * sizeof(Frame));
    return key;
  }
  friend bool operator==(const ParseState& x, const ParseState& y) {
    return x.ends_ == y.ends_ && x.frames_.size() == y.frames_.size() &&
           std::memcmp(x.frames_.data(), y.frames_.data(), x.frames_.size() * sizeof(Frame)) == 0;
  }

  // Building (the stepper): frames are appended for the stack being built, then it is closed.
  std::vector<Frame>& frames() { return frames_; }
  // Closes the stack frames()[start..] unless it equals an earlier one (then drops it).
  void CloseStack(size_t start) {
    const size_t size = frames_.size() - start;
    size_t begin = 0;
    for (uint32_t end : ends_) {
      if (end - begin == size &&
          std::memcmp(frames_.data() + begin, frames_.data() + start, size * sizeof(Frame)) == 0) {
        frames_.resize(start);
        return;
      }
      begin = end;
    }
    ends_.push_back(static_cast<uint32_t>(frames_.size()));
  }

 private:
  std::vector<Frame> frames_;
  std::vector<uint32_t> ends_;  // ends_[i]: one past the last frame of stack i
};

}  // namespace tandem::grammar
