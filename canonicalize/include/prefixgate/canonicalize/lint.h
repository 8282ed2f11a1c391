// Prefix lint: the volatile content inside a prompt's cacheable prefix, with where it sits
// (field, byte, token) and what it costs. Used by `prefixlint check` and by the gateway's live
// findings.
//
//   canon::PromptLint lint = canon::lint_prompt(analyzed);
//   for (const canon::Finding& f : lint.findings) ...   // f.field == "messages[0].content"
//   lint.stable_prefix_tokens;                          // tokens before the first break
//
// Policy: content in the volatile tail (the final user message) is expected to change, so its
// findings are reported at `info` at most. Template markup is never scanned. A client that marks
// cache breakpoints (Anthropic's cache_control; LintOptions::breakpoints) declares the prompt up
// to the last one stable: anything volatile before it, in the tail or not, is an error.
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "prefixgate/canonicalize/prompt.h"
#include "prefixgate/canonicalize/volatile.h"

namespace prefixgate::canon {

struct Finding {
  Rule rule;
  Severity severity;
  std::string kind;              // detector kind, see VolatileSpan::kind
  std::size_t prompt_begin = 0;  // byte range in the rendered prompt
  std::size_t prompt_end = 0;
  std::size_t token_offset = 0;  // first token of the match in the prompt's token stream
  std::string field;             // "messages[0].content", "tools[2]", "prompt"
  std::string excerpt;           // the matched text
  bool in_volatile_tail = false;
  bool before_breakpoint = false;  // inside the prefix the client declared stable
  std::string message;             // what is wrong, for a person
  std::string hint;                // how to fix it
};

struct PromptLint {
  std::vector<Finding> findings;  // in prompt order
  // Tokens before the first finding at warning or above, or before the volatile tail when that
  // comes first: the part of the prompt that can be served from cache request after request.
  std::size_t stable_prefix_tokens = 0;
};

struct LintOptions {
  // Write each finding's message and hint (for people). A gateway that only counts findings
  // per rule turns this off and saves two strings per finding per request.
  bool explain = true;
  // Byte offsets in the rendered prompt where the client's cache breakpoints end
  // (chat_conversion.h's breakpoint_bytes()); the last one bounds the declared-stable prefix.
  std::vector<std::size_t> breakpoints = {};
  // Look into the volatile tail too (the final user message, past any declared breakpoint):
  // what is found there is for information only, as the tail is never served from cache. A
  // gateway that counts what breaks prefixes leaves it out: every request brings a new tail, and
  // scanning it cost more than linting the rest of the prompt, whose texts repeat.
  bool volatile_tail = true;
};

PromptLint lint_prompt(const AnalyzedPrompt& prompt, const LintOptions& options = {});

// A finding as lint_prompt() makes it, less the strings only a person reads (its message and
// hint): its field and excerpt are views of the prompt's segments and text, valid while the
// visitor runs.
struct FindingSeen {
  const VolatileHit& hit;  // as the scanner found it: rule, kind, its severity, bytes in the field
  Severity severity;       // after the volatile tail's and the breakpoints' rules
  std::string_view field;  // "messages[0].content"
  std::string_view excerpt;
  std::size_t prompt_begin = 0;  // byte range in the rendered prompt
  std::size_t prompt_end = 0;
  std::size_t token_offset = 0;
  bool in_volatile_tail = false;
  bool before_breakpoint = false;
};
// lint_prompt()'s findings handed to `seen` one at a time, in prompt order, instead of kept;
// returns the stable_prefix_tokens. For a caller that counts findings on every request (the
// gateway): a Finding's five strings, made, moved and freed, cost more than it uses of them.
std::size_t lint_prompt_each(const AnalyzedPrompt& prompt, const LintOptions& options,
                             const std::function<void(const FindingSeen&)>& seen);

// lint_prompt(), plus what the model's chat template itself puts into the prompt: a template
// that writes today's date (strftime_now()) breaks every cached prefix daily. That finding
// (rule volatile-date, kind "strftime_now", field "chat_template", error) sits where the date
// starts, found by rendering the request with two other dates; there is none when the template
// does not call strftime_now() or this request sets the date itself (the Llama 3.x templates'
// date_string in chat_template_kwargs).
PromptLint lint_request(const ParsedRequest& request, const PromptModel& model,
                        const AnalyzedPrompt& prompt, const LintOptions& options = {});

// The finding's message and hint as lint_prompt writes them, for a span found elsewhere.
std::string finding_message(const VolatileSpan& span, bool in_volatile_tail);
std::string finding_hint(Rule rule);

}  // namespace prefixgate::canon
