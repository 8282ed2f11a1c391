// The sim device: validates each step against the KV pool the scheduler manages, waits the
// modelled step time, and emits deterministic tokens. It holds no KV data; the page ids it is
// given are checked, not read.
#include "prefixgate/engine/sim_device.h"

#include <algorithm>
#include <cmath>
#include <thread>
#include <utility>

#include "prefixgate/base/check.h"

namespace prefixgate::engine {
namespace {

// SplitMix64's finalizer (Steele, Lea and Flood, "Fast Splittable Pseudorandom Number
// Generators", OOPSLA 2014): a bijection on 64 bits whose every output bit depends on every
// input bit, so neighbouring positions give unrelated tokens.
std::uint64_t mix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

std::uint64_t draw(canon::TokenId last_token, std::size_t position, std::uint64_t seed) {
  return mix64(mix64(mix64(seed) ^ last_token) ^ position);
}

}  // namespace

canon::TokenId sim_next_token(const ModelSpec& spec, canon::TokenId last_token,
                              std::size_t position, std::uint64_t seed) {
  PG_DCHECK(spec.vocab_size > 1);
  std::size_t ordinary = std::min<std::size_t>(spec.bos_token, spec.eos_token);
  if (ordinary == 0 || ordinary > spec.vocab_size) ordinary = spec.vocab_size;
  auto token = static_cast<canon::TokenId>(draw(last_token, position, seed) % ordinary);
  // Only reachable when the specials are not at the top (ordinary == vocab_size).
  if (token == spec.eos_token) token = static_cast<canon::TokenId>((token + 1) % ordinary);
  return token;
}

canon::TokenId sim_next_token(std::span<const canon::TokenId> tokens, canon::TokenId last_token,
                              std::size_t position, std::uint64_t seed) {
  PG_DCHECK(!tokens.empty());
  return tokens[draw(last_token, position, seed) % tokens.size()];
}

void SimDevice::set_output_tokens(std::vector<canon::TokenId> tokens) {
  PG_CHECK(!tokens.empty(), "the sim device needs at least one output token");
  output_tokens_ = std::move(tokens);
}

void SimDevice::set_max_model_len(std::size_t max_model_len) {
  max_positions_ = std::max(profile_.model.max_position, max_model_len);
}

SimDevice::SimDevice(SimProfile profile, double speedup)
    : profile_(std::move(profile)),
      output_model_(profile_.model),
      speedup_(speedup),
      max_positions_(profile_.model.max_position) {
  PG_DCHECK(speedup_ > 0 && !std::isnan(speedup_));
}

std::size_t SimDevice::kv_page_bytes(std::size_t page_tokens) const {
  // The KV cache is BF16 whatever the weights are.
  return profile_.model.kv_bytes_per_token(2) * page_tokens;
}

void SimDevice::init_kv_cache(std::size_t num_pages, std::size_t page_tokens) {
  PG_DCHECK(page_tokens > 0);
  PG_DCHECK(num_pages <= kv_capacity_pages(profile_, page_tokens));
  num_pages_ = num_pages;
  page_tokens_ = page_tokens;
}

DeviceSpeed SimDevice::speed() const {
  if (std::isinf(speedup_)) return {};  // the virtual clock: no wall-clock rate to announce
  DeviceSpeed s = sim_speed(profile_);
  s.prefill_seconds_per_token /= speedup_;
  s.decode_seconds_per_sequence /= speedup_;
  return s;
}

StepOutput SimDevice::execute(std::span<const SequenceStep> batch) {
  PG_DCHECK(page_tokens_ > 0, "init_kv_cache() before execute()");
  StepOutput out;
  out.tokens.assign(batch.size(), 0);
  work_.clear();
  for (std::size_t i = 0; i < batch.size(); ++i) {
    const SequenceStep& step = batch[i];
    const std::size_t end = step.start_position + step.tokens.size();
    // The device a real one would be: its pages must hold every position it writes or reads.
    PG_DCHECK(!step.tokens.empty());
    PG_DCHECK(end <= max_positions_);
    PG_DCHECK(step.pages.size() * page_tokens_ >= end);
    for (std::size_t p = 0; p < (end + page_tokens_ - 1) / page_tokens_; ++p) {
      PG_DCHECK(step.pages[p] < num_pages_);
    }
    work_.push_back({step.start_position, step.tokens.size(), step.sample});
    if (step.sample) {
      PG_DCHECK(step.sampling != nullptr);
      const std::uint64_t seed = step.sampling->seed;
      out.tokens[i] = output_tokens_.empty()
                          ? sim_next_token(output_model_, step.tokens.back(), end, seed)
                          : sim_next_token(output_tokens_, step.tokens.back(), end, seed);
    }
  }
  last_step_ = sim_step_cost(profile_, work_);
  ++steps_;
  simulated_seconds_ += last_step_.seconds;
  wait(last_step_.seconds);
  return out;
}

void SimDevice::wait(double simulated_seconds) {
  if (std::isinf(speedup_) || simulated_seconds <= 0) return;
  using Clock = std::chrono::steady_clock;
  const Clock::time_point now = Clock::now();
  // A step starts when the previous one ended or when it is issued, whichever is later. The
  // previous sleep's overshoot (timer slack, typically tens of microseconds) is not the
  // scheduler's doing: subtracting it keeps it from adding up over back-to-back steps, while
  // the host's own time between steps still counts, as it would on a GPU.
  const Clock::time_point start = clock_started_ ? std::max(deadline_, now - overshoot_) : now;
  clock_started_ = true;
  deadline_ = start + std::chrono::round<Clock::duration>(
                          std::chrono::duration<double>(simulated_seconds / speedup_));
  std::this_thread::sleep_until(deadline_);
  overshoot_ = std::max(Clock::now() - deadline_, Clock::duration::zero());
}

std::unique_ptr<SimDevice> make_sim_device(const SimProfile& profile, double speedup) {
  return std::make_unique<SimDevice>(profile, speedup);
}

}  // namespace prefixgate::engine
