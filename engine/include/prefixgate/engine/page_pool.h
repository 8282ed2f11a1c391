// The KV page pool: a fixed set of pages, each holding the K and V of `page_tokens` tokens for
// every layer, handed out by id with reference counts. The device owns the memory behind the
// ids; this class only does the bookkeeping, so it is plain data with no threads or I/O.
//
//   engine::PagePool pool(1024);
//   std::vector<engine::PageId> pages;
//   if (!pool.allocate(4, pages)) { /* evict or preempt */ }
//   pool.retain(pages[0]);   // shared by a second owner
//   pool.release(pages[0]);  // returns to the free list at refcount 0
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace prefixgate::engine {

using PageId = std::uint32_t;

class PagePool {
 public:
  explicit PagePool(std::size_t num_pages);

  std::size_t capacity() const { return refcounts_.size(); }
  std::size_t free_count() const { return free_.size(); }
  std::size_t used_count() const { return capacity() - free_count(); }

  // Appends `n` free pages to `out`, each with refcount 1. All or nothing: returns false and
  // takes none when fewer than `n` are free.
  bool allocate(std::size_t n, std::vector<PageId>& out);
  void retain(PageId page);
  // Drops one reference; the page is free again when none are left.
  void release(PageId page);
  std::uint32_t refcount(PageId page) const;

 private:
  std::vector<std::uint32_t> refcounts_;
  std::vector<PageId> free_;  // a stack: recently freed pages are reused first (warm in cache)
};

}  // namespace prefixgate::engine
