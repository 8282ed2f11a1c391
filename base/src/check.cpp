#include "prefixgate/base/check.h"

#include <cstdio>
#include <cstdlib>

namespace prefixgate::internal {

void check_failed(const char* file, int line, const char* condition,
                  std::string_view message) noexcept {
  std::fprintf(stderr, "%s:%d: broken invariant: `%s`: %.*s\n", file, line, condition,
               static_cast<int>(message.size()), message.data());
  std::fflush(stderr);
  std::abort();
}

}  // namespace prefixgate::internal
