#include "prefixgate/canonicalize/lint.h"

#include <algorithm>
#include <utility>

#include "scanned_ranges.h"
#include "volatile_internal.h"

namespace prefixgate::canon {
namespace {

const char* what_changes(Severity s) {
  switch (s) {
    case Severity::kError: return "changes every request or minute";
    case Severity::kWarning: return "changes every hour";
    case Severity::kInfo: return "changes every day";
  }
  return "changes";
}

// The end of the prefix the client declared stable (0: none declared).
std::size_t declared_end(const LintOptions& options) {
  std::size_t end = 0;
  for (std::size_t b : options.breakpoints) end = std::max(end, b);
  return end;
}

// A finding inside the declared-stable prefix is an error whatever its detector's severity: the
// client's cache entry at that breakpoint is never read back.
// What a finding before the client's last cache breakpoint means, added to its message and hint.
void explain_breakpoint(Finding& f) {
  f.message +=
      " (it is before a cache_control breakpoint: the request declares this prefix "
      "stable, and its cache entry will not be read back)";
  if (f.in_volatile_tail) f.hint = finding_hint(f.rule);
}

void apply_breakpoint(Finding& f, std::size_t declared, bool explain) {
  f.before_breakpoint = f.prompt_begin < declared;
  if (!f.before_breakpoint) return;
  f.severity = Severity::kError;
  if (explain) explain_breakpoint(f);
}

using ScannedRange = PromptMemo::ScannedRange;

// Where the range [begin, end) of the prompt's text is, or goes, among `ranges` (sorted by begin,
// then end).
template <class Ranges>
auto range_position(Ranges& ranges, std::size_t begin, std::size_t end) {
  return std::lower_bound(
      ranges.begin(), ranges.end(), std::pair{begin, end},
      [](const ScannedRange& r, const std::pair<std::size_t, std::size_t>& key) {
        return std::pair{r.begin, r.end} < key;
      });
}

// The kept range [begin, end) of the prompt's text, if any.
const ScannedRange* find_range(const std::vector<ScannedRange>& ranges, std::size_t begin,
                               std::size_t end) {
  const auto at = range_position(ranges, begin, end);
  return at != ranges.end() && at->begin == begin && at->end == end ? &*at : nullptr;
}

// Keeps what the scanner found in [begin, end), room permitting, in its place among `ranges`.
void keep_range(std::vector<ScannedRange>& ranges, std::size_t begin, std::size_t end,
                const std::vector<volatile_detail::Candidate>& found) {
  if (ranges.size() >= PromptMemo::kMaxScannedRanges ||
      found.size() > PromptMemo::kMaxScannedSpans) {
    return;
  }
  ScannedRange range{.begin = begin, .end = end, .spans = {}};
  range.spans.assign(found.begin(), found.end());  // each candidate's VolatileHit
  ranges.insert(range_position(ranges, begin, end), std::move(range));
}

}  // namespace

std::string finding_message(const VolatileSpan& span, bool in_volatile_tail) {
  std::string what;
  switch (span.rule) {
    case Rule::kTimestamp: what = "timestamp (" + span.kind + ")"; break;
    case Rule::kDate: what = "date (" + span.kind + ")"; break;
    case Rule::kId: what = "identifier (" + span.kind + ")"; break;
  }
  if (in_volatile_tail) {
    return what + " in the final user message; it is after the cacheable prefix";
  }
  return what + " in the cacheable prefix: it " + what_changes(span.severity) +
         ", and the prefix cache misses from here on";
}

std::string finding_hint(Rule rule) {
  switch (rule) {
    case Rule::kTimestamp:
      return "move the time into the last user message, or round it (prefixgate's timestamp "
             "rule rounds it to the hour)";
    case Rule::kDate:
      return "move the date after the stable part of the prompt, e.g. into the last user message";
    case Rule::kId:
      return "remove per-request identifiers from the prompt; send them as metadata or headers";
  }
  return {};
}

std::size_t lint_prompt_each(const AnalyzedPrompt& prompt, const LintOptions& options,
                             const std::function<void(const FindingSeen&)>& seen) {
  const RenderedPrompt& r = prompt.rendered;
  std::size_t first_break = r.volatile_tail_begin;
  const std::size_t declared = declared_end(options);
  const std::size_t lint_end =
      options.volatile_tail ? r.text.size() : std::max(r.volatile_tail_begin, declared);
  // The ranges kept with the text (prompt_memo.h): a segment the previous prompt also had is
  // looked up rather than scanned, and one scanned is kept for the next prompt.
  std::vector<ScannedRange>* kept = internal::scanned_ranges_of(prompt);
  internal::ScannedRangeCounts& counts = internal::scanned_range_counts();
  for (const Segment& seg : r.segments) {
    if (seg.begin >= lint_end) continue;
    if (seg.source == "template") continue;  // markup is the model's, not the application's
    const std::string_view text = std::string_view(r.text).substr(seg.begin, seg.end - seg.begin);
    const auto add = [&](const VolatileHit& span) {
      FindingSeen f{.hit = span,
                    .severity = span.severity,
                    .field = seg.source,
                    .excerpt = text.substr(span.begin, span.end - span.begin),
                    .prompt_begin = seg.begin + span.begin,
                    .prompt_end = seg.begin + span.end};
      f.in_volatile_tail = f.prompt_begin >= r.volatile_tail_begin;
      if (f.in_volatile_tail) f.severity = std::min(span.severity, Severity::kInfo);
      f.before_breakpoint = f.prompt_begin < declared;
      if (f.before_breakpoint) f.severity = Severity::kError;
      f.token_offset = prompt.token_at_byte(f.prompt_begin);
      if (f.severity >= Severity::kWarning) first_break = std::min(first_break, f.prompt_begin);
      seen(f);
    };
    if (const ScannedRange* range =
            kept != nullptr ? find_range(*kept, seg.begin, seg.end) : nullptr) {
      ++counts.looked_up;
      for (const VolatileHit& span : range->spans) add(span);
      continue;
    }
    // The scanner's own candidates (its thread's memo), not find_volatile's copies of them.
    const std::vector<volatile_detail::Candidate>& found = volatile_detail::scan(text);
    ++counts.scanned;
    if (kept != nullptr) keep_range(*kept, seg.begin, seg.end, found);
    for (const volatile_detail::Candidate& c : found) add(c);
  }
  return first_break >= r.text.size() ? prompt.tokens.size() : prompt.token_at_byte(first_break);
}

PromptLint lint_prompt(const AnalyzedPrompt& prompt, const LintOptions& options) {
  PromptLint out;
  out.stable_prefix_tokens = lint_prompt_each(prompt, options, [&](const FindingSeen& s) {
    Finding f;
    f.rule = s.hit.rule;
    f.severity = s.severity;
    f.kind = s.hit.kind;
    f.prompt_begin = s.prompt_begin;
    f.prompt_end = s.prompt_end;
    f.token_offset = s.token_offset;
    f.field = s.field;
    f.excerpt = s.excerpt;
    f.in_volatile_tail = s.in_volatile_tail;
    f.before_breakpoint = s.before_breakpoint;
    if (options.explain) {
      f.message = finding_message(
          VolatileSpan{s.hit.rule, s.hit.severity, s.hit.begin, s.hit.end, s.hit.kind},
          f.in_volatile_tail);
      f.hint = f.in_volatile_tail ? "none needed: the final user message is not cached as prefix"
                                  : finding_hint(f.rule);
      if (f.before_breakpoint) explain_breakpoint(f);
    }
    // A prompt with one finding usually has several (a date and a time, each message's): room
    // for them at once instead of moving each Finding's strings at every doubling.
    if (out.findings.empty()) out.findings.reserve(8);
    out.findings.push_back(std::move(f));
  });
  return out;
}

namespace {

// Where a template's strftime_now() output sits in `text` (the prompt as rendered today): it
// starts where two renderings with other dates (differing in every field) part, and ends where
// `text` and one of them join again.
std::optional<std::pair<std::size_t, std::size_t>> template_date_span(const ParsedRequest& request,
                                                                      const PromptModel& model,
                                                                      std::string_view text) {
  if (!model.chat_format.uses_strftime_now()) return std::nullopt;
  ChatRenderOptions one, other;
  one.now = jinja::CivilTime{2001, 2, 3, 4, 5, 6};
  other.now = jinja::CivilTime{2012, 11, 10, 9, 8, 7};
  auto a = model.chat_format.render(request, one);
  auto b = model.chat_format.render(request, other);
  if (!a || !b || a->text == b->text) return std::nullopt;
  const std::string_view x = a->text, y = b->text;
  const std::size_t begin = static_cast<std::size_t>(
      std::mismatch(x.begin(), x.end(), y.begin(), y.end()).first - x.begin());
  std::size_t suffix = 0;
  while (suffix < text.size() - std::min(begin, text.size()) && suffix < x.size() - begin &&
         text[text.size() - 1 - suffix] == x[x.size() - 1 - suffix]) {
    ++suffix;
  }
  const std::size_t start = std::min(begin, text.size());
  return std::pair{start, std::max(start, text.size() - suffix)};
}

}  // namespace

PromptLint lint_request(const ParsedRequest& request, const PromptModel& model,
                        const AnalyzedPrompt& prompt, const LintOptions& options) {
  PromptLint out = lint_prompt(prompt, options);
  const RenderedPrompt& r = prompt.rendered;
  const auto span = template_date_span(request, model, r.text);
  if (!span) return out;
  Finding f;
  f.rule = Rule::kDate;
  f.kind = "strftime_now";
  f.field = "chat_template";
  f.prompt_begin = span->first;
  f.prompt_end = span->second;
  f.excerpt = r.text.substr(f.prompt_begin, f.prompt_end - f.prompt_begin);
  f.in_volatile_tail = f.prompt_begin >= r.volatile_tail_begin;
  f.severity = f.in_volatile_tail ? Severity::kInfo : Severity::kError;
  f.token_offset = prompt.token_at_byte(f.prompt_begin);
  if (options.explain) {
    f.message = f.in_volatile_tail
                    ? "the model's chat template writes today's date after the cacheable prefix"
                    : "the model's chat template writes today's date (strftime_now) into the "
                      "cacheable prefix: every cached copy of this prefix is lost at midnight";
    f.hint =
        "pass the date yourself so that it changes only when you choose (for Llama 3.x "
        "templates, chat_template_kwargs {\"date_string\": ...}), or serve a template "
        "without strftime_now";
  }
  apply_breakpoint(f, declared_end(options), options.explain);
  if (!f.in_volatile_tail || f.before_breakpoint)
    out.stable_prefix_tokens = std::min(out.stable_prefix_tokens, f.token_offset);
  const auto pos = std::find_if(out.findings.begin(), out.findings.end(),
                                [&](const Finding& g) { return g.prompt_begin > f.prompt_begin; });
  out.findings.insert(pos, std::move(f));
  return out;
}

}  // namespace prefixgate::canon
