// Invariant checks: a broken invariant is a bug in our code, never bad input, and stops the
// process loudly with where and why.
//
//   PG_CHECK(pages.size() * page_tokens >= end, "the step's pages cover its tokens");
//   PG_DCHECK(node->lock_count > 0, "unlocking a node nobody locked");
//   PG_DCHECK(page < refcounts_.size());  // the condition is the message
//
// PG_CHECK is on in every build: for invariants whose breach would corrupt memory or serve wrong
// tokens (a scheduler handing a device a page it does not own, a CUDA call failing after start).
// PG_DCHECK is on in debug and sanitizer builds only (compiled out under NDEBUG, its condition
// not evaluated): for checks on hot paths that the tests exercise. What a client or an engine
// sends is never checked with either: it is validated and answered with an Error (status.h).
#pragma once

#include <string_view>

namespace prefixgate::internal {

// Prints "file:line: broken invariant: `condition`: message" to stderr and aborts.
[[noreturn]] void check_failed(const char* file, int line, const char* condition,
                               std::string_view message) noexcept;

// The optional message of a check.
inline std::string_view check_message() {
  return {};
}
inline std::string_view check_message(std::string_view message) {
  return message;
}

}  // namespace prefixgate::internal

#define PG_CHECK(condition, ...)                                                                \
  do {                                                                                          \
    if (!(condition)) [[unlikely]] {                                                            \
      ::prefixgate::internal::check_failed(__FILE__, __LINE__, #condition,                      \
                                           ::prefixgate::internal::check_message(__VA_ARGS__)); \
    }                                                                                           \
  } while (false)

#ifdef NDEBUG
// Compiled out; the condition stays visible to the compiler (no unused-variable warnings) but
// is never evaluated.
#define PG_DCHECK(condition, ...)                               \
  do {                                                          \
    if (false) {                                                \
      (void)(condition);                                        \
      (void)::prefixgate::internal::check_message(__VA_ARGS__); \
    }                                                           \
  } while (false)
#else
#define PG_DCHECK(condition, ...) PG_CHECK(condition __VA_OPT__(, ) __VA_ARGS__)
#endif
