// router_fake_server: the real HttpServer over FakeEngineClient + FakeTextCodec, for
// checking wire compatibility with outside clients (the npm `openai` package,
// curl, promtool on /metrics). Prints "PORT <n>" and serves until stdin closes.
//   router_fake_server [--api-key KEY] [--tool-call-parser hermes|llama3_json]
// A chat prompt containing "call a tool" is answered with a get_weather call for
// Paris in the parser's format (openai_tools_check.mjs).
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
  ToolCallFormat tool_format = ToolCallFormat::kHermes;
  RouterConfig config;
  config.listen_port = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--api-key") config.api_keys = {{argv[i + 1], "tenant-a"}};
    if (flag == "--tool-call-parser") tool_format = *ResolveToolCallFormat(argv[i + 1], "");
  }
  const std::string call = tool_format == ToolCallFormat::kHermes
                               ? "Sure.<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>"
                               : "<|python_tag|>{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}";
  engine.SetScriptFn([call](const GenerateRequest& request) {
    const std::string prompt(request.prompt_token_ids.begin(), request.prompt_token_ids.end());
    if (prompt.find("call a tool") == std::string::npos) {
      return testing::Script{{testing::kWordBase, testing::kWordBase + 1, testing::kEos}, 1, 2};
    }
    std::vector<tandem::TokenId> tokens = testing::ByteTokens(call);
    tokens.push_back(testing::kEos);
    return testing::Script{tokens, 4, 0};
  });
  testing::FakeTextCodec codec;
  RouterDeps deps;
  deps.engine = &engine;
  deps.codec = &codec;
  deps.model = {"tiny", 256, testing::kFakeVocab, 1700000000, {testing::kEos}};
  deps.model.tool_call_format = tool_format;
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
