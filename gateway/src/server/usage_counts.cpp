#include "server/usage_counts.h"

#include <algorithm>

namespace prefixgate::gateway::server {
namespace {

// More tokens than any prompt or answer has, and exactly representable as a double.
constexpr double kMaxCount = 1e15;

// A usage object's fields that the counts come from, noted as they are met; the first of a
// repeated key counts, as Value::find gives it.
class UsageFields {
 public:
  void note(const json::FieldSeen& f) {
    if (f.object.empty()) {
      if (f.key == "prompt_tokens") set(prompt_tokens_, f);
      if (f.key == "completion_tokens") set(completion_tokens_, f);
      if (f.key == "output_tokens") set(output_tokens_, f);
      if (f.key == "input_tokens") set(input_tokens_, f);
      if (f.key == "cache_read_input_tokens") set(cache_read_, f);
      if (f.key == "cache_creation_input_tokens") set(cache_creation_, f);
      if (f.key == "prompt_tokens_details") set(prompt_details_, f);
      if (f.key == "input_tokens_details") set(input_details_, f);
    } else if (f.key == "cached_tokens") {
      // Only the first field of that name is an object whose members count.
      if (f.object == "prompt_tokens_details" && prompt_details_.is_object()) {
        set(prompt_details_cached_, f);
      }
      if (f.object == "input_tokens_details" && input_details_.is_object()) {
        set(input_details_cached_, f);
      }
    }
  }

  UsageCounts counts() const {
    UsageCounts c;
    c.prompt = prompt_tokens_.count();
    if (prompt_details_.is_object()) {
      c.cached = prompt_details_cached_.count();
    } else if (cache_read_.seen) {  // Messages: the input tokens are the uncached part
      c.cached = cache_read_.count();
      c.prompt = input_tokens_.count() + c.cached + cache_creation_.count();
    } else if (input_details_.is_object()) {  // Responses
      c.cached = input_details_cached_.count();
      c.prompt = input_tokens_.count();
    }
    c.completion = std::max(completion_tokens_.count(), output_tokens_.count());
    return c;
  }

 private:
  struct Field {
    bool seen = false;
    json::Type type = json::Type::kNull;
    double number = 0;
    bool is_object() const { return seen && type == json::Type::kObject; }
    // A count: a positive number, whole tokens; anything else counts none. A number past any
    // real count (an upstream's garbage, 1e300) is held at kMaxCount, so converting it stays
    // defined.
    std::size_t count() const {
      if (!seen || type != json::Type::kNumber || !(number > 0)) return 0;
      return static_cast<std::size_t>(std::min(number, kMaxCount));
    }
  };
  static void set(Field& field, const json::FieldSeen& f) {
    if (field.seen) return;
    field = Field{true, f.type, f.number};
  }

  Field prompt_tokens_, completion_tokens_, output_tokens_, input_tokens_;
  Field cache_read_, cache_creation_, prompt_details_, input_details_;
  Field prompt_details_cached_, input_details_cached_;
};

json::FieldSeen seen(std::string_view object, const json::Member& m) {
  const json::Value& v = m.value;
  return json::FieldSeen{object, m.key, v.type(), v.is_number() ? v.as_number().value : 0};
}

}  // namespace

std::optional<UsageCounts> usage_counts(const json::Value& usage) {
  if (!usage.is_object()) return std::nullopt;
  UsageFields fields;
  for (const json::Member& m : usage.as_object()) {
    fields.note(seen({}, m));
    if (!m.value.is_object()) continue;
    for (const json::Member& inner : m.value.as_object()) fields.note(seen(m.key, inner));
  }
  return fields.counts();
}

std::optional<UsageCounts> answer_usage_counts(std::string_view answer) {
  UsageFields fields;
  if (!json::visit_last_member_fields(answer, "usage",
                                      [&](const json::FieldSeen& f) { fields.note(f); })) {
    return std::nullopt;
  }
  return fields.counts();
}

bool event_may_carry_usage(std::string_view event) {
  constexpr std::string_view kKey = "\"usage\"";
  const auto is_space = [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; };
  for (std::size_t brace = event.find('{'); brace != std::string_view::npos;
       brace = event.find('{', brace + 1)) {
    std::size_t at = brace;
    while (at > 0 && is_space(event[at - 1])) --at;
    if (at == 0 || event[at - 1] != ':') continue;
    --at;
    while (at > 0 && is_space(event[at - 1])) --at;
    if (at >= kKey.size() && event.substr(at - kKey.size(), kKey.size()) == kKey) return true;
  }
  return false;
}

}  // namespace prefixgate::gateway::server
