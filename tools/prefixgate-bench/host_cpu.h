// Host CPU use during a run, from /proc/stat: a sim fleet models GPU time by sleeping, so its
// results mean something only while the host has CPU to spare. When the host's cores are busy
// (the engines' schedulers and HTTP, the gateway, this load generator, anything else on the
// machine), steps start late and tokens reach the client late: throughput and latency then
// measure the host, not the modelled GPUs, and every policy looks alike.
//
// A sampler thread reads the aggregate `cpu` line every `interval` and keeps each interval's
// busy share (everything but idle and iowait, over all cores).
//
//   bench::HostCpuMonitor cpu(std::chrono::milliseconds(500));
//   ... run ...
//   bench::HostCpuUse use = cpu.stop();   // use.busy_mean, use.saturated_share
//   if (use.saturated()) warn();
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string_view>
#include <thread>
#include <vector>

namespace prefixgate::bench {

// Jiffies of the aggregate `cpu` line of /proc/stat.
struct CpuTimes {
  std::uint64_t busy = 0;   // user + nice + system + irq + softirq + steal
  std::uint64_t total = 0;  // busy + idle + iowait
};

// Parses the first line of /proc/stat's text (`cpu  user nice system idle iowait irq softirq
// steal ...`); nullopt when it is not there.
std::optional<CpuTimes> parse_proc_stat(std::string_view text);

// The busy share between two readings, in [0, 1]; 0 when no time passed.
double busy_share(const CpuTimes& before, const CpuTimes& after);

struct HostCpuUse {
  bool available = false;      // /proc/stat was readable
  unsigned cores = 0;          // std::thread::hardware_concurrency()
  double busy_mean = 0;        // over the whole run
  double saturated_share = 0;  // share of intervals at or above kSaturatedBusy
  std::size_t intervals = 0;
  // This run's own processes (the bench, and the engines and gateway it started and reaped),
  // as a share of all cores over the same span; -1 when not measured. The rest of busy_mean is
  // someone else's.
  double own_busy = -1;

  static constexpr double kSaturatedBusy = 0.9;
  // Worth a warning: the host was near saturation for a fifth of the run or more, or 80 % busy
  // on average (queues then form in front of the sim's steps and the HTTP threads).
  bool saturated() const { return available && (saturated_share >= 0.2 || busy_mean >= 0.8); }
};

// CPU seconds (user + system) of this process and of its reaped children (getrusage).
double process_tree_cpu_seconds();

class HostCpuMonitor {
 public:
  explicit HostCpuMonitor(std::chrono::milliseconds interval = std::chrono::milliseconds(500));
  ~HostCpuMonitor();
  HostCpuMonitor(const HostCpuMonitor&) = delete;
  HostCpuMonitor& operator=(const HostCpuMonitor&) = delete;

  // Stops sampling (once) and summarizes.
  HostCpuUse stop();

 private:
  void sample_loop();

  std::chrono::milliseconds interval_;
  std::optional<CpuTimes> first_;
  std::vector<double> shares_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::optional<HostCpuUse> result_;
  std::thread thread_;
};

}  // namespace prefixgate::bench
