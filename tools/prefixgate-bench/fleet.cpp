#include "fleet.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <regex>
#include <thread>

namespace prefixgate::bench {

namespace {

Error failure(std::string message) {
  return make_error(ErrorCode::kInvalidValue, std::move(message));
}

std::string tail(const std::string& s, std::size_t n = 2000) {
  return s.size() <= n ? s : "..." + s.substr(s.size() - n);
}

// `count` loopback UDP ports free right now: each gateway must know the others' ports before any
// of them starts. All sockets stay open until every port is picked, so the ports differ.
Result<std::vector<std::uint16_t>> free_udp_ports(std::size_t count) {
  std::vector<int> fds;
  std::vector<std::uint16_t> ports;
  for (std::size_t i = 0; i < count; ++i) {
    const int fd = ::socket(AF_INET, SOCK_DGRAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof a;
    if (fd < 0 || ::bind(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0 ||
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &length) != 0) {
      if (fd >= 0) ::close(fd);
      for (int f : fds) ::close(f);
      return failure("cannot find a free UDP port on 127.0.0.1 for the peers");
    }
    fds.push_back(fd);
    ports.push_back(ntohs(a.sin_port));
  }
  for (int f : fds) ::close(f);
  return ports;
}

}  // namespace

std::string executable_dir() {
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string(".") : exe.parent_path().string();
}

std::string sim_profile_of(const std::string& profiles, std::size_t replica) {
  std::vector<std::string> list;
  std::size_t start = 0;
  for (std::size_t comma; (comma = profiles.find(',', start)) != std::string::npos;
       start = comma + 1) {
    list.push_back(profiles.substr(start, comma - start));
  }
  list.push_back(profiles.substr(start));
  return list[replica % list.size()];
}

Fleet::Fleet(FleetOptions options) : options_(std::move(options)) {}

Fleet::~Fleet() {
  stop();
}

std::vector<std::string> Fleet::engine_args(std::size_t i, std::uint16_t port) const {
  std::vector<std::string> args{"--device",    options_.device, "--model", options_.model,
                                "--host",      "127.0.0.1",     "--port",  std::to_string(port),
                                "--log-level", "warn"};
  if (options_.device == "sim") {
    args.insert(args.end(), {"--sim-profile", sim_profile_of(options_.sim_profile, i),
                             "--sim-speedup", options_.sim_speedup});
  }
  if (options_.kv_cache_tokens > 0) {
    args.insert(args.end(), {"--kv-cache-tokens", std::to_string(options_.kv_cache_tokens)});
  }
  if (options_.max_model_len > 0) {
    args.insert(args.end(), {"--max-model-len", std::to_string(options_.max_model_len)});
  }
  if (options_.upstream_kind == "vllm") {
    args.insert(args.end(), {"--kv-events-endpoint", "tcp://127.0.0.1:0",
                             "--kv-events-replay-endpoint", "tcp://127.0.0.1:0"});
  }
  args.insert(args.end(), options_.engine_args.begin(), options_.engine_args.end());
  return args;
}

Status Fleet::start_engines() {
  ++generation_;
  std::filesystem::create_directories(options_.log_dir);
  for (std::size_t i = 0; i < options_.replicas; ++i) {
    const std::string log = options_.log_dir + "/engine-" + std::to_string(generation_) + "-" +
                            std::to_string(i) + ".log";
    std::filesystem::remove(log);
    auto p = std::make_unique<proc::Process>(options_.engine_bin, engine_args(i, 0),
                                             proc::ProcessOptions{log});
    const std::uint16_t port = p->wait_listening();
    if (port == 0) {
      return failure("engine " + std::to_string(i) + " (" + options_.engine_bin +
                     ") did not start:\n" + tail(p->output()));
    }
    std::string upstream = "http://127.0.0.1:" + std::to_string(port);
    if (options_.upstream_kind == "vllm") {
      // The engine prints where it bound them before its "listening on" line.
      static const std::regex kEvents(R"(kv events on (\S+) replay (\S+))");
      std::smatch m;
      const std::string& out = p->output();
      if (!std::regex_search(out, m, kEvents)) {
        return failure("engine " + std::to_string(i) +
                       " did not say where it publishes KV events:\n" + tail(out));
      }
      upstream += ";kind=vllm;kv_events=" + m[1].str() + ";kv_events_replay=" + m[2].str();
    } else if (options_.upstream_kind == "openai") {
      // Its predicted cache as large as the engine's.
      const std::size_t tokens = options_.kv_cache_tokens > 0 ? options_.kv_cache_tokens : 65536;
      upstream += ";kind=openai;capacity_blocks=" + std::to_string(tokens / 16);
    }
    upstreams_.push_back(std::move(upstream));
    engine_ports_.push_back(port);
    engines_.push_back(std::move(p));
  }
  return {};
}

Status Fleet::restart_engine(std::size_t i) {
  if (i >= engines_.size()) return failure("no engine " + std::to_string(i));
  if (options_.upstream_kind == "vllm") {
    // Its ZeroMQ endpoints are OS-picked: a new process would publish elsewhere.
    return failure("restart_engine: not with vllm upstreams");
  }
  engines_[i]->kill(SIGKILL);
  engines_[i]->wait();
  const std::string log = options_.log_dir + "/engine-" + std::to_string(generation_) + "-" +
                          std::to_string(i) + "-restart-" + std::to_string(++restarts_) + ".log";
  std::filesystem::remove(log);
  // The same port, so that the gateway's upstream URL reaches the new process. The listener sets
  // SO_REUSEADDR, so connections of the old one in TIME_WAIT do not block the bind; another
  // process taking the port in between would (rare: retried for a few seconds).
  std::string last_output;
  for (int attempt = 0; attempt < 20; ++attempt) {
    auto p = std::make_unique<proc::Process>(options_.engine_bin, engine_args(i, engine_ports_[i]),
                                             proc::ProcessOptions{log});
    if (p->wait_listening() == engine_ports_[i]) {
      engines_[i] = std::move(p);
      return {};
    }
    last_output = p->output();
    p->stop(std::chrono::seconds(1));
    std::this_thread::sleep_for(std::chrono::milliseconds(250));  // the port may free up
  }
  return failure("engine " + std::to_string(i) + " did not start again on port " +
                 std::to_string(engine_ports_[i]) + ":\n" + tail(last_output));
}

pid_t Fleet::engine_pid(std::size_t i) const {
  return i < engines_.size() ? engines_[i]->pid() : -1;
}

pid_t Fleet::gateway_pid(std::size_t g) const {
  return g < gateways_.size() ? gateways_[g]->pid() : -1;
}

Result<std::vector<HttpTarget>> Fleet::start_gateways(const std::string& policy,
                                                      const std::string& tag) {
  std::vector<HttpTarget> targets;
  // Each cache_aware gateway is told how many share the fleet (routing.gateways), as the
  // simulator tells its own, unless the policy names a count itself.
  // Peered gateways see each other's sends and need no count.
  const bool peered = options_.peers && options_.gateways > 1;
  std::string spec = policy;
  if (options_.gateways > 1 && !peered && policy.starts_with("cache_aware") &&
      policy.find("gateways=") == std::string::npos) {
    spec += ":gateways=" + std::to_string(options_.gateways);
  }
  // Peers: a loopback UDP port for each gateway, each told the others'.
  std::vector<std::uint16_t> peer_ports;
  if (peered) {
    auto ports = free_udp_ports(options_.gateways);
    if (!ports) return ports.error();
    peer_ports = std::move(*ports);
  }
  for (std::size_t g = 0; g < std::max<std::size_t>(1, options_.gateways); ++g) {
    std::vector<std::string> peer_args;
    if (peered) {
      peer_args = {"--peer-listen", "127.0.0.1:" + std::to_string(peer_ports[g])};
      for (std::size_t h = 0; h < peer_ports.size(); ++h) {
        if (h != g)
          peer_args.insert(peer_args.end(),
                           {"--peer", "127.0.0.1:" + std::to_string(peer_ports[h])});
      }
    }
    auto target =
        start_gateway(spec, options_.gateways > 1 ? tag + "-" + std::to_string(g) : tag, peer_args);
    if (!target) return target.error();
    targets.push_back(*target);
  }
  return targets;
}

Result<HttpTarget> Fleet::start_gateway(const std::string& policy, const std::string& tag,
                                        const std::vector<std::string>& extra) {
  std::vector<std::string> args{"--listen", "127.0.0.1:0", "--policy",
                                policy,     "--log-level", "warn"};
  args.insert(args.end(), extra.begin(), extra.end());
  if (!options_.gateway_config.empty()) {
    args.insert(args.begin(), {"--config", options_.gateway_config});
  }
  for (const std::string& u : upstreams_) args.insert(args.end(), {"--upstream", u});
  const std::string log = options_.log_dir + "/gateway-" + tag + ".log";
  std::filesystem::remove(log);
  proc::Process& gateway = *gateways_.emplace_back(
      std::make_unique<proc::Process>(options_.gateway_bin, args, proc::ProcessOptions{log}));
  const std::uint16_t port = gateway.wait_listening();
  if (port == 0) {
    return failure("gateway (" + options_.gateway_bin + ") did not start:\n" +
                   tail(gateway.output()));
  }
  auto target = parse_url("http://127.0.0.1:" + std::to_string(port));
  if (!target) return target.error();
  const std::string needle = "\"healthy_upstreams\":" + std::to_string(upstreams_.size());
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < deadline) {
    const SimpleReply r = http_get(*target, "/health");
    if (r.status == 200 && r.body.find(needle) != std::string::npos) return target;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // polling, not synchronizing
  }
  return failure("gateway never saw all " + std::to_string(upstreams_.size()) +
                 " replicas healthy:\n" + tail(gateway.output()));
}

void Fleet::stop() {
  for (auto& g : gateways_) g->stop(std::chrono::seconds(5));
  gateways_.clear();
  for (auto& e : engines_) e->kill(SIGTERM);
  for (auto& e : engines_) e->stop(std::chrono::seconds(5));
  engines_.clear();
  upstreams_.clear();
  engine_ports_.clear();
}

}  // namespace prefixgate::bench
