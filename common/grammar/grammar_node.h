// The compiled form of a response format: a graph of value nodes, one per
// schema (sub)schema, that the byte stepper walks. Nodes refer to each other by
// index, so recursive $refs are cycles in the graph.
// Thread rule: plain data, immutable once the Grammar owning it is built.
#pragma once

#include <bitset>
#include <cstdint>
#include <string>
#include <vector>

namespace tandem::grammar {

// Deepest nesting of objects and arrays a generated document may have.
inline constexpr int kMaxNesting = 32;
// Longest whitespace run allowed between two JSON tokens (bytes of ' ', '\n', '\t', '\r').
inline constexpr int kMaxWhitespace = 12;
// Most digits in the integer part, the fraction and the exponent of a number.
inline constexpr int kMaxIntegerDigits = 15;
inline constexpr int kMaxFractionDigits = 15;
inline constexpr int kMaxExponentDigits = 2;
// min_depth of a node no finite document satisfies (or only one nested too deep).
inline constexpr int kUnsatisfiable = 1 << 20;

enum class NodeKind : uint8_t {
  kObject,   // '{' properties '}'
  kArray,    // '[' items ']'
  kString,   // a free string with length bounds
  kNumber,   // a JSON number (integer_only: no fraction or exponent)
  kLiteral,  // one of a set of serialized JSON values (enum, const, true, false, null)
  kAnyOf,    // any of the alternatives
  kAlias,    // a $ref under construction; none remain after Grammar::Compile
};

struct Property {
  std::string key;    // the name as it is written between the quotes (JSON-escaped)
  int node = -1;      // value schema
  bool required = false;
};

struct Node {
  NodeKind kind = NodeKind::kAnyOf;
  // kObject: properties in schema order; `additional` is the schema of properties not listed,
  // -1 when they are not allowed. next_required[i]: index of the first required property >= i
  // (properties.size() when none); size properties.size() + 1 (derived).
  std::vector<Property> properties;
  int additional = -1;
  std::vector<int> next_required;
  // kArray: item i uses prefix_items[i] while i < prefix_items.size(), else `items` (-1: no
  // more items). max_items -1 = unbounded.
  std::vector<int> prefix_items;
  int items = -1;
  int min_items = 0;
  int max_items = -1;
  // kString: bounds in code points; max_length -1 = unbounded.
  int min_length = 0;
  int max_length = -1;
  // kNumber
  bool integer_only = false;
  // kLiteral: serialized values, sorted bytewise, no duplicates.
  std::vector<std::string> literals;
  // kAnyOf: alternatives (never kAlias or kAnyOf of themselves through kAnyOf only).
  std::vector<int> alternatives;
  // kAlias: the node this one stands for.
  int target = -1;
  // Derived by Grammar::Compile: bytes a value of this node can start with, and the fewest
  // object/array levels a value needs (kUnsatisfiable when none exists).
  std::bitset<256> first_bytes;
  int min_depth = kUnsatisfiable;
};

}  // namespace tandem::grammar
