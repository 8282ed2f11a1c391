// How many leading bytes two texts share, for the memos that pick up where a text stops sharing
// one seen before (prompt_memo.h, json_document_memo.h).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <string_view>

namespace prefixgate::canon::internal {

// Leading bytes `a` and `b` share when that is more than `beaten`; otherwise some number at most
// `beaten`: the byte after the best candidate's shared ones rules most others out at once.
inline std::size_t shared_prefix_beyond(std::string_view a, std::string_view b,
                                        std::size_t beaten) {
  const std::size_t n = std::min(a.size(), b.size());
  if (n <= beaten || a[beaten] != b[beaten]) return 0;
  // Long runs first, each a call to memcmp: a shared 30 KB costs three 8 KB runs and six of
  // 1 KB (where thirty 1 KB runs each paid memcmp's setup). A run that differs is compared again
  // by the shorter ones up to the difference: at most one run's bytes twice.
  std::size_t i = 0;
  for (const std::size_t run :
       {std::size_t{8192}, std::size_t{1024}, std::size_t{64}, std::size_t{8}}) {
    while (n - i >= run && std::memcmp(a.data() + i, b.data() + i, run) == 0) i += run;
  }
  while (i < n && a[i] == b[i]) ++i;
  return i;
}

}  // namespace prefixgate::canon::internal
