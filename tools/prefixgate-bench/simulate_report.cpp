#include "simulate_report.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <tuple>

#include "report_text.h"

namespace prefixgate::bench {
namespace {

using report_text::fmt;
using report_text::xml_escape;

std::string seconds(double s) {
  if (s < 1) return fmt("%.0fms", s * 1000);
  return fmt("%.2fs", s);
}

// replicas, gateways, peer delay (< 0: not peered), load
using Cell = std::tuple<std::size_t, std::size_t, double, double>;

Cell cell_of(const SimResult& r) {
  return {r.replicas, r.gateways, r.peer_delay_s, r.load};
}

std::string cell_name(const Cell& c) {
  const double peer_delay = std::get<2>(c);
  return std::to_string(std::get<0>(c)) + " replicas, " + std::to_string(std::get<1>(c)) +
         (std::get<1>(c) == 1 ? " gateway" : " gateways") +
         (peer_delay >= 0 ? " peered (" + fmt("%g", peer_delay * 1000) + " ms)" : "") + ", load " +
         fmt("%.2f", std::get<3>(c));
}

// Cells in the order they were run.
std::vector<Cell> cells_of(const SimReport& report) {
  std::vector<Cell> cells;
  for (const SimResult& r : report.results) {
    const Cell c = cell_of(r);
    if (std::find(cells.begin(), cells.end(), c) == cells.end()) cells.push_back(c);
  }
  return cells;
}

}  // namespace

double gpu_hours_per_mtok(const SimResult& r) {
  const double tokens = static_cast<double>(r.prompt_tokens + r.output_tokens);
  return tokens > 0 ? r.gpu_seconds / 3600.0 / (tokens / 1e6) : 0;
}

std::string format_sim_table(const SimReport& report) {
  std::string out;
  char line[640];
  if (!report.title.empty()) out += report.title + "\n";
  std::snprintf(
      line, sizeof line,
      "ceiling hit rate %.1f%%; modelled capacity %.2f requests/s per replica (load 1.0)\n",
      report.ceiling_hit_rate * 100, report.capacity_rps_per_replica);
  out += line;
  for (const Cell& c : cells_of(report)) {
    out += "\n" + cell_name(c) + "\n";
    std::snprintf(line, sizeof line,
                  "| %-18s | %8s | %7s | %9s | %9s | %8s | %8s | %9s | %9s | %9s | %6s | %8s | "
                  "%10s | %9s | %8s |\n",
                  "policy", "hit rate", "of ceil", "TTFT p50", "TTFT p99", "ITL p50", "ITL p99",
                  "queue p50", "queue p99", "imbalance", "preempt", "GPU-s", "GPU-h/Mtok",
                  "events/s", "wall");
    out += line;
    out +=
        "|--------------------|---------:|--------:|----------:|----------:|---------:|---------:|"
        "----------:|----------:|----------:|-------:|---------:|-----------:|----------:|---------"
        ":|\n";
    for (const SimResult& r : report.results) {
      if (cell_of(r) != c) continue;
      std::snprintf(
          line, sizeof line,
          "| %-18s | %7.1f%% | %6.1f%% | %9s | %9s | %8s | %8s | %9s | %9s | %9.2f | %6zu | %8.0f "
          "| %10.3f | %9.0f | %7.0fs |\n",
          r.policy.c_str(), r.hit_rate * 100,
          report.ceiling_hit_rate > 0 ? r.hit_rate / report.ceiling_hit_rate * 100 : 0.0,
          seconds(r.ttft_s.p50).c_str(), seconds(r.ttft_s.p99).c_str(),
          seconds(r.itl_s.p50).c_str(), seconds(r.itl_s.p99).c_str(),
          seconds(r.queue_s.p50).c_str(), seconds(r.queue_s.p99).c_str(), r.imbalance,
          r.preemptions, r.gpu_seconds, gpu_hours_per_mtok(r),
          r.wall_s > 0 ? static_cast<double>(r.events) / r.wall_s : 0.0, r.wall_s);
      out += line;
    }
  }
  out +=
      "\nTimes are modelled (virtual) seconds. errors: requests the engines refused (prompt past "
      "--max-model-len), counted in the JSON.\n";
  return out;
}

std::string sim_to_json(const SimReport& report) {
  json::Array results;
  for (const SimResult& r : report.results) {
    json::Object reasons;
    for (const auto& [k, v] : r.route_reasons) reasons.push_back({k, static_cast<double>(v)});
    json::Object o{
        {"replicas", static_cast<double>(r.replicas)},
        {"gateways", static_cast<double>(r.gateways)},
        {"peered", r.peer_delay_s >= 0},
        {"peer_delay_s", r.peer_delay_s >= 0 ? json::Value(r.peer_delay_s) : json::Value()},
        {"policy", r.policy},
        {"load", r.load},
        {"offered_rps", r.offered_rps},
        {"hit_rate", r.hit_rate},
        {"ceiling_hit_rate", report.ceiling_hit_rate},
        {"hit_rate_of_ceiling",
         report.ceiling_hit_rate > 0 ? r.hit_rate / report.ceiling_hit_rate : 0.0},
        {"ttft_p50", r.ttft_s.p50},
        {"ttft_p90", r.ttft_s.p90},
        {"ttft_p99", r.ttft_s.p99},
        {"ttft_mean", r.ttft_s.mean},
        {"itl_p50", r.itl_s.p50},
        {"itl_p90", r.itl_s.p90},
        {"itl_p99", r.itl_s.p99},
        {"itl_mean", r.itl_s.mean},
        {"e2e_p50", r.e2e_s.p50},
        {"e2e_p99", r.e2e_s.p99},
        {"queue_p50", r.queue_s.p50},
        {"queue_p99", r.queue_s.p99},
        {"queue_mean", r.queue_s.mean},
        {"imbalance", r.imbalance},
        {"preemptions", static_cast<double>(r.preemptions)},
        {"gpu_seconds", r.gpu_seconds},
        {"gpu_hours_per_mtok", gpu_hours_per_mtok(r)},
        {"requests", static_cast<double>(r.requests)},
        {"errors", static_cast<double>(r.errors)},
        {"prompt_tokens", static_cast<double>(r.prompt_tokens)},
        {"cached_tokens", static_cast<double>(r.cached_tokens)},
        {"output_tokens", static_cast<double>(r.output_tokens)},
        {"throughput_rps", r.throughput_rps},
        {"output_tps", r.output_tps},
        {"makespan_s", r.makespan_s},
        {"route_reasons", std::move(reasons)},
        {"steps", static_cast<double>(r.steps)},
        {"events", static_cast<double>(r.events)},
        {"kv_events", static_cast<double>(r.kv_events)},
        {"wall_s", r.wall_s},
        {"events_per_s", r.wall_s > 0 ? static_cast<double>(r.events) / r.wall_s : 0.0}};
    if (report.gpu_hour_usd > 0) {
      o.push_back({"usd_per_mtok", gpu_hours_per_mtok(r) * report.gpu_hour_usd});
    }
    results.push_back(std::move(o));
  }
  json::Object doc{{"title", report.title},
                   {"ceiling_hit_rate", report.ceiling_hit_rate},
                   {"capacity_rps_per_replica", report.capacity_rps_per_replica},
                   {"setup", report.setup},
                   {"time_note", "Times are modelled (virtual) seconds."},
                   {"results", std::move(results)}};
  return json::to_json(json::Value(std::move(doc))) + "\n";
}

std::string sim_to_svg(const SimReport& report) {
  // Two panels (hit rate, TTFT p99), one group of bars per cell, one bar per policy.
  std::vector<std::string> policies;
  for (const SimResult& r : report.results) {
    if (std::find(policies.begin(), policies.end(), r.policy) == policies.end()) {
      policies.push_back(r.policy);
    }
  }
  const std::vector<Cell> cells = cells_of(report);
  std::map<std::pair<Cell, std::string>, const SimResult*> at;
  for (const SimResult& r : report.results) at[{cell_of(r), r.policy}] = &r;
  const char* colors[] = {"#9e9e9e", "#f4a261", "#2a9d8f", "#e9c46a",
                          "#8ab17d", "#e76f51", "#264653", "#6d597a"};
  const double group_w = 26.0 * static_cast<double>(policies.size()) + 24;
  const double panel_w = std::max(320.0, group_w * static_cast<double>(cells.size()) + 60);
  const double panel_h = 230, top = 60, bar_area = 160;
  // The legend first: the picture is as wide as the widest of the panels, the legend and the
  // title (about 8.5 px a character at 15 px), so nothing is cut off.
  std::string legend;
  double lx = 10;
  for (std::size_t i = 0; i < policies.size(); ++i) {
    legend += "<rect x=\"" + fmt("%.0f", lx) + "\" y=\"32\" width=\"12\" height=\"12\" fill=\"" +
              colors[i % 8] + "\"/><text x=\"" + fmt("%.0f", lx + 16) + "\" y=\"43\">" +
              xml_escape(policies[i]) + "</text>\n";
    lx += 30 + 7.0 * static_cast<double>(policies[i].size());
  }
  const double width =
      std::max({panel_w + 20, lx + 10, 20 + 8.5 * static_cast<double>(report.title.size())});
  std::string svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + fmt("%.0f", width) +
                    "\" height=\"" + fmt("%.0f", top + 2 * panel_h + 20) +
                    "\" font-family=\"sans-serif\" font-size=\"11\">\n"
                    "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  svg += "<text x=\"10\" y=\"22\" font-size=\"15\" font-weight=\"bold\">" +
         xml_escape(report.title) + "</text>\n";
  svg += legend;
  struct Panel {
    const char* title;
    double (*value)(const SimResult&);
    const char* format;
  };
  const Panel panels[] = {
      {"prompt tokens from cache (%)", [](const SimResult& r) { return r.hit_rate * 100; }, "%.0f"},
      {"TTFT p99 (s, modelled)", [](const SimResult& r) { return r.ttft_s.p99; }, "%.2g"},
  };
  for (std::size_t p = 0; p < 2; ++p) {
    const double y0 = top + panel_h * static_cast<double>(p);
    const double base = y0 + 20 + bar_area;
    double max_v = p == 0 ? report.ceiling_hit_rate * 100 : 0;
    for (const SimResult& r : report.results) max_v = std::max(max_v, panels[p].value(r));
    if (max_v <= 0) max_v = 1;
    svg += "<text x=\"10\" y=\"" + fmt("%.0f", y0 + 10) + "\" font-weight=\"bold\">" +
           panels[p].title + "</text>\n";
    svg += "<line x1=\"10\" y1=\"" + fmt("%.0f", base) + "\" x2=\"" + fmt("%.0f", panel_w) +
           "\" y2=\"" + fmt("%.0f", base) + "\" stroke=\"black\"/>\n";
    for (std::size_t c = 0; c < cells.size(); ++c) {
      const double gx = 20 + group_w * static_cast<double>(c);
      for (std::size_t i = 0; i < policies.size(); ++i) {
        auto it = at.find({cells[c], policies[i]});
        if (it == at.end()) continue;
        const double v = panels[p].value(*it->second);
        const double h = bar_area * v / max_v;
        const double x = gx + 26.0 * static_cast<double>(i);
        svg += "<rect x=\"" + fmt("%.1f", x) + "\" y=\"" + fmt("%.1f", base - h) +
               "\" width=\"22\" height=\"" + fmt("%.1f", h) + "\" fill=\"" + colors[i % 8] +
               "\"/><text x=\"" + fmt("%.1f", x + 11) + "\" y=\"" + fmt("%.1f", base - h - 3) +
               "\" text-anchor=\"middle\" font-size=\"9\">" + fmt(panels[p].format, v) +
               "</text>\n";
      }
      const Cell& cell = cells[c];
      svg += "<text x=\"" + fmt("%.1f", gx) + "\" y=\"" + fmt("%.0f", base + 13) +
             "\" font-size=\"10\">" + std::to_string(std::get<0>(cell)) + "r " +
             std::to_string(std::get<1>(cell)) + "g @" + fmt("%.2g", std::get<2>(cell)) +
             "</text>\n";
    }
    if (p == 0 && report.ceiling_hit_rate > 0) {
      const double y = base - bar_area * report.ceiling_hit_rate * 100 / max_v;
      svg += "<line x1=\"10\" y1=\"" + fmt("%.1f", y) + "\" x2=\"" + fmt("%.0f", panel_w) +
             "\" y2=\"" + fmt("%.1f", y) + "\" stroke=\"black\" stroke-dasharray=\"4 3\"/>" +
             "<text x=\"" + fmt("%.0f", panel_w) + "\" y=\"" + fmt("%.1f", y - 3) +
             "\" text-anchor=\"end\" font-size=\"10\">ceiling " +
             fmt("%.1f", report.ceiling_hit_rate * 100) + "</text>\n";
    }
  }
  svg += "</svg>\n";
  return svg;
}

}  // namespace prefixgate::bench
