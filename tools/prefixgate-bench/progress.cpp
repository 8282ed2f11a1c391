#include "progress.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

namespace prefixgate::bench {

Progress::Progress(std::string label, std::size_t total, bool enabled)
    : label_(std::move(label)), total_(total), enabled_(enabled), tty_(isatty(2) != 0) {}

std::string Progress::line(std::size_t done, std::size_t failed, double elapsed_s) const {
  constexpr std::size_t kWidth = 30;
  const std::size_t filled = total_ == 0 ? kWidth : std::min(kWidth, done * kWidth / total_);
  std::string bar(filled, '#');
  bar.resize(kWidth, '.');
  char buf[256];
  std::snprintf(buf, sizeof buf, "%-16s [%s] %zu/%zu  %.1f req/s  errors %zu  %.0fs",
                label_.c_str(), bar.c_str(), done, total_,
                elapsed_s > 0 ? static_cast<double>(done) / elapsed_s : 0.0, failed, elapsed_s);
  return buf;
}

void Progress::update(std::size_t done, std::size_t failed, double elapsed_s) {
  if (!enabled_) return;
  if (tty_) {
    std::fprintf(stderr, "\r%s", line(done, failed, elapsed_s).c_str());
  } else if (last_print_s_ < 0 || elapsed_s - last_print_s_ >= 10) {
    std::fprintf(stderr, "%s\n", line(done, failed, elapsed_s).c_str());
    last_print_s_ = elapsed_s;
  }
  std::fflush(stderr);
}

void Progress::finish(std::size_t done, std::size_t failed, double elapsed_s) {
  if (!enabled_) return;
  std::fprintf(stderr, tty_ ? "\r%s\n" : "%s\n", line(done, failed, elapsed_s).c_str());
  std::fflush(stderr);
}

}  // namespace prefixgate::bench
