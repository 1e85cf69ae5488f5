// Removes the scratch directories of test_util.h when the test binary ends.
#include "tests/common/model/test_util.h"

namespace tandem::model::testing {
namespace {

class ScratchCleanup : public ::testing::Environment {
 public:
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(ScratchRoot(), ec);
  }
};

[[maybe_unused]] ::testing::Environment* const kCleanup = ::testing::AddGlobalTestEnvironment(new ScratchCleanup);

}  // namespace
}  // namespace tandem::model::testing
