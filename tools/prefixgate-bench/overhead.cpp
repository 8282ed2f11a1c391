// prefixgate-bench overhead: the gateway's cost with a fast upstream, side by side in one run.
//
// Three targets get the same wrk load (overhead_request.lua: POST /v1/chat/completions with
// a ~2 KB system prompt, two tools, a user message, max_tokens 1):
//   direct      wrk -> prefixgate-engine (sim device, --sim-speedup inf: no simulated GPU time,
//               only the engine's own HTTP, tokenization and scheduler step)
//   nginx       wrk -> nginx proxy_pass (keep-alive upstream pool) -> the same engine
//   prefixgate  wrk -> prefixgate --policy cache_aware -> the same engine
// It prints requests/s, p50 and p99 for each, the ratio of requests/s to nginx's, the p50
// added over direct, and the CPU time per request of the proxy and of the engine (from
// /proc: robust on a busy machine, where requests/s also measure the neighbours), and writes
// OUT_DIR/overhead.json. With --stream TOKENS every target is asked for a streamed answer
// instead (overhead_stream.lua), which the engine sends an event a token in modelled time and
// nginx forwards unbuffered: requests/s are then the engine's, and the CPU per request is the
// proxies' relay of TOKENS + 3 events. With pinning (2+ cores) wrk runs on the
// last core and the servers on the others (taskset), so the load generator does not steal the
// proxy's CPU. After the long runs, --rounds short loaded runs visit every target in turn, and
// --latency-rounds one-connection runs likewise (interleaved_rounds.h): on a shared host the
// ratio to nginx within a round holds still where one long run a target moves by a third.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <regex>
#include <sstream>
#include <thread>
#include <vector>

#include "commands.h"
#include "http_client.h"
#include "interleaved_rounds.h"
#include "report_text.h"

namespace prefixgate::bench {

namespace {

struct WrkResult {
  double rps = 0;
  long requests = 0, p50_us = 0, p99_us = 0, body_bytes = 0;
  double proxy_cpu_us = 0, engine_cpu_us = 0;     // CPU time per request
  long unloaded_p50_us = 0, unloaded_p99_us = 0;  // one connection
};

// utime + stime of a process, all threads, in seconds (proc(5) fields 14 and 15); and of its
// children when asked (nginx's workers). Reads after "(comm) " so a comm with spaces is safe.
double cpu_seconds(pid_t pid, bool with_children) {
  const auto stat_fields = [](const std::string& path) {
    std::ifstream in(path);
    std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const std::size_t close = stat.rfind(") ");
    std::vector<std::string> fields;
    if (close == std::string::npos) return fields;
    std::istringstream rest(stat.substr(close + 2));
    for (std::string f; rest >> f;) fields.push_back(f);
    return fields;  // fields[0] is proc(5) field 3 (state)
  };
  static const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  const auto cpu_of = [&](const std::vector<std::string>& f) {
    return f.size() > 12 ? (std::stod(f[11]) + std::stod(f[12])) / ticks : 0.0;
  };
  double total = cpu_of(stat_fields("/proc/" + std::to_string(pid) + "/stat"));
  if (!with_children) return total;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    const auto f = stat_fields(entry.path().string() + "/stat");
    if (f.size() > 1 && f[1] == std::to_string(pid)) total += cpu_of(f);  // field 4: ppid
  }
  return total;
}

bool on_path(const std::string& tool) {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    if (access((dir + "/" + tool).c_str(), X_OK) == 0) return true;
  }
  for (const char* dir : {"/usr/sbin", "/sbin"}) {
    if (access((std::string(dir) + "/" + tool).c_str(), X_OK) == 0) return true;
  }
  return false;
}

std::string which(const std::string& tool) {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(std::string(path ? path : "") + ":/usr/sbin:/sbin");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    const std::string p = dir + "/" + tool;
    if (access(p.c_str(), X_OK) == 0) return p;
  }
  return tool;
}

std::uint16_t free_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  std::uint16_t port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  close(fd);
  return port;
}

// Runs a command to completion; its output.
std::string run_capture(const std::string& bin, const std::vector<std::string>& args, int& status) {
  proc::Process p(bin, args);
  std::smatch m;
  static const std::regex never("\\x01never\\x01");
  p.read_until(never, m, std::chrono::hours(1));  // reads until the child closes its output
  status = p.wait();
  return p.output();
}

bool parse_pgbench(const std::string& out, WrkResult& r, std::string& line) {
  const std::size_t at = out.find("PGBENCH ");
  if (at == std::string::npos) return false;
  line = out.substr(at, out.find('\n', at) - at);
  std::map<std::string, std::string> kv;
  std::stringstream ss(line);
  for (std::string tok; ss >> tok;) {
    const std::size_t eq = tok.find('=');
    if (eq != std::string::npos) kv[tok.substr(0, eq)] = tok.substr(eq + 1);
  }
  if (kv["errors"] != "0" || kv["non2xx"] != "0") return false;
  r.rps = std::atof(kv["rps"].c_str());
  r.requests = std::atol(kv["requests"].c_str());
  r.p50_us = std::atol(kv["p50_us"].c_str());
  r.p99_us = std::atol(kv["p99_us"].c_str());
  r.body_bytes = std::atol(kv["body_bytes"].c_str());
  return true;
}

}  // namespace

int run_overhead(const OverheadFlags& f) {
  for (const char* tool : {"wrk", "nginx"}) {
    if (!on_path(tool)) {
      std::cerr << "prefixgate-bench overhead: '" << tool
                << "' is not installed (Debian: sudo apt-get install wrk nginx)\n";
      return 2;
    }
  }
  const std::string dir = executable_dir();
  const std::string engine_bin =
      f.engine_bin.empty() ? dir + "/../../engine/prefixgate-engine" : f.engine_bin;
  const std::string gateway_bin =
      f.gateway_bin.empty() ? dir + "/../../gateway/prefixgate" : f.gateway_bin;
  const bool stream = f.stream_tokens > 0;
  const std::string lua = !f.lua.empty()
                              ? f.lua
                              : std::string(PREFIXGATE_BENCH_ASSET_DIR) +
                                    (stream ? "/overhead_stream.lua" : "/overhead_request.lua");
  // overhead_stream.lua reads the answer's length from the environment wrk inherits.
  if (stream) setenv("TOKENS", std::to_string(f.stream_tokens).c_str(), 1);
  for (const std::string& file : {engine_bin, gateway_bin, lua}) {
    if (access(file.c_str(), R_OK) != 0) {
      std::cerr << "prefixgate-bench overhead: cannot read '" << file << "'\n";
      return 2;
    }
  }
  std::filesystem::create_directories(f.out_dir);
  char tmpl[] = "/tmp/prefixgate-overhead.XXXXXX";
  if (mkdtemp(tmpl) == nullptr) {
    std::cerr << "prefixgate-bench overhead: mkdtemp failed\n";
    return 1;
  }
  const std::string tmp = tmpl;
  struct Cleanup {
    std::string dir;
    ~Cleanup() {
      std::error_code ec;
      std::filesystem::remove_all(dir, ec);
    }
  } cleanup{tmp};

  const unsigned ncpu = std::max(1u, std::thread::hardware_concurrency());
  std::string server_cpus, wrk_cpus;
  if (f.pin && ncpu >= 2) {
    server_cpus = "0-" + std::to_string(ncpu - 2);
    wrk_cpus = std::to_string(ncpu - 1);
  }
  const std::string taskset = which("taskset");
  auto pinned = [&](const std::string& cpus, const std::string& bin, std::vector<std::string> args,
                    const std::string& log) {
    if (!cpus.empty()) {
      args.insert(args.begin(), {"-c", cpus, bin});
      return std::make_unique<proc::Process>(taskset, args, proc::ProcessOptions{log});
    }
    return std::make_unique<proc::Process>(bin, args, proc::ProcessOptions{log});
  };

  // A streamed answer comes an event a token only in modelled time; otherwise no GPU time.
  std::vector<std::string> engine_args{"--device",      "sim",
                                       "--sim-speedup", stream ? "1" : "inf",
                                       "--model",       "builtin:tiny",
                                       "--host",        "127.0.0.1",
                                       "--port",        "0",
                                       "--threads",     std::to_string(f.engine_threads),
                                       "--log-level",   "warn"};
  engine_args.insert(engine_args.end(), f.engine_args.begin(), f.engine_args.end());
  auto engine = pinned(server_cpus, engine_bin, engine_args, tmp + "/engine.log");
  const std::uint16_t engine_port = engine->wait_listening();
  if (engine_port == 0) {
    std::cerr << "prefixgate-bench overhead: the engine did not start:\n" << engine->output();
    return 1;
  }

  const std::uint16_t nginx_port = free_port();
  std::filesystem::create_directories(tmp + "/nginx");
  {
    std::ofstream conf(tmp + "/nginx/nginx.conf");
    conf << "# Written by prefixgate-bench overhead: a plain reverse proxy with an upstream "
            "keep-alive pool.\n"
         << "worker_processes " << f.proxy_threads << ";\ndaemon off;\npid " << tmp
         << "/nginx/nginx.pid;\nerror_log " << tmp << "/nginx/error.log warn;\n"
         << "events { worker_connections 4096; }\nhttp {\n  access_log off;\n"
         << "  client_body_temp_path " << tmp << "/nginx/body;\n  proxy_temp_path " << tmp
         << "/nginx/proxy;\n  fastcgi_temp_path " << tmp << "/nginx/fastcgi;\n  uwsgi_temp_path "
         << tmp << "/nginx/uwsgi;\n  scgi_temp_path " << tmp
         << "/nginx/scgi;\n"
         // Bodies in memory, as the gateway keeps them (not in temporary files).
         << "  client_max_body_size 16m;\n  client_body_buffer_size 1m;\n"
         << "  keepalive_requests 1000000;\n"
         << "  upstream engine {\n    server 127.0.0.1:" << engine_port
         << ";\n    keepalive 64;\n    keepalive_requests 1000000;\n  }\n"
         << "  server {\n    listen 127.0.0.1:" << nginx_port << ";\n    location / {\n"
         << "      proxy_pass http://engine;\n      proxy_http_version 1.1;\n"
         << "      proxy_set_header Connection \"\";\n"
         // Streams forwarded as they come, as LLM deployments set nginx for them.
         << (stream ? "      proxy_buffering off;\n" : "") << "    }\n  }\n}\n";
  }
  // -e: the startup error log too, so nginx never touches /var/log/nginx.
  auto nginx = pinned(
      server_cpus, which("nginx"),
      {"-p", tmp + "/nginx", "-e", tmp + "/nginx/error.log", "-c", tmp + "/nginx/nginx.conf"},
      tmp + "/nginx/stdout.log");

  std::vector<std::string> gw_args{
      "--listen",    "127.0.0.1:0", "--upstream", "http://127.0.0.1:" + std::to_string(engine_port),
      "--policy",    "cache_aware", "--threads",  std::to_string(f.proxy_threads),
      "--log-level", "warn"};
  gw_args.insert(gw_args.end(), f.gateway_args.begin(), f.gateway_args.end());
  // The gateways: "prefixgate" with the common flags, then one per --variant with its own.
  // A variant's FLAGS may start with bin=PATH: another prefixgate build, so that a change is
  // measured against the build before it side by side, on the same engine and in the same run.
  struct GatewaySpec {
    std::string name;
    std::string bin;
    std::vector<std::string> args;
  };
  std::vector<GatewaySpec> gateway_specs{{"prefixgate", gateway_bin, gw_args}};
  for (const std::string& v : f.variants) {
    const std::size_t eq = v.find('=');
    if (eq == 0 || eq == std::string::npos) {
      std::cerr << "prefixgate-bench overhead: --variant '" << v << "': expected NAME=FLAGS\n";
      return 2;
    }
    GatewaySpec spec{"prefixgate-" + v.substr(0, eq), gateway_bin, gw_args};
    std::istringstream words(v.substr(eq + 1));
    for (std::string w; words >> w;) {
      if (w.starts_with("bin=") && spec.args.size() == gw_args.size()) {
        spec.bin = w.substr(4);
      } else {
        spec.args.push_back(w);
      }
    }
    gateway_specs.push_back(std::move(spec));
  }
  std::map<std::string, std::unique_ptr<proc::Process>> gateways;
  std::map<std::string, std::uint16_t> gateway_ports;
  for (const auto& [name, bin, args] : gateway_specs) {
    auto g = pinned(server_cpus, bin, args, tmp + "/" + name + ".log");
    const std::uint16_t port = g->wait_listening();
    if (port == 0) {
      std::cerr << "prefixgate-bench overhead: " << name << " did not start:\n" << g->output();
      return 1;
    }
    gateway_ports[name] = port;
    gateways[name] = std::move(g);
  }
  const std::uint16_t gateway_port = gateway_ports["prefixgate"];
  auto wait_ok = [](std::uint16_t port, const char* what) {
    auto t = parse_url("http://127.0.0.1:" + std::to_string(port));
    for (int i = 0; i < 200 && t; ++i) {
      if (http_get(*t, "/health", std::chrono::seconds(1)).status == 200) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));  // polling a starting server
    }
    std::cerr << "prefixgate-bench overhead: " << what << " does not answer\n";
    return false;
  };
  if (!wait_ok(nginx_port, "nginx")) return 1;
  for (const auto& [name, port] : gateway_ports) {
    if (!wait_ok(port, name.c_str())) return 1;
  }

  std::cerr << "overhead: engine :" << engine_port << ", nginx :" << nginx_port
            << ", prefixgate :" << gateway_port << "; wrk -t" << f.wrk_threads << " -c"
            << f.connections << " -d" << f.duration << " (warm-up " << f.warmup
            << "), proxy threads " << f.proxy_threads << ", pinning "
            << (server_cpus.empty() ? "off"
                                    : "servers on CPU " + server_cpus + ", wrk on CPU " + wrk_cpus)
            << "\n";

  const std::string wrk = which("wrk");
  std::map<std::string, WrkResult> results;
  std::vector<std::pair<std::string, std::uint16_t>> targets{{"direct", engine_port},
                                                             {"nginx", nginx_port}};
  for (const auto& spec : gateway_specs) targets.emplace_back(spec.name, gateway_ports[spec.name]);
  const std::string bin = wrk_cpus.empty() ? wrk : taskset;
  auto wrk_args_for = [&](std::uint16_t port, const std::string& duration, bool latency,
                          std::size_t connections) {
    const std::string url = "http://127.0.0.1:" + std::to_string(port);
    const std::size_t threads = std::min(f.wrk_threads, connections);
    std::vector<std::string> a{"-t" + std::to_string(threads), "-c" + std::to_string(connections),
                               "-d" + duration};
    if (latency) a.push_back("--latency");
    a.insert(a.end(), {"-s", lua, url});
    if (!wrk_cpus.empty()) a.insert(a.begin(), {"-c", wrk_cpus, wrk});
    return a;
  };
  // A loaded run of `name` with its proxy's and the engine's CPU time over it, per request, in
  // `r` (r.requests 0 where wrk saw failures); wrk's output.
  const auto timed_run = [&](const std::string& name, std::uint16_t port,
                             const std::string& duration, WrkResult& r) {
    // The proxy's processes: none for direct; nginx's master and workers; the gateway.
    const auto gw_it = gateways.find(name);
    const auto proxy_cpu = [&] {
      if (name == "nginx") return cpu_seconds(nginx->pid(), true);
      if (gw_it != gateways.end()) return cpu_seconds(gw_it->second->pid(), false);
      return 0.0;
    };
    const double proxy_before = proxy_cpu();
    const double engine_before = cpu_seconds(engine->pid(), false);
    int st = 0;
    const std::string out = run_capture(bin, wrk_args_for(port, duration, true, f.connections), st);
    const double proxy_used = proxy_cpu() - proxy_before;
    const double engine_used = cpu_seconds(engine->pid(), false) - engine_before;
    std::string line;
    if (!parse_pgbench(out, r, line)) r.requests = 0;
    if (r.requests > 0) {
      r.proxy_cpu_us = proxy_used * 1e6 / static_cast<double>(r.requests);
      r.engine_cpu_us = engine_used * 1e6 / static_cast<double>(r.requests);
    }
    return out;
  };
  for (const auto& [name, port] : targets) {
    auto wrk_args = [&](const std::string& duration, bool latency, std::size_t connections = 0) {
      return wrk_args_for(port, duration, latency, connections == 0 ? f.connections : connections);
    };
    int st = 0;
    WrkResult r;
    std::string line;
    const std::string warm = run_capture(bin, wrk_args(f.warmup, false), st);
    if (!parse_pgbench(warm, r, line)) {
      std::cerr << "overhead: " << name << ": warm-up had failures:\n" << warm;
      return 1;
    }
    std::unique_ptr<proc::Process> perf;
    const auto gw_it = gateways.find(name);
    if (gw_it != gateways.end() && f.profile) {
      const std::string suffix = name == "prefixgate" ? "gateway" : name;
      perf = std::make_unique<proc::Process>(
          which("perf"),
          // DWARF call graphs: release builds keep no frame pointers, so -g's stacks stop at the
          // first frame; 499 Hz keeps the stack copies to tens of megabytes.
          std::vector<std::string>{"record", "-q", "--call-graph", "dwarf,16384", "-F", "499", "-p",
                                   std::to_string(gw_it->second->pid()), "-o",
                                   f.out_dir + "/perf-" + suffix + ".data"},
          proc::ProcessOptions{f.out_dir + "/perf-gateway.log"});
      std::this_thread::sleep_for(std::chrono::milliseconds(300));  // let perf attach
    }
    const std::string out = timed_run(name, port, f.duration, r);
    if (perf) {
      perf->kill(SIGINT);
      perf->wait();
    }
    std::ofstream(f.out_dir + "/wrk-" + name + ".txt") << out;
    if (r.requests == 0) {
      std::cerr << "overhead: " << name << ": failures during the run:\n" << out;
      return 1;
    }
    // Unloaded: one connection, one request at a time, so the p50 is a request's own latency
    // through the proxy rather than its wait behind the other connections' requests.
    WrkResult one;
    const std::string single = run_capture(bin, wrk_args(f.warmup, true, 1), st);
    if (!parse_pgbench(single, one, line)) {
      std::cerr << "overhead: " << name << ": failures in the one-connection run:\n" << single;
      return 1;
    }
    r.unloaded_p50_us = one.p50_us;
    r.unloaded_p99_us = one.p99_us;
    std::fprintf(stderr,
                 "overhead: %s: %.0f req/s, p50 %ld us, p99 %ld us; one connection: p50 %ld us\n",
                 name.c_str(), r.rps, r.p50_us, r.p99_us, r.unloaded_p50_us);
    results[name] = r;
  }
  // Rounds of short loaded runs, then of one-connection runs, every target in each (the first
  // target moving on a place each round, so that none always follows the same one).
  InterleavedRounds loaded;
  for (std::size_t round = 0; round < f.rounds; ++round) {
    for (std::size_t k = 0; k < targets.size(); ++k) {
      const auto& [name, port] = targets[(round + k) % targets.size()];
      WrkResult r;
      const std::string out = timed_run(name, port, f.round_duration, r);
      if (r.requests == 0) {
        std::cerr << "overhead: " << name << ": failures in round " << round + 1 << ":\n" << out;
        return 1;
      }
      loaded.add(name,
                 {{"rps", r.rps}, {"proxy_cpu", r.proxy_cpu_us}, {"engine_cpu", r.engine_cpu_us}});
    }
  }
  InterleavedRounds interleaved;
  for (std::size_t round = 0; round < f.latency_rounds; ++round) {
    for (std::size_t k = 0; k < targets.size(); ++k) {
      const auto& [name, port] = targets[(round + k) % targets.size()];
      int st = 0;
      WrkResult one;
      std::string line;
      const std::string out =
          run_capture(bin, wrk_args_for(port, f.latency_round_duration, true, 1), st);
      if (!parse_pgbench(out, one, line)) {
        std::cerr << "overhead: " << name << ": failures in latency round " << round + 1 << ":\n"
                  << out;
        return 1;
      }
      interleaved.add(name, {{"p50", static_cast<double>(one.p50_us)},
                             {"p99", static_cast<double>(one.p99_us)}});
    }
  }
  if (auto t = parse_url("http://127.0.0.1:" + std::to_string(gateway_port))) {
    std::string decisions;
    std::stringstream metrics(http_get(*t, "/metrics").body);
    for (std::string l; std::getline(metrics, l);) {
      if (l.rfind("prefixgate_routing_decisions_total", 0) == 0) decisions += l + "\n";
    }
    std::ofstream(f.out_dir + "/gateway-decisions.txt") << decisions;
  }

  const WrkResult& nginx_r = results["nginx"];
  const WrkResult& direct_r = results["direct"];
  std::printf("\n%-26s %11s %9s %9s %9s %10s %10s %11s %10s %11s\n", "target", "requests/s",
              "p50 us", "p99 us", "vs nginx", "added p50", "1-conn p50", "added 1-conn",
              "proxy CPU", "engine CPU");
  const std::string connections = "(" + std::to_string(f.connections) + " conn)";
  std::printf("%-26s %11s %9s %9s %9s %10s %10s %11s %10s %11s\n", "", connections.c_str(), "", "",
              "rps", "us", "us", "p50 us", "us/req", "us/req");
  std::string json_targets;
  for (const auto& [name, port] : targets) {
    const WrkResult& r = results[name];
    const double vs = nginx_r.rps > 0 ? r.rps / nginx_r.rps : 0;
    std::printf("%-26s %11.0f %9ld %9ld %9.2f %10ld %10ld %11ld %10.1f %11.1f\n", name.c_str(),
                r.rps, r.p50_us, r.p99_us, vs, r.p50_us - direct_r.p50_us, r.unloaded_p50_us,
                r.unloaded_p50_us - direct_r.unloaded_p50_us, r.proxy_cpu_us, r.engine_cpu_us);
    char buf[768];
    std::snprintf(buf, sizeof buf,
                  "%s    \"%s\": {\"requests\": %ld, \"requests_per_s\": %.2f, \"p50_us\": %ld, "
                  "\"p99_us\": %ld, \"rps_vs_nginx\": %.3f, \"added_p50_us\": %ld, "
                  "\"one_connection_p50_us\": %ld, \"one_connection_p99_us\": %ld, "
                  "\"one_connection_added_p50_us\": %ld, "
                  "\"proxy_cpu_us_per_request\": %.1f, \"engine_cpu_us_per_request\": %.1f}",
                  json_targets.empty() ? "" : ",\n", name.c_str(), r.requests, r.rps, r.p50_us,
                  r.p99_us, vs, r.p50_us - direct_r.p50_us, r.unloaded_p50_us, r.unloaded_p99_us,
                  r.unloaded_p50_us - direct_r.unloaded_p50_us, r.proxy_cpu_us, r.engine_cpu_us);
    json_targets += buf;
    const auto num = [](double v) { return report_text::fmt("%.0f", v); };
    const auto list = [&](const std::vector<double>& values) {
      std::string out;
      for (const double v : values) out += (out.empty() ? "" : ", ") + num(v);
      return "[" + out + "]";
    };
    std::string extra;
    if (f.rounds > 0) {
      const auto rps = loaded.summary(name, "rps", "nginx");
      const auto proxy_cpu = loaded.summary(name, "proxy_cpu", "nginx");
      const auto engine_cpu = loaded.summary(name, "engine_cpu", "nginx");
      extra += ", \"rounds\": {\"rounds\": " + std::to_string(rps.rounds) +
               ", \"requests_per_s\": " + num(rps.median) +
               ", \"rps_vs_nginx\": " + report_text::fmt("%.3f", rps.over_baseline) +
               ", \"proxy_cpu_us_per_request\": " + report_text::fmt("%.1f", proxy_cpu.median) +
               ", \"proxy_cpu_vs_nginx\": " + report_text::fmt("%.3f", proxy_cpu.over_baseline) +
               ", \"engine_cpu_us_per_request\": " + report_text::fmt("%.1f", engine_cpu.median) +
               ", \"requests_per_s_by_round\": " + list(rps.by_round) + "}";
    }
    if (f.latency_rounds > 0) {
      const auto p50 = interleaved.summary(name, "p50", "direct");
      const auto p99 = interleaved.summary(name, "p99", "direct");
      extra += ", \"interleaved\": {\"rounds\": " + std::to_string(p50.rounds) +
               ", \"p50_us\": " + num(p50.median) + ", \"p99_us\": " + num(p99.median) +
               ", \"added_p50_us\": " + num(p50.minus_baseline) +
               ", \"added_p99_us\": " + num(p99.minus_baseline) +
               ", \"p99_us_by_round\": " + list(p99.by_round) + "}";
    }
    if (!extra.empty()) {
      json_targets.pop_back();  // the target's closing brace, put back after its rounds
      json_targets += extra + "}";
    }
  }
  std::printf("\n");
  if (f.rounds > 0) {
    std::printf(
        "loaded (%zu conn), %zu rounds of %s a target, every target in each round: medians over "
        "the rounds, and of each round's ratio to nginx\n",
        f.connections, f.rounds, f.round_duration.c_str());
    std::printf("%-26s %11s %9s %10s %9s %11s\n", "target", "requests/s", "vs nginx", "proxy CPU",
                "vs nginx", "engine CPU");
    std::printf("%-26s %11s %9s %10s %9s %11s\n", "", "", "", "us/req", "", "us/req");
    for (const auto& [name, port] : targets) {
      const auto rps = loaded.summary(name, "rps", "nginx");
      const auto proxy_cpu = loaded.summary(name, "proxy_cpu", "nginx");
      const auto engine_cpu = loaded.summary(name, "engine_cpu", "nginx");
      std::printf("%-26s %11.0f %9.2f %10.1f %9.2f %11.1f\n", name.c_str(), rps.median,
                  rps.over_baseline, proxy_cpu.median, proxy_cpu.over_baseline, engine_cpu.median);
    }
    std::printf("\n");
  }
  if (f.latency_rounds > 0) {
    std::printf(
        "one connection, %zu rounds of %s a target, every target in each round: medians "
        "over the rounds, and of each round's difference from direct\n",
        f.latency_rounds, f.latency_round_duration.c_str());
    std::printf("%-26s %9s %9s %10s %10s\n", "target", "p50 us", "p99 us", "added p50",
                "added p99");
    for (const auto& [name, port] : targets) {
      const auto p50 = interleaved.summary(name, "p50", "direct");
      const auto p99 = interleaved.summary(name, "p99", "direct");
      std::printf("%-26s %9.0f %9.0f %10.0f %10.0f\n", name.c_str(), p50.median, p99.median,
                  p50.minus_baseline, p99.minus_baseline);
    }
    std::printf("\n");
  }
  std::time_t now = std::time(nullptr);
  char date[32];
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  std::ofstream json(f.out_dir + "/overhead.json");
  json << "{\n  \"date\": \"" << date << "\",\n  \"host\": {\"cpus\": " << ncpu << "},\n"
       << "  \"wrk\": {\"threads\": " << f.wrk_threads << ", \"connections\": " << f.connections
       << ", \"duration\": \"" << f.duration << "\", \"warmup\": \"" << f.warmup << "\"},\n"
       << "  \"proxy_threads\": " << f.proxy_threads << ", \"engine_threads\": " << f.engine_threads
       << ", \"pinned\": " << (server_cpus.empty() ? "false" : "true")
       << ",\n  \"request_body_bytes\": " << direct_r.body_bytes << ",\n  \"targets\": {\n"
       << json_targets << "\n  }\n}\n";
  std::cerr << "overhead: wrote " << f.out_dir << "/overhead.json (wrk output in " << f.out_dir
            << "/wrk-*.txt)\n";
  for (auto& [name, g] : gateways) g->stop();
  nginx->stop();
  engine->stop();
  return 0;
}

}  // namespace prefixgate::bench
