// router_fake_server: the real HttpServer over FakeEngineClient + FakeTextCodec, for
// checking wire compatibility with outside clients (the npm `openai` package,
// curl, promtool on /metrics). Prints "PORT <n>" and serves until stdin closes.
//   router_fake_server [--api-key KEY]
#include <cstdio>
#include <iostream>
#include <string>

#include "common/metrics/metrics_registry.h"
#include "router/http_server.h"
#include "tests/router/fake_engine_client.h"
#include "tests/router/fake_text_codec.h"

int main(int argc, char** argv) {
  using namespace tandem::router;
  testing::FakeEngineClient engine;
  engine.SetScript({{testing::kWordBase, testing::kWordBase + 1, testing::kEos}, 1, 2});
  testing::FakeTextCodec codec;
  RouterConfig config;
  config.listen_port = 0;
  if (argc == 3 && std::string(argv[1]) == "--api-key") config.api_keys = {{argv[2], "tenant-a"}};
  RouterDeps deps;
  deps.engine = &engine;
  deps.codec = &codec;
  deps.model = {"tiny", 64, testing::kFakeVocab, 1700000000, {testing::kEos}};
  tandem::metrics::MetricsRegistry registry;
  deps.metrics = &registry;
  deps.metrics_text = [&registry] { return registry.RenderText(); };
  HttpServer server(config, deps);
  if (tandem::Status s = server.Start(); !s.ok()) {
    std::fprintf(stderr, "%s\n", s.ToString().c_str());
    return 1;
  }
  std::printf("PORT %u\n", server.port());
  std::fflush(stdout);
  std::string line;
  while (std::getline(std::cin, line)) {
  }
  engine.Shutdown();
  server.Stop();
  return 0;
}
