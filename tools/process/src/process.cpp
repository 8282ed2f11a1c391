#include "prefixgate/process/process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <thread>

namespace prefixgate::proc {

Process::Process(std::string binary, std::vector<std::string> args, ProcessOptions options)
    : output_file_(std::move(options.output_file)) {
  args.insert(args.begin(), std::move(binary));
  int fds[2] = {-1, -1};
  int file = -1;
  if (output_file_.empty()) {
    if (pipe(fds) != 0) return;
  } else {
    file = open(output_file_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (file < 0) return;
  }
  // argv is built before fork: the child of a multi-threaded parent may only call
  // async-signal-safe functions, and allocation is not one.
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_ = fork();
  if (pid_ == 0) {
    // Children die with us: a benchmark or test killed by a signal leaves no servers behind.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    const int target = file >= 0 ? file : fds[1];
    dup2(target, 1);
    dup2(target, 2);
    if (fds[0] >= 0) close(fds[0]);
    if (fds[1] >= 0) close(fds[1]);
    if (file >= 0) close(file);
    execv(argv[0], argv.data());
    _exit(127);
  }
  if (file >= 0) close(file);
  if (fds[1] >= 0) close(fds[1]);
  if (pid_ < 0) {
    if (fds[0] >= 0) close(fds[0]);
    return;
  }
  out_ = fds[0];
}

Process::~Process() {
  kill(SIGKILL);
  wait();
}

std::uint16_t Process::wait_listening(std::chrono::milliseconds timeout) {
  static const std::regex re(R"(listening on http://[^:\s]+:(\d+))");
  std::smatch m;
  if (!read_until(re, m, timeout)) return 0;
  return static_cast<std::uint16_t>(std::stoi(m[1].str()));
}

bool Process::read_until(const std::regex& re, std::smatch& m, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (std::regex_search(output_, m, re)) return true;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    if (!read_more(left)) return false;
  }
}

// Appends what is available to output_, waiting up to `timeout` for something new. False when
// nothing more can come (the child closed its output or exited) or the wait timed out.
bool Process::read_more(std::chrono::milliseconds timeout) {
  if (!output_file_.empty()) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      std::ifstream in(output_file_, std::ios::binary);
      in.seekg(static_cast<std::streamoff>(output_.size()));
      std::ostringstream more;
      more << in.rdbuf();
      if (!more.str().empty()) {
        output_ += more.str();
        return true;
      }
      if (!running()) return false;
      if (std::chrono::steady_clock::now() >= deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));  // polling a file
    }
  }
  if (out_ < 0) return false;
  pollfd pfd{out_, POLLIN, 0};
  if (poll(&pfd, 1, static_cast<int>(timeout.count())) <= 0) return false;
  char buf[4096];
  const ssize_t n = read(out_, buf, sizeof buf);
  if (n <= 0) return false;
  output_.append(buf, static_cast<std::size_t>(n));
  return true;
}

void Process::kill(int signal) {
  if (pid_ > 0 && !exited_) ::kill(pid_, signal);
}

int Process::wait() {
  if (pid_ <= 0 || exited_) return status_;
  int status = 0;
  waitpid(pid_, &status, 0);
  return reap(status);
}

int Process::wait_for(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (pid_ > 0 && !exited_) {
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) return reap(status);
    if (std::chrono::steady_clock::now() >= deadline) return -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return status_;
}

int Process::stop(std::chrono::milliseconds grace) {
  kill(SIGTERM);
  if (wait_for(grace) >= 0) return status_;
  kill(SIGKILL);
  return wait();
}

bool Process::running() {
  if (pid_ <= 0 || exited_) return false;
  int status = 0;
  if (waitpid(pid_, &status, WNOHANG) == pid_) {
    reap(status);
    return false;
  }
  return true;
}

const std::string& Process::output() {
  if (!output_file_.empty()) read_more(std::chrono::milliseconds(0));
  return output_;
}

int Process::reap(int status) {
  exited_ = true;
  if (out_ >= 0) {
    char buf[4096];
    for (ssize_t n; (n = read(out_, buf, sizeof buf)) > 0;) {
      output_.append(buf, static_cast<std::size_t>(n));
    }
    close(out_);
    out_ = -1;
  }
  status_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return status_;
}

}  // namespace prefixgate::proc
