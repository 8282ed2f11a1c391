#include "prefixgate/canonicalize/policy.h"

#include <algorithm>
#include <memory>

#include "field_checks.h"
#include "prefixgate/canonicalize/volatile.h"
#include "shared_tree_memo.h"
#include "tool_list_memo.h"

namespace prefixgate::canon {
namespace {

using json::Value;

std::string granularity_text(std::chrono::seconds g) {
  const auto s = g.count();
  if (s % 86400 == 0) return std::to_string(s / 86400) + "d";
  if (s % 3600 == 0) return std::to_string(s / 3600) + "h";
  if (s % 60 == 0) return std::to_string(s / 60) + "m";
  return std::to_string(s) + "s";
}

// What the timestamp rule reports for a field: "2 timestamps rounded to 1h".
std::string timestamps_detail(std::size_t count, std::chrono::seconds granularity) {
  return std::to_string(count) + " timestamps rounded to " + granularity_text(granularity);
}

// The text of a message's text part `part` (the content string is part 0): null when there is
// none.
const Value* text_of(const Value& message, std::size_t part, bool content_is_string) {
  const Value* content = message.find("content");
  if (content == nullptr) return nullptr;
  if (content_is_string) return content->is_string() ? content : nullptr;
  if (!content->is_array() || part >= content->as_array().size()) return nullptr;
  const Value& p = content->as_array()[part];
  const Value* type = p.find("type");
  const Value* text = p.find("text");
  if (type == nullptr || !type->is_string() || type->as_string() != "text" || text == nullptr ||
      !text->is_string()) {
    return nullptr;
  }
  return text;
}

// Applies `fn(text, field, part, set)` to every string of a message's text: the content string
// (part 0) or each text part (its index in `content`, which is its index in Message::parts).
// The message is read, not written: a message the parser took from the thread's memo is shared
// with every request that sent it (json_element_memo.h), and only `set(new_text)`, which
// returns the stored text, gives it a copy of its own. `text` is not to be read after `set`.
template <class Fn>
void for_each_text(Value& message, Fn&& fn) {
  const Value& view = message;
  const Value* content = view.find("content");
  if (content == nullptr) return;
  const bool is_string = content->is_string();
  if (!is_string && !content->is_array()) return;
  const std::size_t parts = is_string ? 1 : content->as_array().size();
  for (std::size_t i = 0; i < parts; ++i) {
    // Found again each time: a `set` before may have replaced the tree it lay in.
    const Value* text = text_of(view, i, is_string);
    if (text == nullptr) continue;
    const auto set = [&message, i, is_string](std::string replacement) -> const std::string& {
      Value* own = message.find("content");
      std::string& stored =
          is_string ? own->as_string() : own->as_array()[i].find("text")->as_string();
      stored = std::move(replacement);
      return stored;
    };
    fn(text->as_string(),
       is_string ? std::string("content") : "content[" + std::to_string(i) + "].text", i, set);
  }
}

// A text field of a message and the timestamps in it that rounding would change.
struct ObservedTimestamps {
  std::string field;  // "content", "content[2].text"
  std::size_t count = 0;
};
struct TimestampsSeen {
  std::chrono::seconds granularity{0};
  std::vector<ObservedTimestamps> fields;  // those with a count
};

// The timestamp rule in observe mode: `report(field)` for each text field of `message` with
// timestamps to round. What a message the parser shares held is looked up by its tree (a system
// prompt sent with every request is scanned once, not on each), as SharedTreeMemo keeps it: at
// most 1,024 messages and 4 MiB a thread.
template <class Report>
void observe_timestamps(Value& message, std::chrono::seconds granularity, Report&& report) {
  thread_local internal::SharedTreeMemo<TimestampsSeen> memo(1024, std::size_t{4} << 20);
  if (const TimestampsSeen* seen = memo.find(message);
      seen != nullptr && seen->granularity == granularity) {
    for (const ObservedTimestamps& o : seen->fields) report(o);
    return;
  }
  TimestampsSeen seen{granularity, {}};
  for_each_text(message,
                [&](const std::string& text, const std::string& field, std::size_t, const auto&) {
                  // Only the count; the rounded text would be thrown away.
                  const std::size_t count = count_timestamps_to_round(text, granularity);
                  if (count != 0) seen.fields.push_back({field, count});
                });
  for (const ObservedTimestamps& o : seen.fields) report(o);
  std::size_t bytes = seen.fields.capacity() * sizeof(ObservedTimestamps);
  for (const ObservedTimestamps& o : seen.fields) bytes += o.field.capacity();
  memo.keep(message, std::move(seen), bytes);
}

// The parsed fields an in-place pass keeps consistent with the body it rewrites.
struct Derived {
  std::vector<Message>* messages = nullptr;
  std::vector<ToolDef>* tools = nullptr;
  // The client's bytes of each top-level member, when known: tool lists then go through the
  // thread's memo, and their text is kept in `tool_texts`.
  std::span<const json::SourceMember> source = {};
  std::vector<std::shared_ptr<const ToolListText>>* tool_texts = nullptr;
  SourceShape shape = SourceShape::kChat;  // whose members `source` holds
};

// Message::parts[part] after its text was rewritten in `message` (the body's JSON).
void refresh_part(Message& parsed, const Value& message, std::size_t part,
                  const std::string& text) {
  if (part >= parsed.parts.size()) return;
  ContentPart& p = parsed.parts[part];
  p.text = text;
  if (parsed.content_is_string) return;  // value stays null, see ContentPart
  const Value* content = message.find("content");
  if (content != nullptr && content->is_array() && part < content->as_array().size()) {
    p.value = content->as_array()[part];
  }
}

// What each rule does in one pass: nothing, report, or rewrite.
enum class Mode { kOff, kObserve, kRewrite };

struct Modes {
  Mode tool_json, tool_order, response_format, timestamp, whitespace;
  std::chrono::seconds timestamp_granularity;
};

Mode mode_of(bool rewrite, bool observe) {
  return rewrite ? Mode::kRewrite : observe ? Mode::kObserve : Mode::kOff;
}

Modes modes_of(const CanonicalizationPolicy& rewrite, const CanonicalizationPolicy& observe) {
  return Modes{mode_of(rewrite.tool_json, observe.tool_json),
               mode_of(rewrite.tool_order, observe.tool_order),
               mode_of(rewrite.response_format, observe.response_format),
               mode_of(rewrite.timestamp, observe.timestamp),
               mode_of(rewrite.whitespace, observe.whitespace),
               rewrite.timestamp ? rewrite.timestamp_granularity : observe.timestamp_granularity};
}

void report(std::vector<Change>& changes, Mode mode, std::string_view rule, std::string path,
            std::string detail) {
  changes.push_back(
      Change{std::string(rule), std::move(path), std::move(detail), mode == Mode::kRewrite});
}

// Rounds (or, observing, counts) timestamps in every "description" string of a tool
// definition, however deep (JSON schemas put descriptions on each parameter).
std::size_t round_descriptions(Value& v, std::chrono::seconds granularity, Mode mode) {
  std::size_t n = 0;
  if (v.is_object()) {
    for (json::Member& m : v.as_object()) {
      if (m.key == "description" && m.value.is_string()) {
        if (mode != Mode::kRewrite) {
          n += count_timestamps_to_round(m.value.as_string(), granularity);
          continue;
        }
        TimestampRounding r = round_timestamps(m.value.as_string(), granularity);
        if (r.rewritten > 0) {
          m.value.as_string() = std::move(r.text);
          n += r.rewritten;
        }
      } else {
        n += round_descriptions(m.value, granularity, mode);
      }
    }
  } else if (v.is_array()) {
    for (Value& item : v.as_array()) n += round_descriptions(item, granularity, mode);
  }
  return n;
}

std::string normalize_whitespace(std::string_view s, bool& changed) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '\r' && i + 1 < s.size() && s[i + 1] == '\n') continue;  // CRLF -> LF
    if (c == '\n') {
      while (!out.empty() && (out.back() == ' ' || out.back() == '\t')) out.pop_back();
    }
    out.push_back(c);
  }
  while (!out.empty() && (out.back() == ' ' || out.back() == '\t')) out.pop_back();
  changed = out != s;
  return out;
}

const std::string* tool_name(const Value& tool) {
  const Value* fn = tool.find("function");
  const Value* name = (fn != nullptr ? fn : &tool)->find("name");
  return name != nullptr && name->is_string() ? &name->as_string() : nullptr;
}

// Returns whether the list's order was rewritten.
bool canonicalize_tool_list(Value& body, std::string_view key, const Modes& modes,
                            std::vector<Change>& changes) {
  Value* list = body.find(key);
  if (list == nullptr || !list->is_array()) return false;
  json::Array& tools = list->as_array();
  bool reordered = false;
  if (modes.tool_json != Mode::kOff) {
    std::size_t rewritten = 0;
    for (Value& tool : tools) {
      if (json::is_canonical(tool)) continue;
      if (modes.tool_json == Mode::kRewrite) json::canonicalize_in_place(tool);
      ++rewritten;
    }
    if (rewritten > 0) {
      report(changes, modes.tool_json, kRuleToolJson, std::string(key),
             std::to_string(rewritten) + " of " + std::to_string(tools.size()) +
                 " definitions re-serialized in RFC 8785 form");
    }
  }
  if (modes.tool_order != Mode::kOff && tools.size() > 1) {
    // Stable: tools without a name (custom tool types) keep their relative order, last.
    const auto less = [](const Value& a, const Value& b) {
      const std::string* na = tool_name(a);
      const std::string* nb = tool_name(b);
      if (na == nullptr || nb == nullptr) return na != nullptr && nb == nullptr;
      return *na < *nb;
    };
    if (!std::is_sorted(tools.begin(), tools.end(), less)) {
      if (modes.tool_order == Mode::kRewrite) {
        std::stable_sort(tools.begin(), tools.end(), less);
        reordered = true;
      }
      report(changes, modes.tool_order, kRuleToolOrder, std::string(key),
             std::to_string(tools.size()) + " tools sorted by name");
    }
  }
  if (modes.timestamp != Mode::kOff) {
    std::size_t rounded = 0;
    for (Value& tool : tools) {
      rounded += round_descriptions(tool, modes.timestamp_granularity, modes.timestamp);
    }
    if (rounded > 0) {
      report(changes, modes.timestamp, kRuleTimestamp, std::string(key),
             std::to_string(rounded) + " timestamps in descriptions rounded to " +
                 granularity_text(modes.timestamp_granularity));
    }
  }
  return reordered;
}

// What fixes canonicalize_tool_list's result for given client bytes of list `key` in a request
// of `shape` (a converted request's list is its conversion of those bytes).
std::uint64_t rules_fingerprint(const Modes& modes, std::string_view key, SourceShape shape) {
  std::uint64_t f = static_cast<std::uint64_t>(modes.timestamp_granularity.count());
  for (Mode m : {modes.tool_json, modes.tool_order, modes.timestamp}) {
    f = f * 3 + static_cast<std::uint64_t>(m);
  }
  f = f * 2 + (key == "functions" ? 1 : 0);
  return f * 3 + static_cast<std::uint64_t>(shape);
}

std::string_view source_of(std::span<const json::SourceMember> source, std::string_view key) {
  for (const json::SourceMember& m : source) {
    if (m.key == key) return m.text;
  }
  return {};
}

// canonicalize_tool_list through the thread's memo when the list's client bytes are known: the
// same bytes under the same rules give the same list, reports and text, so a repeated list is
// copied instead of checked, sorted, scanned and serialized again.
bool canonicalize_tool_list_memoized(Value& body, std::string_view key, const Modes& modes,
                                     std::vector<Change>& changes, const Derived& derived) {
  const std::string_view source = source_of(derived.source, key);
  Value* list = body.find(key);
  if (derived.tool_texts == nullptr || source.empty() ||
      source.size() > internal::kToolListMemoMaxBytes || list == nullptr || !list->is_array()) {
    return canonicalize_tool_list(body, key, modes, changes);
  }
  internal::ToolListMemo& memo = internal::ToolListMemo::for_this_thread();
  const std::uint64_t rules = rules_fingerprint(modes, key, derived.shape);
  if (const internal::ToolListOutcome* hit = memo.find(source, rules)) {
    // Unless a rule rewrote it, the list parsed (or converted) from the same bytes is the
    // remembered one.
    if (hit->rewrote) *list = json::Value::shared(hit->list);
    changes.insert(changes.end(), hit->changes.begin(), hit->changes.end());
    derived.tool_texts->push_back(hit->text);
    return hit->reordered;
  }
  const std::size_t first = changes.size();
  internal::ToolListOutcome outcome;
  outcome.reordered = canonicalize_tool_list(body, key, modes, changes);
  outcome.changes.assign(changes.begin() + static_cast<std::ptrdiff_t>(first), changes.end());
  outcome.rewrote = std::any_of(outcome.changes.begin(), outcome.changes.end(),
                                [](const Change& c) { return c.applied; });
  if (outcome.rewrote) {
    // The body refers to the kept list too: no copy now, none on the next hit.
    outcome.list = std::make_shared<const Value>(std::move(*list));
    *list = json::Value::shared(outcome.list);
  }
  outcome.text = internal::tool_list_text_of(key, *list);
  derived.tool_texts->push_back(outcome.text);
  const bool reordered = outcome.reordered;
  memo.remember(source, rules, std::move(outcome));
  return reordered;
}

// ParsedRequest::tools for a body whose tool lists were re-ordered (names as parse_request
// takes them: function.name, or a custom tool's own name).
void rebuild_tool_defs(const Value& body, std::vector<ToolDef>& defs) {
  defs.clear();
  for (std::string_view key : {"tools", "functions"}) {
    const Value* list = body.find(key);
    if (list == nullptr || !list->is_array()) continue;
    for (std::size_t i = 0; i < list->as_array().size(); ++i) {
      const std::string* name = tool_name(list->as_array()[i]);
      defs.push_back(ToolDef{name != nullptr ? *name : std::string(), checks::index_path(key, i)});
    }
  }
}

std::vector<Change> canonicalize_body(Value& body, const std::vector<Message>& parsed,
                                      const Modes& modes, const Derived& derived) {
  std::vector<Change> changes;
  if (derived.tool_texts != nullptr) derived.tool_texts->clear();
  bool reordered = canonicalize_tool_list_memoized(body, "tools", modes, changes, derived);
  reordered =
      canonicalize_tool_list_memoized(body, "functions", modes, changes, derived) || reordered;
  if (reordered && derived.tools != nullptr) rebuild_tool_defs(body, *derived.tools);

  if (modes.response_format != Mode::kOff) {
    if (Value* rf = body.find("response_format"); rf != nullptr && rf->is_object()) {
      if (Value* schema = rf->find("json_schema");
          schema != nullptr && !json::is_canonical(*schema)) {
        if (modes.response_format == Mode::kRewrite) json::canonicalize_in_place(*schema);
        report(changes, modes.response_format, kRuleResponseFormat, "response_format.json_schema",
               "schema re-serialized in RFC 8785 form");
      }
    }
  }

  Value* messages = body.find("messages");
  if (messages == nullptr || !messages->is_array()) return changes;
  json::Array& list = messages->as_array();
  for (std::size_t i = 0; i < list.size() && i < parsed.size(); ++i) {
    // Built for a report only: most messages have nothing to report.
    const auto path = [i](const std::string& field) {
      return "messages[" + std::to_string(i) + "]." + field;
    };
    const Role role = parsed[i].role;
    if (modes.timestamp == Mode::kObserve && (role == Role::kSystem || role == Role::kDeveloper)) {
      observe_timestamps(list[i], modes.timestamp_granularity, [&](const ObservedTimestamps& o) {
        report(changes, modes.timestamp, kRuleTimestamp, path(o.field),
               timestamps_detail(o.count, modes.timestamp_granularity));
      });
    } else if (modes.timestamp == Mode::kRewrite &&
               (role == Role::kSystem || role == Role::kDeveloper)) {
      for_each_text(list[i], [&](const std::string& text, const std::string& field,
                                 std::size_t part, const auto& set) {
        TimestampRounding r = round_timestamps(text, modes.timestamp_granularity);
        const std::size_t rounded = r.rewritten;
        if (rounded == 0) return;
        const std::string& stored = set(std::move(r.text));
        if (derived.messages != nullptr)
          refresh_part((*derived.messages)[i], list[i], part, stored);
        report(changes, modes.timestamp, kRuleTimestamp, path(field),
               timestamps_detail(rounded, modes.timestamp_granularity));
      });
    }
    if (modes.whitespace != Mode::kOff) {
      for_each_text(list[i], [&](const std::string& text, const std::string& field,
                                 std::size_t part, const auto& set) {
        bool changed = false;
        std::string normalized = normalize_whitespace(text, changed);
        if (!changed) return;
        if (modes.whitespace == Mode::kRewrite) {
          const std::string& stored = set(std::move(normalized));
          if (derived.messages != nullptr)
            refresh_part((*derived.messages)[i], list[i], part, stored);
        }
        report(changes, modes.whitespace, kRuleWhitespace, path(field),
               "line endings and trailing whitespace normalized");
      });
    }
  }
  return changes;
}

}  // namespace

CanonicalizationPolicy CanonicalizationPolicy::none() {
  CanonicalizationPolicy p;
  p.tool_json = p.tool_order = p.response_format = p.timestamp = p.whitespace = false;
  return p;
}

CanonicalizeOutcome canonicalize(const ParsedRequest& request,
                                 const CanonicalizationPolicy& policy) {
  CanonicalizeOutcome out{request.body, {}};
  out.changes = canonicalize_body(out.body, request.messages,
                                  modes_of(policy, CanonicalizationPolicy::none()), Derived{});
  return out;
}

std::vector<Change> canonicalize_in_place(ParsedRequest& request,
                                          const CanonicalizationPolicy& rewrite,
                                          const CanonicalizationPolicy& observe) {
  return canonicalize_in_place(request, rewrite, observe, {});
}

std::vector<Change> canonicalize_in_place(ParsedRequest& request,
                                          const CanonicalizationPolicy& rewrite,
                                          const CanonicalizationPolicy& observe,
                                          std::span<const json::SourceMember> source,
                                          SourceShape shape) {
  return canonicalize_body(
      request.body, request.messages, modes_of(rewrite, observe),
      Derived{&request.messages, &request.tools, source, &request.tool_texts, shape});
}

}  // namespace prefixgate::canon
