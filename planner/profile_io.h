// The profile as JSON: written by tandem-profile, read by the planner. Keys come
// out in one fixed order (the order of docs/planner.md), so two profiles of the
// same grid differ only in their measured values, commit and date.
// Reading refuses, with a message naming the file and the field: text that is
// not JSON or over the size and nesting limits, a missing or mistyped field,
// another format or format_version, and anything ValidateProfile refuses.
// Unknown keys are ignored (a later minor addition must not break older readers).
// Thread rule: free functions, no state.
#pragma once

#include <string>
#include <string_view>

#include "common/base/status.h"
#include "planner/profile.h"

namespace tandem::planner {

// The "format" value of every profile.
inline constexpr std::string_view kProfileFormatName = "tandem-profile";
// Profiles larger than this are refused before parsing.
inline constexpr size_t kMaxProfileBytes = 64 << 20;

// The profile as JSON text (two-space indents, a final newline). REQUIRES: nothing;
// callers that write files validate first (SaveProfile does).
std::string SerializeProfile(const Profile& profile);
// Parses and validates JSON text; `what` names it in errors (a file path).
StatusOr<Profile> ParseProfile(std::string_view text, std::string_view what = "profile");

// Reads and parses a profile file. NotFound when it does not exist.
StatusOr<Profile> LoadProfile(const std::string& path);
// Validates and writes `profile` to `path` (through a temporary file renamed
// over it, so a reader never sees half a profile).
Status SaveProfile(const Profile& profile, const std::string& path);

}  // namespace tandem::planner
