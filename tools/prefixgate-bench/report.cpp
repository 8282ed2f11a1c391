#include "report.h"

#include <algorithm>
#include <cstdio>

#include "report_text.h"

namespace prefixgate::bench {

namespace {

using report_text::counts_json;
using report_text::fmt;
using report_text::xml_escape;

json::Value strings_json(const std::map<std::string, std::string>& m) {
  json::Object o;
  for (const auto& [k, v] : m) o.push_back({k, v});
  return o;
}

}  // namespace

namespace {

// A row's ceiling: its own under --rule-sets, else the report's.
double row_ceiling(const Report& report, const RunResult& r) {
  return r.ceiling_hit_rate >= 0 ? r.ceiling_hit_rate : report.ceiling_hit_rate;
}

double hit_rate_of_ceiling(const Report& report, const RunResult& r) {
  const double ceiling = row_ceiling(report, r);
  return ceiling > 0 ? r.hit_rate / ceiling : 0;
}

}  // namespace

std::string format_table(const Report& report) {
  std::string out;
  char line[512];
  if (!report.title.empty()) out += report.title + "\n";
  const bool per_row = std::any_of(report.results.begin(), report.results.end(),
                                   [](const RunResult& r) { return r.ceiling_hit_rate >= 0; });
  if (per_row) {
    std::snprintf(line, sizeof line,
                  "ceiling hit rates: as sent %.1f%%, the gateway's default rules %.1f%%, all "
                  "canonicalization rules %.1f%% (each row against its own rules' ceiling)\n\n",
                  report.ceiling_hit_rate_as_sent * 100, report.ceiling_hit_rate_default * 100,
                  report.ceiling_hit_rate_canonical * 100);
  } else {
    std::snprintf(line, sizeof line,
                  "ceiling hit rate %.1f%% (%s rules; as sent %.1f%%, all canonicalization rules "
                  "%.1f%%)\n\n",
                  report.ceiling_hit_rate * 100, report.ceiling_rules.c_str(),
                  report.ceiling_hit_rate_as_sent * 100, report.ceiling_hit_rate_canonical * 100);
  }
  out += line;
  std::snprintf(
      line, sizeof line,
      "| %-25s | %8s | %10s | %9s | %9s | %9s | %9s | %8s | %9s | %11s | %9s | %6s | %8s | %7s "
      "|\n",
      "policy", "hit rate", "of ceiling", "TTFT p50", "TTFT p99", "ITL p50", "E2E p50", "req/s",
      "out tok/s", "tok/s (arr)", "imbalance", "errors", "host CPU", "own CPU");
  out += line;
  out +=
      "|---------------------------|---------:|-----------:|----------:|----------:|----------:|"
      "----------:|---------:|----------:|------------:|----------:|-------:|---------:|--------:|"
      "\n";
  for (const RunResult& r : report.results) {
    const double of_ceiling = hit_rate_of_ceiling(report, r);
    const std::string own =
        r.host_cpu.own_busy < 0 ? "-" : fmt("%.0f%%", r.host_cpu.own_busy * 100);
    std::snprintf(line, sizeof line,
                  "| %-25s | %7.1f%% | %9.1f%% | %8.3fs | %8.3fs | %7.2fms | %8.3fs | %8.2f | "
                  "%9.0f | %11.0f | %9.2f | %6zu | %7.0f%% | %7s |\n",
                  r.policy.c_str(), r.hit_rate * 100, of_ceiling * 100, r.ttft_s.p50, r.ttft_s.p99,
                  r.itl_s.p50 * 1000, r.e2e_s.p50, r.throughput_rps, r.output_tps,
                  r.output_tps_arrivals, r.imbalance, r.errors, r.host_cpu.busy_mean * 100,
                  own.c_str());
    out += line;
  }
  if (!report.time_note.empty()) out += "\n" + report.time_note + "\n";
  bool saturated = false;
  for (const RunResult& r : report.results) saturated = saturated || r.host_cpu.saturated();
  if (saturated) {
    out +=
        "\nwarning: the host's CPU was saturated during at least one run (host CPU: all cores, "
        "everyone's; own CPU: this run's bench, engines and gateway): its latency and throughput "
        "measure the host, not the modelled GPUs.\n";
  }
  return out;
}

std::string to_json(const Report& report) {
  json::Array results;
  for (const RunResult& r : report.results) {
    results.push_back(json::Object{
        {"policy", r.policy},
        {"hit_rate", r.hit_rate},
        {"hit_rate_of_ceiling", hit_rate_of_ceiling(report, r)},
        {"ceiling_hit_rate", row_ceiling(report, r)},
        {"ttft_p50", r.ttft_s.p50},
        {"ttft_p90", r.ttft_s.p90},
        {"ttft_p99", r.ttft_s.p99},
        {"ttft_mean", r.ttft_s.mean},
        {"itl_p50", r.itl_s.p50},
        {"itl_p90", r.itl_s.p90},
        {"itl_p99", r.itl_s.p99},
        {"itl_mean", r.itl_s.mean},
        {"e2e_p50", r.e2e_s.p50},
        {"e2e_p90", r.e2e_s.p90},
        {"e2e_p99", r.e2e_s.p99},
        {"e2e_mean", r.e2e_s.mean},
        {"throughput_rps", r.throughput_rps},
        {"output_tps", r.output_tps},
        {"output_tps_arrivals", r.output_tps_arrivals},
        {"imbalance", r.imbalance},
        {"errors", static_cast<double>(r.errors)},
        {"errors_by_kind", counts_json(r.errors_by_kind)},
        {"error_examples", strings_json(r.error_examples)},
        {"requests", static_cast<double>(r.requests)},
        {"prompt_tokens", static_cast<double>(r.prompt_tokens)},
        {"cached_tokens", static_cast<double>(r.cached_tokens)},
        {"output_tokens", static_cast<double>(r.output_tokens)},
        {"duration_s", r.duration_s},
        {"requests_per_replica", counts_json(r.requests_per_replica)},
        {"route_reasons", counts_json(r.route_reasons)},
        {"host_cpu_busy", r.host_cpu.busy_mean},
        {"host_cpu_saturated_share", r.host_cpu.saturated_share},
        {"own_cpu_busy", r.host_cpu.own_busy},
        {"host_cpu_saturated", r.host_cpu.saturated()},
    });
  }
  json::Object doc{{"title", report.title},
                   {"ceiling_hit_rate", report.ceiling_hit_rate},
                   {"ceiling_rules", report.ceiling_rules},
                   {"ceiling_hit_rate_as_sent", report.ceiling_hit_rate_as_sent},
                   {"ceiling_hit_rate_default", report.ceiling_hit_rate_default},
                   {"ceiling_hit_rate_canonical", report.ceiling_hit_rate_canonical},
                   {"setup", report.setup},
                   {"time_note", report.time_note},
                   {"results", std::move(results)}};
  // One result per line: diffable, and still one JSON document.
  std::string out = json::to_json(json::Value(std::move(doc)));
  std::string pretty;
  pretty.reserve(out.size() + 64);
  const std::string key = "\"results\":[";
  const std::size_t at = out.find(key);
  int depth = 0;
  for (std::size_t i = 0; i < out.size(); ++i) {
    pretty += out[i];
    if (at == std::string::npos || i < at + key.size() - 1) continue;
    if (out[i] == '{') ++depth;
    if (out[i] == '}') --depth;
    if ((out[i] == '[' && i == at + key.size() - 1) ||
        (out[i] == ',' && depth == 0 && out[i - 1] == '}')) {
      pretty += "\n  ";
    }
  }
  return pretty + "\n";
}

std::string to_svg(const Report& report) {
  // Four panels side by side, one bar per policy in each.
  struct Panel {
    const char* title;
    double (*value)(const RunResult&);
    const char* format;
  };
  Panel panels[] = {
      {"prompt tokens from cache (%)", [](const RunResult& r) { return r.hit_rate * 100; }, "%.1f"},
      {"output tok/s", [](const RunResult& r) { return r.output_tps; }, "%.0f"},
      {"TTFT p50 (ms)", [](const RunResult& r) { return r.ttft_s.p50 * 1000; }, "%.0f"},
      {"TTFT p99 (ms)", [](const RunResult& r) { return r.ttft_s.p99 * 1000; }, "%.0f"},
  };
  // Throughput: while requests arrived (the capacity under overload) when every run has it, else
  // over the whole run.
  bool arrivals = !report.results.empty();
  for (const RunResult& r : report.results) arrivals = arrivals && r.output_tps_arrivals > 0;
  if (arrivals) {
    panels[1] = {"output tok/s while arriving",
                 [](const RunResult& r) { return r.output_tps_arrivals; }, "%.0f"};
  }
  const char* colors[] = {"#9e9e9e", "#f4a261", "#2a9d8f", "#e76f51", "#264653", "#8ab17d"};
  const double panel_w = 260, panel_h = 260, top = 60, bar_area = 180;
  const std::size_t n = report.results.size();
  const double width = panel_w * 4 + 20;
  std::string svg;
  svg += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + fmt("%.0f", width) +
         "\" height=\"" + fmt("%.0f", top + panel_h + 40) +
         "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  svg += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  svg += "<text x=\"10\" y=\"22\" font-size=\"15\" font-weight=\"bold\">" +
         xml_escape(report.title) + "</text>\n";
  // Legend.
  double lx = 10;
  for (std::size_t i = 0; i < n; ++i) {
    svg += "<rect x=\"" + fmt("%.0f", lx) + "\" y=\"32\" width=\"12\" height=\"12\" fill=\"" +
           colors[i % 6] + "\"/>";
    svg += "<text x=\"" + fmt("%.0f", lx + 16) + "\" y=\"43\">" +
           xml_escape(report.results[i].policy) + "</text>\n";
    lx += 30 + 7.0 * static_cast<double>(report.results[i].policy.size());
  }
  for (std::size_t p = 0; p < 4; ++p) {
    const double x0 = 10 + panel_w * static_cast<double>(p);
    double max_v = 0;
    for (const RunResult& r : report.results) max_v = std::max(max_v, panels[p].value(r));
    if (p == 0) max_v = std::max(max_v, report.ceiling_hit_rate * 100);
    if (max_v <= 0) max_v = 1;
    const double base = top + 20 + bar_area;
    svg += "<text x=\"" + fmt("%.0f", x0) + "\" y=\"" + fmt("%.0f", top + 10) + "\">" +
           panels[p].title + "</text>\n";
    svg += "<line x1=\"" + fmt("%.0f", x0) + "\" y1=\"" + fmt("%.0f", base) + "\" x2=\"" +
           fmt("%.0f", x0 + panel_w - 30) + "\" y2=\"" + fmt("%.0f", base) +
           "\" stroke=\"black\"/>\n";
    const double slot = (panel_w - 40) / static_cast<double>(std::max<std::size_t>(n, 1));
    for (std::size_t i = 0; i < n; ++i) {
      const double v = panels[p].value(report.results[i]);
      const double h = bar_area * v / max_v;
      const double x = x0 + 5 + slot * static_cast<double>(i);
      svg += "<rect x=\"" + fmt("%.1f", x) + "\" y=\"" + fmt("%.1f", base - h) + "\" width=\"" +
             fmt("%.1f", slot * 0.8) + "\" height=\"" + fmt("%.1f", h) + "\" fill=\"" +
             colors[i % 6] + "\"/>";
      svg += "<text x=\"" + fmt("%.1f", x + slot * 0.4) + "\" y=\"" + fmt("%.1f", base - h - 4) +
             "\" text-anchor=\"middle\" font-size=\"10\">" + fmt(panels[p].format, v) + "</text>\n";
    }
    if (p == 0 && report.ceiling_hit_rate > 0) {
      const double y = base - bar_area * report.ceiling_hit_rate * 100 / max_v;
      svg += "<line x1=\"" + fmt("%.0f", x0) + "\" y1=\"" + fmt("%.1f", y) + "\" x2=\"" +
             fmt("%.0f", x0 + panel_w - 30) + "\" y2=\"" + fmt("%.1f", y) +
             "\" stroke=\"black\" stroke-dasharray=\"4 3\"/>";
      svg += "<text x=\"" + fmt("%.0f", x0 + panel_w - 32) + "\" y=\"" + fmt("%.1f", y - 4) +
             "\" text-anchor=\"end\" font-size=\"10\">ceiling " +
             fmt("%.1f", report.ceiling_hit_rate * 100) + "</text>\n";
    }
  }
  svg += "</svg>\n";
  return svg;
}

}  // namespace prefixgate::bench
