#include "prefixgate/engine/scheduler.h"

#include <algorithm>
#include <boost/unordered/unordered_flat_set.hpp>

#include "prefixgate/base/check.h"
#include "prefixgate/canonicalize/block_hash.h"

namespace prefixgate::engine {

struct Scheduler::Sequence {
  enum class State { kWaiting, kRunning };

  std::uint64_t id = 0;
  std::string salt;
  std::vector<canon::TokenId> tokens;  // prompt, then generated tokens
  std::size_t prompt_len = 0;
  SamplingParams sampling;
  State state = State::kWaiting;
  std::size_t computed = 0;            // tokens whose K/V is in `pages`
  std::vector<PageId> pages;           // page table; this sequence holds one reference on each
  RadixCache::Node* locked = nullptr;  // deepest cached node this sequence pins
  std::size_t locked_blocks = 0;       // blocks from the salt's root to `locked`
  bool admitted_once = false;
  std::size_t cached_tokens = 0;  // from the prefix cache at first admission
  bool prompt_cached = false;     // the prompt's full blocks were offered to the cache
  bool first_token_sent = false;
  bool waited_for_shared_prefill = false;  // counted once in shared_prefill_waits_
  // Chained keys of the prompt's full blocks (salted), for stats(): which waiting prompts share
  // blocks that a sequence ahead of them will compute. Not the radix cache's keys.
  std::vector<std::uint64_t> prompt_block_keys;
  // Where stats() last found this waiting prompt's cached prefix, so the next report continues
  // from there instead of hashing the prompt again (a memo: stats() stays const in meaning).
  mutable RadixCache::PrefixProbe cached_probe;

  std::size_t generated() const { return tokens.size() - prompt_len; }
};

const char* finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::kNone: return "none";
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    case FinishReason::kAbort: return "abort";
  }
  return "none";
}

Scheduler::Scheduler(SchedulerConfig config, RadixCache& cache, PagePool& pool)
    : config_(config), cache_(cache), pool_(pool) {
  PG_DCHECK(config_.max_num_batched_tokens > 0 && config_.max_num_seqs > 0);
}

Scheduler::~Scheduler() {
  for (auto& [id, seq] : sequences_) release(*seq);
}

void Scheduler::add(SequenceRequest request) {
  PG_DCHECK(!request.prompt.empty());
  auto seq = std::make_unique<Sequence>();
  seq->id = request.id;
  seq->salt = std::move(request.salt);
  seq->prompt_len = request.prompt.size();
  seq->tokens = std::move(request.prompt);
  seq->sampling = std::move(request.sampling);
  const std::size_t page_tokens = cache_.page_tokens();
  // The last prompt token is always computed (its logits sample the first token), so only the
  // blocks before it can be shared.
  seq->prompt_block_keys =
      canon::block_hashes(std::span<const canon::TokenId>(seq->tokens).first(seq->prompt_len - 1),
                          page_tokens, canon::block_hash_root("queued", seq->salt));
  // One more position than the prompt: the first generated token needs its K/V slot on the
  // next decode step.
  const std::size_t min_pages = (seq->prompt_len + 1 + page_tokens - 1) / page_tokens;
  if (seq->prompt_len >= config_.max_model_len || min_pages > pool_.capacity()) {
    finished_outside_.push_back(SequenceUpdate{
        .id = seq->id, .finished = FinishReason::kLength, .prompt_tokens = seq->prompt_len});
    return;
  }
  Sequence* raw = seq.get();
  sequences_.emplace(raw->id, std::move(seq));
  waiting_.push_back(raw);
}

void Scheduler::finish(std::uint64_t id, FinishReason reason) {
  auto it = sequences_.find(id);
  if (it == sequences_.end()) return;
  finish_sequence(*it->second, reason, finished_outside_);
}

void Scheduler::release(Sequence& seq) {
  for (PageId page : seq.pages) pool_.release(page);
  seq.pages.clear();
  if (seq.locked != nullptr) {
    cache_.unlock(seq.locked);
    seq.locked = nullptr;
    seq.locked_blocks = 0;
  }
}

// Offers the sequence's full computed blocks to the cache and switches its page table to the
// cache's copies where the cache already had a block (same tokens at the same positions, so the
// same K/V). Pins the deepest block for as long as the sequence runs. The walk starts below the
// block it already pins, so a long prompt's chain is hashed once, not again at each call.
void Scheduler::cache_full_blocks(Sequence& seq) {
  const std::size_t page_tokens = cache_.page_tokens();
  const std::size_t full = std::min(seq.computed / page_tokens, seq.pages.size());
  if (full == 0) return;
  PG_DCHECK(seq.locked_blocks <= full);
  const RadixCache::InsertFrom from{.node = seq.locked, .blocks = seq.locked_blocks};
  std::vector<PageId> cached;
  RadixCache::Node* node =
      cache_.insert(seq.salt, std::span<const canon::TokenId>(seq.tokens).first(full * page_tokens),
                    std::span<const PageId>(seq.pages).first(full), &cached, from);
  // `cached` covers the blocks after `from`, fewer than `full` after a hash collision.
  for (std::size_t k = 0; k < cached.size(); ++k) {
    const std::size_t j = seq.locked_blocks + k;
    if (cached[k] != seq.pages[j]) {
      pool_.retain(cached[k]);
      pool_.release(seq.pages[j]);
      seq.pages[j] = cached[k];
    }
  }
  cache_.move_lock(seq.locked, node);
  seq.locked = node;
  seq.locked_blocks = node != nullptr ? seq.locked_blocks + cached.size() : 0;
}

void Scheduler::finish_sequence(Sequence& seq, FinishReason reason,
                                std::vector<SequenceUpdate>& out) {
  cache_full_blocks(seq);  // what it computed stays reusable after it is gone
  release(seq);
  if (seq.state == Sequence::State::kRunning) {
    running_.erase(std::find(running_.begin(), running_.end(), &seq));
  } else {
    waiting_.erase(std::find(waiting_.begin(), waiting_.end(), &seq));
  }
  out.push_back(SequenceUpdate{.id = seq.id,
                               .finished = reason,
                               .prompt_tokens = seq.prompt_len,
                               .cached_tokens = seq.cached_tokens});
  sequences_.erase(seq.id);
}

// Preempts the most recently admitted running sequence, which must come after `keep` in
// admission order (those before it are already in this step's batch).
bool Scheduler::preempt_one(const Sequence* keep) {
  if (running_.empty() || running_.back() == keep) return false;
  Sequence* victim = running_.back();
  running_.pop_back();
  release(*victim);
  victim->computed = 0;  // recompute: mostly from cache when it is re-admitted
  victim->state = Sequence::State::kWaiting;
  waiting_.push_front(victim);
  ++preemptions_;
  return true;
}

// Makes the page table cover `positions` positions: free pages, then evicted cache blocks, then
// (if allowed) preempted sequences.
bool Scheduler::ensure_pages(Sequence& seq, std::size_t positions, bool may_preempt) {
  const std::size_t page_tokens = cache_.page_tokens();
  const std::size_t want = (positions + page_tokens - 1) / page_tokens;
  if (want <= seq.pages.size()) return true;
  const std::size_t needed = want - seq.pages.size();
  for (;;) {
    if (pool_.free_count() >= needed) {
      const bool ok = pool_.allocate(needed, seq.pages);
      PG_DCHECK(ok);
      return ok;
    }
    if (cache_.evict(needed - pool_.free_count()) > 0) continue;
    if (!may_preempt || !preempt_one(&seq)) return false;
  }
}

void Scheduler::add_step(Sequence& seq, std::size_t count, StepPlan& plan) {
  SequenceStep step;
  step.tokens = std::span<const canon::TokenId>(seq.tokens).subspan(seq.computed, count);
  step.start_position = seq.computed;
  step.pages = seq.pages;
  step.sample = seq.computed + count == seq.tokens.size();
  step.sampling = &seq.sampling;
  step.sample_step = seq.generated();
  plan.batch.push_back(step);
  plan.sequence_ids.push_back(seq.id);
  plan.num_batched_tokens += count;
  if (seq.computed < seq.prompt_len) plan.num_prefill_tokens += count;
}

bool Scheduler::admit(Sequence& seq, std::size_t& budget, StepPlan& plan) {
  // The last token always runs: its logits give the next token.
  const auto match = cache_.match_prefix(
      seq.salt, std::span<const canon::TokenId>(seq.tokens).first(seq.tokens.size() - 1));
  for (PageId page : match.pages) pool_.retain(page);
  seq.pages = match.pages;
  seq.computed = match.tokens;
  if (match.node != nullptr) {
    cache_.lock(match.node);
    seq.locked = match.node;
    seq.locked_blocks = match.pages.size();
  }
  const std::size_t count = std::min(seq.tokens.size() - seq.computed, budget);
  if (!ensure_pages(seq, seq.computed + count, /*may_preempt=*/false)) {
    release(seq);
    seq.computed = 0;
    return false;
  }
  if (!seq.admitted_once) {
    seq.admitted_once = true;
    seq.cached_tokens = match.tokens;
    prompt_tokens_total_ += seq.prompt_len;
    cached_prompt_tokens_total_ += match.tokens;
  }
  seq.state = Sequence::State::kRunning;
  add_step(seq, count, plan);
  budget -= count;
  return true;
}

// Whether a waiting prompt's first uncached blocks, at least kSharedPrefillBlocks of them, are
// being computed by a running sequence's prefill (one admitted earlier in this step included).
// Admitted now it would compute them a second time beside it, in the same step, and find none of
// them cached; a step or a few later they are in the cache, as stats() already counts them.
// Waiting costs it about one step's fixed time and saves the step's budget for other prompts:
// the prefill it skips is the one it shares. SGLang's scheduler deprioritizes such prompts the
// same way (its in-batch prefix check, 32 tokens).
bool Scheduler::waits_for_shared_prefill(const Sequence& seq) const {
  const std::vector<std::uint64_t>& keys = seq.prompt_block_keys;
  if (keys.size() < kSharedPrefillBlocks) return false;
  // Most steps have no prefill under way (only decodes): no walk of the cache then, as admit()
  // walks it again for every prompt it admits.
  const bool prefilling = std::any_of(running_.begin(), running_.end(), [](const Sequence* other) {
    return other->computed < other->prompt_len;
  });
  if (!prefilling) return false;
  const std::size_t page_tokens = cache_.page_tokens();
  const std::size_t cached = cache_.cached_prefix_tokens(
      seq.salt, std::span<const canon::TokenId>(seq.tokens).first(seq.prompt_len - 1),
      seq.cached_probe);
  const std::size_t first = cached / page_tokens;
  const std::size_t last = first + kSharedPrefillBlocks - 1;
  if (last >= keys.size()) return false;
  for (const Sequence* other : running_) {
    // Chained keys: equal at `last` means equal up to it. A running sequence past `first`
    // would have put the block in the cache already; one still before it is computing toward it.
    if (other->computed >= other->prompt_len || other->computed >= (first + 1) * page_tokens) {
      continue;
    }
    const std::vector<std::uint64_t>& theirs = other->prompt_block_keys;
    if (last < theirs.size() && theirs[last] == keys[last]) return true;
  }
  return false;
}

StepPlan Scheduler::schedule() {
  StepPlan plan;
  std::size_t budget = config_.max_num_batched_tokens;
  const std::size_t preemptions_before = preemptions_;

  // Running sequences first: decodes and prefill chunks already under way.
  for (std::size_t i = 0; i < running_.size() && budget > 0;) {
    Sequence& seq = *running_[i];
    const std::size_t count = std::min(seq.tokens.size() - seq.computed, budget);
    if (!ensure_pages(seq, seq.computed + count, /*may_preempt=*/true)) {
      // Nothing after it left to preempt: this one yields its pages and waits.
      running_.erase(running_.begin() + static_cast<std::ptrdiff_t>(i));
      release(seq);
      seq.computed = 0;
      seq.state = Sequence::State::kWaiting;
      waiting_.push_front(&seq);
      ++preemptions_;
      continue;
    }
    add_step(seq, count, plan);
    budget -= count;
    ++i;
  }

  // A preemption means the running sequences alone outgrow the pool: whoever waits, waits for
  // memory, unless an admission below says otherwise.
  if (preemptions_ != preemptions_before) waiting_for_memory_ = true;

  // Then admissions, oldest first, while there is budget, room and memory. A prompt whose next
  // blocks a prefill under way is computing waits for them (waits_for_shared_prefill) and the
  // ones behind it go first.
  std::size_t next = 0;
  while (budget > 0 && next < waiting_.size() && running_.size() < config_.max_num_seqs) {
    Sequence& seq = *waiting_[next];
    if (waits_for_shared_prefill(seq)) {
      if (!seq.waited_for_shared_prefill) {
        seq.waited_for_shared_prefill = true;
        ++shared_prefill_waits_;
      }
      ++next;
      continue;
    }
    if (!admit(seq, budget, plan)) {
      if (running_.empty() && plan.empty()) {
        // Nothing runs and still no room: the pool is too small for this request, ever.
        finish_sequence(seq, FinishReason::kLength, finished_outside_);
        continue;
      }
      waiting_for_memory_ = true;
      break;
    }
    waiting_for_memory_ = false;
    waiting_.erase(waiting_.begin() + static_cast<std::ptrdiff_t>(next));
    running_.push_back(&seq);
  }
  // With nobody left waiting, nothing is held back. When no admission was tried (the budget
  // went to running prefill chunks, or the batch is full), the last verdict stands: it is the
  // best evidence there is of what the pool allows.
  if (waiting_.empty()) waiting_for_memory_ = false;
  return plan;
}

std::vector<SequenceUpdate> Scheduler::complete(const StepPlan& plan, const StepOutput& output) {
  std::vector<SequenceUpdate> updates;
  for (std::size_t i = 0; i < plan.batch.size(); ++i) {
    auto it = sequences_.find(plan.sequence_ids[i]);
    if (it == sequences_.end()) continue;
    Sequence& seq = *it->second;
    seq.computed += plan.batch[i].tokens.size();
    if (!plan.batch[i].sample) {
      // A chunk of a long prompt: its full blocks are shared at once, as vLLM caches a block as
      // soon as it is full, so a request with the same prefix admitted at the next step reuses
      // them instead of computing the prefix a second time beside this one.
      cache_full_blocks(seq);
      continue;
    }

    const canon::TokenId token = output.tokens.at(i);
    seq.tokens.push_back(token);
    SequenceUpdate u{.id = seq.id,
                     .has_token = true,
                     .token = token,
                     .prompt_tokens = seq.prompt_len,
                     .cached_tokens = seq.cached_tokens,
                     .first_token = !seq.first_token_sent};
    seq.first_token_sent = true;
    if (!seq.prompt_cached) {  // the prompt is computed: share it with requests arriving now
      seq.prompt_cached = true;
      cache_full_blocks(seq);
    }
    if (!seq.sampling.ignore_eos && token == config_.eos_token) {
      u.finished = FinishReason::kStop;
    } else if (seq.generated() >= seq.sampling.max_tokens ||
               seq.tokens.size() >= config_.max_model_len) {
      u.finished = FinishReason::kLength;
    }
    if (u.finished != FinishReason::kNone) {
      std::vector<SequenceUpdate> ignored;  // `u` already reports the finish
      finish_sequence(seq, u.finished, ignored);
    }
    updates.push_back(u);
  }
  for (SequenceUpdate& u : take_finished()) updates.push_back(std::move(u));
  return updates;
}

std::vector<SequenceUpdate> Scheduler::take_finished() {
  std::vector<SequenceUpdate> out;
  out.swap(finished_outside_);
  return out;
}

bool Scheduler::idle() const {
  return sequences_.empty() && finished_outside_.empty();
}

SchedulerStats Scheduler::stats() const {
  SchedulerStats s;
  s.running = running_.size();
  s.waiting = waiting_.size();
  s.preemptions_total = preemptions_;
  s.shared_prefill_waits_total = shared_prefill_waits_;
  s.prompt_tokens_total = prompt_tokens_total_;
  s.cached_prompt_tokens_total = cached_prompt_tokens_total_;
  // Prompt tokens still to prefill, as the replica will really compute them. A waiting sequence
  // has not matched the cache yet (computed is 0): it will prefill its prompt less the prefix
  // cached now, and less what a sequence ahead of it (running, or earlier in the queue) computes
  // first and caches. Counting whole prompts would make a replica holding a hot prefix, or one
  // whose queue holds a group of requests behind the one computing their prefix, look loaded by
  // work it never does, and routers would spill that prefix elsewhere.
  // Open addressing: a node-based set allocated a node per key at every report.
  boost::unordered_flat_set<std::uint64_t> ahead;  // block keys a sequence ahead computes
  const std::size_t page_tokens = cache_.page_tokens();
  auto count = [&](const Sequence& seq) {
    if (seq.computed >= seq.prompt_len) return;
    const std::vector<std::uint64_t>& keys = seq.prompt_block_keys;
    std::size_t done = seq.computed;
    // Blocks before first_uncached are in the cache for everyone; a running sequence's own
    // computed blocks are cached when its prefill ends, so all of its blocks count as ahead.
    std::size_t first_uncached = 0;
    if (seq.state == Sequence::State::kWaiting) {
      const std::size_t cached = cache_.cached_prefix_tokens(
          seq.salt, std::span<const canon::TokenId>(seq.tokens).first(seq.prompt_len - 1),
          seq.cached_probe);
      std::size_t block = cached / page_tokens;
      first_uncached = block;
      while (block < keys.size() && ahead.contains(keys[block])) ++block;
      done = std::max(cached, block * page_tokens);
    }
    // Only a waiting sequence looks its prefix up among those ahead: with none, no set is built.
    if (!waiting_.empty()) {
      ahead.insert(keys.begin() + static_cast<std::ptrdiff_t>(first_uncached), keys.end());
    }
    s.tokens_queued_for_prefill += seq.prompt_len - std::min(seq.prompt_len, done);
  };
  if (!waiting_.empty()) {
    std::size_t keys = 0;
    for (const Sequence* seq : running_) keys += seq->prompt_block_keys.size();
    for (const Sequence* seq : waiting_) keys += seq->prompt_block_keys.size();
    ahead.reserve(keys);  // one table, not a rehash at each doubling
  }
  for (const Sequence* seq : running_) count(*seq);
  for (const Sequence* seq : waiting_) count(*seq);
  admission_stats(s);
  return s;
}

void Scheduler::admission_stats(SchedulerStats& s) const {
  s.batch_slots = config_.max_num_seqs;
  if (running_.empty()) return;
  // A sequence lives max_tokens steps (an upper bound: a stop ends it sooner); the steps each
  // running one has left.
  std::vector<std::size_t> left;
  left.reserve(running_.size());
  double lifetime = 0;
  for (const Sequence* seq : running_) {
    const std::size_t max_tokens = std::max<std::size_t>(1, seq->sampling.max_tokens);
    left.push_back(max_tokens - std::min(max_tokens - 1, seq->generated()));
    lifetime += static_cast<double>(max_tokens);
  }
  lifetime /= static_cast<double>(running_.size());
  // In steady state one of them ends every lifetime / running steps.
  s.steps_per_admission = lifetime / static_cast<double>(running_.size());
  s.steps_until_next_end = *std::min_element(left.begin(), left.end());
  if (waiting_.empty()) return;
  // Those ahead plus the newcomer, less the free slots: how many running sequences must end.
  // With slots enough for all of them, requests wait either for KV memory (the last admission
  // found no pages: one running sequence must end to free some) or only for the step's token
  // budget, taken by other prefills. That queue is tokens_queued_for_prefill's to price; counted
  // here too it would charge a replica with an almost empty batch a whole sequence's lifetime.
  const std::size_t free_slots =
      config_.max_num_seqs - std::min(config_.max_num_seqs, running_.size());
  const std::size_t ahead = waiting_.size() + 1;
  if (ahead <= free_slots && !waiting_for_memory_) return;
  const std::size_t need = ahead > free_slots ? ahead - free_slots : 1;
  // Past one batch's worth, each further round of the batch takes a whole sequence's lifetime.
  const std::size_t rounds = (need - 1) / left.size();
  const auto kth = left.begin() + static_cast<std::ptrdiff_t>((need - 1) % left.size());
  std::nth_element(left.begin(), kth, left.end());
  s.steps_until_admission = *kth + static_cast<std::size_t>(static_cast<double>(rounds) * lifetime);
}

}  // namespace prefixgate::engine
