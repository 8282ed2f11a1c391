// Zeroed memory for the prefix index's flat tables (block_table.h, hash_multiset.h). From 2 MiB
// up it is mapped from the kernel, which zeroes each page as it is first touched: that cost is
// spread over the writes that follow rather than paid at once under the gateway's routing lock
// (tens of megabytes zeroed here, each page faulted in, would take milliseconds). It is aligned
// to a huge page and asks for huge pages (MADV_HUGEPAGE): a table of hundreds of megabytes in
// 4 KiB pages would miss the TLB on nearly every lookup. Smaller ones come from the allocator,
// zeroed here. (Mapping from 256 KiB instead, in 4 KiB pages, made the prefix index's sweeps
// slower: their multiset is probed at random, and the allocator's memory served it better.)
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>

namespace prefixgate::gateway::zeroed_memory {

inline constexpr std::size_t kHugePage = std::size_t{2} << 20;

// What a request for `bytes` takes: mapped sizes are whole huge pages.
inline std::size_t rounded(std::size_t bytes) {
  return bytes >= kHugePage ? (bytes + kHugePage - 1) / kHugePage * kHugePage : bytes;
}
// Bytes mapped from the kernel for a request of `bytes` (0 when it comes from the allocator).
inline std::size_t mapped(std::size_t bytes) {
  return bytes >= kHugePage ? rounded(bytes) : 0;
}

// `bytes` of zeroes aligned to `align` (at most a page); throws std::bad_alloc.
inline void* allocate(std::size_t bytes, std::size_t align) {
  if (bytes < kHugePage) {
    void* p = ::operator new (bytes, std::align_val_t{align});
    std::memset(p, 0, bytes);
    return p;
  }
  const std::size_t size = rounded(bytes);
  void* p =
      mmap(nullptr, size + kHugePage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  const auto begin = reinterpret_cast<std::uintptr_t>(p);
  const std::uintptr_t aligned = (begin + kHugePage - 1) / kHugePage * kHugePage;
  if (aligned > begin) munmap(p, aligned - begin);
  if (const std::size_t tail = begin + kHugePage - aligned; tail > 0) {
    munmap(reinterpret_cast<void*>(aligned + size), tail);
  }
  // Advice only: without huge pages the memory works the same, with more TLB misses.
  madvise(reinterpret_cast<void*>(aligned), size, MADV_HUGEPAGE);
  return reinterpret_cast<void*>(aligned);
}

// Gives back what allocate(bytes, align) returned.
inline void deallocate(void* p, std::size_t bytes, std::size_t align) {
  if (p == nullptr) return;
  if (bytes < kHugePage) {
    ::operator delete (p, std::align_val_t{align});
  } else {
    munmap(p, rounded(bytes));
  }
}

}  // namespace prefixgate::gateway::zeroed_memory
