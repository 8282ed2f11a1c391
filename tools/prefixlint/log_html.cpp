// `prefixlint log --format html`: the log report as one self-contained page, the offline
// counterpart of the gateway's /dashboard. Inline CSS and SVG only: no script, nothing fetched,
// so it can be attached to a CI run or mailed.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>

#include "log_report.h"

namespace prefixgate::lint {
namespace {

constexpr const char* kAsSentColor = "#d64545";
constexpr const char* kCanonicalColor = "#16a34a";
constexpr const char* kCauseColors[] = {"#2563eb", "#e07a1f", "#9333ea", "#db2777",
                                        "#0891b2", "#ca8a04", "#64748b", "#4b5563"};

std::string esc(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

// The same rounding as the text format, so the numbers agree across formats.
std::string percent(double x) {
  return fmt("%.1f%%", 100.0 * x);
}

std::string count(std::size_t n) {
  std::string digits = std::to_string(n);
  for (std::size_t i = digits.size(); i > 3; i -= 3) digits.insert(i - 3, ",");
  return digits;
}

std::string bar(double fraction, const char* color) {
  return "<div class=\"bar\"><span style=\"width:" +
         fmt("%.1f", 100 * std::clamp(fraction, 0.0, 1.0)) + "%;background:" + color +
         "\"></span></div>";
}

// Consecutive requests grouped into at most `max_buckets` buckets of equal size.
struct Bucket {
  std::size_t first = 0, last = 0;  // request indices, inclusive
  Totals totals;
  std::map<std::string, std::size_t> causes;
};

std::vector<Bucket> bucketize(const LogReport& r, std::size_t max_buckets) {
  std::vector<Bucket> out;
  const std::size_t n = r.requests.size();
  if (n == 0) return out;
  const std::size_t per = (n + max_buckets - 1) / max_buckets;
  for (std::size_t i = 0; i < n; ++i) {
    if (i % per == 0) out.push_back(Bucket{i, i, {}, {}});
    Bucket& b = out.back();
    b.last = i;
    const RequestOutcome& q = r.requests[i];
    ++b.totals.requests;
    b.totals.prompt_tokens += q.prompt_tokens;
    b.totals.hit_tokens += q.hit_tokens;
    b.totals.canonical_hit_tokens += q.canonical_hit_tokens;
    if (!q.cause.empty()) ++b.causes[q.cause];
  }
  return out;
}

// "request 17" or its timestamp when the log has them.
std::string label_of(const LogReport& r, std::size_t index) {
  const RequestOutcome& q = r.requests[index];
  if (!q.timestamp.empty()) {
    // "2026-08-20T09:00:40.073Z" -> "08-20 09:00"
    const std::string& t = q.timestamp;
    if (t.size() >= 16 && t[10] == 'T') return t.substr(5, 5) + " " + t.substr(11, 5);
    return t;
  }
  return "#" + std::to_string(index + 1);
}

struct Plot {
  double width = 900, height = 220;
  double left = 48, right = 12, top = 10, bottom = 24;
  double x(double i, double n) const {
    return left + (n <= 1 ? 0.5 : i / (n - 1)) * (width - left - right);
  }
  double y(double v, double max) const { return top + (1 - v / max) * (height - top - bottom); }
};

std::string axes(const Plot& p, const LogReport& r, const std::vector<Bucket>& buckets,
                 double y_max, bool as_percent) {
  std::string s = "<g class=\"axis\">";
  for (int k = 0; k <= 4; ++k) {
    const double v = y_max * k / 4;
    const double y = p.y(v, y_max);
    s += "<line x1=\"" + fmt("%.1f", p.left) + "\" x2=\"" + fmt("%.1f", p.width - p.right) +
         "\" y1=\"" + fmt("%.1f", y) + "\" y2=\"" + fmt("%.1f", y) + "\"/>";
    s += "<text x=\"" + fmt("%.1f", p.left - 6) + "\" y=\"" + fmt("%.1f", y + 4) +
         "\" text-anchor=\"end\">" + (as_percent ? fmt("%.0f%%", 100 * v) : fmt("%.0f", v)) +
         "</text>";
  }
  const std::size_t n = buckets.size();
  for (std::size_t k : {std::size_t{0}, n / 2, n - 1}) {
    if (n == 0) break;
    const char* anchor = k == 0 ? "start" : k == n - 1 ? "end" : "middle";
    s += "<text x=\"" + fmt("%.1f", p.x(static_cast<double>(k), static_cast<double>(n))) +
         "\" y=\"" + fmt("%.1f", p.height - 6) + "\" text-anchor=\"" + anchor + "\">" +
         esc(label_of(r, buckets[k].first)) + "</text>";
  }
  return s + "</g>";
}

std::string ceiling_chart(const LogReport& r, const std::vector<Bucket>& buckets) {
  Plot p;
  std::string s =
      "<svg viewBox=\"0 0 900 220\" role=\"img\" aria-label=\"hit-rate ceiling over "
      "the log\">";
  s += axes(p, r, buckets, 1.0, true);
  const double n = static_cast<double>(buckets.size());
  for (const auto& [color, canonical] :
       {std::pair{kAsSentColor, false}, std::pair{kCanonicalColor, true}}) {
    std::string d;
    for (std::size_t i = 0; i < buckets.size(); ++i) {
      const Totals& t = buckets[i].totals;
      const double v = ratio(canonical ? t.canonical_hit_tokens : t.hit_tokens, t.prompt_tokens);
      d += (i == 0 ? "M" : "L") + fmt("%.1f", p.x(static_cast<double>(i), n)) + " " +
           fmt("%.1f", p.y(v, 1.0));
    }
    s += "<path d=\"" + d + "\" fill=\"none\" stroke=\"" + color +
         "\" stroke-width=\"2.5\" stroke-linejoin=\"round\"/>";
  }
  // Hover titles per bucket.
  for (std::size_t i = 0; i < buckets.size(); ++i) {
    const Totals& t = buckets[i].totals;
    const double x = p.x(static_cast<double>(i), n);
    s += "<circle cx=\"" + fmt("%.1f", x) + "\" cy=\"" +
         fmt("%.1f", p.y(ratio(t.hit_tokens, t.prompt_tokens), 1.0)) + "\" r=\"3\" fill=\"" +
         kAsSentColor + "\"><title>requests " + std::to_string(buckets[i].first + 1) + "-" +
         std::to_string(buckets[i].last + 1) + ": as sent " +
         percent(ratio(t.hit_tokens, t.prompt_tokens)) + ", canonicalized " +
         percent(ratio(t.canonical_hit_tokens, t.prompt_tokens)) + "</title></circle>";
  }
  return s + "</svg>";
}

std::string causes_chart(const LogReport& r, const std::vector<Bucket>& buckets,
                         const std::vector<std::string>& causes) {
  Plot p;
  std::size_t max_count = 1;
  for (const Bucket& b : buckets) {
    std::size_t sum = 0;
    for (const auto& [c, k] : b.causes) sum += k;
    max_count = std::max(max_count, sum);
  }
  // Whole-request ticks: the four steps of the axis are integers.
  const double y_max = 4 * std::ceil(static_cast<double>(max_count) / 4);
  std::string s =
      "<svg viewBox=\"0 0 900 220\" role=\"img\" aria-label=\"divergence causes over "
      "the log\">";
  s += axes(p, r, buckets, y_max, false);
  const double n = static_cast<double>(buckets.size());
  const double slot = (p.width - p.left - p.right) / std::max(1.0, n);
  const double bw = std::max(1.0, slot * 0.7);
  for (std::size_t i = 0; i < buckets.size(); ++i) {
    double base = 0;
    const double cx = p.left + slot * (static_cast<double>(i) + 0.5);
    for (std::size_t c = 0; c < causes.size(); ++c) {
      auto it = buckets[i].causes.find(causes[c]);
      if (it == buckets[i].causes.end()) continue;
      const double top = base + static_cast<double>(it->second);
      s += "<rect x=\"" + fmt("%.1f", cx - bw / 2) + "\" y=\"" + fmt("%.1f", p.y(top, y_max)) +
           "\" width=\"" + fmt("%.1f", bw) + "\" height=\"" +
           fmt("%.1f", p.y(base, y_max) - p.y(top, y_max)) + "\" fill=\"" +
           kCauseColors[c % std::size(kCauseColors)] + "\"><title>" + esc(causes[c]) + ": " +
           std::to_string(it->second) + " requests (" + std::to_string(buckets[i].first + 1) + "-" +
           std::to_string(buckets[i].last + 1) + ")</title></rect>";
      base = top;
    }
  }
  return s + "</svg>";
}

const char* kStyle = R"(
  * { box-sizing: border-box; }
  body { margin: 0; background: #f5f6f8; color: #1c2230;
         font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, Arial, sans-serif; }
  header { padding: 16px 28px; background: #111827; color: #f3f4f6; }
  header h1 { margin: 0; font-size: 19px; font-weight: 600; }
  header p { margin: 2px 0 0; color: #9ca3af; font-size: 13px; }
  main { max-width: 1200px; margin: 0 auto; padding: 18px 28px 40px; }
  .intro { color: #5f6b7d; max-width: 900px; }
  .kpis { display: grid; grid-template-columns: repeat(auto-fit, minmax(200px, 1fr)); gap: 12px; margin: 14px 0; }
  .kpi, section { background: #fff; border: 1px solid #e3e6eb; border-radius: 10px; padding: 12px 16px; }
  section { margin-top: 14px; }
  .kpi .label { color: #5f6b7d; font-size: 12px; text-transform: uppercase; letter-spacing: .04em; }
  .kpi .value { font-size: 30px; font-weight: 650; }
  .kpi .note { color: #5f6b7d; font-size: 12.5px; }
  h2 { font-size: 15px; margin: 0 0 2px; font-weight: 600; }
  .what { color: #5f6b7d; font-size: 12.5px; margin: 0 0 8px; }
  svg { width: 100%; height: auto; display: block; }
  .axis text { fill: #6b7280; font-size: 11px; }
  .axis line { stroke: #eceff3; }
  .legend { display: flex; flex-wrap: wrap; gap: 4px 16px; font-size: 12.5px; color: #5f6b7d; }
  .legend i { display: inline-block; width: 12px; height: 10px; margin-right: 5px; border-radius: 2px; vertical-align: middle; }
  table { width: 100%; border-collapse: collapse; font-size: 13px; }
  th { text-align: left; color: #5f6b7d; font-weight: 500; font-size: 12px; border-bottom: 1px solid #e3e6eb; padding: 4px 6px; }
  td { border-bottom: 1px solid #f0f2f5; padding: 5px 6px; vertical-align: top; font-variant-numeric: tabular-nums; }
  .num { text-align: right; }
  .mono { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 12px; word-break: break-all; }
  .bar { position: relative; height: 8px; background: #eef0f3; border-radius: 4px; min-width: 80px; margin-top: 5px; }
  .bar span { position: absolute; left: 0; top: 0; bottom: 0; border-radius: 4px; }
)";

}  // namespace

std::string log_html(const LogReport& r) {
  const double as_sent = ratio(r.all.hit_tokens, r.all.prompt_tokens);
  const double canonical = ratio(r.all.canonical_hit_tokens, r.all.prompt_tokens);
  std::size_t lost = 0, missed = 0, fixed = 0;
  for (const auto& [name, c] : r.causes) {
    lost += c.tokens_lost;
    missed += c.requests;
    fixed += c.fixed_by_canonicalization;
  }
  const auto causes = causes_by_count(r);
  std::vector<std::string> cause_names;
  for (const auto& [name, c] : causes) cause_names.push_back(name);
  const std::vector<Bucket> buckets = bucketize(r, 60);

  std::string h;
  h += "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  h += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
  h += "<title>prefixlint log report: " + esc(r.file) + "</title>\n";
  h += "<style>" + std::string(kStyle) + "</style>\n</head>\n<body>\n";
  h += "<header><h1>Prefix-cache report: " + esc(r.file) + "</h1><p>" + count(r.all.requests) +
       " requests · " + count(r.all.prompt_tokens) + " prompt tokens · " +
       std::to_string(r.block_size) + "-token blocks · prefixlint log</p></header>\n<main>\n";
  h += "<p class=\"intro\">The <b>hit-rate ceiling</b> is the share of prompt tokens that could "
       "be served from a prefix cache: exact prefix matching, block by block, against every "
       "earlier request, with an unbounded cache. No router or cache size can beat it for this "
       "traffic. <b>Canonicalized</b> is the same after prefixgate's canonicalization (tool JSON "
       "and order, timestamps rounded); the gap is what canonicalization is worth.</p>\n";

  h += "<div class=\"kpis\">";
  h += "<div class=\"kpi\"><div class=\"label\">Ceiling as sent</div><div class=\"value\" "
       "id=\"ceiling-as-sent\">" +
       percent(as_sent) + "</div><div class=\"note\">" + count(r.all.hit_tokens) +
       " tokens cacheable</div></div>";
  h += "<div class=\"kpi\"><div class=\"label\">Ceiling canonicalized</div><div class=\"value\" "
       "id=\"ceiling-canonical\">" +
       percent(canonical) + "</div><div class=\"note\">" +
       fmt("%+.1f", 100 * (canonical - as_sent)) + " points</div></div>";
  h += "<div class=\"kpi\"><div class=\"label\">Prefix tokens lost</div><div class=\"value\">" +
       count(lost) + "</div><div class=\"note\">to divergence in the stable prefix</div></div>";
  h += "<div class=\"kpi\"><div class=\"label\">Requests that diverged</div><div "
       "class=\"value\">" +
       count(missed) + "</div><div class=\"note\">" + count(fixed) +
       " fixed by canonicalization</div></div>";
  h += "</div>\n";

  if (!buckets.empty()) {
    h += "<section id=\"ceiling\"><h2>Hit-rate ceiling over the log</h2><p class=\"what\">Per "
         "group of " +
         std::to_string(buckets.front().last - buckets.front().first + 1) +
         " consecutive requests: cacheable share of their prompt tokens.</p>";
    h += ceiling_chart(r, buckets);
    h += std::string("<div class=\"legend\"><span><i style=\"background:") + kAsSentColor +
         "\"></i>as sent <b>" + percent(as_sent) +
         "</b></span><span><i style=\"background:" + kCanonicalColor + "\"></i>canonicalized <b>" +
         percent(canonical) + "</b></span></div></section>\n";
  }

  h += "<section id=\"causes\"><h2>Divergence causes over the log</h2><p class=\"what\">Requests "
       "that missed part of their stable prefix, by why they diverged from the most similar "
       "earlier request.</p>";
  if (causes.empty()) {
    h += "<p>No request missed part of its stable prefix.</p>";
  } else {
    h += causes_chart(r, buckets, cause_names);
    h += "<div class=\"legend\">";
    for (std::size_t c = 0; c < cause_names.size(); ++c) {
      h += std::string("<span><i style=\"background:") + kCauseColors[c % std::size(kCauseColors)] +
           "\"></i>" + esc(cause_names[c]) + "</span>";
    }
    h += "</div>";
  }
  h += "</section>\n";

  h += "<section id=\"offenders\"><h2>Top offenders</h2><p class=\"what\">Causes by requests "
       "affected, with the prefix tokens they cost and an example.</p>";
  if (!causes.empty()) {
    h += "<table><thead><tr><th>cause</th><th class=\"num\">requests</th><th class=\"num\">prefix "
         "tokens lost</th><th class=\"num\">fixed by canonicalization</th><th>example</th></tr>"
         "</thead><tbody>";
    for (const auto& [name, c] : causes) {
      h += "<tr><td><b>" + esc(name) + "</b></td><td class=\"num\">" + count(c.requests) +
           "</td><td class=\"num\">" + count(c.tokens_lost) + "</td><td class=\"num\">" +
           count(c.fixed_by_canonicalization) + " (" +
           percent(ratio(c.fixed_by_canonicalization, c.requests)) + ")</td><td class=\"mono\">" +
           esc(c.example.empty() ? "-" : c.example) + "</td></tr>";
    }
    h += "</tbody></table>";
  } else {
    h += "<p>None.</p>";
  }
  std::vector<const RequestOutcome*> worst;
  for (const RequestOutcome& q : r.requests) {
    if (q.tokens_lost > 0) worst.push_back(&q);
  }
  std::stable_sort(worst.begin(), worst.end(),
                   [](const RequestOutcome* a, const RequestOutcome* b) {
                     return a->tokens_lost > b->tokens_lost;
                   });
  if (!worst.empty()) {
    h += "<h2 style=\"margin-top:14px\">Requests that lost the most prefix</h2><table><thead><tr>"
         "<th class=\"num\">line</th><th>time</th><th>tenant</th><th>cause</th><th "
         "class=\"num\">tokens lost</th><th>canonicalization</th></tr></thead><tbody>";
    for (std::size_t i = 0; i < std::min<std::size_t>(10, worst.size()); ++i) {
      const RequestOutcome& q = *worst[i];
      h += "<tr><td class=\"num\">" + std::to_string(q.line) + "</td><td class=\"mono\">" +
           esc(q.timestamp.empty() ? "-" : q.timestamp) + "</td><td>" +
           esc(q.tenant.empty() ? "(none)" : q.tenant) + "</td><td>" + esc(q.cause) +
           "</td><td class=\"num\">" + count(q.tokens_lost) + "</td><td>" +
           (q.fixed_by_canonicalization ? "fixes it" : "does not fix it") + "</td></tr>";
    }
    h += "</tbody></table>";
  }
  h += "</section>\n";

  if (r.tenants.size() > 1 || (r.tenants.size() == 1 && !r.tenants.begin()->first.empty())) {
    h += "<section id=\"tenants\"><h2>Per tenant</h2><table><thead><tr><th>tenant</th><th "
         "class=\"num\">requests</th><th class=\"num\">prompt tokens</th><th>as sent</th><th "
         "class=\"num\"></th><th>canonicalized</th><th class=\"num\"></th></tr></thead><tbody>";
    for (const auto& [name, t] : r.tenants) {
      const double a = ratio(t.hit_tokens, t.prompt_tokens);
      const double c = ratio(t.canonical_hit_tokens, t.prompt_tokens);
      h += "<tr><td>" + esc(name.empty() ? "(none)" : name) + "</td><td class=\"num\">" +
           count(t.requests) + "</td><td class=\"num\">" + count(t.prompt_tokens) + "</td><td>" +
           bar(a, kAsSentColor) + "</td><td class=\"num\">" + percent(a) + "</td><td>" +
           bar(c, kCanonicalColor) + "</td><td class=\"num\">" + percent(c) + "</td></tr>";
    }
    h += "</tbody></table></section>\n";
  }
  h += "</main>\n</body>\n</html>\n";
  return h;
}

}  // namespace prefixgate::lint
