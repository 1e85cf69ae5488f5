// DeriveGrammar: alias resolution and the per-node facts the stepper needs.
#include <algorithm>

#include "common/grammar/grammar.h"

namespace tandem::grammar {
namespace {

// Follows alias chains; -1 for a cycle of aliases.
int Resolve(const std::vector<Node>& nodes, int id) {
  for (size_t steps = 0; id >= 0 && nodes[id].kind == NodeKind::kAlias; ++steps) {
    if (steps > nodes.size()) return -1;
    id = nodes[id].target;
  }
  return id;
}

Status ResolveAliases(std::vector<Node>* nodes, int* root) {
  const Status circular = InvalidArgumentError("schema.$ref: circular reference that never reaches a schema");
  auto fix = [&](int* id) {
    if (*id < 0) return true;
    *id = Resolve(*nodes, *id);
    return *id >= 0;
  };
  if (!fix(root)) return circular;
  for (Node& n : *nodes) {
    if (n.kind == NodeKind::kAlias) continue;
    bool ok = fix(&n.additional) && fix(&n.items);
    for (Property& p : n.properties) ok = ok && fix(&p.node);
    for (int& i : n.prefix_items) ok = ok && fix(&i);
    for (int& i : n.alternatives) ok = ok && fix(&i);
    if (!ok) return circular;
  }
  return Status::Ok();
}

// True if an anyOf reaches itself through anyOf alternatives only (the stepper would loop).
bool AnyOfCycle(const std::vector<Node>& nodes) {
  std::vector<int> color(nodes.size(), 0);  // 0 new, 1 on the path, 2 done
  std::vector<std::pair<int, size_t>> stack;
  for (size_t start = 0; start < nodes.size(); ++start) {
    if (nodes[start].kind != NodeKind::kAnyOf || color[start] != 0) continue;
    stack.push_back({static_cast<int>(start), 0});
    color[start] = 1;
    while (!stack.empty()) {
      auto& [id, next] = stack.back();
      const Node& n = nodes[id];
      if (next == n.alternatives.size()) {
        color[id] = 2;
        stack.pop_back();
        continue;
      }
      const int alt = n.alternatives[next++];
      if (nodes[alt].kind != NodeKind::kAnyOf) continue;
      if (color[alt] == 1) return true;
      if (color[alt] == 0) {
        color[alt] = 1;
        stack.push_back({alt, 0});
      }
    }
  }
  return false;
}

int ItemNode(const Node& n, int i) {
  return i < static_cast<int>(n.prefix_items.size()) ? n.prefix_items[i] : n.items;
}

int MinDepth(const std::vector<Node>& nodes, const Node& n) {
  int depth = 0;
  switch (n.kind) {
    case NodeKind::kObject:
      for (const Property& p : n.properties) {
        if (p.required) depth = std::max(depth, nodes[p.node].min_depth);
      }
      depth += 1;
      break;
    case NodeKind::kArray:
      for (int i = 0; i < n.min_items; ++i) {
        const int item = ItemNode(n, i);
        depth = std::max(depth, item < 0 ? kUnsatisfiable : nodes[item].min_depth);
        if (i >= static_cast<int>(n.prefix_items.size())) break;  // the rest repeat `items`
      }
      depth += 1;
      break;
    case NodeKind::kAnyOf:
      depth = kUnsatisfiable;
      for (int alt : n.alternatives) depth = std::min(depth, nodes[alt].min_depth);
      break;
    case NodeKind::kAlias:
      depth = kUnsatisfiable;
      break;
    default:
      depth = 0;
  }
  return depth > kMaxNesting ? kUnsatisfiable : depth;
}

void DeriveFirstBytes(std::vector<Node>* nodes) {
  for (Node& n : *nodes) {
    switch (n.kind) {
      case NodeKind::kObject: n.first_bytes.set('{'); break;
      case NodeKind::kArray: n.first_bytes.set('['); break;
      case NodeKind::kString: n.first_bytes.set('"'); break;
      case NodeKind::kNumber:
        n.first_bytes.set('-');
        for (int c = '0'; c <= '9'; ++c) n.first_bytes.set(c);
        break;
      case NodeKind::kLiteral:
        for (const auto& lit : n.literals) n.first_bytes.set(static_cast<unsigned char>(lit[0]));
        break;
      default: break;
    }
  }
  for (bool changed = true; changed;) {  // anyOf unions; no anyOf cycles, so this ends
    changed = false;
    for (Node& n : *nodes) {
      if (n.kind != NodeKind::kAnyOf) continue;
      std::bitset<256> bytes;
      for (int alt : n.alternatives) bytes |= (*nodes)[alt].first_bytes;
      if (bytes != n.first_bytes) {
        n.first_bytes = bytes;
        changed = true;
      }
    }
  }
}

}  // namespace

Status DeriveGrammar(std::vector<Node>* nodes, int* root) {
  TANDEM_RETURN_IF_ERROR(ResolveAliases(nodes, root));
  if (AnyOfCycle(*nodes)) {
    return InvalidArgumentError("schema.$ref: circular reference through anyOf/oneOf without an object or array");
  }
  DeriveFirstBytes(nodes);
  for (Node& n : *nodes) {
    const int count = static_cast<int>(n.properties.size());
    n.next_required.assign(count + 1, count);
    for (int i = count - 1; i >= 0; --i) n.next_required[i] = n.properties[i].required ? i : n.next_required[i + 1];
  }
  // min_depth only decreases from kUnsatisfiable, so the loop ends.
  for (bool changed = true; changed;) {
    changed = false;
    for (Node& n : *nodes) {
      const int depth = MinDepth(*nodes, n);
      if (depth != n.min_depth) {
        n.min_depth = depth;
        changed = true;
      }
    }
  }
  if ((*nodes)[*root].min_depth >= kUnsatisfiable) {
    return InvalidArgumentError("schema: no document satisfies it (a required value is impossible, or needs more "
                                "than 32 nested levels)");
  }
  return Status::Ok();
}

}  // namespace tandem::grammar
