// tandem-ctl: the operator's command line for a running cluster, over the
// router's admin API (router/README.md, "Operator API"):
//   tandem-ctl [--router URL] [--admin-key-file FILE] [--json] nodes | drain NODE | ready
// The admin key comes from --admin-key-file, else from $TANDEM_ADMIN_KEY. Exit
// status: 0 done (ready: the cluster is ready), 1 refused or failed (a bad key,
// an unreachable router, an unknown node; ready: not ready), 2 bad usage.
// Thread rule: main thread only.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "common/net/cluster_token_file.h"
#include "common/net/http_client.h"
#include "tools/ctl/ctl_format.h"

namespace tandem::ctl {
namespace {

using nlohmann::json;

struct CtlOptions {
  std::string router = "http://127.0.0.1:8000";
  std::string admin_key_file;
  int64_t timeout_ms = 10'000;
  bool json = false;
  std::string node;  // drain
};

int Fail(const std::string& message) {
  std::fprintf(stderr, "tandem-ctl: %s\n", message.c_str());
  return 1;
}

StatusOr<std::string> AdminKey(const CtlOptions& o) {
  if (!o.admin_key_file.empty()) return net::ReadSecretFile(o.admin_key_file, "--admin-key-file");
  const char* key = std::getenv("TANDEM_ADMIN_KEY");
  if (key != nullptr && *key != '\0') return std::string(key);
  return InvalidArgumentError("no admin key: pass --admin-key-file FILE or set TANDEM_ADMIN_KEY");
}

// Calls the admin API; prints the answer (as text, or the JSON with --json). `ok_status`
// answers print to stdout; `soft_status` (e.g. 503 not ready) too, but exit 1.
int Call(const CtlOptions& o, const std::string& method, const std::string& path, int ok_status, int soft_status,
         std::string (*format)(const json&)) {
  StatusOr<net::HttpUrl> url = net::ParseHttpUrl(o.router);
  if (!url.ok()) return Fail("--router: " + url.status().message());
  StatusOr<std::string> key = AdminKey(o);
  if (!key.ok()) return Fail(key.status().message());
  net::HttpRequest request;
  request.method = method;
  request.target = path;
  request.timeout_ms = o.timeout_ms;
  request.headers = {{"Authorization", "Bearer " + *key}};
  StatusOr<net::HttpResponse> response = net::SendHttpRequest(url->host, url->port, request);
  if (!response.ok()) return Fail("cannot reach the router at " + o.router + ": " + response.status().message());
  if (response->status != ok_status && response->status != soft_status) {
    const std::string message = ErrorMessage(response->body);
    switch (response->status) {
      case 401: return Fail("the router refused the admin key (401): " + message);
      case 403: return Fail("the router's admin API is off (403): " + message);
      default: return Fail(method + " " + path + ": HTTP " + std::to_string(response->status) + ": " + message);
    }
  }
  const json body = json::parse(response->body, nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded())
    return Fail("the router answered something that is not JSON: " + response->body.substr(0, 300));
  std::fputs(o.json ? (body.dump(2) + "\n").c_str() : format(body).c_str(), stdout);
  return response->status == ok_status ? 0 : 1;
}

// The node as one path segment: every byte but unreserved ones percent-escaped.
std::string EscapeSegment(const std::string& text) {
  std::string out;
  for (unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      char buf[4];
      std::snprintf(buf, sizeof(buf), "%%%02X", c);
      out += buf;
    }
  }
  return out;
}

int Run(int argc, char** argv) {
  CtlOptions o;
  CLI::App app(
      "tandem-ctl: list, drain and check the nodes of a Tandem cluster through its router's admin API "
      "(admin key from --admin-key-file or $TANDEM_ADMIN_KEY)",
      "tandem-ctl");
  app.add_option("--router", o.router, "the router's HTTP address")->capture_default_str();
  app.add_option("--admin-key-file", o.admin_key_file, "file holding the router's admin key");
  app.add_option("--timeout-ms", o.timeout_ms, "deadline of the call to the router, ms")->capture_default_str();
  app.add_flag("--json", o.json, "print the router's JSON instead of a table");
  app.require_subcommand(1);
  app.fallthrough();  // the options above also after the subcommand: `tandem-ctl nodes --json`
  CLI::App* nodes = app.add_subcommand("nodes", "list the nodes: role, state, load, KV, version, last heartbeat");
  CLI::App* drain = app.add_subcommand("drain", "drain a node: it gets no new work and exits once idle");
  drain->add_option("node", o.node, "node id, name (if only one node has it) or control address")->required();
  CLI::App* ready = app.add_subcommand("ready", "cluster readiness: which pools are missing (exit 1 if not ready)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;  // 0 for --help
  }
  if (o.timeout_ms <= 0) {
    std::fprintf(stderr, "tandem-ctl: --timeout-ms must be positive\n");
    return 2;
  }
  if (nodes->parsed()) return Call(o, "GET", "/admin/nodes", 200, 200, NodesTable);
  if (drain->parsed()) return Call(o, "POST", "/admin/nodes/" + EscapeSegment(o.node) + "/drain", 202, 202, DrainText);
  if (ready->parsed()) return Call(o, "GET", "/admin/ready", 200, 503, ReadinessText);
  return 2;
}

}  // namespace
}  // namespace tandem::ctl

int main(int argc, char** argv) {
  try {
    return tandem::ctl::Run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tandem-ctl: %s\n", e.what());
    return 1;
  }
}
