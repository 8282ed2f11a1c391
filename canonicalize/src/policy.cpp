#include "prefixgate/canonicalize/policy.h"

#include <algorithm>

#include "prefixgate/canonicalize/volatile.h"

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

// Applies `fn` to every string of a message's text: the content string or each text part.
template <class Fn>
void for_each_text(Value& message, Fn&& fn) {
  Value* content = message.find("content");
  if (content == nullptr) return;
  if (content->is_string()) {
    fn(content->as_string(), std::string("content"));
    return;
  }
  if (!content->is_array()) return;
  json::Array& parts = content->as_array();
  for (std::size_t i = 0; i < parts.size(); ++i) {
    Value* type = parts[i].find("type");
    Value* text = parts[i].find("text");
    if (type != nullptr && type->is_string() && type->as_string() == "text" && text != nullptr &&
        text->is_string()) {
      fn(text->as_string(), "content[" + std::to_string(i) + "].text");
    }
  }
}

// Rounds timestamps in every "description" string of a tool definition, however deep (JSON
// schemas put descriptions on each parameter).
std::size_t round_descriptions(Value& v, std::chrono::seconds granularity) {
  std::size_t n = 0;
  if (v.is_object()) {
    for (json::Member& m : v.as_object()) {
      if (m.key == "description" && m.value.is_string()) {
        TimestampRounding r = round_timestamps(m.value.as_string(), granularity);
        if (r.rewritten > 0) {
          m.value.as_string() = std::move(r.text);
          n += r.rewritten;
        }
      } else {
        n += round_descriptions(m.value, granularity);
      }
    }
  } else if (v.is_array()) {
    for (Value& item : v.as_array()) n += round_descriptions(item, granularity);
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

void canonicalize_tool_list(Value& body, std::string_view key, const CanonicalizationPolicy& policy,
                            std::vector<Change>& changes) {
  Value* list = body.find(key);
  if (list == nullptr || !list->is_array()) return;
  json::Array& tools = list->as_array();
  if (policy.tool_json) {
    std::size_t rewritten = 0;
    for (Value& tool : tools) {
      Value canonical = json::canonicalized(tool);
      if (json::to_json(canonical) != json::to_json(tool)) {
        tool = std::move(canonical);
        ++rewritten;
      }
    }
    if (rewritten > 0) {
      changes.push_back(Change{std::string(kRuleToolJson), std::string(key),
                               std::to_string(rewritten) + " of " + std::to_string(tools.size()) +
                                   " definitions re-serialized in RFC 8785 form"});
    }
  }
  if (policy.tool_order && tools.size() > 1) {
    // Stable: tools without a name (custom tool types) keep their relative order, last.
    const auto less = [](const Value& a, const Value& b) {
      const std::string* na = tool_name(a);
      const std::string* nb = tool_name(b);
      if (na == nullptr || nb == nullptr) return na != nullptr && nb == nullptr;
      return *na < *nb;
    };
    if (!std::is_sorted(tools.begin(), tools.end(), less)) {
      std::stable_sort(tools.begin(), tools.end(), less);
      changes.push_back(Change{std::string(kRuleToolOrder), std::string(key),
                               std::to_string(tools.size()) + " tools sorted by name"});
    }
  }
  if (policy.timestamp) {
    std::size_t rounded = 0;
    for (Value& tool : tools) rounded += round_descriptions(tool, policy.timestamp_granularity);
    if (rounded > 0) {
      changes.push_back(Change{std::string(kRuleTimestamp), std::string(key),
                               std::to_string(rounded) + " timestamps in descriptions rounded to " +
                                   granularity_text(policy.timestamp_granularity)});
    }
  }
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
  Value& body = out.body;

  canonicalize_tool_list(body, "tools", policy, out.changes);
  canonicalize_tool_list(body, "functions", policy, out.changes);

  if (policy.response_format) {
    if (Value* rf = body.find("response_format"); rf != nullptr && rf->is_object()) {
      if (Value* schema = rf->find("json_schema"); schema != nullptr) {
        Value canonical = json::canonicalized(*schema);
        if (json::to_json(canonical) != json::to_json(*schema)) {
          *schema = std::move(canonical);
          out.changes.push_back(Change{std::string(kRuleResponseFormat),
                                       "response_format.json_schema",
                                       "schema re-serialized in RFC 8785 form"});
        }
      }
    }
  }

  Value* messages = body.find("messages");
  if (messages != nullptr && messages->is_array()) {
    json::Array& list = messages->as_array();
    for (std::size_t i = 0; i < list.size() && i < request.messages.size(); ++i) {
      const std::string base = "messages[" + std::to_string(i) + "].";
      const Role role = request.messages[i].role;
      if (policy.timestamp && (role == Role::kSystem || role == Role::kDeveloper)) {
        for_each_text(list[i], [&](std::string& text, const std::string& field) {
          TimestampRounding r = round_timestamps(text, policy.timestamp_granularity);
          if (r.rewritten == 0) return;
          text = std::move(r.text);
          out.changes.push_back(Change{std::string(kRuleTimestamp), base + field,
                                       std::to_string(r.rewritten) + " timestamps rounded to " +
                                           granularity_text(policy.timestamp_granularity)});
        });
      }
      if (policy.whitespace) {
        for_each_text(list[i], [&](std::string& text, const std::string& field) {
          bool changed = false;
          std::string normalized = normalize_whitespace(text, changed);
          if (!changed) return;
          text = std::move(normalized);
          out.changes.push_back(Change{std::string(kRuleWhitespace), base + field,
                                       "line endings and trailing whitespace normalized"});
        });
      }
    }
  }
  return out;
}

}  // namespace prefixgate::canon
