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
  EXPECT_EQ(c.port, 4321);     // flag beats file
  EXPECT_EQ(c.max_bytes, 77);  // nested key from file
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

enum class Shade { kLight, kDark };

struct Member {
  std::string name;
  std::string team;
  std::string role;  // optional
};

struct ShapedConfig {
  Shade shade = Shade::kLight;
  std::vector<Member> members;
  int port = 1;

  void Bind(ConfigBinder& b) {
    b.Choice("shade", shade, {{"light", Shade::kLight}, {"dark", Shade::kDark}}, "shade");
    b.Records("members", members, {{"name", &Member::name}, {"team", &Member::team}}, "members",
              {{"role", &Member::role}});
    b.Field("port", port, "port");
  }
};

TEST(ConfigBinderTest, ChoicesAndRecordsFromYamlAndFlags) {
  StatusOr<ShapedConfig> c =
      FromYaml<ShapedConfig>("shade: dark\nmembers:\n  - {name: a, team: x}\n  - {team: y, name: b, role: r}\n");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->shade, Shade::kDark);
  ASSERT_EQ(c->members.size(), 2u);
  EXPECT_EQ(c->members[0].role, "") << "an optional member left out keeps its default";
  EXPECT_EQ(c->members[1].name, "b");
  EXPECT_EQ(c->members[1].team, "y");
  EXPECT_EQ(c->members[1].role, "r");

  ShapedConfig f;
  ConfigBinder b;
  f.Bind(b);
  ASSERT_TRUE(
      ParseArgs(b, {"--shade", "dark", "--members", "name=m1,team=t1", "--members", "team=t2,role=r2,name=m2"}).ok());
  EXPECT_EQ(f.shade, Shade::kDark);
  ASSERT_EQ(f.members.size(), 2u);
  EXPECT_EQ(f.members[0].name, "m1");
  EXPECT_EQ(f.members[1].team, "t2");
  EXPECT_EQ(f.members[1].role, "r2");
  EXPECT_NE(b.Dump().find("shade: dark\nmembers: 2 items\n"), std::string::npos) << b.Dump();

  Status bad = FromYaml<ShapedConfig>("shade: dim\n").status();
  EXPECT_NE(bad.message().find("'shade': 'dim' is not one of light, dark"), std::string::npos) << bad.ToString();
  bad = FromYaml<ShapedConfig>("members: [{name: a}]\n").status();
  EXPECT_NE(bad.message().find("'members' item lacks 'team'"), std::string::npos) << bad.ToString();
  bad = FromYaml<ShapedConfig>("members: [{name: a, team: b, age: 3}]\n").status();
  EXPECT_NE(bad.message().find("unknown key 'age' (keys: name, team, role)"), std::string::npos) << bad.ToString();
  EXPECT_FALSE(FromYaml<ShapedConfig>("members: a\n").ok());
  EXPECT_FALSE(FromYaml<ShapedConfig>("members: [a]\n").ok());
  ShapedConfig g;
  ConfigBinder gb;
  g.Bind(gb);
  bad = ParseArgs(gb, {"--members", "name=secret"});
  EXPECT_NE(bad.message().find("lacks 'team'"), std::string::npos) << bad.ToString();
  EXPECT_EQ(bad.message().find("secret"), std::string::npos) << "an item's text leaked";
}

TEST(ConfigBinderTest, SecretsNeverShowTheirValue) {
  std::string token = "default-secret-0123456789";
  std::string plain = "visible";
  ConfigBinder b;
  b.Secret("token", token, "a shared secret");
  b.Field("plain", plain, "not a secret");
  CLI::App app;
  b.AddFlags(app);
  EXPECT_EQ(app.help().find("default-secret"), std::string::npos) << app.help();
  ASSERT_TRUE(b.ApplyYaml("token: from-yaml-abcdefghijklmnop\n", "test").ok());
  EXPECT_EQ(token, "from-yaml-abcdefghijklmnop");
  EXPECT_NE(b.Dump().find("token: (hidden)\nplain: visible\n"), std::string::npos) << b.Dump();
  token.clear();
  EXPECT_NE(b.Dump().find("token: \n"), std::string::npos) << b.Dump();
}

TEST(ConfigBinderTest, ParseCommandLineExitsOnHelpAndErrors) {
  ShapedConfig c;
  ConfigBinder b;
  c.Bind(b);
  const char* ok[] = {"prog", "--port", "5"};
  EXPECT_EQ(b.ParseCommandLine("prog", "test", 3, ok), std::nullopt);
  EXPECT_EQ(c.port, 5);
  ShapedConfig h;
  ConfigBinder hb;
  h.Bind(hb);
  const char* help[] = {"prog", "--help"};
  EXPECT_EQ(hb.ParseCommandLine("prog", "test", 2, help), std::optional<int>(0));
  ShapedConfig u;
  ConfigBinder ub;
  u.Bind(ub);
  const char* unknown[] = {"prog", "--colour", "red"};
  EXPECT_EQ(ub.ParseCommandLine("prog", "test", 3, unknown), std::optional<int>(2));
  ShapedConfig v;
  ConfigBinder vb;
  v.Bind(vb);
  const char* bad_value[] = {"prog", "--shade", "dim"};
  EXPECT_EQ(vb.ParseCommandLine("prog", "test", 3, bad_value), std::optional<int>(2));
}

TEST(ConfigBinderTest, ParseCommandLineTakesFlagsThatAreNoField) {
  ShapedConfig c;
  ConfigBinder b;
  c.Bind(b);
  bool quick = false;
  auto add_quick = [&quick](CLI::App& app) { app.add_flag("--quick", quick, "a bare flag"); };
  const char* args[] = {"prog", "--quick", "--port", "5"};
  EXPECT_EQ(b.ParseCommandLine("prog", "test", 4, args, add_quick), std::nullopt);
  EXPECT_TRUE(quick);
  EXPECT_EQ(c.port, 5);
  ShapedConfig u;
  ConfigBinder ub;
  u.Bind(ub);
  const char* without[] = {"prog", "--quick"};
  EXPECT_EQ(ub.ParseCommandLine("prog", "test", 2, without), std::optional<int>(2));  // not added: unknown
}

}  // namespace
}  // namespace tandem::config
