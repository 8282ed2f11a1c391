#include "prefixgate/canonicalize/lint.h"

#include <algorithm>

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

PromptLint lint_prompt(const AnalyzedPrompt& prompt, const LintOptions& options) {
  PromptLint out;
  const RenderedPrompt& r = prompt.rendered;
  std::size_t first_break = r.volatile_tail_begin;
  for (const Segment& seg : r.segments) {
    if (seg.source == "template") continue;  // markup is the model's, not the application's
    const std::string_view text = std::string_view(r.text).substr(seg.begin, seg.end - seg.begin);
    for (const VolatileSpan& span : find_volatile(text)) {
      Finding f;
      f.rule = span.rule;
      f.kind = span.kind;
      f.prompt_begin = seg.begin + span.begin;
      f.prompt_end = seg.begin + span.end;
      f.in_volatile_tail = f.prompt_begin >= r.volatile_tail_begin;
      f.severity = f.in_volatile_tail ? std::min(span.severity, Severity::kInfo) : span.severity;
      f.token_offset = prompt.tokens.token_at_byte(f.prompt_begin);
      f.field = seg.source;
      f.excerpt = std::string(text.substr(span.begin, span.end - span.begin));
      if (options.explain) {
        f.message = finding_message(span, f.in_volatile_tail);
        f.hint = f.in_volatile_tail ? "none needed: the final user message is not cached as prefix"
                                    : finding_hint(span.rule);
      }
      if (f.severity >= Severity::kWarning) first_break = std::min(first_break, f.prompt_begin);
      out.findings.push_back(std::move(f));
    }
  }
  out.stable_prefix_tokens = first_break >= r.text.size()
                                 ? prompt.tokens.tokens.size()
                                 : prompt.tokens.token_at_byte(first_break);
  return out;
}

}  // namespace prefixgate::canon
