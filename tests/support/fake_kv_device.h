// A Device for scheduler tests that does no math but keeps real page contents: each KV slot
// records the token and position written to it, and every sampled token is a hash of the whole
// context as read back through the page table. A scheduler that hands a sequence the wrong
// pages, reuses a cached page for different tokens, or loses a chunk, changes the output.
#pragma once

#include <cassert>
#include <stdexcept>
#include <string>
#include <vector>

#include "prefixgate/engine/device.h"

namespace prefixgate::engine::testing {

class FakeKvDevice : public Device {
 public:
  explicit FakeKvDevice(std::size_t vocab = 1000, canon::TokenId eos = 999) {
    spec_.id = "fake";
    spec_.vocab_size = vocab;
    spec_.eos_token = eos;
  }

  std::string_view name() const override { return "fake"; }
  const ModelSpec& spec() const override { return spec_; }
  std::size_t kv_page_bytes(std::size_t page_tokens) const override { return page_tokens * 8; }
  void init_kv_cache(std::size_t num_pages, std::size_t page_tokens) override {
    page_tokens_ = page_tokens;
    slots_.assign(num_pages * page_tokens, Slot{});
  }

  StepOutput execute(std::span<const SequenceStep> batch) override {
    ++steps;
    StepOutput out;
    out.tokens.assign(batch.size(), 0);
    for (std::size_t b = 0; b < batch.size(); ++b) {
      const SequenceStep& s = batch[b];
      batch_tokens_total += s.tokens.size();
      for (std::size_t i = 0; i < s.tokens.size(); ++i) {
        slot(s, s.start_position + i) = Slot{s.tokens[i], s.start_position + i, true};
      }
      if (!s.sample) continue;
      std::uint64_t h = 1469598103934665603ull;
      const std::size_t context = s.start_position + s.tokens.size();
      for (std::size_t p = 0; p < context; ++p) {
        const Slot& sl = slot(s, p);
        if (!sl.filled || sl.position != p) {
          throw std::logic_error("position " + std::to_string(p) + " not in the page table");
        }
        h = (h ^ sl.token) * 1099511628211ull;
      }
      // Never EOS: tests end sequences by length unless they ask for EOS explicitly.
      out.tokens[b] = static_cast<canon::TokenId>(h % (spec_.vocab_size - 1));
      if (eos_after_step > 0 && s.sample_step + 1 >= eos_after_step)
        out.tokens[b] = spec_.eos_token;
    }
    return out;
  }

  std::size_t steps = 0;
  std::size_t batch_tokens_total = 0;
  std::uint64_t eos_after_step = 0;  // when > 0: the n-th generated token is EOS

 private:
  struct Slot {
    canon::TokenId token = 0;
    std::size_t position = 0;
    bool filled = false;
  };
  Slot& slot(const SequenceStep& s, std::size_t position) {
    const std::size_t page_index = position / page_tokens_;
    if (page_index >= s.pages.size()) throw std::logic_error("page table too short");
    return slots_.at(s.pages[page_index] * page_tokens_ + position % page_tokens_);
  }

  ModelSpec spec_;
  std::size_t page_tokens_ = 16;
  std::vector<Slot> slots_;
};

}  // namespace prefixgate::engine::testing
