#include "cost_chart.h"

#include <algorithm>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>

#include "percentiles.h"
#include "prefixgate/canonicalize/json.h"
#include "report_text.h"

namespace prefixgate::bench {
namespace {

using report_text::fmt;
using report_text::xml_escape;

Error bad(const std::string& what) {
  return make_error(ErrorCode::kInvalidValue, what);
}

const std::string* string_member(const json::Value& v, std::string_view key) {
  const json::Value* m = v.find(key);
  return m != nullptr && m->is_string() ? &m->as_string() : nullptr;
}

const json::Value* number_member(const json::Value& v, std::string_view key) {
  const json::Value* m = v.find(key);
  return m != nullptr && m->is_number() ? m : nullptr;
}

// Microseconds per unit of Google Benchmark's time_unit.
double to_microseconds(const std::string* unit) {
  if (unit == nullptr || *unit == "ns") return 1e-3;
  if (*unit == "us") return 1;
  if (*unit == "ms") return 1e3;
  return 1e6;  // "s"
}

}  // namespace

Result<std::vector<CostSeries>> cost_series(std::string_view benchmark_json,
                                            std::string_view x_counter) {
  auto doc = json::parse(benchmark_json);
  if (!doc) return bad("not JSON: " + doc.error().message);
  const json::Value* runs = doc->is_object() ? doc->find("benchmarks") : nullptr;
  if (runs == nullptr || !runs->is_array()) {
    return bad("not a Google Benchmark JSON document (no \"benchmarks\" array)");
  }
  // Per run name: its x, the CPU times of its repetitions, and its median aggregate if any.
  struct Run {
    double x = 0;
    std::vector<double> cpu_us;
    double median_us = -1;
  };
  std::vector<std::string> order;  // series names, first seen first
  std::map<std::string, std::map<std::string, Run>> by_series;
  for (const json::Value& r : runs->as_array()) {
    const std::string* run_name = r.is_object() ? string_member(r, "run_name") : nullptr;
    if (run_name == nullptr) run_name = r.is_object() ? string_member(r, "name") : nullptr;
    if (run_name == nullptr) return bad("a run without a name");
    const std::string* type = string_member(r, "run_type");
    const std::string* aggregate = string_member(r, "aggregate_name");
    const bool is_aggregate = type != nullptr && *type == "aggregate";
    if (is_aggregate && (aggregate == nullptr || *aggregate != "median")) continue;
    const json::Value* cpu = number_member(r, "cpu_time");
    const json::Value* x = number_member(r, x_counter);
    if (cpu == nullptr) return bad("run " + *run_name + " has no cpu_time");
    if (x == nullptr) {
      return bad("run " + *run_name + " has no counter \"" + std::string(x_counter) + "\"");
    }
    const std::size_t slash = run_name->rfind('/');
    const std::string series = slash == std::string::npos ? *run_name : run_name->substr(0, slash);
    if (!by_series.contains(series)) order.push_back(series);
    Run& run = by_series[series][*run_name];
    run.x = x->as_number().value;
    const double us = cpu->as_number().value * to_microseconds(string_member(r, "time_unit"));
    if (is_aggregate) {
      run.median_us = us;
    } else {
      run.cpu_us.push_back(us);
    }
  }
  if (order.empty()) return bad("no benchmark runs");
  std::vector<CostSeries> out;
  for (const std::string& name : order) {
    CostSeries s{name, {}};
    for (const auto& [run_name, run] : by_series[name]) {
      s.points.emplace_back(run.x, run.median_us >= 0 ? run.median_us : median(run.cpu_us));
    }
    std::sort(s.points.begin(), s.points.end());
    out.push_back(std::move(s));
  }
  return out;
}

std::string cost_chart_svg(const std::vector<CostSeries>& series, const std::string& title,
                           const std::string& x_label) {
  const char* colors[] = {"#264653", "#e76f51", "#2a9d8f", "#f4a261",
                          "#6d597a", "#8ab17d", "#9e9e9e", "#457b9d"};
  const double left = 60, top = 40, plot_w = 520, plot_h = 300, legend_w = 330;
  double max_x = 0, max_y = 0;
  for (const CostSeries& s : series) {
    for (const auto& [x, y] : s.points) {
      max_x = std::max(max_x, x);
      max_y = std::max(max_y, y);
    }
  }
  if (max_x <= 0) max_x = 1;
  if (max_y <= 0) max_y = 1;
  max_y *= 1.05;
  const auto px = [&](double x) { return left + plot_w * x / max_x; };
  const auto py = [&](double y) { return top + plot_h - plot_h * y / max_y; };
  const double width = left + plot_w + 20 + legend_w;
  const double height = top + plot_h + 45;
  std::string svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + fmt("%.0f", width) +
                    "\" height=\"" + fmt("%.0f", height) +
                    "\" font-family=\"sans-serif\" font-size=\"11\">\n"
                    "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  svg += "<text x=\"10\" y=\"22\" font-size=\"15\" font-weight=\"bold\">" + xml_escape(title) +
         "</text>\n";
  // Axes and four ticks on each.
  svg += "<line x1=\"" + fmt("%.0f", left) + "\" y1=\"" + fmt("%.0f", top + plot_h) + "\" x2=\"" +
         fmt("%.0f", left + plot_w) + "\" y2=\"" + fmt("%.0f", top + plot_h) +
         "\" stroke=\"black\"/>\n<line x1=\"" + fmt("%.0f", left) + "\" y1=\"" + fmt("%.0f", top) +
         "\" x2=\"" + fmt("%.0f", left) + "\" y2=\"" + fmt("%.0f", top + plot_h) +
         "\" stroke=\"black\"/>\n";
  const auto tick = [](double v) { return fmt(v >= 100 ? "%.0f" : "%.3g", v); };
  for (int i = 0; i <= 4; ++i) {
    const double xv = max_x * i / 4, yv = max_y * i / 4;
    svg += "<text x=\"" + fmt("%.1f", px(xv)) + "\" y=\"" + fmt("%.0f", top + plot_h + 14) +
           "\" text-anchor=\"middle\">" + tick(xv) + "</text>\n";
    svg += "<text x=\"" + fmt("%.0f", left - 4) + "\" y=\"" + fmt("%.1f", py(yv) + 4) +
           "\" text-anchor=\"end\">" + tick(yv) + "</text>\n";
    svg += "<line x1=\"" + fmt("%.0f", left) + "\" y1=\"" + fmt("%.1f", py(yv)) + "\" x2=\"" +
           fmt("%.0f", left + plot_w) + "\" y2=\"" + fmt("%.1f", py(yv)) +
           "\" stroke=\"#e0e0e0\"/>\n";
  }
  svg += "<text x=\"" + fmt("%.0f", left + plot_w / 2) + "\" y=\"" + fmt("%.0f", height - 8) +
         "\" text-anchor=\"middle\">" + xml_escape(x_label) + "</text>\n";
  svg += "<text x=\"14\" y=\"" + fmt("%.0f", top + plot_h / 2) + "\" transform=\"rotate(-90 14 " +
         fmt("%.0f", top + plot_h / 2) + ")\" text-anchor=\"middle\">CPU per request (us)</text>\n";
  for (std::size_t i = 0; i < series.size(); ++i) {
    const CostSeries& s = series[i];
    const std::string color = colors[i % 8];
    std::string points;
    for (const auto& [x, y] : s.points) {
      points += fmt("%.1f", px(x)) + "," + fmt("%.1f", py(y)) + " ";
      svg += "<circle cx=\"" + fmt("%.1f", px(x)) + "\" cy=\"" + fmt("%.1f", py(y)) +
             "\" r=\"2.5\" fill=\"" + color + "\"/>\n";
    }
    svg += "<polyline fill=\"none\" stroke=\"" + color + "\" stroke-width=\"2\" points=\"" +
           points + "\"/>\n";
    // The legend: the line's name and what its largest point costs against its smallest.
    const double ly = top + 14 + 18.0 * static_cast<double>(i);
    const double lx = left + plot_w + 20;
    std::string growth;
    if (s.points.size() >= 2 && s.points.front().second > 0) {
      growth = " (" + fmt("%.2gx", s.points.back().second / s.points.front().second) + ")";
    }
    svg += "<rect x=\"" + fmt("%.0f", lx) + "\" y=\"" + fmt("%.0f", ly - 10) +
           "\" width=\"12\" height=\"12\" fill=\"" + color + "\"/><text x=\"" +
           fmt("%.0f", lx + 16) + "\" y=\"" + fmt("%.0f", ly) + "\">" + xml_escape(s.name) +
           growth + "</text>\n";
  }
  svg += "<text x=\"" + fmt("%.0f", left + plot_w + 20) + "\" y=\"" +
         fmt("%.0f", top + 18 + 18.0 * static_cast<double>(series.size())) +
         "\" font-size=\"10\">(x): the largest point against the smallest</text>\n";
  svg += "</svg>\n";
  return svg;
}

int run_cost_chart(const CostChartFlags& flags) {
  std::ifstream in(flags.input, std::ios::binary);
  if (!in) {
    std::cerr << "prefixgate-bench cost-chart: cannot read " << flags.input << "\n";
    return 1;
  }
  std::ostringstream text;
  text << in.rdbuf();
  auto series = cost_series(text.str(), flags.x_counter);
  if (!series) {
    std::cerr << "prefixgate-bench cost-chart: " << flags.input << ": " << series.error().message
              << "\n";
    return 2;
  }
  const std::string out_path = flags.svg_out.empty()
                                   ? flags.input.substr(0, flags.input.rfind('.')) + ".svg"
                                   : flags.svg_out;
  std::ofstream out(out_path, std::ios::binary);
  out << cost_chart_svg(*series, flags.title, flags.x_counter);
  if (!out) {
    std::cerr << "prefixgate-bench cost-chart: cannot write " << out_path << "\n";
    return 1;
  }
  for (const CostSeries& s : *series) {
    std::cout << s.name << ":";
    for (const auto& [x, y] : s.points) std::cout << " " << x << "=" << y << "us";
    std::cout << "\n";
  }
  std::cout << "wrote " << out_path << "\n";
  return 0;
}

}  // namespace prefixgate::bench
