// sample_token(): greedy, or temperature + top-k + top-p (nucleus) sampling with a counter-based
// random draw, so the n-th token of a request depends only on (seed, n) and the logits.
#include "prefixgate/engine/sampling.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "prefixgate/base/check.h"

namespace prefixgate::engine {
namespace {

// splitmix64 finaliser (Steele, Lea, Flood 2014): a bijective mix with good avalanche.
std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Uniform in [0, 1) from (seed, step): 53 random bits, the precision of a double.
double uniform01(std::uint64_t seed, std::uint64_t step) {
  const std::uint64_t bits = splitmix64(seed ^ splitmix64(step * 0x9E3779B97F4A7C15ull + 1));
  return static_cast<double>(bits >> 11) * 0x1.0p-53;
}

// NaN logits never win and are never drawn.
float clean(float logit) {
  return std::isnan(logit) ? -INFINITY : logit;
}

canon::TokenId argmax(std::span<const float> logits) {
  std::size_t best = 0;
  for (std::size_t i = 1; i < logits.size(); ++i) {
    if (clean(logits[i]) > clean(logits[best])) best = i;  // strict: lowest id wins ties
  }
  return static_cast<canon::TokenId>(best);
}

}  // namespace

canon::TokenId sample_token(std::span<const float> logits, const SamplingParams& params,
                            std::uint64_t step) {
  PG_DCHECK(!logits.empty());
  const std::size_t vocab = logits.size();
  const bool use_top_k = params.top_k > 0 && static_cast<std::size_t>(params.top_k) < vocab;
  const bool use_top_p = params.top_p < 1.0;
  if (!(params.temperature > 0.0) || params.top_k == 1) return argmax(logits);

  // Candidates in descending logit order (ties: lower id first) when a filter needs an order;
  // otherwise every id in id order, which draws the same distribution without sorting.
  std::vector<canon::TokenId> ids(vocab);
  std::iota(ids.begin(), ids.end(), canon::TokenId{0});
  std::size_t kept = vocab;
  if (use_top_k || use_top_p) {
    const auto by_logit = [&](canon::TokenId a, canon::TokenId b) {
      const float la = clean(logits[a]), lb = clean(logits[b]);
      return la > lb || (la == lb && a < b);
    };
    if (use_top_k) {
      kept = static_cast<std::size_t>(params.top_k);
      std::partial_sort(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(kept), ids.end(),
                        by_logit);
    } else {
      std::sort(ids.begin(), ids.end(), by_logit);
    }
  }

  // Softmax at temperature over the kept candidates, shifted by the maximum for stability.
  float max_logit = -INFINITY;
  for (std::size_t i = 0; i < kept; ++i) max_logit = std::max(max_logit, clean(logits[ids[i]]));
  if (max_logit == -INFINITY) return argmax(logits);  // nothing is drawable: all -inf or NaN
  std::vector<double> weights(kept);
  double total = 0.0;
  for (std::size_t i = 0; i < kept; ++i) {
    weights[i] =
        std::exp((static_cast<double>(clean(logits[ids[i]])) - max_logit) / params.temperature);
    total += weights[i];
  }

  if (use_top_p) {
    // Nucleus: the shortest prefix (in descending probability) whose mass reaches top_p; at
    // least one token, so top_p <= 0 is greedy.
    double mass = 0.0;
    std::size_t n = 0;
    while (n < kept) {
      mass += weights[n++];
      if (mass >= params.top_p * total) break;
    }
    kept = n;
    total = mass;
  }

  const double target = uniform01(params.seed, step) * total;
  double cumulative = 0.0;
  for (std::size_t i = 0; i < kept; ++i) {
    cumulative += weights[i];
    if (target < cumulative) return ids[i];
  }
  // Rounding can leave target == total: take the last candidate with any weight.
  for (std::size_t i = kept; i-- > 0;) {
    if (weights[i] > 0.0) return ids[i];
  }
  return ids[0];
}

}  // namespace prefixgate::engine
