// The tables tandem-profile prints as it goes: what is profiled, then each
// measured section with its fit and its error, in milliseconds and GB/s.
// Thread rule: free functions writing to stdout.
#pragma once

#include "planner/profile.h"

namespace tandem::tools {

void PrintHeader(const planner::Profile& profile);
void PrintPrefill(const planner::PrefillProfile& prefill);
void PrintDecode(const planner::DecodeProfile& decode);
// How far the rounds of the engine's points disagreed, and the warning when too far.
void PrintSpread(const planner::Profile& profile);
void PrintTransfer(const planner::TransferProfile& transfer);

}  // namespace tandem::tools
