// Addressing the paged KV pool (KvCacheView in params.h), shared by the kernels that write and
// read it.
#pragma once

#include "common.cuh"

namespace prefixgate::kernels::PG_NS {

// Element offset of (page, kind 0 = K / 1 = V, head, slot), dim 0.
__device__ __forceinline__ std::int64_t kv_offset(const KvCacheView& c, std::int64_t page, int kind,
                                                  int head, int slot) {
  return page * c.page_stride +
         (static_cast<std::int64_t>(kind * c.num_kv_heads + head) * c.page_tokens + slot) *
             c.head_dim;
}
__device__ __forceinline__ std::int64_t kv_scale_offset(const KvCacheView& c, std::int64_t page,
                                                        int kind, int head, int slot) {
  return page * c.scale_page_stride +
         static_cast<std::int64_t>(kind * c.num_kv_heads + head) * c.page_tokens + slot;
}

}  // namespace prefixgate::kernels::PG_NS
