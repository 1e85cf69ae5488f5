#include "planner/profile_io.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "nlohmann/json.hpp"
#include "tests/planner/sample_profile.h"

namespace tandem::planner {
namespace {

using nlohmann::json;
using testing::SampleProfile;

// The sample's JSON with one change applied, parsed back.
template <typename Edit>
Status ParseEdited(Edit edit) {
  json j = json::parse(SerializeProfile(SampleProfile()));
  edit(j);
  return ParseProfile(j.dump(), "edited.json").status();
}

void ExpectError(const Status& status, StatusCode code, const std::string& needle) {
  EXPECT_EQ(status.code(), code) << status.ToString();
  EXPECT_NE(status.message().find(needle), std::string::npos) << "'" << needle << "' not in: " << status.ToString();
}

TEST(ProfileIoTest, RoundTripsEveryField) {
  const Profile p = SampleProfile();
  ASSERT_TRUE(ValidateProfile(p).ok()) << ValidateProfile(p).ToString();
  const std::string text = SerializeProfile(p);
  StatusOr<Profile> back = ParseProfile(text);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(SerializeProfile(*back), text);  // every field came back
  EXPECT_EQ(back->device.name, "NVIDIA H200");
  EXPECT_EQ(back->transfer.paths[0].points[2].runs, 512);
  EXPECT_DOUBLE_EQ(back->decode.fit.per_kv_token_seconds, 1.5e-8);
  EXPECT_EQ(back->prefill.capped, p.prefill.capped);
}

TEST(ProfileIoTest, KeysComeOutInTheDocumentedOrder) {
  const std::string text = SerializeProfile(SampleProfile());
  EXPECT_EQ(text, SerializeProfile(SampleProfile()));
  const char* order[] = {"\"format\"",  "\"format_version\"", "\"commit\"",  "\"version\"", "\"date\"",
                         "\"quick\"",   "\"device\"",         "\"model\"",   "\"engine\"",  "\"kv_capacity\"",
                         "\"prefill\"", "\"decode\"",         "\"transfer\""};
  size_t at = 0;
  for (const char* key : order) {
    const size_t found = text.find(key, at);
    ASSERT_NE(found, std::string::npos) << key << " missing or out of order";
    at = found;
  }
  EXPECT_EQ(text.back(), '\n');
}

TEST(ProfileIoTest, RefusesTextThatIsNotAProfile) {
  ExpectError(ParseProfile("", "p.json").status(), StatusCode::kInvalidArgument, "p.json: not valid JSON");
  ExpectError(ParseProfile("{\"format\": ", "p.json").status(), StatusCode::kInvalidArgument, "not valid JSON");
  ExpectError(ParseProfile("[1, 2]", "p.json").status(), StatusCode::kInvalidArgument, "a profile is a JSON object");
  ExpectError(ParseProfile(std::string(100, '[') + std::string(100, ']'), "p.json").status(),
              StatusCode::kInvalidArgument, "nests deeper");
  ExpectError(ParseProfile("{}", "p.json").status(), StatusCode::kInvalidArgument, "field 'format' is missing");
  ExpectError(ParseEdited([](json& j) { j["format"] = "vidur-profile"; }), StatusCode::kInvalidArgument,
              "format 'vidur-profile' is not a tandem-profile");
}

TEST(ProfileIoTest, RefusesAnotherFormatVersion) {
  ExpectError(ParseEdited([](json& j) { j["format_version"] = 2; }), StatusCode::kFailedPrecondition,
              "profile format_version 2; this build reads version 1");
  ExpectError(ParseEdited([](json& j) { j["format_version"] = "1"; }), StatusCode::kInvalidArgument,
              "field 'format_version' must be an integer");
}

TEST(ProfileIoTest, NamesTheMissingOrMistypedField) {
  ExpectError(ParseEdited([](json& j) { j.erase("commit"); }), StatusCode::kInvalidArgument,
              "edited.json: top level: field 'commit' is missing");
  ExpectError(ParseEdited([](json& j) { j["model"].erase("num_kv_heads"); }), StatusCode::kInvalidArgument,
              "model: field 'num_kv_heads' is missing");
  ExpectError(ParseEdited([](json& j) { j.erase("decode"); }), StatusCode::kInvalidArgument,
              "field 'decode' is missing");
  ExpectError(ParseEdited([](json& j) { j["decode"]["fit"].erase("r2"); }), StatusCode::kInvalidArgument,
              "decode.fit: field 'r2' is missing");
  ExpectError(ParseEdited([](json& j) { j["prefill"]["points"][1]["seconds"] = "fast"; }), StatusCode::kInvalidArgument,
              "prefill.points[1]: field 'seconds' must be a number");
  ExpectError(ParseEdited([](json& j) { j["transfer"]["paths"][0]["points"] = 3; }), StatusCode::kInvalidArgument,
              "transfer.paths[0]: field 'points' must be a list");
  ExpectError(ParseEdited([](json& j) { j["device"] = "H200"; }), StatusCode::kInvalidArgument,
              "field 'device' must be an object");
}

TEST(ProfileIoTest, RefusesValuesOutOfRangeOrInconsistent) {
  ExpectError(ParseEdited([](json& j) { j["kv_capacity"]["device_tokens"] = 1; }), StatusCode::kInvalidArgument,
              "kv_capacity.device_tokens is not engine.num_device_blocks × engine.block_size");
  ExpectError(ParseEdited([](json& j) { j["prefill"]["points"][0]["seconds"] = -1; }), StatusCode::kInvalidArgument,
              "prefill.points[0].seconds must be a positive number");
  ExpectError(ParseEdited([](json& j) { j["prefill"]["points"] = json::array(); }), StatusCode::kInvalidArgument,
              "prefill.points must not be empty");
  ExpectError(ParseEdited([](json& j) { j["prefill"]["points"][1] = j["prefill"]["points"][0]; }),
              StatusCode::kInvalidArgument, "prefill.points[1] repeats the shape");
  ExpectError(ParseEdited([](json& j) { j["decode"]["points"].erase(0); }), StatusCode::kInvalidArgument,
              "decode.points must hold at least 3 points");
  ExpectError(ParseEdited([](json& j) { j["decode"]["fit"]["r2"] = 1.5; }), StatusCode::kInvalidArgument,
              "decode.fit.r2 must be a number <= 1");
  ExpectError(ParseEdited([](json& j) { j["transfer"]["paths"][0]["fit"]["bytes_per_second"] = 0; }),
              StatusCode::kInvalidArgument, "transfer.paths[0].fit.bytes_per_second must be a positive number");
  ExpectError(ParseEdited([](json& j) { j["device"]["backend"] = "tpu"; }), StatusCode::kInvalidArgument,
              "device.backend must be cpu or cuda");
}

TEST(ProfileIoTest, ReadsProfilesMadeBeforeTheRoundsWereRecorded) {
  // Profiles of the first format-1 builds carry no spread and no decode repetitions.
  json j = json::parse(SerializeProfile(SampleProfile()));
  j["decode"].erase("repetitions");
  for (json& point : j["prefill"]["points"]) point.erase("spread");
  for (json& point : j["decode"]["points"]) point.erase("spread");
  StatusOr<Profile> p = ParseProfile(j.dump(), "old.json");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->decode.repetitions, 1);
  EXPECT_EQ(p->prefill.points[2].spread, 0);
  EXPECT_EQ(MeasurementSpread(*p).points, 3);  // prefill's three repetitions; decode measured once
  ExpectError(ParseEdited([](json& j) { j["decode"]["points"][1]["spread"] = -0.1; }), StatusCode::kInvalidArgument,
              "decode.points[1].spread must be a number >= 0");
  ExpectError(ParseEdited([](json& j) { j["decode"]["repetitions"] = 0; }), StatusCode::kInvalidArgument,
              "decode.repetitions must be >= 1");
}

TEST(ProfileIoTest, MeasurementSpreadIsTheHostsNoiseWhileProfiled) {
  Profile p = SampleProfile();
  ProfileSpread spread = MeasurementSpread(p);
  EXPECT_EQ(spread.points, 6);
  EXPECT_DOUBLE_EQ(spread.max, 0.04);
  EXPECT_EQ(spread.where, "decode 8 at 8192");
  EXPECT_DOUBLE_EQ(spread.median, 0.015);  // of 0, 0.01, 0.01, 0.02, 0.03, 0.04
  EXPECT_EQ(NoisyProfileWarning(p), "");   // one point's 4 % is jitter, not a moving host

  for (PrefillPoint& x : p.prefill.points) x.spread = 0.2;
  p.decode.points[0].spread = 0.08;
  spread = MeasurementSpread(p);
  EXPECT_DOUBLE_EQ(spread.median, 0.14);  // of 0, 0.04, 0.08, 0.2, 0.2, 0.2
  EXPECT_EQ(spread.where, "prefill 1 × 64");
  const std::string warning = NoisyProfileWarning(p);
  EXPECT_NE(warning.find("half its 6 points disagreed by more than 14 % (up to 20 %, prefill 1 × 64)"),
            std::string::npos)
      << warning;

  p.prefill.repetitions = 1;  // one run per point: nothing to disagree
  p.decode.repetitions = 1;
  EXPECT_EQ(MeasurementSpread(p).points, 0);
  EXPECT_EQ(NoisyProfileWarning(p), "");
}

TEST(ProfileIoTest, IgnoresUnknownKeys) {
  EXPECT_TRUE(ParseEdited([](json& j) { j["added_later"] = {{"x", 1}}; }).ok());
}

TEST(ProfileIoTest, SavesAndLoadsFiles) {
  const std::string path = ::testing::TempDir() + "/profile_io_test_" + std::to_string(::getpid()) + ".json";
  ASSERT_TRUE(SaveProfile(SampleProfile(), path).ok());
  StatusOr<Profile> loaded = LoadProfile(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_EQ(SerializeProfile(*loaded), SerializeProfile(SampleProfile()));
  std::remove(path.c_str());
  EXPECT_EQ(LoadProfile(path).status().code(), StatusCode::kNotFound);

  Profile invalid = SampleProfile();
  invalid.decode.points.clear();
  ExpectError(SaveProfile(invalid, path), StatusCode::kInvalidArgument, "decode.points");
  EXPECT_EQ(LoadProfile(path).status().code(), StatusCode::kNotFound);  // nothing written

  std::ofstream(path) << "{\"format\": \"tandem-profile\", \"format_version\": 1}";
  ExpectError(LoadProfile(path).status(), StatusCode::kInvalidArgument, path + ": top level: field 'commit'");
  std::remove(path.c_str());
}

}  // namespace
}  // namespace tandem::planner

namespace tandem::planner {
namespace {

// The GPU profiles committed for the planner's worked examples load and validate; the
// H100 one has the path the GPU cluster moves KV on.
TEST(ProfileIoTest, TheCommittedGpuProfilesLoad) {
  const char* source = std::getenv("TANDEM_SOURCE_DIR");
  if (source == nullptr) GTEST_SKIP() << "TANDEM_SOURCE_DIR is not set (ctest sets it)";
  for (const char* name : {"h200-llama3-8b.json", "h100-llama3-8b.json"}) {
    StatusOr<Profile> p = LoadProfile(std::string(source) + "/planner/profiles/" + name);
    ASSERT_TRUE(p.ok()) << name << ": " << p.status().ToString();
    EXPECT_EQ(p->device.backend, "cuda") << name;
    EXPECT_GT(p->decode.fit.r2, 0.95) << name;
  }
  StatusOr<Profile> h100 = LoadProfile(std::string(source) + "/planner/profiles/h100-llama3-8b.json");
  ASSERT_TRUE(h100.ok());
  const TransferPath *cuda_ipc = nullptr, *ucx = nullptr;
  for (const TransferPath& path : h100->transfer.paths) {
    if (path.transport == "cuda_ipc") cuda_ipc = &path;
    if (path.transport == "ucx") ucx = &path;
  }
  ASSERT_NE(cuda_ipc, nullptr);
  ASSERT_NE(ucx, nullptr);
  EXPECT_EQ(cuda_ipc->memory, "device to device (one GPU)");
  // A 4K prompt's KV (512 MiB, one run per layer) moves in a few milliseconds on one GPU,
  // tens of times faster than through host memory.
  const double bytes = 256 * 32 * 65536.0;
  EXPECT_LT(cuda_ipc->fit.Seconds(32, bytes), 5e-3);
  EXPECT_LT(10 * cuda_ipc->fit.Seconds(32, bytes), ucx->fit.Seconds(32, bytes));
}

}  // namespace
}  // namespace tandem::planner
