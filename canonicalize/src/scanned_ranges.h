// The volatile-content scans a prompt's text keeps in the thread's PromptMemo (prompt_memo.h
// says why they hold for the next prompt that shares it), as lint_prompt reads and adds them.
#pragma once

#include <cstddef>
#include <vector>

#include "prefixgate/canonicalize/prompt.h"
#include "prefixgate/canonicalize/prompt_memo.h"

namespace prefixgate::canon::internal {

// The ranges kept with `prompt`'s text, when this thread's memo analyzed it last and kept it;
// null otherwise (analyzed elsewhere or before the memo's last analysis, or not through it).
std::vector<PromptMemo::ScannedRange>* scanned_ranges_of(const AnalyzedPrompt& prompt);

// What lint_prompt did with the ranges it scanned, on this thread: looked up among the kept
// ones, or scanned (and kept, room permitting). For tests and benchmarks.
struct ScannedRangeCounts {
  std::size_t looked_up = 0;
  std::size_t scanned = 0;
};
ScannedRangeCounts& scanned_range_counts();

}  // namespace prefixgate::canon::internal
