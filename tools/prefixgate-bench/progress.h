// The progress line of a run, on stderr: a bar when stderr is a terminal (redrawn in place),
// otherwise a plain line every few seconds (logs, CI).
#pragma once

#include <cstddef>
#include <string>

namespace prefixgate::bench {

class Progress {
 public:
  Progress(std::string label, std::size_t total, bool enabled);
  void update(std::size_t done, std::size_t failed, double elapsed_s);
  void finish(std::size_t done, std::size_t failed, double elapsed_s);

 private:
  std::string line(std::size_t done, std::size_t failed, double elapsed_s) const;

  std::string label_;
  std::size_t total_;
  bool enabled_;
  bool tty_;
  double last_print_s_ = -1;
};

}  // namespace prefixgate::bench
