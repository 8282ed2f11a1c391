// A child process whose stdout and stderr we read: what tests and prefixgate-bench use to run
// prefixgate-engine, prefixgate, nginx and wrk on loopback.
//
//   proc::Process engine("build/release/engine/prefixgate-engine",
//                        {"--device", "sim", "--port", "0"});
//   std::uint16_t port = engine.wait_listening();   // 0: it exited or never said where
//   ...
//   engine.stop();                                   // SIGTERM, then SIGKILL after a grace period
//
// Output goes to a pipe read into output() as the caller waits for it, or, with
// ProcessOptions::output_file, to a file (for long-lived children whose output nobody drains: a
// full pipe would block them). The destructor kills (SIGKILL) and reaps a child still running.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <regex>
#include <string>
#include <vector>

namespace prefixgate::proc {

struct ProcessOptions {
  std::string output_file;  // "": a pipe; else stdout and stderr are appended to this file
};

class Process {
 public:
  Process(std::string binary, std::vector<std::string> args, ProcessOptions options = {});
  ~Process();
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;

  // False when fork/exec failed (the exec failure shows as exit status 127).
  bool started() const { return pid_ > 0; }
  pid_t pid() const { return pid_; }

  // Reads output until "listening on http://HOST:PORT"; returns the port, 0 on timeout or exit.
  std::uint16_t wait_listening(std::chrono::milliseconds timeout = std::chrono::seconds(30));
  // Reads output until `re` matches it (m holds the match); false on timeout or exit.
  bool read_until(const std::regex& re, std::smatch& m, std::chrono::milliseconds timeout);

  void kill(int signal);
  // Blocks until the child exits; its exit status (128 + signal when killed by one).
  int wait();
  // Waits up to `timeout` for the child to exit by itself; -1 while it is still running.
  int wait_for(std::chrono::milliseconds timeout);
  // SIGTERM, up to `grace` for a clean exit, then SIGKILL. Returns the exit status.
  int stop(std::chrono::milliseconds grace = std::chrono::seconds(5));
  bool running();

  // What the child wrote so far (read so far, for a pipe).
  const std::string& output();

 private:
  bool read_more(std::chrono::milliseconds timeout);
  int reap(int status);

  pid_t pid_ = -1;
  int out_ = -1;  // pipe read end, or -1
  std::string output_file_;
  std::string output_;
  bool exited_ = false;
  int status_ = -1;
};

}  // namespace prefixgate::proc
