#include "soak_report.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <sstream>

#include "prefixgate/canonicalize/json.h"
#include "report_text.h"

namespace prefixgate::bench {

namespace {

using report_text::counts_json;
using report_text::fmt;
using report_text::xml_escape;

json::Value parsed_or_null(const std::string& text) {
  auto v = json::parse(text);
  return v ? *v : json::Value();
}

std::size_t total(const std::map<std::string, std::size_t>& m) {
  std::size_t n = 0;
  for (const auto& [k, v] : m) n += v;
  return n;
}

// The process names in sample order: gateway, engine-0, ...
std::vector<std::string> process_names(const std::vector<SoakSample>& samples) {
  std::vector<std::string> names;
  for (const SoakSample& s : samples) {
    for (const ProcessSample& p : s.processes) {
      if (std::find(names.begin(), names.end(), p.name) == names.end()) names.push_back(p.name);
    }
  }
  return names;
}

std::string number(double v) {
  if (v < 0) return "";
  return fmt(v == std::floor(v) && std::abs(v) < 1e15 ? "%.0f" : "%.3f", v);
}

}  // namespace

std::string format_soak_summary(const SoakReport& r) {
  std::ostringstream out;
  out << "\n" << r.title << "\n";
  out << "requests " << r.requests << ", errors not injected " << total(r.errors_by_kind)
      << ", injected (streams cut by a restart) " << total(r.injected_by_kind) << ", restarts "
      << r.restarts.size() << "\n";
  for (const SoakRestart& x : r.restarts) {
    out << "  t=" << fmt("%.0f", x.t_s) << "s engine-" << x.replica << ": " << x.in_flight
        << " requests in flight on it, " << x.in_flight_failed << " failed\n";
  }
  for (const auto& [kind, n] : r.errors_by_kind) {
    out << "  error " << kind << " x" << n;
    if (auto it = r.error_examples.find(kind); it != r.error_examples.end()) {
      out << ": " << it->second.substr(0, 200);
    }
    out << "\n";
  }
  out << "judged: after " << fmt("%.0f", r.verdict_options.warmup_s)
      << " s of warm-up (the gateway's RSS and descriptors after "
      << fmt("%.0f", std::max(r.verdict_options.warmup_s, r.verdict_options.gateway_warmup_s))
      << " s), and a restarted process's first " << fmt("%.0f", r.verdict_options.lifetime_warmup_s)
      << " s\n";
  char line[256];
  std::snprintf(line, sizeof line, "%-22s %-24s %5s %12s %12s %12s %12s %12s  %s\n", "check",
                "subject", "n", "first", "last", "min", "max", "limit", "");
  out << line;
  for (const SoakCheck& c : r.verdict.checks) {
    std::snprintf(line, sizeof line, "%-22s %-24s %5zu %12.0f %12.0f %12.0f %12.0f %12.0f  %s\n",
                  c.what.c_str(), c.subject.c_str(), c.samples, c.first, c.last, c.min, c.max,
                  c.limit,
                  !c.judged ? "(too few samples)"
                  : c.pass  ? "ok"
                            : "FAIL");
    out << line;
  }
  out << "(rss_kb, fds: first/last = medians of the first/last quarter of the judged samples; "
         "rss_kb passes when max <= limit = min * (1 + tolerance), fds_not_connections "
         "(descriptors "
         "less established TCP connections) when last <= limit = first "
         "* "
         "(1 + tolerance) + slack; bounded sizes: first/last = max over the first/second half, "
         "limit = first * (1 + tolerance))\n";
  out << "verdict: " << (r.verdict.pass ? "PASS" : "FAIL") << "\n";
  return out.str();
}

std::string soak_csv(const SoakReport& r) {
  const std::vector<std::string> names = process_names(r.samples);
  std::string out = "t_s";
  for (const std::string& n : names) {
    out += "," + n + "_pid," + n + "_rss_kb," + n + "_fds," + n + "_connections";
  }
  out +=
      ",index_blocks,index_hashes,tokenizer_cache_bytes,metrics_series,metrics_bytes,stats_bytes,"
      "requests_done,errors,injected_errors\n";
  for (const SoakSample& s : r.samples) {
    out += fmt("%.1f", s.t_s);
    for (const std::string& n : names) {
      auto it = std::find_if(s.processes.begin(), s.processes.end(),
                             [&](const ProcessSample& p) { return p.name == n; });
      if (it == s.processes.end()) {
        out += ",,,,";
      } else {
        out += "," + std::to_string(it->pid) + "," + number(static_cast<double>(it->rss_kb)) + "," +
               number(static_cast<double>(it->fds)) + "," +
               number(static_cast<double>(it->connections));
      }
    }
    for (double v :
         {s.gateway.index_blocks, s.gateway.index_hashes, s.gateway.tokenizer_cache_bytes,
          s.gateway.metrics_series, s.gateway.metrics_bytes, s.gateway.stats_bytes}) {
      out += "," + number(v);
    }
    out += "," + std::to_string(s.requests_done) + "," + std::to_string(s.errors) + "," +
           std::to_string(s.injected_errors) + "\n";
  }
  return out;
}

std::string soak_json(const SoakReport& r) {
  const SoakFlags& f = r.flags;
  json::Object setup{{"replicas", static_cast<double>(f.fleet.replicas)},
                     {"sim_profile", f.fleet.sim_profile},
                     {"sim_speedup", f.fleet.sim_speedup},
                     {"kv_cache_tokens", static_cast<double>(f.fleet.kv_cache_tokens)},
                     {"kv_events_history", static_cast<double>(f.kv_events_history)},
                     {"policy", f.policy},
                     {"duration_s", f.duration_s},
                     {"restart_every", f.restart_every},
                     {"sample_every", f.sample_every},
                     {"rate_sessions_per_s", f.rate},
                     {"multi_turn_share", f.multi_turn_share},
                     {"groups", static_cast<double>(f.groups)},
                     {"system_len", static_cast<double>(f.system_len)},
                     {"question_len", static_cast<double>(f.question_len)},
                     {"output_len", static_cast<double>(f.output_len)},
                     {"turns", static_cast<double>(f.turns)},
                     {"seed", static_cast<double>(f.seed)}};
  const SoakVerdictOptions& o = r.verdict_options;
  json::Object criteria{{"warmup_s", o.warmup_s},
                        {"gateway_warmup_s", o.gateway_warmup_s},
                        {"lifetime_warmup_s", o.lifetime_warmup_s},
                        {"rss_tolerance", o.rss_tolerance},
                        {"fd_tolerance", o.fd_tolerance},
                        {"fd_slack", o.fd_slack},
                        {"bound_tolerance", o.bound_tolerance},
                        {"min_samples", static_cast<double>(o.min_samples)}};
  json::Array samples;
  for (const SoakSample& s : r.samples) {
    json::Array procs;
    for (const ProcessSample& p : s.processes) {
      procs.push_back(json::Object{{"name", p.name},
                                   {"pid", static_cast<double>(p.pid)},
                                   {"started_s", p.started_s},
                                   {"rss_kb", static_cast<double>(p.rss_kb)},
                                   {"fds", static_cast<double>(p.fds)},
                                   {"connections", static_cast<double>(p.connections)}});
    }
    samples.push_back(json::Object{{"t_s", s.t_s},
                                   {"processes", std::move(procs)},
                                   {"index_blocks", s.gateway.index_blocks},
                                   {"index_hashes", s.gateway.index_hashes},
                                   {"tokenizer_cache_bytes", s.gateway.tokenizer_cache_bytes},
                                   {"metrics_series", s.gateway.metrics_series},
                                   {"metrics_bytes", s.gateway.metrics_bytes},
                                   {"stats_bytes", s.gateway.stats_bytes},
                                   {"stats_ring_s", s.gateway.stats_ring_s},
                                   {"requests_done", static_cast<double>(s.requests_done)},
                                   {"errors", static_cast<double>(s.errors)},
                                   {"injected_errors", static_cast<double>(s.injected_errors)}});
  }
  json::Array restarts;
  for (const SoakRestart& x : r.restarts) {
    restarts.push_back(json::Object{{"t_s", x.t_s},
                                    {"replica", static_cast<double>(x.replica)},
                                    {"old_pid", static_cast<double>(x.old_pid)},
                                    {"new_pid", static_cast<double>(x.new_pid)},
                                    {"listening_after_s", x.listening_after_s},
                                    {"healthy_after_s", x.healthy_after_s},
                                    {"in_flight", static_cast<double>(x.in_flight)},
                                    {"in_flight_failed", static_cast<double>(x.in_flight_failed)}});
  }
  json::Array checks;
  for (const SoakCheck& c : r.verdict.checks) {
    checks.push_back(json::Object{{"what", c.what},
                                  {"subject", c.subject},
                                  {"samples", static_cast<double>(c.samples)},
                                  {"first", c.first},
                                  {"last", c.last},
                                  {"min", c.min},
                                  {"max", c.max},
                                  {"limit", c.limit},
                                  {"judged", c.judged},
                                  {"pass", c.pass}});
  }
  json::Array failed;
  for (std::size_t i = 0; i < r.failed.size() && i < 100; ++i) {
    const SoakFailure& x = r.failed[i];
    failed.push_back(json::Object{{"sent_s", x.sent_s},
                                  {"done_s", x.done_s},
                                  {"replica", x.replica},
                                  {"error", x.error},
                                  {"detail", x.detail}});
  }
  json::Object examples;
  for (const auto& [k, v] : r.error_examples) examples.push_back({k, v});
  json::Object doc{{"title", r.title},
                   {"setup", r.setup_json.empty() ? json::Value(std::move(setup))
                                                  : parsed_or_null(r.setup_json)},
                   {"criteria", std::move(criteria)},
                   {"requests", static_cast<double>(r.requests)},
                   {"errors", static_cast<double>(total(r.errors_by_kind))},
                   {"errors_by_kind", counts_json(r.errors_by_kind)},
                   {"error_examples", std::move(examples)},
                   {"failed_requests", std::move(failed)},
                   {"requests_per_replica", counts_json(r.requests_per_replica)},
                   {"injected_errors", static_cast<double>(total(r.injected_by_kind))},
                   {"injected_errors_by_kind", counts_json(r.injected_by_kind)},
                   {"restarts", std::move(restarts)},
                   {"verdict", r.verdict.pass ? "pass" : "fail"},
                   {"checks", std::move(checks)},
                   {"samples", std::move(samples)}};
  return json::to_json(json::Value(std::move(doc))) + "\n";
}

std::string soak_svg(const SoakReport& r) {
  struct Line {
    std::string label;
    std::string color;
    std::vector<std::vector<std::pair<double, double>>> segments;  // one per process lifetime
  };
  struct Panel {
    std::string title;
    std::vector<Line> lines;
    double warmup_s = -1;  // shaded; < 0: the run's
  };
  const char* colors[] = {"#264653", "#e76f51", "#2a9d8f", "#f4a261", "#8ab17d",
                          "#9e9e9e", "#6d597a", "#e9c46a", "#457b9d", "#b5838d"};
  const std::vector<std::string> names = process_names(r.samples);
  Panel gateway_rss{"gateway resident memory (MiB); shaded: its warm-up (the /stats ring fills)",
                    {},
                    std::max(r.verdict_options.warmup_s, r.verdict_options.gateway_warmup_s)};
  Panel rss{"engines resident memory (MiB)", {}};
  Panel fds{"open file descriptors", {}};
  for (std::size_t i = 0; i < names.size(); ++i) {
    Line lr{names[i], colors[i % 10], {}};
    Line lf{names[i], colors[i % 10], {}};
    pid_t last_pid = -2;
    for (const SoakSample& s : r.samples) {
      for (const ProcessSample& p : s.processes) {
        if (p.name != names[i] || p.rss_kb < 0) continue;
        if (p.pid != last_pid) {
          lr.segments.emplace_back();
          lf.segments.emplace_back();
          last_pid = p.pid;
        }
        lr.segments.back().emplace_back(s.t_s, static_cast<double>(p.rss_kb) / 1024.0);
        lf.segments.back().emplace_back(s.t_s, static_cast<double>(p.fds));
      }
    }
    (names[i] == "gateway" ? gateway_rss : rss).lines.push_back(std::move(lr));
    fds.lines.push_back(std::move(lf));
  }
  auto gateway_line = [&](const std::string& label, const std::string& color, auto field,
                          double scale) {
    Line l{label, color, {{}}};
    for (const SoakSample& s : r.samples) {
      const double v = field(s.gateway);
      if (v >= 0) l.segments.back().emplace_back(s.t_s, v * scale);
    }
    return l;
  };
  Panel index{"gateway prefix index", {}};
  index.lines.push_back(gateway_line(
      "blocks", colors[0], [](const GatewaySizes& g) { return g.index_blocks; }, 1.0));
  index.lines.push_back(gateway_line(
      "hashes", colors[1], [](const GatewaySizes& g) { return g.index_hashes; }, 1.0));
  Panel stats{"gateway /metrics and /stats (KiB), /metrics series", {}};
  stats.lines.push_back(gateway_line(
      "/metrics KiB", colors[2], [](const GatewaySizes& g) { return g.metrics_bytes; },
      1 / 1024.0));
  stats.lines.push_back(gateway_line(
      "/stats KiB", colors[3], [](const GatewaySizes& g) { return g.stats_bytes; }, 1 / 1024.0));
  stats.lines.push_back(gateway_line(
      "/metrics series", colors[4], [](const GatewaySizes& g) { return g.metrics_series; }, 1.0));
  Panel errs{"requests failed (cumulative): not injected, injected by restarts", {}};
  {
    Line e{"not injected", "#d62828", {{}}};
    Line inj{"injected", colors[5], {{}}};
    for (const SoakSample& s : r.samples) {
      e.segments.back().emplace_back(s.t_s, static_cast<double>(s.errors));
      inj.segments.back().emplace_back(s.t_s, static_cast<double>(s.injected_errors));
    }
    errs.lines.push_back(std::move(e));
    errs.lines.push_back(std::move(inj));
  }
  const std::vector<Panel> panels{gateway_rss, rss, fds, index, stats, errs};

  double t_max = 1;
  for (const SoakSample& s : r.samples) t_max = std::max(t_max, s.t_s);
  const double width = 960, left = 70, right = 170, panel_h = 190, gap = 50, top = 60;
  const double plot_w = width - left - right;
  const double height = top + static_cast<double>(panels.size()) * (panel_h + gap) + 10;
  auto x_of = [&](double t) { return left + plot_w * t / t_max; };
  std::string svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + fmt("%.0f", width) +
                    "\" height=\"" + fmt("%.0f", height) +
                    "\" font-family=\"sans-serif\" font-size=\"12\">\n"
                    "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  svg += "<text x=\"10\" y=\"22\" font-size=\"15\" font-weight=\"bold\">" + xml_escape(r.title) +
         "</text>\n";
  svg +=
      "<text x=\"10\" y=\"42\">verdict " + std::string(r.verdict.pass ? "PASS" : "FAIL") + "; " +
      std::to_string(r.requests) + " requests, " + std::to_string(total(r.errors_by_kind)) +
      " errors not injected, " + std::to_string(total(r.injected_by_kind)) +
      " streams cut by restarts; shaded: warm-up; dashed: a replica killed and restarted</text>\n";
  for (std::size_t p = 0; p < panels.size(); ++p) {
    const double y0 = top + static_cast<double>(p) * (panel_h + gap) + 20;
    const double base = y0 + panel_h;
    double y_max = 0;
    for (const Line& l : panels[p].lines) {
      for (const auto& seg : l.segments) {
        for (const auto& [t, v] : seg) y_max = std::max(y_max, v);
      }
    }
    y_max = y_max <= 0 ? 1 : y_max * 1.1;
    auto y_of = [&](double v) { return base - panel_h * v / y_max; };
    svg += "<text x=\"" + fmt("%.0f", left) + "\" y=\"" + fmt("%.0f", y0 - 6) +
           "\" font-weight=\"bold\">" + xml_escape(panels[p].title) + "</text>\n";
    svg += "<rect x=\"" + fmt("%.1f", left) + "\" y=\"" + fmt("%.1f", y0) + "\" width=\"" +
           fmt("%.1f",
               x_of(panels[p].warmup_s >= 0 ? panels[p].warmup_s : r.verdict_options.warmup_s) -
                   left) +
           "\" height=\"" + fmt("%.1f", panel_h) + "\" fill=\"#eeeeee\"/>\n";
    for (const SoakRestart& x : r.restarts) {
      svg += "<line x1=\"" + fmt("%.1f", x_of(x.t_s)) + "\" y1=\"" + fmt("%.1f", y0) + "\" x2=\"" +
             fmt("%.1f", x_of(x.t_s)) + "\" y2=\"" + fmt("%.1f", base) +
             "\" stroke=\"#bbbbbb\" stroke-dasharray=\"3 3\"/>\n";
    }
    svg += "<line x1=\"" + fmt("%.0f", left) + "\" y1=\"" + fmt("%.1f", base) + "\" x2=\"" +
           fmt("%.0f", left + plot_w) + "\" y2=\"" + fmt("%.1f", base) + "\" stroke=\"black\"/>\n";
    svg += "<line x1=\"" + fmt("%.0f", left) + "\" y1=\"" + fmt("%.1f", y0) + "\" x2=\"" +
           fmt("%.0f", left) + "\" y2=\"" + fmt("%.1f", base) + "\" stroke=\"black\"/>\n";
    for (int k = 0; k <= 4; ++k) {  // y ticks
      const double v = y_max * k / 4;
      svg += "<text x=\"" + fmt("%.0f", left - 4) + "\" y=\"" + fmt("%.1f", y_of(v) + 4) +
             "\" text-anchor=\"end\" font-size=\"10\">" + fmt(y_max >= 40 ? "%.0f" : "%.1f", v) +
             "</text>\n";
    }
    for (int k = 0; k <= 6; ++k) {  // x ticks, minutes
      const double t = t_max * k / 6;
      svg += "<text x=\"" + fmt("%.1f", x_of(t)) + "\" y=\"" + fmt("%.1f", base + 14) +
             "\" text-anchor=\"middle\" font-size=\"10\">" +
             fmt(t_max >= 600 ? "%.0f min" : "%.0f s", t_max >= 600 ? t / 60 : t) + "</text>\n";
    }
    double ly = y0 + 8;
    for (const Line& l : panels[p].lines) {
      for (const auto& seg : l.segments) {
        if (seg.empty()) continue;
        svg += "<polyline fill=\"none\" stroke=\"" + l.color + "\" stroke-width=\"1.5\" points=\"";
        for (const auto& [t, v] : seg)
          svg += fmt("%.1f", x_of(t)) + "," + fmt("%.1f", y_of(v)) + " ";
        svg += "\"/>\n";
      }
      svg += "<rect x=\"" + fmt("%.0f", left + plot_w + 12) + "\" y=\"" + fmt("%.1f", ly - 9) +
             "\" width=\"12\" height=\"3\" fill=\"" + l.color + "\"/>";
      svg += "<text x=\"" + fmt("%.0f", left + plot_w + 28) + "\" y=\"" + fmt("%.1f", ly - 4) +
             "\" font-size=\"11\">" + xml_escape(l.label) + "</text>\n";
      ly += 15;
    }
  }
  svg += "</svg>\n";
  return svg;
}

}  // namespace prefixgate::bench
