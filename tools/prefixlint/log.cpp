// `prefixlint log FILE.jsonl`: the prefix hit-rate ceiling of a recorded traffic log, as sent
// and after canonicalization, and what breaks prefixes, with counts and an example each.
//
// The ceiling is exact prefix matching at block granularity against every request seen before,
// with an unbounded cache: the hit rate no router or cache size can beat for this traffic.
#include <algorithm>
#include <cstdio>
#include <deque>
#include <iostream>
#include <map>
#include <unordered_map>

#include "commands.h"
#include "documents.h"
#include "log_report.h"
#include "model_flags.h"
#include "prefixgate/canonicalize/divergence.h"

namespace prefixgate::lint {
namespace {

// A prior request kept for explaining later misses.
struct HistoryEntry {
  const Document* doc;
  canon::AnalyzedPrompt prompt;
};

// An unbounded prefix cache over chained block hashes: block -> the latest request holding it.
class CeilingCache {
 public:
  // Blocks of `hashes` already cached, from the start.
  std::size_t match(const std::vector<std::uint64_t>& hashes, std::size_t* owner) const {
    std::size_t n = 0;
    for (; n < hashes.size(); ++n) {
      auto it = blocks_.find(hashes[n]);
      if (it == blocks_.end()) break;
      *owner = it->second;
    }
    return n;
  }
  void insert(const std::vector<std::uint64_t>& hashes, std::size_t owner) {
    for (std::uint64_t h : hashes) blocks_[h] = owner;
  }

 private:
  std::unordered_map<std::uint64_t, std::size_t> blocks_;
};

std::string percent(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f%%", 100.0 * x);
  return buf;
}

std::string json_quoted(const std::string& s) {
  std::string q;
  json::append_quoted(s, q);
  return q;
}

constexpr const char* kNewPrefix = "new-prefix";

// An edit changes part of a prompt and keeps the rest: some text a little after the divergence
// in the new prompt appears near the same place in the old one. Two different prompts that
// happen to start alike (another app's "You are ...") do not re-synchronize.
bool resynchronizes(const std::string& old_text, const std::string& new_text, std::size_t at) {
  constexpr std::size_t kSkip = 64, kProbe = 48, kWindow = 8192;
  for (std::size_t skip : {std::size_t{0}, kSkip, 4 * kSkip}) {
    if (at + skip + kProbe > new_text.size()) break;
    const std::string_view probe(new_text.data() + at + skip, kProbe);
    const std::size_t from = at > kWindow ? at - kWindow : 0;
    const std::string_view window(old_text.data() + from,
                                  std::min(old_text.size() - from, 3 * kWindow));
    if (window.find(probe) != std::string_view::npos) return true;
  }
  return false;
}

Result<LogReport> analyze_log(const std::string& file, const std::vector<Document>& docs,
                              const LoadedModel& loaded, std::size_t history_limit) {
  LogReport report;
  report.file = file;
  report.block_size = loaded.model.block_size;
  const std::size_t block = loaded.model.block_size;
  CeilingCache as_sent, canonical;
  std::deque<std::pair<std::size_t, HistoryEntry>> history;  // (request index, entry)
  std::map<std::string, std::size_t> last_of_tenant;

  const auto find_history = [&](std::size_t index) -> const HistoryEntry* {
    auto it = std::lower_bound(history.begin(), history.end(), index,
                               [](const auto& e, std::size_t i) { return e.first < i; });
    return it != history.end() && it->first == index ? &it->second : nullptr;
  };

  for (std::size_t i = 0; i < docs.size(); ++i) {
    const Document& doc = docs[i];
    auto analyzed = canon::analyze_prompt(doc.request, loaded.model, loaded.render);
    if (!analyzed) return refused_by_template(file, doc, analyzed.error());
    canon::AnalyzedPrompt& prompt = *analyzed;
    auto canon_req = canon::parse_request_value(
        canon::canonicalize(doc.request, loaded.policy).body, doc.request.endpoint);
    auto canon_analyzed =
        canon::analyze_prompt(canon_req ? *canon_req : doc.request, loaded.model, loaded.render);
    if (!canon_analyzed) return refused_by_template(file, doc, canon_analyzed.error());
    const canon::AnalyzedPrompt& canon_prompt = *canon_analyzed;

    std::size_t owner = 0, canon_owner = 0;
    const std::size_t hit_blocks = as_sent.match(prompt.block_hashes, &owner);
    const std::size_t canon_hit_blocks = canonical.match(canon_prompt.block_hashes, &canon_owner);
    as_sent.insert(prompt.block_hashes, i);
    canonical.insert(canon_prompt.block_hashes, i);

    const std::size_t tokens = prompt.tokens.tokens.size();
    for (Totals* t : {&report.all, &report.tenants[doc.tenant]}) {
      ++t->requests;
      t->prompt_tokens += tokens;
      t->hit_tokens += hit_blocks * block;
      t->canonical_hit_tokens += canon_hit_blocks * block;
    }
    RequestOutcome& outcome = report.requests.emplace_back();
    outcome.line = doc.line;
    outcome.timestamp = doc.timestamp;
    outcome.tenant = doc.tenant;
    outcome.prompt_tokens = tokens;
    outcome.hit_tokens = hit_blocks * block;
    outcome.canonical_hit_tokens = canon_hit_blocks * block;

    // A request that missed part of its own stable prefix: explain against the most similar
    // earlier request (the holder of its deepest cached block, or its tenant's previous one).
    const std::size_t stable_blocks = prompt.stable_prefix_tokens() / block;
    if (i > 0 && hit_blocks < stable_blocks) {
      std::vector<std::size_t> candidates;
      if (hit_blocks > 0) candidates.push_back(owner);
      if (auto it = last_of_tenant.find(doc.tenant); it != last_of_tenant.end()) {
        candidates.push_back(it->second);
      }
      candidates.push_back(i - 1);
      canon::Divergence best;
      const HistoryEntry* best_entry = nullptr;
      for (std::size_t c : candidates) {
        const HistoryEntry* e = find_history(c);
        if (e == nullptr) continue;
        canon::Divergence d =
            canon::compare_analyzed(e->doc->request, e->prompt, doc.request, prompt);
        if (best_entry == nullptr || d.common_prefix_tokens > best.common_prefix_tokens) {
          best = std::move(d);
          best_entry = e;
        }
      }
      std::string cause = kNewPrefix;
      if (best_entry != nullptr && best.diverged && best.common_prefix_tokens >= block &&
          (best.cause != canon::DivergenceCause::kEdit ||
           resynchronizes(best_entry->prompt.rendered.text, prompt.rendered.text,
                          best.byte_offset))) {
        cause = canon::cause_name(best.cause);
      }
      CauseStats& stats = report.causes[cause];
      ++stats.requests;
      stats.tokens_lost += (stable_blocks - hit_blocks) * block;
      const bool fixed = canon_hit_blocks >= canon_prompt.stable_prefix_tokens() / block;
      if (fixed) ++stats.fixed_by_canonicalization;
      outcome.cause = cause;
      outcome.tokens_lost = (stable_blocks - hit_blocks) * block;
      outcome.fixed_by_canonicalization = fixed;
      if (stats.example.empty() && cause != kNewPrefix) {
        stats.example = "line " + std::to_string(doc.line) + ", " + best.field + ": " +
                        json_quoted(best.old_excerpt) + " -> " + json_quoted(best.new_excerpt);
      }
    }

    last_of_tenant[doc.tenant] = i;
    history.emplace_back(i, HistoryEntry{&doc, std::move(prompt)});
    if (history.size() > history_limit) history.pop_front();
  }
  return report;
}

json::Value number(double n) {
  return json::Value(n);
}

json::Value totals_json(const Totals& t) {
  json::Object o;
  o.push_back({"requests", number(static_cast<double>(t.requests))});
  o.push_back({"prompt_tokens", number(static_cast<double>(t.prompt_tokens))});
  o.push_back({"hit_tokens", number(static_cast<double>(t.hit_tokens))});
  o.push_back({"hit_rate", number(ratio(t.hit_tokens, t.prompt_tokens))});
  o.push_back({"canonical_hit_tokens", number(static_cast<double>(t.canonical_hit_tokens))});
  o.push_back({"canonical_hit_rate", number(ratio(t.canonical_hit_tokens, t.prompt_tokens))});
  return json::Value(std::move(o));
}

std::string log_json(const LogReport& r) {
  json::Object root;
  root.push_back({"file", r.file});
  root.push_back({"block_size", number(static_cast<double>(r.block_size))});
  root.push_back({"total", totals_json(r.all)});
  json::Array causes;
  for (const auto& [name, s] : causes_by_count(r)) {
    json::Object o;
    o.push_back({"cause", name});
    o.push_back({"requests", number(static_cast<double>(s.requests))});
    o.push_back({"prefix_tokens_lost", number(static_cast<double>(s.tokens_lost))});
    o.push_back(
        {"fixed_by_canonicalization", number(static_cast<double>(s.fixed_by_canonicalization))});
    o.push_back({"example", s.example});
    causes.push_back(json::Value(std::move(o)));
  }
  root.push_back({"causes", json::Value(std::move(causes))});
  if (r.tenants.size() > 1 || (r.tenants.size() == 1 && !r.tenants.begin()->first.empty())) {
    json::Object tenants;
    for (const auto& [name, t] : r.tenants) tenants.push_back({name, totals_json(t)});
    root.push_back({"tenants", json::Value(std::move(tenants))});
  }
  return json::to_json(json::Value(std::move(root))) + "\n";
}

std::string pad(std::string s, std::size_t width) {
  if (s.size() < width) s.append(width - s.size(), ' ');
  return s;
}
std::string lpad(std::string s, std::size_t width) {
  if (s.size() < width) s.insert(0, width - s.size(), ' ');
  return s;
}

std::string log_text(const LogReport& r) {
  std::string out;
  out += r.file + ": " + std::to_string(r.all.requests) + " requests, " +
         std::to_string(r.all.prompt_tokens) + " prompt tokens\n";
  out += "prefix hit-rate ceiling (unbounded cache, " + std::to_string(r.block_size) +
         "-token blocks):\n";
  const double asis = ratio(r.all.hit_tokens, r.all.prompt_tokens);
  const double canon = ratio(r.all.canonical_hit_tokens, r.all.prompt_tokens);
  char delta[32];
  std::snprintf(delta, sizeof delta, "%+.1f points", 100.0 * (canon - asis));
  out += "  as sent:        " + percent(asis) + "\n";
  out += "  canonicalized:  " + percent(canon) + "  (" + delta + ")\n";
  if (r.causes.empty()) {
    out += "no request missed part of its stable prefix\n";
  } else {
    out += "divergence causes (requests that missed part of their stable prefix):\n";
    out += "  " + pad("cause", 12) + lpad("requests", 9) + lpad("tokens lost", 13) +
           lpad("fixed by canon", 16) + "\n";
    for (const auto& [name, s] : causes_by_count(r)) {
      out += "  " + pad(name, 12) + lpad(std::to_string(s.requests), 9) +
             lpad(std::to_string(s.tokens_lost), 13) +
             lpad(std::to_string(s.fixed_by_canonicalization), 16) + "\n";
    }
    for (const auto& [name, s] : causes_by_count(r)) {
      if (!s.example.empty()) out += "  e.g. " + name + ": " + s.example + "\n";
    }
  }
  if (r.tenants.size() > 1 || (r.tenants.size() == 1 && !r.tenants.begin()->first.empty())) {
    out += "per tenant:\n";
    out += "  " + pad("tenant", 16) + lpad("requests", 9) + lpad("prompt tokens", 15) +
           lpad("as sent", 10) + lpad("canonical", 11) + "\n";
    for (const auto& [name, t] : r.tenants) {
      out += "  " + pad(name.empty() ? "(none)" : name, 16) + lpad(std::to_string(t.requests), 9) +
             lpad(std::to_string(t.prompt_tokens), 15) +
             lpad(percent(ratio(t.hit_tokens, t.prompt_tokens)), 10) +
             lpad(percent(ratio(t.canonical_hit_tokens, t.prompt_tokens)), 11) + "\n";
    }
  }
  return out;
}

}  // namespace

std::vector<std::pair<std::string, CauseStats>> causes_by_count(const LogReport& r) {
  std::vector<std::pair<std::string, CauseStats>> v(r.causes.begin(), r.causes.end());
  std::stable_sort(v.begin(), v.end(), [](const auto& a, const auto& b) {
    return a.second.requests > b.second.requests;
  });
  return v;
}

void add_log_command(CLI::App& app, std::function<int()>& run) {
  struct Options {
    ModelFlags model;
    std::string format = "text";
    std::string file;
    std::size_t history = 4096;
  };
  auto opts = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "log", "hit-rate ceiling of a request log, as sent and canonicalized, and what breaks it");
  cmd->add_option("--format", opts->format,
                  "text, json, or html (a self-contained report page with charts)")
      ->capture_default_str()
      ->check(CLI::IsMember({"text", "json", "html"}));
  cmd->add_option("--history", opts->history,
                  "earlier requests kept to explain misses (memory grows with it)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 24));
  cmd->add_option("file", opts->file,
                  "JSONL: one request per line, or {\"request\":...,\"tenant\":...}")
      ->required();
  add_model_flags(*cmd, opts->model, /*with_policy=*/true);
  cmd->callback([opts, &run] {
    run = [opts]() -> int {
      auto loaded = load_model(opts->model);
      if (!loaded) return fail(loaded.error());
      auto docs = read_documents(opts->file, forced_api(opts->model));
      if (!docs) return fail(docs.error());
      auto analyzed = analyze_log(opts->file, *docs, *loaded, opts->history);
      if (!analyzed) return fail(analyzed.error());
      const LogReport& report = *analyzed;
      std::cout << (opts->format == "json"   ? log_json(report)
                    : opts->format == "html" ? log_html(report)
                                             : log_text(report));
      return 0;
    };
  });
}

}  // namespace prefixgate::lint
