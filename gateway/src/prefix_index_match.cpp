// PrefixIndex::longest_match: how many leading blocks of a prompt each replica holds.
//
// longest_match keeps the mask of replicas whose match is still unbroken (visiting only its
// non-zero words) and stops as soon as that mask is empty. A prefix cache holds a block only
// with its parent (engines evict leaves first, and a chained hash names the whole prefix), so
// the set of replicas holding block i shrinks as i grows, and each replica's match ends at one
// boundary that a galloping and then binary search finds: from the first block not yet known to
// be held by every replica still matching, it probes that block, those 1, 3, 7, 15... further
// on and the last, until one of them drops out, searches for the first block where one does, drops
// those there, and goes on. That is O(k log n) probes for k distinct match lengths instead of one
// per block (a prompt of 2,048 blocks held by one replica of 1,000: 14 lookups). It equals the
// block-by-block walk whenever each replica's held blocks (confirmed, or predicted and not expired)
// are a prefix of the prompt. When they are not, a hole in the middle of a replica's run can be
// skipped: its match is then some i where it holds block i - 1 and not block i, never shorter than
// the first hole. The block-by-block walk stays where it is exact or cheaper: prompts under
// kGallopMinBlocks, the count of lower-tier blocks (per block, asked for and some replica has
// them), and the rest of a gallop that has spent its probe budget on many distinct match lengths.
#include <algorithm>
#include <bit>
#include <span>
#include <vector>

#include "prefix_index_impl.h"

namespace prefixgate::gateway {
namespace prefix_index_detail {

// longest_match gallops over prompts of at least this many blocks. On the 10 M-block index of
// 1,000 replicas (gateway_bench BM_IndexLongestMatchShort: a different prompt each time, so its
// entries come from memory) a 48-block prompt held by one replica costs 0.5 us galloped against
// 2.8 us walked, and 16 blocks 0.43 against 0.65 us; at 8 blocks the two are even. The gallop's
// probes are prefetched together as the walk's batches are. Shorter prompts stay exact whatever
// the holders. A gallop that has spent n / divisor probes (many distinct match lengths, each
// probe a cache miss of its own) walks the rest linearly.
constexpr std::size_t kGallopMinBlocks = 16;
constexpr std::size_t kGallopProbeBudgetDivisor = 16;

// longest_match's state: the replicas whose match is unbroken so far. When a replica drops out
// at block i, its match is i blocks; those never dropping match the whole prompt. Only the words of
// `alive` that are still non-zero are visited (`live`): after the first blocks there are one or
// two, whatever the replica count.
struct Walk {
  std::span<const std::uint64_t> hashes;
  Clock::time_point now;
  std::span<std::size_t> out;
  std::span<std::size_t> offloaded;
  bool count_offloaded = false;
  std::span<std::uint64_t> alive = {};  // bit r % 64 of word r / 64: replica r still matches
  std::span<std::uint32_t> live = {};   // live[0, live_count): the non-zero words of alive
  std::size_t live_count = 0;
};

}  // namespace prefix_index_detail

void PrefixIndex::longest_match(std::span<const std::uint64_t> hashes, Clock::time_point now,
                                std::span<std::size_t> out,
                                std::span<std::size_t> offloaded) const {
  const Impl& im = *impl_;
  const std::size_t n_replicas = im.replicas.size();
  PG_DCHECK(out.size() == n_replicas);
  PG_DCHECK(offloaded.empty() || offloaded.size() == n_replicas);
  // Zero first, so that the replicas that drop out at the first block (most of a large fleet)
  // cost no write of their own.
  std::fill(out.begin(), out.end(), 0);
  std::fill(offloaded.begin(), offloaded.end(), 0);
  if (n_replicas == 0 || hashes.empty()) return;

  // The walk's words in the thread's room, reused: a decision allocates nothing of its own.
  thread_local std::vector<std::uint64_t> alive;
  thread_local std::vector<std::uint32_t> live;
  alive.assign(im.words, ~std::uint64_t{0});
  if (n_replicas % kBitsPerWord != 0) {
    alive.back() = (std::uint64_t{1} << (n_replicas % kBitsPerWord)) - 1;
  }
  live.resize(im.words);
  Walk walk{.hashes = hashes,
            .now = now,
            .out = out,
            .offloaded = offloaded,
            .count_offloaded = !offloaded.empty() && im.offload_entries > 0,
            .alive = alive,
            .live = live};
  for (std::size_t w = 0; w < im.words; ++w) walk.live[w] = static_cast<std::uint32_t>(w);
  walk.live_count = im.words;
  // Lower-tier blocks are counted one by one, so that count needs every block probed.
  if (walk.count_offloaded || hashes.size() < kGallopMinBlocks) {
    im.walk_linear(walk, 0);
  } else {
    im.walk_galloping(walk);
  }
  // The replicas still alive hold the whole prompt.
  for (std::size_t j = 0; j < walk.live_count; ++j) {
    const std::uint32_t w = walk.live[j];
    for (std::uint64_t bits = walk.alive[w]; bits != 0; bits &= bits - 1) {
      out[w * kBitsPerWord + static_cast<std::size_t>(std::countr_zero(bits))] = hashes.size();
    }
  }
}

const Predictions* PrefixIndex::Impl::predictions_of(const Entry* entry, std::uint64_t hash) const {
  return entry != nullptr && entry->predicted() ? &predictions.find(hash)->second : nullptr;
}

std::uint64_t PrefixIndex::Impl::holders_word(const Entry* entry, const Predictions* preds,
                                              std::size_t w, Clock::time_point now) const {
  if (entry == nullptr) return 0;
  std::uint64_t held = held_word(*entry, w);
  if (preds != nullptr) {
    for (const Prediction& p : *preds) {
      if (p.replica / kBitsPerWord == w && p.expiry > now) {
        held |= std::uint64_t{1} << (p.replica % kBitsPerWord);
      }
    }
  }
  return held;
}

bool PrefixIndex::Impl::all_alive_hold(const Walk& walk, std::size_t i) const {
  const std::uint64_t hash = walk.hashes[i];
  const Entry* entry = entries.find(hash);
  if (entry == nullptr) return false;
  const Predictions* preds = predictions_of(entry, hash);
  for (std::size_t j = 0; j < walk.live_count; ++j) {
    const std::uint32_t w = walk.live[j];
    if ((walk.alive[w] & ~holders_word(entry, preds, w, walk.now)) != 0) return false;
  }
  return true;
}

void PrefixIndex::Impl::advance(Walk& walk, std::size_t i, const Entry* entry) const {
  const std::uint64_t hash = walk.hashes[i];
  const Predictions* preds = predictions_of(entry, hash);
  const std::uint64_t* lower =
      walk.count_offloaded && entry != nullptr && entry->offloaded() ? offload_row(hash) : nullptr;
  std::size_t kept = 0;
  for (std::size_t j = 0; j < walk.live_count; ++j) {
    const std::uint32_t w = walk.live[j];
    const std::uint64_t held = holders_word(entry, preds, w, walk.now);
    // out[] is 0 already for those dropping at the first block.
    std::uint64_t dropped = i == 0 ? 0 : walk.alive[w] & ~held;
    while (dropped != 0) {
      walk.out[w * kBitsPerWord + static_cast<std::size_t>(std::countr_zero(dropped))] = i;
      dropped &= dropped - 1;
    }
    walk.alive[w] &= held;
    if (lower != nullptr) {
      std::uint64_t off = walk.alive[w] & lower[w];
      while (off != 0) {
        ++walk.offloaded[w * kBitsPerWord + static_cast<std::size_t>(std::countr_zero(off))];
        off &= off - 1;
      }
    }
    if (walk.alive[w] != 0) walk.live[kept++] = w;
  }
  walk.live_count = kept;
}

void PrefixIndex::Impl::walk_linear(Walk& walk, std::size_t from) const {
  // Entries are prefetched a batch ahead, then looked up: the lookups are independent, so their
  // cache misses overlap instead of queueing behind each block's work (a large index is
  // memory-bound). The entry holds the holders, so one probe per block is all a block without
  // predictions costs.
  constexpr std::size_t kBatch = 16;
  const std::span<const std::uint64_t> hashes = walk.hashes;
  const Entry* found[kBatch];
  for (std::size_t base = from; base < hashes.size() && walk.live_count > 0; base += kBatch) {
    const std::size_t batch = std::min(kBatch, hashes.size() - base);
    for (std::size_t k = 0; k < batch; ++k) entries.prefetch(hashes[base + k]);
    for (std::size_t k = 0; k < batch; ++k) found[k] = entries.find(hashes[base + k]);
    for (std::size_t k = 0; k < batch && walk.live_count > 0; ++k) {
      advance(walk, base + k, found[k]);
    }
  }
}

void PrefixIndex::Impl::walk_galloping(Walk& walk) const {
  const std::span<const std::uint64_t> hashes = walk.hashes;
  const std::size_t n = hashes.size();
  std::size_t probes = 0;
  auto holds = [&](std::size_t i) {
    ++probes;
    return all_alive_hold(walk, i);
  };
  std::size_t next = 0;  // every alive replica holds blocks [0, next)
  while (next < n && walk.live_count > 0) {
    // Many distinct match lengths cost a gallop and a search each: past the budget, the rest
    // is walked block by block, which from here gives the same answer.
    if (probes > n / kGallopProbeBudgetDivisor) {
      walk_linear(walk, next);
      return;
    }
    // Gallop: blocks next, next + 1, next + 3, next + 7... then the last. Their places do not
    // depend on the answers, so all their lookups are prefetched at once.
    for (std::size_t step = 1; next + step - 1 < n; step *= 2) {
      entries.prefetch(hashes[next + step - 1]);
    }
    entries.prefetch(hashes[n - 1]);
    // The first block some alive replica lacks.
    const std::size_t bad = gallop_to_first_unheld(next, n, holds);
    if (bad == n) return;  // the alive replicas hold the whole prompt
    advance(walk, bad, entries.find(hashes[bad]));
    next = bad + 1;
  }
}

}  // namespace prefixgate::gateway
