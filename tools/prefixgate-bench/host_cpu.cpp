#include "host_cpu.h"

#include <sys/resource.h>

#include <charconv>
#include <fstream>
#include <sstream>
#include <string>

namespace prefixgate::bench {

namespace {

std::optional<CpuTimes> read_proc_stat() {
  std::ifstream in("/proc/stat");
  std::string line;
  if (!in || !std::getline(in, line)) return std::nullopt;
  return parse_proc_stat(line);
}

}  // namespace

std::optional<CpuTimes> parse_proc_stat(std::string_view text) {
  if (!text.starts_with("cpu ")) return std::nullopt;
  text.remove_prefix(4);
  // user nice system idle iowait irq softirq steal (guest time is already in user and nice)
  std::uint64_t v[8] = {};
  std::size_t n = 0;
  while (n < 8) {
    while (!text.empty() && text.front() == ' ') text.remove_prefix(1);
    if (text.empty() || text.front() == '\n') break;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v[n]);
    if (ec != std::errc()) return std::nullopt;
    text.remove_prefix(static_cast<std::size_t>(end - text.data()));
    ++n;
  }
  if (n < 4) return std::nullopt;
  CpuTimes t;
  const std::uint64_t idle = v[3] + v[4];
  t.busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
  t.total = t.busy + idle;
  return t;
}

double busy_share(const CpuTimes& before, const CpuTimes& after) {
  if (after.total <= before.total || after.busy < before.busy) return 0;
  const double share = static_cast<double>(after.busy - before.busy) /
                       static_cast<double>(after.total - before.total);
  return share > 1 ? 1 : share;
}

double process_tree_cpu_seconds() {
  auto seconds = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) * 1e-6;
  };
  double total = 0;
  for (int who : {RUSAGE_SELF, RUSAGE_CHILDREN}) {
    rusage u{};
    if (getrusage(who, &u) == 0) total += seconds(u.ru_utime) + seconds(u.ru_stime);
  }
  return total;
}

HostCpuMonitor::HostCpuMonitor(std::chrono::milliseconds interval) : interval_(interval) {
  first_ = read_proc_stat();
  if (first_) thread_ = std::thread([this] { sample_loop(); });
}

HostCpuMonitor::~HostCpuMonitor() {
  stop();
}

void HostCpuMonitor::sample_loop() {
  CpuTimes last = *first_;
  std::unique_lock lock(mutex_);
  while (!wake_.wait_for(lock, interval_, [this] { return stopping_; })) {
    if (auto now = read_proc_stat()) {
      shares_.push_back(busy_share(last, *now));
      last = *now;
    }
  }
  // The interval the stop cut short counts too: a short run, or a sampler thread the scheduler
  // starved on a busy host, still reports what it saw.
  if (auto now = read_proc_stat(); now && now->total > last.total) {
    shares_.push_back(busy_share(last, *now));
  }
}

HostCpuUse HostCpuMonitor::stop() {
  {
    std::lock_guard lock(mutex_);
    if (result_) return *result_;
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  HostCpuUse use;
  use.cores = std::thread::hardware_concurrency();
  if (first_) {
    if (auto end = read_proc_stat()) {
      use.available = true;
      use.busy_mean = busy_share(*first_, *end);
      use.intervals = shares_.size();
      std::size_t saturated = 0;
      for (double s : shares_) saturated += s >= HostCpuUse::kSaturatedBusy ? 1 : 0;
      use.saturated_share =
          shares_.empty() ? 0
                          : static_cast<double>(saturated) / static_cast<double>(shares_.size());
    }
  }
  std::lock_guard lock(mutex_);
  result_ = use;
  return use;
}

}  // namespace prefixgate::bench
