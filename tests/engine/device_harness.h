// Drives a Device the way the scheduler will: sequences with page tables from a PagePool,
// steps that compute some of each sequence's tokens, greedy decoding. For the cpu device
// tests.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <vector>

#include "prefixgate/engine/device.h"
#include "prefixgate/engine/page_pool.h"

namespace prefixgate::engine::testing {

struct Sequence {
  std::vector<canon::TokenId> tokens = {};  // prompt, then generated tokens
  std::vector<PageId> pages = {};
  std::size_t computed = 0;   // tokens whose K/V is in `pages`
  std::size_t generated = 0;  // tokens sampled so far (the sampler's step index)
};

// A share of one execute(): the next `count` uncomputed tokens of `seq`.
struct Work {
  Sequence* seq;
  std::size_t count;
  bool sample;
};

inline const SamplingParams& greedy() {
  static const SamplingParams params{.temperature = 0.0};
  return params;
}

// Runs one execute() over `work` (allocating pages from `pool` as needed) and marks the tokens
// computed. Sampled tokens are appended to their sequences; the logits are returned.
inline StepOutput run_step(Device& device, PagePool& pool, std::size_t page_tokens,
                           std::vector<Work> work, const SamplingParams& sampling = greedy()) {
  std::vector<SequenceStep> steps;
  for (Work& w : work) {
    Sequence& s = *w.seq;
    const std::size_t end = s.computed + w.count;
    const std::size_t pages_needed = (end + page_tokens - 1) / page_tokens;
    if (pages_needed > s.pages.size()) {
      const bool ok = pool.allocate(pages_needed - s.pages.size(), s.pages);
      if (!ok) std::abort();  // the tests size their pools; running out is a test bug
    }
    steps.push_back(SequenceStep{
        .tokens = std::span(s.tokens).subspan(s.computed, w.count),
        .start_position = s.computed,
        .pages = s.pages,
        .sample = w.sample,
        .sampling = &sampling,
        .sample_step = s.generated,
    });
  }
  StepOutput out = device.execute(steps);
  for (std::size_t i = 0; i < work.size(); ++i) {
    work[i].seq->computed += work[i].count;
    if (work[i].sample) {
      work[i].seq->tokens.push_back(out.tokens[i]);
      ++work[i].seq->generated;
    }
  }
  return out;
}

// Largest |got - want| over the two, and the largest |want| (the scale of the tolerance).
struct Diff {
  double max_abs_diff = 0.0;
  double max_abs_want = 0.0;
};
template <class A, class B>
Diff diff(std::span<const A> got, std::span<const B> want) {
  Diff d;
  if (got.size() != want.size()) return Diff{INFINITY, 0.0};
  for (std::size_t i = 0; i < got.size(); ++i) {
    d.max_abs_diff = std::max(d.max_abs_diff,
                              std::abs(static_cast<double>(got[i]) - static_cast<double>(want[i])));
    d.max_abs_want = std::max(d.max_abs_want, std::abs(static_cast<double>(want[i])));
  }
  return d;
}

}  // namespace prefixgate::engine::testing
