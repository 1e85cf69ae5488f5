// Whether a profile belongs to the code and the device it is about to be used
// for. A profile measured by another commit (the engine's speed changes with
// the code: Vidur's simulator reached 619 % error on stale profiles) or on
// another device predicts nothing; the planner refuses such a profile, or warns
// when the user asks it to go on.
// Thread rule: free functions, no state.
#pragma once

#include <string>
#include <vector>

#include "common/base/status.h"
#include "planner/profile.h"

namespace tandem::planner {

// What a profile is checked against. An empty field is not checked.
struct ProfileOrigin {
  std::string commit;       // BuildCommit() of the planner, usually
  std::string backend;      // "cpu" or "cuda"
  std::string device_name;  // DeviceInfo::name, e.g. "NVIDIA H200"
};

enum class OriginPolicy {
  kRefuse,  // a difference is an error
  kWarn,    // differences are reported, the profile is accepted
};

// One line per difference between the profile and `expected` ("commit: profile
// e7edb3a..., expected 8cf02db..."); empty when they match. A commit marked
// "-dirty" differs even from the same string: uncommitted code cannot be
// known to be the same.
std::vector<std::string> OriginDifferences(const Profile& profile, const ProfileOrigin& expected);

// kRefuse: FailedPrecondition listing every difference. kWarn: OK, with the
// differences appended to `warnings` (may be null). OK when nothing differs.
Status CheckProfileOrigin(const Profile& profile, const ProfileOrigin& expected, OriginPolicy policy,
                          std::vector<std::string>* warnings);

}  // namespace tandem::planner
