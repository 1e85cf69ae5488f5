#include "common/grammar/byte_stepper.h"

#include <algorithm>

#include "common/grammar/string_dfa.h"

namespace tandem::grammar {
namespace {

enum ObjectStep : uint8_t { kObjOpen, kObjColon, kObjValue, kObjAfterValue, kObjComma };
enum ArrayStep : uint8_t { kArrOpen, kArrAfterValue, kArrComma };
enum NumberStep : uint8_t {
  kNumStart, kNumMinus, kNumZero, kNumInt, kNumDot, kNumFrac, kNumExp, kNumExpSign, kNumExpDigits,
};

// kPopRetry: the top value is complete and does not take the byte; its parent gets it.
enum class Outcome { kRejected, kAlive, kEmitted, kPopRetry };

bool IsWhitespace(uint8_t c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }
bool IsDigit(uint8_t c) { return c >= '0' && c <= '9'; }

int ItemNode(const Node& n, int i) {
  return i < static_cast<int>(n.prefix_items.size()) ? n.prefix_items[i] : n.items;
}
// Items counted past this many are all alike (clamping keeps states repeating).
int ItemCountCap(const Node& n) {
  return n.max_items >= 0 ? n.max_items : std::max(n.min_items, static_cast<int>(n.prefix_items.size()));
}

Outcome FeedNumber(Frame& fr, bool integer_only, uint8_t c) {
  const bool digit = IsDigit(c);
  auto go = [&](NumberStep step, int a) {
    fr.sub = step;
    fr.a = a;
    return Outcome::kAlive;
  };
  const bool exp = !integer_only && (c == 'e' || c == 'E');
  switch (fr.sub) {
    case kNumStart:
      if (c == '-') return go(kNumMinus, 0);
      [[fallthrough]];
    case kNumMinus:
      if (c == '0') return go(kNumZero, 0);
      return digit ? go(kNumInt, 1) : Outcome::kRejected;
    case kNumZero:
    case kNumInt:
      if (fr.sub == kNumInt && digit && fr.a < kMaxIntegerDigits) return go(kNumInt, fr.a + 1);
      if (!integer_only && c == '.') return go(kNumDot, 0);
      return exp ? go(kNumExp, 0) : Outcome::kPopRetry;
    case kNumDot: return digit ? go(kNumFrac, 1) : Outcome::kRejected;
    case kNumFrac:
      if (digit && fr.a < kMaxFractionDigits) return go(kNumFrac, fr.a + 1);
      return exp ? go(kNumExp, 0) : Outcome::kPopRetry;
    case kNumExp:
      if (c == '+' || c == '-') return go(kNumExpSign, 0);
      [[fallthrough]];
    case kNumExpSign: return digit ? go(kNumExpDigits, 1) : Outcome::kRejected;
    case kNumExpDigits:
      return digit && fr.a < kMaxExponentDigits ? go(kNumExpDigits, fr.a + 1) : Outcome::kPopRetry;
  }
  return Outcome::kRejected;
}

bool NumberComplete(const Frame& fr) {
  return fr.sub == kNumZero || fr.sub == kNumInt || fr.sub == kNumFrac || fr.sub == kNumExpDigits;
}

Outcome FeedLiteral(Frame& fr, const Node& n, uint8_t c) {
  const size_t m = static_cast<size_t>(fr.a);
  const std::string& prefix = n.literals[fr.b];
  for (size_t i = fr.b; i < n.literals.size() && n.literals[i].compare(0, m, prefix, 0, m) == 0; ++i) {
    if (n.literals[i].size() > m && static_cast<uint8_t>(n.literals[i][m]) == c) {
      fr.a = static_cast<int32_t>(m + 1);
      fr.b = static_cast<int32_t>(i);
      return Outcome::kAlive;
    }
  }
  return prefix.size() == m ? Outcome::kPopRetry : Outcome::kRejected;
}

// Feeds bytes to the stack being built at the end of out->frames().
class Stepper {
 public:
  Stepper(const Grammar& g, ParseState* out) : g_(g), out_(out), f_(out->frames()) {}

  Outcome Feed(size_t start, uint8_t c) {
    while (true) {
      Frame& top = f_.back();
      Outcome r = Outcome::kRejected;
      switch (top.kind) {
        case FrameKind::kDocument:
          if (top.sub != 0) return Outcome::kRejected;
          top.sub = 1;
          return Dispatch(start, g_.root(), c);
        case FrameKind::kObject: return FeedObject(start, c);
        case FrameKind::kKey: return FeedKey(start, c);
        case FrameKind::kArray: return FeedArray(start, c);
        case FrameKind::kString: return FeedString(c);
        case FrameKind::kNumber: r = FeedNumber(top, g_.node(top.node).integer_only, c); break;
        case FrameKind::kLiteral: r = FeedLiteral(top, g_.node(top.node), c); break;
      }
      if (r != Outcome::kPopRetry) return r;
      f_.pop_back();
    }
  }

 private:
  // Frames above the document: the objects and arrays a value dispatched now would be inside.
  int Depth(size_t start) const { return static_cast<int>(f_.size() - start) - 1; }
  bool Fits(size_t start, int node) const { return Depth(start) + g_.node(node).min_depth <= kMaxNesting; }

  Outcome Push(Frame frame) {
    f_.push_back(frame);
    return Outcome::kAlive;
  }

  Outcome Dispatch(size_t start, int id, uint8_t c) {
    const Node& n = g_.node(id);
    if (!n.first_bytes[c] || !Fits(start, id)) return Outcome::kRejected;
    switch (n.kind) {
      case NodeKind::kObject: return Push(Frame{id, FrameKind::kObject, kObjOpen, 0, 0, -1});
      case NodeKind::kArray: return Push(Frame{id, FrameKind::kArray, kArrOpen, 0, 0, 0});
      case NodeKind::kString: return Push(Frame{id, FrameKind::kString, kStrClean, 0, 0, 0});
      case NodeKind::kNumber:
        f_.push_back(Frame{id, FrameKind::kNumber, kNumStart, 0, 0, 0});
        return FeedNumber(f_.back(), n.integer_only, c);
      case NodeKind::kLiteral:
        f_.push_back(Frame{id, FrameKind::kLiteral, 0, 0, 0, 0});
        return FeedLiteral(f_.back(), n, c);
      case NodeKind::kAnyOf: return DispatchAnyOf(start, n, c);
      case NodeKind::kAlias: break;
    }
    return Outcome::kRejected;
  }

  Outcome DispatchAnyOf(size_t start, const Node& n, uint8_t c) {
    int viable = -1;
    int num_viable = 0;
    for (int alt : n.alternatives) {
      if (g_.node(alt).first_bytes[c] && Fits(start, alt)) {
        viable = alt;
        ++num_viable;
      }
    }
    if (num_viable <= 1) return num_viable == 0 ? Outcome::kRejected : Dispatch(start, viable, c);
    const std::vector<Frame> snapshot(f_.begin() + start, f_.end());
    f_.resize(start);
    for (int alt : n.alternatives) {
      if (!g_.node(alt).first_bytes[c] || !Fits(start, alt)) continue;
      const size_t s = f_.size();
      f_.insert(f_.end(), snapshot.begin(), snapshot.end());
      const Outcome r = Dispatch(s, alt, c);
      if (r == Outcome::kAlive) {
        out_->CloseStack(s);
      } else if (r == Outcome::kRejected) {
        f_.resize(s);
      }
    }
    return Outcome::kEmitted;
  }

  // Whitespace between JSON tokens, bounded per gap.
  static Outcome Whitespace(Frame& fr) {
    if (fr.ws >= kMaxWhitespace) return Outcome::kRejected;
    ++fr.ws;
    return Outcome::kAlive;
  }

  // Listed property k may be the next key of the object frame `obj` (order, required, depth).
  bool Candidate(size_t start, const Frame& obj, const Node& n, int k) const {
    const int n_props = static_cast<int>(n.properties.size());
    const int limit = std::min(n.next_required[obj.a], n_props - 1);
    return k >= obj.a && k <= limit && Fits(start, n.properties[k].node);
  }
  // An additional (unlisted) property may come next: only once every required one is written,
  // so a model cannot put the required ones off forever.
  bool AdditionalAllowed(size_t start, const Frame& obj, const Node& n) const {
    return n.additional >= 0 && n.next_required[obj.a] == static_cast<int>(n.properties.size()) &&
           Fits(start, n.additional);
  }
  // Keys tracked while a key is typed: every listed name when an additional property may come
  // (it must differ from all of them), else only the candidates.
  bool Tracked(size_t start, const Frame& obj, const Node& n, int k) const {
    return AdditionalAllowed(start, obj, n) || Candidate(start, obj, n, k);
  }

  Outcome StartKey(size_t start, Frame& obj, const Node& n) {
    int first = -1;
    for (int k = 0; k < static_cast<int>(n.properties.size()) && first < 0; ++k) {
      if (Tracked(start, obj, n, k)) first = k;
    }
    bool any = AdditionalAllowed(start, obj, n);
    for (int k = obj.a; k < static_cast<int>(n.properties.size()) && !any; ++k) any = Candidate(start, obj, n, k);
    if (!any) return Outcome::kRejected;
    return Push(Frame{obj.node, FrameKind::kKey, kStrClean, 0, first, 0});
  }

  Outcome FeedObject(size_t start, uint8_t c) {
    Frame& fr = f_.back();
    const Node& n = g_.node(fr.node);
    if (IsWhitespace(c)) return Whitespace(fr);
    fr.ws = 0;
    const bool can_close = n.next_required[fr.a] == static_cast<int>(n.properties.size());
    switch (fr.sub) {
      case kObjOpen:
      case kObjAfterValue:
        if (c == '}' && can_close) {
          f_.pop_back();
          return Outcome::kAlive;
        }
        if (fr.sub == kObjOpen && c == '"') return StartKey(start, fr, n);
        if (fr.sub == kObjAfterValue && c == ',') {
          // A key must follow: check one can start (its '"' is checked again then).
          if (StartKey(start, fr, n) == Outcome::kRejected) return Outcome::kRejected;
          f_.pop_back();
          f_.back().sub = kObjComma;
          return Outcome::kAlive;
        }
        return Outcome::kRejected;
      case kObjComma: return c == '"' ? StartKey(start, fr, n) : Outcome::kRejected;
      case kObjColon:
        if (c != ':') return Outcome::kRejected;
        fr.sub = kObjValue;
        return Outcome::kAlive;
      case kObjValue: {
        const int value = fr.b >= 0 ? n.properties[fr.b].node : n.additional;
        fr.sub = kObjAfterValue;
        return Dispatch(start, value, c);
      }
    }
    return Outcome::kRejected;
  }

  // The key just closed names `property` (-1: an additional property). REQUIRES: the key frame
  // is already popped.
  static Outcome EndKey(Frame& obj, int property) {
    obj.b = property;
    if (property >= 0) obj.a = property + 1;
    obj.sub = kObjColon;
    obj.ws = 0;
    return Outcome::kAlive;
  }

  Outcome FeedKey(size_t start, uint8_t c) {
    Frame key = f_.back();
    f_.pop_back();  // the object on top: depth checks are for its values; pushed back below
    Frame& obj = f_.back();
    const Node& n = g_.node(key.node);
    bool starts_char = false;
    const uint8_t next = StringByte(key.sub, c, &starts_char);
    if (next == kStrReject) return Outcome::kRejected;
    bool alive = false;
    if (key.a < 0) {  // free text: an additional property's name
      if (next == kStrClose) return EndKey(obj, -1);
      alive = n.properties.empty() || c != '\\';
    } else {
      const size_t m = static_cast<size_t>(key.b);
      const std::string& prefix = n.properties[key.a].key;
      for (int k = 0; k < static_cast<int>(n.properties.size()) && !alive; ++k) {
        const std::string& name = n.properties[k].key;
        if (!Tracked(start, obj, n, k) || name.size() < m || name.compare(0, m, prefix, 0, m) != 0) continue;
        if (next == kStrClose && name.size() == m) {
          return Candidate(start, obj, n, k) ? EndKey(obj, k) : Outcome::kRejected;
        }
        if (next != kStrClose && name.size() > m && static_cast<uint8_t>(name[m]) == c) {
          key.a = k;
          key.b = static_cast<int32_t>(m + 1);
          alive = true;
        }
      }
      if (!alive && AdditionalAllowed(start, obj, n)) {
        if (next == kStrClose) return EndKey(obj, -1);
        // Diverged from every listed name: free text from here on, without escapes.
        if (key.sub == kStrClean && c != '\\') {
          key.a = -1;
          key.b = 0;
          alive = true;
        }
      }
    }
    if (!alive) return Outcome::kRejected;
    key.sub = next;
    f_.push_back(key);
    return Outcome::kAlive;
  }

  Outcome FeedArray(size_t start, uint8_t c) {
    Frame& fr = f_.back();
    const Node& n = g_.node(fr.node);
    if (IsWhitespace(c)) return Whitespace(fr);
    fr.ws = 0;
    if (c == ']' && fr.sub != kArrComma && fr.a >= n.min_items) {
      f_.pop_back();
      return Outcome::kAlive;
    }
    if (fr.sub == kArrAfterValue) {
      if (c != ',' || (n.max_items >= 0 && fr.a >= n.max_items)) return Outcome::kRejected;
      const int item = ItemNode(n, fr.a);
      if (item < 0 || !Fits(start, item)) return Outcome::kRejected;
      fr.sub = kArrComma;
      return Outcome::kAlive;
    }
    if (n.max_items >= 0 && fr.a >= n.max_items) return Outcome::kRejected;
    const int item = ItemNode(n, fr.a);
    if (item < 0) return Outcome::kRejected;
    fr.a = std::min(fr.a + 1, ItemCountCap(n));
    fr.sub = kArrAfterValue;
    return Dispatch(start, item, c);
  }

  Outcome FeedString(uint8_t c) {
    Frame& fr = f_.back();
    const Node& n = g_.node(fr.node);
    bool starts_char = false;
    const uint8_t next = StringByte(fr.sub, c, &starts_char);
    if (next == kStrReject) return Outcome::kRejected;
    if (next == kStrClose) {
      if (fr.a < n.min_length) return Outcome::kRejected;
      f_.pop_back();
      return Outcome::kAlive;
    }
    if (starts_char) {
      const int count = fr.a + 1;
      if (n.max_length >= 0 && count > n.max_length) return Outcome::kRejected;
      fr.a = n.max_length >= 0 ? count : std::min(count, n.min_length);
    }
    fr.sub = next;
    return Outcome::kAlive;
  }

  const Grammar& g_;
  ParseState* out_;
  std::vector<Frame>& f_;
};

}  // namespace

ParseState InitialState(const Grammar& grammar) {
  ParseState state;
  state.frames().push_back(Frame{});
  state.CloseStack(0);
  return state;
}

void Advance(const Grammar& grammar, const ParseState& in, uint8_t byte, ParseState* out) {
  out->Clear();
  Stepper stepper(grammar, out);
  std::vector<Frame>& f = out->frames();
  for (int i = 0; i < in.num_stacks(); ++i) {
    const size_t start = f.size();
    f.insert(f.end(), in.stack_begin(i), in.stack_end(i));
    const Outcome r = stepper.Feed(start, byte);
    if (r == Outcome::kAlive) {
      out->CloseStack(start);
    } else if (r == Outcome::kRejected || r == Outcome::kPopRetry) {
      f.resize(start);
    }
  }
}

bool CanEnd(const Grammar& grammar, const ParseState& state) {
  for (int i = 0; i < state.num_stacks(); ++i) {
    for (const Frame* top = state.stack_end(i) - 1; top >= state.stack_begin(i); --top) {
      if (top->kind == FrameKind::kDocument) {
        if (top->sub == 1) return true;
        break;
      }
      const bool complete =
          (top->kind == FrameKind::kNumber && NumberComplete(*top)) ||
          (top->kind == FrameKind::kLiteral && grammar.node(top->node).literals[top->b].size() == size_t(top->a));
      if (!complete) break;
    }
  }
  return false;
}

bool GetOpenString(const Grammar& grammar, const ParseState& state, OpenString* open) {
  if (state.num_stacks() != 1) return false;
  const Frame& top = *(state.stack_end(0) - 1);
  const Node& n = grammar.node(top.node);
  if (top.kind == FrameKind::kKey) {
    if (top.a >= 0 || !n.properties.empty()) return false;
    *open = OpenString{top.sub, 0, 0, -1};
    return true;
  }
  if (top.kind != FrameKind::kString) return false;
  *open = OpenString{top.sub, top.a, n.min_length, n.max_length};
  return true;
}

void SetOpenStringCount(const ParseState& state, int count, ParseState* out) {
  *out = state;
  Frame& top = out->frames().back();
  top.sub = kStrClean;
  top.a = top.kind == FrameKind::kString ? count : top.a;
}

}  // namespace tandem::grammar
