#include "common/config/config_binder.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

namespace tandem::config {
namespace {

struct DemoConfig {
  int port = 9000;
  int64_t max_bytes = 1 << 20;
  double ratio = 0.5;
  bool tls = false;
  std::string host = "127.0.0.1";
  std::vector<std::string> keys;

  void Bind(ConfigBinder& b) {
    b.Field("port", port, "TCP port");
    b.Field("limits.max_bytes", max_bytes, "byte cap");
    b.Field("ratio", ratio, "a ratio");
    b.Field("tls", tls, "use TLS");
    b.Field("host", host, "listen host");
    b.Field("keys", keys, "API keys");
  }
};

Status ParseArgs(ConfigBinder& binder, std::vector<std::string> args) {
  CLI::App app("test");
  binder.AddFlags(app);
  std::vector<const char*> argv = {"prog"};
  for (auto& a : args) argv.push_back(a.c_str());
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::ParseError& e) {
    return InvalidArgumentError(e.what());
  }
  return binder.Apply();
}

TEST(ConfigBinderTest, DefaultsStayWithoutInput) {
  DemoConfig c;
  ConfigBinder b;
  c.Bind(b);
  ASSERT_TRUE(ParseArgs(b, {}).ok());
  EXPECT_EQ(c.port, 9000);
  EXPECT_EQ(c.host, "127.0.0.1");
}

TEST(ConfigBinderTest, YamlThenFlagsOverride) {
  std::string path = ::testing::TempDir() + "/demo.yaml";
  {
    std::ofstream out(path);
    out << "port: 1234\nlimits:\n  max_bytes: 77\nratio: 0.25\ntls: true\nkeys: [a, b]\nhost: h1\n";
  }
  DemoConfig c;
  ConfigBinder b;
  c.Bind(b);
  ASSERT_TRUE(ParseArgs(b, {"--config", path, "--port", "4321", "--keys", "x"}).ok());
  EXPECT_EQ(c.port, 4321);        // flag beats file
  EXPECT_EQ(c.max_bytes, 77);     // nested key from file
  EXPECT_DOUBLE_EQ(c.ratio, 0.25);
  EXPECT_TRUE(c.tls);
  EXPECT_EQ(c.host, "h1");
  EXPECT_EQ(c.keys, std::vector<std::string>({"x"}));
  std::remove(path.c_str());
}

TEST(ConfigBinderTest, BadInputIsAClearError) {
  DemoConfig c;
  ConfigBinder b;
  c.Bind(b);
  Status unknown = b.ApplyYaml("prot: 1\n", "f.yaml");
  EXPECT_EQ(unknown.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(unknown.message().find("unknown config key 'prot'"), std::string::npos);
  EXPECT_FALSE(b.ApplyYaml("port: abc\n", "f.yaml").ok());
  EXPECT_FALSE(b.ApplyYaml("port: [1, 2]\n", "f.yaml").ok());
  EXPECT_FALSE(b.ApplyYaml("tls: maybe\n", "f.yaml").ok());
  EXPECT_FALSE(b.ApplyYaml("port: {a: b: c\n", "f.yaml").ok());
  EXPECT_FALSE(b.ApplyYaml("- 1\n- 2\n", "f.yaml").ok());
  EXPECT_FALSE(ParseArgs(b, {"--port", "12x"}).ok());
  EXPECT_EQ(ParseArgs(b, {"--config", "/nonexistent.yaml"}).code(), StatusCode::kNotFound);
  EXPECT_EQ(c.port, 9000);
}

}  // namespace
}  // namespace tandem::config
