// What tandem-ctl prints: the router's operator JSON (router/README.md,
// "Operator API") as text for people, and the router's error bodies as one
// line. Pure functions of the JSON: any shape, even a wrong one, prints
// something and never throws.
// Thread rule: free functions; thread-safe.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

namespace tandem::ctl {

// GET /admin/nodes as a table: one row per node, live ones then the recently dead.
std::string NodesTable(const nlohmann::json& reply);
// POST /admin/nodes/{node}/drain's answer as one sentence.
std::string DrainText(const nlohmann::json& reply);
// GET /admin/ready as a verdict line and a table of the pools.
std::string ReadinessText(const nlohmann::json& reply);
// The message of an error body ({"error": {"message"}}), else the body itself (cut to 300 bytes).
std::string ErrorMessage(const std::string& body);

}  // namespace tandem::ctl
