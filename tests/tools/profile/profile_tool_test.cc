// tandem-profile --quick on the tiny model with the CPU backend: the profile it
// writes loads and validates, carries this build's commit, and is monotone where
// the engine must be (more prompt tokens take longer, a larger decode batch takes
// longer, more KV bytes take longer to move); grid points over a small KV pool
// are left out and named; a batch prefilled over several steps is timed only
// once every sequence decodes. Bad flags and a missing model end with a message.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>

#include "common/base/build_info.h"
#include "planner/profile_io.h"
#include "tests/testing/run_command.h"

namespace tandem::planner {
namespace {

std::string BinaryDir() {
  const char* dir = std::getenv("TANDEM_BINARY_DIR");
  return dir != nullptr ? dir : ".";
}

using Result = ::tandem::testing::CommandResult;
using ::tandem::testing::RunCommand;

class ProfileToolTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = new std::string(::testing::TempDir() + "/profile_tool_test_" + std::to_string(::getpid()));
    std::filesystem::create_directories(*root_);
    Result made =
        RunCommand(BinaryDir() + "/tools/make_model/tandem-make-model --preset tiny -f -o " + *root_ + "/tiny");
    ASSERT_EQ(made.exit_code, 0) << made.output;
  }
  static void TearDownTestSuite() {
    std::filesystem::remove_all(*root_);
    delete root_;
  }
  static std::string Profiler() {
    return BinaryDir() + "/tools/profile/tandem-profile --model-dir " + *root_ + "/tiny";
  }

  static std::string* root_;
};

std::string* ProfileToolTest::root_ = nullptr;

TEST_F(ProfileToolTest, QuickCpuProfileIsWellFormedAndMonotone) {
  const std::string output = *root_ + "/tiny-cpu.json";
  // A small engine: the longest prompts and the largest decode batches do not fit, a
  // 256-token prompt takes two steps, and a batch of 8 × 128 tokens is prefilled over
  // several steps (its first sequences decode meanwhile).
  Result run = RunCommand(Profiler() +
                          " --quick --kv-num-device-blocks 80 --scheduler-max-num-batched-tokens 256"
                          " --scheduler-max-prefill-chunk-tokens 128 --scheduler-max-model-len 300 --output " +
                          output);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("fit: step = "), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("R² "), std::string::npos);
  StatusOr<Profile> loaded = LoadProfile(output);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString() << "\n" << run.output;
  const Profile& p = *loaded;

  EXPECT_EQ(p.commit, std::string(BuildCommit()));
  EXPECT_TRUE(p.quick);
  // Rounds over the grids (prefill 3, decode 2 with --quick), each point's spread recorded and summed up.
  EXPECT_EQ(p.prefill.repetitions, 3);
  EXPECT_EQ(p.decode.repetitions, 2);
  const ProfileSpread spread = MeasurementSpread(p);
  EXPECT_EQ(spread.points, static_cast<int>(p.prefill.points.size() + p.decode.points.size()));
  EXPECT_GT(spread.max, 0) << "no two rounds of any point took the same time to the nanosecond";
  EXPECT_NE(run.output.find("the rounds agreed within "), std::string::npos) << run.output;
  EXPECT_EQ(p.device.backend, "cpu");
  EXPECT_EQ(p.model.id, "tiny");
  EXPECT_EQ(p.model.num_layers, 2);
  EXPECT_EQ(p.engine.num_device_blocks, 80);
  EXPECT_EQ(p.engine.max_model_len, 300);
  EXPECT_EQ(p.kv_capacity.device_tokens, 80 * 16);
  EXPECT_EQ(p.kv_capacity.bytes_per_token, 2 * 2 * 2 * 16 * 4);  // layers × K,V × kv heads × head_dim × f32

  // Prefill: per request count, 4× the prompt tokens take longer (a factor of 4 keeps
  // noise on a loaded machine from flipping the order); the longest takes longest.
  std::map<int, std::map<int, double>> prefill;  // requests -> prompt tokens -> seconds
  for (const PrefillPoint& x : p.prefill.points) prefill[x.requests][x.prompt_tokens] = x.seconds;
  ASSERT_GE(prefill[1].size(), 5u);
  for (const auto& [requests, by_tokens] : prefill) {
    for (const auto& [tokens, seconds] : by_tokens) {
      auto four_times = by_tokens.find(4 * tokens);
      if (four_times == by_tokens.end()) continue;
      EXPECT_GT(four_times->second, seconds) << requests << " × " << tokens << " tokens vs 4× as many";
    }
    EXPECT_GT(by_tokens.rbegin()->second, by_tokens.begin()->second);
  }
  EXPECT_EQ(prefill[1].rbegin()->first, 256);
  bool chunked = false;
  for (const PrefillPoint& x : p.prefill.points) chunked = chunked || (x.prompt_tokens == 256 && x.steps == 2);
  EXPECT_TRUE(chunked) << "a 256-token prompt in chunks of 128 takes two steps";
  ASSERT_EQ(p.prefill.capped.size(), 1u);
  EXPECT_EQ(p.prefill.capped[0], "prompt_tokens 512 and longer: over max_model_len 300");

  // Decode: at the shortest context, batch 8 takes longer than batch 1.
  std::map<int, double> by_batch;
  for (const DecodePoint& x : p.decode.points) {
    if (x.context_tokens == p.decode.points[0].context_tokens) by_batch[x.batch] = x.step_seconds;
  }
  ASSERT_TRUE(by_batch.count(1) && by_batch.count(8)) << run.output;
  EXPECT_GT(by_batch[8], by_batch[1]);
  EXPECT_GT(p.decode.fit.StepSeconds(8, 8 * 64), p.decode.fit.StepSeconds(1, 64));
  bool batch_8_at_128 = false;
  for (const DecodePoint& x : p.decode.points)
    batch_8_at_128 = batch_8_at_128 || (x.batch == 8 && x.context_tokens == 128);
  EXPECT_TRUE(batch_8_at_128) << run.output;
  ASSERT_EQ(p.decode.capped.size(), 2u) << run.output;
  EXPECT_NE(p.decode.capped[0].find("batch 16 and larger at context 128: over the device KV pool of 1280 tokens"),
            std::string::npos)
      << p.decode.capped[0];
  EXPECT_EQ(p.decode.capped[1], "context 512 and longer: over max_model_len 300");

  // Transfer: the local path is always there; 64 blocks take longer than 1.
  ASSERT_FALSE(p.transfer.paths.empty());
  const TransferPath& local = p.transfer.paths[0];
  EXPECT_EQ(local.transport, "local");
  EXPECT_EQ(local.points.front().blocks, 1);
  EXPECT_EQ(local.points.back().blocks, 64);
  EXPECT_EQ(local.points.back().runs, 64 * 2);  // scattered: a write per block and layer
  EXPECT_GT(local.points.back().seconds, local.points.front().seconds);
  // UCX (when the build has it) crosses into a second process, as between nodes (its
  // times are not compared: beside other tests two processes polling on two cores are noisy).
  for (const TransferPath& path : p.transfer.paths) {
    if (path.transport != "ucx") continue;
    EXPECT_NE(path.note.find("second one"), std::string::npos) << path.note;
    EXPECT_EQ(path.points.back().blocks, 64);
    EXPECT_GT(path.fit.bytes_per_second, 0);
  }
  // cuda_ipc is asked for by default and named as left out for a CPU engine.
  bool cuda_ipc_named = false;
  for (const std::string& why : p.transfer.left_out) cuda_ipc_named = cuda_ipc_named || why.rfind("cuda_ipc: ", 0) == 0;
  EXPECT_TRUE(cuda_ipc_named) << run.output;
}

TEST_F(ProfileToolTest, BadInputEndsWithAMessage) {
  Result run = RunCommand(Profiler() + " --quick --prefill-min-tokens 0 --output " + *root_ + "/x.json");
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.output.find("prefill.min_tokens must be >= 1"), std::string::npos) << run.output;
  run = RunCommand(BinaryDir() + "/tools/profile/tandem-profile --quick --model-dir " + *root_ + "/none --output " +
                   *root_ + "/x.json");
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.output.find("tandem-profile: "), std::string::npos) << run.output;
  run = RunCommand(Profiler() + " --quick --transfer-transports tcp");
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.output.find("unknown transport 'tcp'"), std::string::npos) << run.output;
  EXPECT_FALSE(std::filesystem::exists(*root_ + "/x.json"));
}

}  // namespace
}  // namespace tandem::planner
