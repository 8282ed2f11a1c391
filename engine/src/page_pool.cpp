#include "prefixgate/engine/page_pool.h"

#include "prefixgate/base/check.h"

namespace prefixgate::engine {

PagePool::PagePool(std::size_t num_pages) : refcounts_(num_pages, 0) {
  free_.reserve(num_pages);
  // Highest id at the bottom of the stack so that page 0 is handed out first.
  for (std::size_t i = num_pages; i-- > 0;) free_.push_back(static_cast<PageId>(i));
}

bool PagePool::allocate(std::size_t n, std::vector<PageId>& out) {
  if (n > free_.size()) return false;
  for (std::size_t i = 0; i < n; ++i) {
    const PageId page = free_.back();
    free_.pop_back();
    PG_DCHECK(refcounts_[page] == 0);
    refcounts_[page] = 1;
    out.push_back(page);
  }
  return true;
}

void PagePool::retain(PageId page) {
  PG_DCHECK(page < refcounts_.size() && refcounts_[page] > 0);
  ++refcounts_[page];
}

void PagePool::release(PageId page) {
  PG_DCHECK(page < refcounts_.size() && refcounts_[page] > 0);
  if (--refcounts_[page] == 0) free_.push_back(page);
}

std::uint32_t PagePool::refcount(PageId page) const {
  PG_DCHECK(page < refcounts_.size());
  return refcounts_[page];
}

}  // namespace prefixgate::engine
