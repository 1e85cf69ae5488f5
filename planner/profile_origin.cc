#include "planner/profile_origin.h"

namespace tandem::planner {
namespace {

bool Dirty(const std::string& commit) {
  constexpr std::string_view kMark = "-dirty";
  return commit.size() >= kMark.size() && commit.compare(commit.size() - kMark.size(), kMark.size(), kMark) == 0;
}

}  // namespace

std::vector<std::string> OriginDifferences(const Profile& profile, const ProfileOrigin& expected) {
  std::vector<std::string> differences;
  if (!expected.commit.empty()) {
    if (profile.commit != expected.commit) {
      differences.push_back("commit: profile " + profile.commit + ", expected " + expected.commit);
    } else if (Dirty(profile.commit)) {
      differences.push_back("commit: both built from uncommitted changes to " + profile.commit +
                            " (the code may differ)");
    } else if (profile.commit == "unknown") {
      differences.push_back("commit: unknown on both sides (built outside git)");
    }
  }
  if (!expected.backend.empty() && profile.device.backend != expected.backend) {
    differences.push_back("backend: profile " + profile.device.backend + ", expected " + expected.backend);
  }
  if (!expected.device_name.empty() && profile.device.name != expected.device_name) {
    differences.push_back("device: profile '" + profile.device.name + "', expected '" + expected.device_name + "'");
  }
  return differences;
}

Status CheckProfileOrigin(const Profile& profile, const ProfileOrigin& expected, OriginPolicy policy,
                          std::vector<std::string>* warnings) {
  std::vector<std::string> differences = OriginDifferences(profile, expected);
  if (differences.empty()) return Status::Ok();
  if (policy == OriginPolicy::kWarn) {
    if (warnings != nullptr) warnings->insert(warnings->end(), differences.begin(), differences.end());
    return Status::Ok();
  }
  std::string message = "the profile was measured elsewhere (";
  for (size_t i = 0; i < differences.size(); ++i) message += (i ? "; " : "") + differences[i];
  return FailedPreconditionError(message + "); profile again on this build and device, or accept it with a warning");
}

}  // namespace tandem::planner
