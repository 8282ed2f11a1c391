#include "prefixgate/engine/scheduler.h"

#include <gtest/gtest.h>

#include <array>
#include <map>
#include <random>

#include "support/fake_kv_device.h"

namespace prefixgate::engine {
namespace {

using canon::TokenId;

constexpr std::size_t kPage = 16;

std::vector<TokenId> tokens(std::size_t n, TokenId seed) {
  std::vector<TokenId> t(n);
  for (std::size_t i = 0; i < n; ++i) t[i] = static_cast<TokenId>((seed * 131 + i * 7) % 900);
  return t;
}

SequenceRequest request(std::uint64_t id, std::vector<TokenId> prompt, std::size_t max_tokens,
                        std::string salt = "") {
  SequenceRequest r;
  r.id = id;
  r.salt = std::move(salt);
  r.prompt = std::move(prompt);
  r.sampling.max_tokens = max_tokens;
  r.sampling.temperature = 0;
  return r;
}

// A scheduler, its cache and pool, and a fake device, run to completion.
struct Harness {
  explicit Harness(std::size_t pages, SchedulerConfig config = {})
      : pool(pages), cache(pool, kPage, "fake"), sched(with_eos(config), cache, pool) {
    device.init_kv_cache(pages, kPage);
  }
  static SchedulerConfig with_eos(SchedulerConfig c) {
    c.eos_token = 999;
    return c;
  }

  struct Result {
    std::vector<TokenId> output;
    FinishReason reason = FinishReason::kNone;
    std::size_t cached_tokens = 0;
  };

  // Steps until idle; returns each sequence's output. Fails the test on a stuck scheduler.
  std::map<std::uint64_t, Result> run(std::size_t max_steps = 100000) {
    std::map<std::uint64_t, Result> results;
    for (std::size_t step = 0; step < max_steps && !sched.idle(); ++step) {
      StepPlan plan = sched.schedule();
      max_batch_tokens = std::max(max_batch_tokens, plan.num_batched_tokens);
      StepOutput out = plan.empty() ? StepOutput{} : device.execute(plan.batch);
      for (const SequenceUpdate& u : sched.complete(plan, out)) {
        Result& r = results[u.id];
        if (u.has_token) r.output.push_back(u.token);
        if (u.finished != FinishReason::kNone) {
          r.reason = u.finished;
          r.cached_tokens = u.cached_tokens;
        }
      }
      EXPECT_EQ(cache.check_invariants(), "");
    }
    EXPECT_TRUE(sched.idle()) << "scheduler did not finish";
    // Nothing leaked: every used page belongs to the cache.
    EXPECT_EQ(pool.used_count(), cache.cached_pages());
    return results;
  }

  // Schedules and runs one step; returns the sequences it ran, in batch order.
  std::vector<std::uint64_t> step() {
    StepPlan plan = sched.schedule();
    sched.complete(plan, plan.empty() ? StepOutput{} : device.execute(plan.batch));
    return plan.sequence_ids;
  }

  PagePool pool;
  RadixCache cache;
  Scheduler sched;
  testing::FakeKvDevice device;
  std::size_t max_batch_tokens = 0;
};

// What a sequence outputs alone, with room to spare: the reference for every other setting.
std::vector<TokenId> alone(const std::vector<TokenId>& prompt, std::size_t max_tokens) {
  Harness h(4096);
  h.sched.add(request(1, prompt, max_tokens));
  return h.run()[1].output;
}

TEST(SchedulerTest, GeneratesUntilMaxTokens) {
  Harness h(64);
  h.sched.add(request(1, tokens(40, 1), 5));
  auto r = h.run();
  EXPECT_EQ(r[1].output.size(), 5u);
  EXPECT_EQ(r[1].reason, FinishReason::kLength);
  EXPECT_EQ(h.sched.stats().running, 0u);
}

// A full batch admits a waiting request only as running ones reach max_tokens: the stats say
// after how many steps a request arriving now would start.
TEST(SchedulerTest, StepsUntilAdmissionCountTheRunningSequencesThatMustEnd) {
  SchedulerConfig config;
  config.max_num_seqs = 2;
  Harness h(256, config);
  h.sched.add(request(1, tokens(20, 1), 10));
  h.sched.add(request(2, tokens(20, 2), 4));
  EXPECT_EQ(h.sched.stats().steps_until_admission, 0u);  // room for both
  StepPlan plan = h.sched.schedule();                    // both prefill, each samples one token
  h.sched.complete(plan, h.device.execute(plan.batch));
  EXPECT_EQ(h.sched.stats().steps_until_admission, 0u);  // nobody waits: a newcomer waits too,
                                                         // but only for a slot the stats price
                                                         // once someone queues
  h.sched.add(request(3, tokens(20, 3), 8));
  // 9 and 3 tokens left; request 3 takes the place request 2 frees, a newcomer request 1's.
  SchedulerStats s = h.sched.stats();
  EXPECT_EQ(s.waiting, 1u);
  EXPECT_EQ(s.steps_until_admission, 9u);
  EXPECT_EQ(s.batch_slots, 2u);
  EXPECT_DOUBLE_EQ(s.steps_per_admission, (10.0 + 4.0) / 2 / 2);
  // Two ahead: past one round of the batch, a whole mean lifetime (7 steps) more.
  h.sched.add(request(4, tokens(20, 4), 8));
  EXPECT_EQ(h.sched.stats().steps_until_admission, 3u + 7u);
  h.run();
  EXPECT_EQ(h.sched.stats().steps_until_admission, 0u);
  EXPECT_EQ(h.sched.stats().steps_per_admission, 0.0);
}

// Slots free, the step's token budget taken by other prefills: the request is admitted as soon
// as the prefills ahead are done, which tokens_queued_for_prefill already prices. Charging it a
// running sequence's lifetime would make a replica with an almost empty batch look full.
// A step's token budget of 64 and `max_num_seqs` batch places.
SchedulerConfig budget_of_64(std::size_t max_num_seqs) {
  SchedulerConfig config;
  config.max_num_batched_tokens = 64;
  config.max_num_seqs = max_num_seqs;
  return config;
}

// Three 40-token requests (max_tokens as given) and one step of a 64-token budget: request 1
// prefills whole, request 2 its first 24 tokens, and request 3 finds no budget left.
void three_requests_one_step(Harness& h, std::array<std::size_t, 3> max_tokens) {
  for (std::uint32_t i = 0; i < 3; ++i)
    h.sched.add(request(i + 1, tokens(40, i + 1), max_tokens[i]));
  StepPlan plan = h.sched.schedule();
  ASSERT_EQ(plan.num_batched_tokens, 64u);
  h.sched.complete(plan, h.device.execute(plan.batch));
}

TEST(SchedulerTest, WaitingOnlyForTheTokenBudgetIsNoAdmissionWait) {
  Harness h(256, budget_of_64(8));
  three_requests_one_step(h, {10, 10, 10});
  SchedulerStats s = h.sched.stats();
  EXPECT_EQ(s.running, 2u);
  EXPECT_EQ(s.waiting, 1u);
  EXPECT_EQ(s.tokens_queued_for_prefill, 16u + 40u);  // the wait is here
  EXPECT_EQ(s.steps_until_admission, 0u);
  h.run();
}

// The batch full (and the budget taken too): a newcomer waits for running sequences to end.
TEST(SchedulerTest, AFullBatchStillCountsTheSequencesThatMustEnd) {
  Harness h(256, budget_of_64(2));
  three_requests_one_step(h, {10, 4, 8});
  // Request 1 has 9 steps left, request 2 (no token yet) 4: request 3 takes the place request 2
  // frees, a newcomer request 1's.
  SchedulerStats s = h.sched.stats();
  EXPECT_EQ(s.waiting, 1u);
  EXPECT_EQ(s.steps_until_admission, 9u);
  h.run();
}

// Slots free but no KV pages: a running sequence must end before the request fits.
TEST(SchedulerTest, AFullKvPoolWithSlotsFreeIsAnAdmissionWait) {
  Harness h(8);  // 128 tokens: one 100-token prompt fills it
  h.sched.add(request(1, tokens(100, 1), 10));
  h.sched.add(request(2, tokens(100, 2), 10));
  StepPlan plan = h.sched.schedule();
  ASSERT_EQ(plan.batch.size(), 1u);  // request 2 finds 1 free page, needs 7
  h.sched.complete(plan, h.device.execute(plan.batch));
  SchedulerStats s = h.sched.stats();
  EXPECT_EQ(s.running, 1u);
  EXPECT_EQ(s.waiting, 1u);
  EXPECT_EQ(s.steps_until_admission, 9u);  // request 1's steps left
  // Still no room on the next steps (request 1 grows), still the same verdict.
  plan = h.sched.schedule();
  h.sched.complete(plan, h.device.execute(plan.batch));
  EXPECT_EQ(h.sched.stats().steps_until_admission, 8u);
  h.run();
  EXPECT_EQ(h.sched.stats().steps_until_admission, 0u);
}

TEST(SchedulerTest, StopsAtEos) {
  Harness h(64);
  h.device.eos_after_step = 3;
  h.sched.add(request(1, tokens(20, 1), 10));
  auto r = h.run();
  EXPECT_EQ(r[1].output.size(), 3u);
  EXPECT_EQ(r[1].output.back(), 999u);
  EXPECT_EQ(r[1].reason, FinishReason::kStop);
}

TEST(SchedulerTest, RepeatedPromptIsServedFromCacheWithTheSameOutput) {
  const auto prompt = tokens(100, 3);
  const auto reference = alone(prompt, 8);
  Harness h(256);
  h.sched.add(request(1, prompt, 8));
  auto first = h.run();
  EXPECT_EQ(first[1].cached_tokens, 0u);
  const std::size_t tokens_before = h.device.batch_tokens_total;
  h.sched.add(request(2, prompt, 8));
  auto second = h.run();
  // All full blocks of the prompt but the last token's: 99 tokens -> 6 blocks of 16.
  EXPECT_EQ(second[2].cached_tokens, 96u);
  EXPECT_EQ(second[2].output, reference);
  // Only the uncached 4 tokens plus 7 decode steps ran.
  EXPECT_EQ(h.device.batch_tokens_total - tokens_before, 4u + 7u);
  EXPECT_EQ(h.sched.stats().cached_prompt_tokens_total, 96u);
}

TEST(SchedulerTest, SaltsNeverShareCachedPrefixes) {
  Harness h(256);
  h.sched.add(request(1, tokens(64, 5), 2, "tenant-a"));
  h.run();
  h.sched.add(request(2, tokens(64, 5), 2, "tenant-b"));
  auto r = h.run();
  EXPECT_EQ(r[2].cached_tokens, 0u);
}

TEST(SchedulerTest, ChunkedPrefillInterleavesWithDecode) {
  SchedulerConfig config;
  config.max_num_batched_tokens = 32;
  Harness h(256, config);
  h.sched.add(request(1, tokens(10, 1), 30));
  // Let the first sequence reach decode.
  for (int i = 0; i < 2; ++i) {
    StepPlan p = h.sched.schedule();
    h.sched.complete(p, h.device.execute(p.batch));
  }
  h.sched.add(request(2, tokens(300, 2), 3));
  StepPlan p = h.sched.schedule();
  ASSERT_EQ(p.batch.size(), 2u);  // the decode and a 31-token chunk of the long prompt
  EXPECT_EQ(p.batch[0].tokens.size(), 1u);
  EXPECT_EQ(p.batch[1].tokens.size(), 31u);
  EXPECT_FALSE(p.batch[1].sample);
  h.sched.complete(p, h.device.execute(p.batch));
  auto r = h.run();
  EXPECT_LE(h.max_batch_tokens, 32u);
  EXPECT_EQ(r[2].output, alone(tokens(300, 2), 3));
  EXPECT_EQ(r[1].output.size(), 27u);  // 3 of the 30 came from the steps before run()
}

TEST(SchedulerTest, MaxNumSeqsCapsTheBatch) {
  SchedulerConfig config;
  config.max_num_seqs = 3;
  Harness h(512, config);
  for (std::uint64_t i = 1; i <= 8; ++i) h.sched.add(request(i, tokens(20, i), 4));
  StepPlan p = h.sched.schedule();
  EXPECT_EQ(p.batch.size(), 3u);
  EXPECT_EQ(h.sched.stats().waiting, 5u);
  h.sched.complete(p, h.device.execute(p.batch));
  h.run();
}

TEST(SchedulerTest, MemoryPressurePreemptsAndEveryRequestFinishesCorrectly) {
  // 24 pages of 16 tokens; eight requests of ~60 tokens generating 40 each need far more.
  SchedulerConfig config;
  config.max_num_batched_tokens = 64;
  Harness h(24, config);
  std::map<std::uint64_t, std::vector<TokenId>> prompts;
  for (std::uint64_t i = 1; i <= 8; ++i) {
    prompts[i] = tokens(50 + i, i);
    h.sched.add(request(i, prompts[i], 40));
  }
  auto r = h.run();
  EXPECT_GT(h.sched.stats().preemptions_total, 0u);
  for (const auto& [id, prompt] : prompts) {
    EXPECT_EQ(r[id].reason, FinishReason::kLength) << id;
    EXPECT_EQ(r[id].output, alone(prompt, 40)) << id;
  }
}

TEST(SchedulerTest, FinishFreesPagesAndKeepsComputedBlocksCached) {
  Harness h(64);
  h.sched.add(request(1, tokens(80, 9), 100));
  for (int i = 0; i < 3; ++i) {
    StepPlan p = h.sched.schedule();
    h.sched.complete(p, h.device.execute(p.batch));
  }
  EXPECT_GT(h.pool.used_count(), h.cache.cached_pages());
  h.sched.finish(1, FinishReason::kAbort);
  auto updates = h.sched.take_finished();
  ASSERT_EQ(updates.size(), 1u);
  EXPECT_EQ(updates[0].finished, FinishReason::kAbort);
  EXPECT_TRUE(h.sched.idle());
  EXPECT_EQ(h.pool.used_count(), h.cache.cached_pages());
  EXPECT_EQ(h.cache.cached_pages(), 5u);  // the 80-token prompt's full blocks stay reusable
}

TEST(SchedulerTest, RequestThatCanNeverFitFinishesWithLength) {
  Harness h(4);  // 64 tokens of KV in all
  h.sched.add(request(1, tokens(100, 1), 4));
  h.sched.add(request(2, tokens(20, 2), 4));
  auto r = h.run();
  EXPECT_EQ(r[1].reason, FinishReason::kLength);
  EXPECT_TRUE(r[1].output.empty());
  EXPECT_EQ(r[2].output.size(), 4u);
}

TEST(SchedulerTest, RandomWorkloadsKeepEveryInvariant) {
  for (std::uint32_t seed : {1u, 2u, 3u}) {
    std::mt19937 rng(seed);
    SchedulerConfig config;
    config.max_num_batched_tokens = 48 + rng() % 64;
    config.max_num_seqs = 2 + rng() % 6;
    Harness h(20 + rng() % 30, config);
    const std::vector<std::vector<TokenId>> prefixes = {tokens(33, 100), tokens(70, 200),
                                                        tokens(5, 300)};
    std::map<std::uint64_t, std::pair<std::vector<TokenId>, std::size_t>> expected;
    std::map<std::uint64_t, std::vector<TokenId>> outputs;
    std::uint64_t next_id = 1;
    for (int round = 0; round < 40; ++round) {
      const int n = static_cast<int>(rng() % 3);
      for (int k = 0; k < n; ++k) {
        std::vector<TokenId> prompt = prefixes[rng() % prefixes.size()];
        const auto tail = tokens(1 + rng() % 40, static_cast<TokenId>(rng() % 50));
        prompt.insert(prompt.end(), tail.begin(), tail.end());
        const std::size_t max_tokens = 1 + rng() % 20;
        expected[next_id] = {prompt, max_tokens};
        h.sched.add(request(next_id++, prompt, max_tokens, rng() % 4 == 0 ? "other" : ""));
      }
      StepPlan p = h.sched.schedule();
      StepOutput out = p.empty() ? StepOutput{} : h.device.execute(p.batch);
      for (const SequenceUpdate& u : h.sched.complete(p, out)) {
        if (u.has_token) outputs[u.id].push_back(u.token);
      }
      if (rng() % 10 == 0 && next_id > 1) {
        const std::uint64_t victim = 1 + rng() % (next_id - 1);
        h.sched.finish(victim, FinishReason::kAbort);
        expected.erase(victim);
      }
      ASSERT_EQ(h.cache.check_invariants(), "") << "seed " << seed;
      ASSERT_LE(h.pool.used_count(), h.pool.capacity());
    }
    for (auto& [id, r] : h.run()) {
      outputs[id].insert(outputs[id].end(), r.output.begin(), r.output.end());
    }
    for (const auto& [id, job] : expected) {
      EXPECT_EQ(outputs[id], alone(job.first, job.second)) << "seed " << seed << " id " << id;
    }
  }
}

// The queued prefill a replica reports is what it will really compute: a group of requests
// queued behind the one that computes their shared prefix counts that prefix once.
std::vector<TokenId> concat(std::vector<TokenId> a, const std::vector<TokenId>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

TEST(SchedulerTest, QueuedPrefillCountsASharedPrefixOnce) {
  Harness h(64);
  const std::vector<TokenId> prefix = tokens(64, 1);
  h.sched.add(request(1, concat(prefix, tokens(16, 2)), 4));
  EXPECT_EQ(h.sched.stats().tokens_queued_for_prefill, 80U);
  // Behind the first: only its own 16 tokens (the 4 shared blocks are computed first).
  h.sched.add(request(2, concat(prefix, tokens(16, 3)), 4));
  EXPECT_EQ(h.sched.stats().tokens_queued_for_prefill, 96U);
  // Another salt shares nothing.
  h.sched.add(request(3, concat(prefix, tokens(16, 4)), 4, "tenant-b"));
  EXPECT_EQ(h.sched.stats().tokens_queued_for_prefill, 176U);
  // A prompt that diverges inside the second block shares only the first.
  std::vector<TokenId> diverging = prefix;
  diverging[20] += 1;
  h.sched.add(request(4, concat(diverging, tokens(16, 5)), 4));
  EXPECT_EQ(h.sched.stats().tokens_queued_for_prefill, 176U + 80U - 16U);
  h.run();
  // Once computed and cached, a new prompt with that prefix queues only its suffix.
  h.sched.add(request(5, concat(prefix, tokens(16, 6)), 4));
  EXPECT_EQ(h.sched.stats().tokens_queued_for_prefill, 16U);
}

TEST(SchedulerTest, QueuedPrefillBehindARunningChunkedPrefill) {
  SchedulerConfig config;
  config.max_num_batched_tokens = 32;  // the first prompt needs three steps
  Harness h(64, config);
  const std::vector<TokenId> prefix = tokens(64, 7);
  h.sched.add(request(1, concat(prefix, tokens(16, 8)), 4));
  StepPlan plan = h.sched.schedule();
  ASSERT_FALSE(plan.empty());
  h.sched.complete(plan, h.device.execute(plan.batch));
  h.sched.add(request(2, concat(prefix, tokens(16, 9)), 4));
  // The first has 48 of 80 tokens left; the second only its 16 past the shared prefix.
  EXPECT_EQ(h.sched.stats().tokens_queued_for_prefill, 48U + 16U);
  h.run();
}

// Two prompts with a 64-token prefix queued together: the second waits a step for the first to
// compute the prefix, then finds it cached, instead of computing it beside it in the same step.
TEST(SchedulerTest, APrefixQueuedTwiceIsComputedOnce) {
  Harness h(64);
  const std::vector<TokenId> prefix = tokens(64, 11);
  const auto first = concat(prefix, tokens(16, 12));
  const auto second = concat(prefix, tokens(16, 13));
  h.sched.add(request(1, first, 4));
  h.sched.add(request(2, second, 4));
  ASSERT_EQ(h.step(), std::vector<std::uint64_t>{1});
  auto r = h.run();
  EXPECT_EQ(r[2].cached_tokens, 64U);
  EXPECT_EQ(r[2].output, alone(second, 4));
  // 80 + 16 prompt tokens and 3 decode steps each.
  EXPECT_EQ(h.device.batch_tokens_total, 80U + 16U + 2U * 3U);
  EXPECT_EQ(h.sched.stats().shared_prefill_waits_total, 1U);
}

// The prompt that waits lets those behind it in: only a shared prefix holds a request back.
TEST(SchedulerTest, APromptWaitingForASharedPrefixLetsOthersPass) {
  Harness h(64);
  const std::vector<TokenId> prefix = tokens(64, 14);
  h.sched.add(request(1, concat(prefix, tokens(16, 15)), 4));
  h.sched.add(request(2, concat(prefix, tokens(16, 16)), 4));
  h.sched.add(request(3, tokens(40, 17), 4));                           // shares nothing
  h.sched.add(request(4, concat(prefix, tokens(16, 18)), 4, "other"));  // another salt
  EXPECT_EQ(h.step(), (std::vector<std::uint64_t>{1, 3, 4}));
  auto r = h.run();
  EXPECT_EQ(r[2].cached_tokens, 64U);
  EXPECT_EQ(r[4].cached_tokens, 0U);
}

// One shared block is not worth a step: both are admitted at once.
TEST(SchedulerTest, AOneBlockSharedPrefixDoesNotWait) {
  Harness h(64);
  const std::vector<TokenId> prefix = tokens(16, 19);
  h.sched.add(request(1, concat(prefix, tokens(48, 20)), 4));
  h.sched.add(request(2, concat(prefix, tokens(48, 21)), 4));
  EXPECT_EQ(h.step(), (std::vector<std::uint64_t>{1, 2}));
  h.run();
  EXPECT_EQ(h.sched.stats().shared_prefill_waits_total, 0U);
}

// Behind a chunked prefill the prompt waits for every shared block, chunk after chunk, even when
// the last chunk leaves budget it could take, and then computes only its own suffix.
TEST(SchedulerTest, APromptWaitsForAChunkedPrefillOfItsPrefix) {
  SchedulerConfig config;
  config.max_num_batched_tokens = 48;
  Harness h(64, config);
  const std::vector<TokenId> prefix = tokens(128, 22);
  const auto second = concat(prefix, tokens(16, 24));
  h.sched.add(request(1, concat(prefix, tokens(8, 23)), 4));
  h.sched.add(request(2, second, 4));
  // 48, 48, then the last 40 of the first's 136 tokens: 8 left that the second does not take,
  // as 2 of its shared blocks are still being computed.
  for (int step = 0; step < 3; ++step) {
    EXPECT_EQ(h.step(), std::vector<std::uint64_t>{1}) << "step " << step;
  }
  EXPECT_EQ(h.sched.stats().shared_prefill_waits_total, 1U);  // one request, however many steps
  auto r = h.run();
  EXPECT_EQ(r[2].cached_tokens, 128U);
  EXPECT_EQ(r[2].output, alone(second, 4));
}

}  // namespace
}  // namespace prefixgate::engine
