// A small network for fault injection: the gateway's network namespace and one namespace per
// engine, each joined to the gateway's by a veth pair, with `ip` and `tc`. Needs root (CI runs as
// root); unavailable() says why it cannot run, for a GTEST_SKIP.
//
//   Lab lab(3, {.events_links = false});        // namespaces pgf<pid>g, pgf<pid>e0..e2
//   lab.enter_gateway_ns();                      // this thread's sockets: the gateway's namespace
//   lab.set_link(1, false);                      // partition engine 1 (its end of the veth down)
//   lab.tc(1, "tbf rate 256kbit burst 4kb latency 400ms");   // on both ends of its link
//
// Engine i listens on 10.77.(i+1).2 (the gateway's end is .1, a /30); with events_links a second
// pair carries 10.77.(i+1).6 (.5 on the gateway's side), for an event endpoint that can be
// partitioned apart from the HTTP one. Names carry the test process's pid, so parallel ctest runs
// do not collide, and each Lab deletes its namespaces when destroyed; a Lab also deletes those of
// test processes that no longer exist (killed before they could clean up).
#pragma once

#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

namespace prefixgate::netns_testing {

// Runs a shell command; returns its exit status and puts its output (stderr too) in `out`.
inline int sh(const std::string& command, std::string* out = nullptr) {
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return -1;
  char buf[4096];
  std::string text;
  for (std::size_t n; (n = fread(buf, 1, sizeof buf, pipe)) > 0;) text.append(buf, n);
  const int status = pclose(pipe);
  if (out != nullptr) *out = text;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

inline std::string ip_binary() {
  for (const char* p : {"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"}) {
    if (access(p, X_OK) == 0) return p;
  }
  return {};
}

struct LabOptions {
  bool events_links = false;  // a second veth pair per engine (10.77.N.4/30)
};

class Lab {
 public:
  // Why a Lab cannot be built here ("" when it can): not root, no `ip`, no network namespaces.
  static std::string unavailable() {
    if (geteuid() != 0) return "needs root (ip netns, veth, tc)";
    if (ip_binary().empty()) return "no `ip` binary (iproute2)";
    const std::string probe = "pgf" + std::to_string(getpid()) + "probe";
    std::string out;
    if (sh("ip netns add " + probe, &out) != 0) return "ip netns add failed: " + out;
    sh("ip netns del " + probe);
    return {};
  }

  // Whether tc's netem qdisc exists on this kernel ("" if it does, else tc's message).
  std::string netem_unavailable() {
    std::string out;
    if (sh("tc -n " + gateway_ns() + " qdisc add dev lo root netem delay 1ms", &out) != 0) {
      while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
      return "tc netem: " + out;
    }
    sh("tc -n " + gateway_ns() + " qdisc del dev lo root");
    return {};
  }

  Lab(int engines, LabOptions options) : engines_(engines) {
    remove_stale();
    const std::string g = gateway_ns();
    ok_ = run("ip netns add " + g) && run("ip -n " + g + " link set lo up");
    for (int i = 0; ok_ && i < engines; ++i) {
      const std::string e = engine_ns(i);
      ok_ = run("ip netns add " + e) && run("ip -n " + e + " link set lo up") &&
            pair(i, "gv", "ev", 0) && (!options.events_links || pair(i, "gx", "ex", 4));
    }
  }
  ~Lab() {
    if (saved_ns_ >= 0) {
      setns(saved_ns_, CLONE_NEWNET);
      close(saved_ns_);
    }
    for (int i = 0; i < engines_; ++i) sh("ip netns del " + engine_ns(i));
    sh("ip netns del " + gateway_ns());
  }
  Lab(const Lab&) = delete;
  Lab& operator=(const Lab&) = delete;

  bool ok() const { return ok_; }
  const std::string& error() const { return error_; }

  std::string gateway_ns() const { return prefix() + "g"; }
  std::string engine_ns(int i) const { return prefix() + "e" + std::to_string(i); }
  static std::string engine_addr(int i) { return "10.77." + std::to_string(i + 1) + ".2"; }
  static std::string events_addr(int i) { return "10.77." + std::to_string(i + 1) + ".6"; }

  // Moves the calling thread (and the threads it starts later) into the gateway's namespace;
  // the destructor moves it back.
  bool enter_gateway_ns() {
    saved_ns_ = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
    const int fd = open(("/var/run/netns/" + gateway_ns()).c_str(), O_RDONLY | O_CLOEXEC);
    const bool entered = fd >= 0 && setns(fd, CLONE_NEWNET) == 0;
    if (fd >= 0) close(fd);
    return entered;
  }

  // Engine i's end of its HTTP link (or of its events link) up or down. Down, the gateway's end
  // keeps its route and carrier-less packets are dropped: a partition, not a refused connection.
  bool set_link(int i, bool up, bool events = false) {
    return run("ip -n " + engine_ns(i) + " link set " + (events ? "ex0" : "ev0") +
               (up ? " up" : " down"));
  }
  // A root qdisc on both ends of engine i's HTTP link ("" removes it).
  bool tc(int i, const std::string& qdisc) {
    bool all = true;
    for (const auto& [ns, dev] : {std::pair{gateway_ns(), "gv" + std::to_string(i)},
                                  std::pair{engine_ns(i), std::string("ev0")}}) {
      all = all &&
            (qdisc.empty() ? run("tc -n " + ns + " qdisc del dev " + dev + " root")
                           : run("tc -n " + ns + " qdisc replace dev " + dev + " root " + qdisc));
    }
    return all;
  }

  // `ip netns exec NS` before a program's argv (the program replaces ip: its pid is the child's).
  std::vector<std::string> exec_in(const std::string& ns) const { return {"netns", "exec", ns}; }

 private:
  std::string prefix() const { return "pgf" + std::to_string(getpid()); }

  bool run(const std::string& command) {
    std::string out;
    if (sh(command, &out) == 0) return true;
    error_ += command + ": " + out;
    return false;
  }

  // A veth pair between the gateway's namespace (gw_name<i>, 10.77.(i+1).(base+1)) and engine
  // i's (eng_name0, .(base+2)).
  bool pair(int i, const std::string& gw_name, const std::string& eng_name, int base) {
    const std::string g = gateway_ns(), e = engine_ns(i), n = std::to_string(i + 1);
    const std::string gdev = gw_name + std::to_string(i), edev = eng_name + "0";
    const std::string net = "10.77." + n + ".";
    return run("ip -n " + g + " link add " + gdev + " type veth peer name " + edev + " netns " +
               e) &&
           run("ip -n " + g + " addr add " + net + std::to_string(base + 1) + "/30 dev " + gdev) &&
           run("ip -n " + e + " addr add " + net + std::to_string(base + 2) + "/30 dev " + edev) &&
           run("ip -n " + g + " link set " + gdev + " up") &&
           run("ip -n " + e + " link set " + edev + " up");
  }

  // No such process, or a zombie (killed, not yet reaped: its parent may be slow to wait).
  static bool gone(pid_t pid) {
    if (kill(pid, 0) != 0 && errno == ESRCH) return true;
    std::FILE* f = std::fopen(("/proc/" + std::to_string(pid) + "/stat").c_str(), "r");
    if (f == nullptr) return true;
    char buf[512] = {};
    const std::size_t n = std::fread(buf, 1, sizeof buf - 1, f);
    std::fclose(f);
    const std::string stat(buf, n);
    const std::size_t paren = stat.rfind(')');  // "pid (comm) S ..."
    return paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] == 'Z';
  }

  // Namespaces pgf<pid>* of test processes that are gone.
  static void remove_stale() {
    DIR* dir = opendir("/var/run/netns");
    if (dir == nullptr) return;
    std::vector<std::string> stale;
    while (const dirent* d = readdir(dir)) {
      const std::string name = d->d_name;
      if (!name.starts_with("pgf")) continue;
      const long pid = std::strtol(name.c_str() + 3, nullptr, 10);
      if (pid > 0 && pid != getpid() && gone(static_cast<pid_t>(pid))) stale.push_back(name);
    }
    closedir(dir);
    for (const std::string& name : stale) sh("ip netns del " + name);
  }

  int engines_;
  bool ok_ = false;
  std::string error_;
  int saved_ns_ = -1;
};

}  // namespace prefixgate::netns_testing
