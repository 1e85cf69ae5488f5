#include "planner/profile_origin.h"

#include <gtest/gtest.h>

#include "tests/planner/sample_profile.h"

namespace tandem::planner {
namespace {

using testing::SampleProfile;

ProfileOrigin SameAsSample() {
  const Profile p = SampleProfile();
  return {.commit = p.commit, .backend = p.device.backend, .device_name = p.device.name};
}

TEST(ProfileOriginTest, AcceptsAProfileOfThisCommitAndDevice) {
  EXPECT_TRUE(OriginDifferences(SampleProfile(), SameAsSample()).empty());
  std::vector<std::string> warnings;
  EXPECT_TRUE(CheckProfileOrigin(SampleProfile(), SameAsSample(), OriginPolicy::kRefuse, &warnings).ok());
  EXPECT_TRUE(warnings.empty());
  EXPECT_TRUE(OriginDifferences(SampleProfile(), ProfileOrigin{}).empty());  // nothing asked, nothing checked
}

TEST(ProfileOriginTest, RefusesAnotherCommitOrDevice) {
  ProfileOrigin other = SameAsSample();
  other.commit = "fedcba9876543210fedcba9876543210fedcba98";
  other.device_name = "NVIDIA H100 80GB HBM3";
  Status status = CheckProfileOrigin(SampleProfile(), other, OriginPolicy::kRefuse, nullptr);
  EXPECT_EQ(status.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(status.message().find("commit: profile 0123456789abcdef"), std::string::npos) << status.ToString();
  EXPECT_NE(status.message().find("expected fedcba98"), std::string::npos);
  EXPECT_NE(status.message().find("device: profile 'NVIDIA H200', expected 'NVIDIA H100 80GB HBM3'"),
            std::string::npos);

  other = SameAsSample();
  other.backend = "cpu";
  EXPECT_EQ(OriginDifferences(SampleProfile(), other), std::vector<std::string>{"backend: profile cuda, expected cpu"});
}

TEST(ProfileOriginTest, WarnsInsteadWhenAskedTo) {
  ProfileOrigin other = SameAsSample();
  other.commit = "fedcba9876543210fedcba9876543210fedcba98";
  std::vector<std::string> warnings;
  EXPECT_TRUE(CheckProfileOrigin(SampleProfile(), other, OriginPolicy::kWarn, &warnings).ok());
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("commit: profile"), std::string::npos);
}

TEST(ProfileOriginTest, UncommittedCodeNeverMatches) {
  Profile p = SampleProfile();
  p.commit += "-dirty";
  ProfileOrigin same = SameAsSample();
  same.commit = p.commit;
  const std::vector<std::string> differences = OriginDifferences(p, same);
  ASSERT_EQ(differences.size(), 1u);
  EXPECT_NE(differences[0].find("uncommitted changes"), std::string::npos);
  EXPECT_FALSE(CheckProfileOrigin(p, same, OriginPolicy::kRefuse, nullptr).ok());
}

}  // namespace
}  // namespace tandem::planner
