// The byte-level pushdown automaton of a Grammar: from a ParseState and one
// byte to the next ParseState. Everything above bytes (tokens, masks, caches)
// is built on Advance, so the rules of README.md live here and in string_dfa.h.
// Thread rule: pure functions over an immutable Grammar.
#pragma once

#include <cstdint>

#include "common/grammar/grammar.h"
#include "common/grammar/parse_state.h"

namespace tandem::grammar {

// The state before the first byte of a document.
ParseState InitialState(const Grammar& grammar);

// Sets *out to the states reached from `in` by `byte` (empty: the byte is not allowed).
// REQUIRES: out != &in.
void Advance(const Grammar& grammar, const ParseState& in, uint8_t byte, ParseState* out);

// True if the bytes so far form a complete document (some stack can end here).
bool CanEnd(const Grammar& grammar, const ParseState& state);

// An open string whose next bytes follow string_dfa.h alone until its closing quote.
struct OpenString {
  uint8_t step = 0;     // StringStep
  int count = 0;        // code points counted so far (as stored in the frame)
  int min_length = 0;   // bounds; max_length -1 = unbounded
  int max_length = -1;
};

// True, filling *open, if `state` is one stack whose top frame is such a string: a string value,
// or a key of an object that lists no properties. The string tables of the vocabulary then give
// the tokens that stay inside it.
bool GetOpenString(const Grammar& grammar, const ParseState& state, OpenString* open);

// Copies `state` (which GetOpenString accepted) with the open string's step set to kStrClean and
// its count to `count` (which must satisfy the bounds); the caller then feeds the closing quote.
void SetOpenStringCount(const ParseState& state, int count, ParseState* out);

}  // namespace tandem::grammar
