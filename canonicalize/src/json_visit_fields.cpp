// json::visit_member_fields: the fields of one root member, and of the objects directly in it,
// read with simdjson On Demand without building a tree (what reading an answer's usage takes).
#include <simdjson.h>

#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "json_parse_text.h"
#include "prefixgate/canonicalize/json.h"

namespace prefixgate::json {
namespace {

namespace ondemand = simdjson::ondemand;
using namespace parse_text_detail;

// What a field's value is for visit_member_fields, its number read when it is one; false for a
// value the walk cannot go on from.
bool describe_field(ondemand::value& value, FieldSeen& seen) {
  ondemand::json_type type;
  if (value.type().get(type)) return false;
  seen.number = 0;
  switch (type) {
    case ondemand::json_type::array: seen.type = Type::kArray; return true;
    case ondemand::json_type::object: seen.type = Type::kObject; return true;
    case ondemand::json_type::string: {
      seen.type = Type::kString;
      std::string_view text;
      return !value.get_string().get(text);  // unescaped, so that a bad escape is an error
    }
    case ondemand::json_type::boolean:
    case ondemand::json_type::null: {
      const std::optional<Value> literal =
          read_literal(trim_trailing_whitespace(value.raw_json_token()));
      if (!literal) return false;
      seen.type = literal->type();
      return true;
    }
    case ondemand::json_type::number: {
      seen.type = Type::kNumber;
      return read_number(trim_trailing_whitespace(value.raw_json_token()), seen.number) ==
             NumberRead::kOk;
    }
  }
  return false;
}

// The fields of `object`, and of the objects directly inside it; `outer` names the field whose
// value `object` is below the member (empty for the member itself).
bool visit_fields(ondemand::object& object, std::string_view outer, bool descend,
                  const std::function<void(const FieldSeen&)>& visit) {
  for (auto result : object) {
    ondemand::field field;
    std::string_view name;
    if (std::move(result).get(field) || field.unescaped_key().get(name)) return false;
    ondemand::value& value = field.value();
    FieldSeen seen{outer, name, Type::kNull, 0};
    if (!describe_field(value, seen)) return false;
    visit(seen);
    if (descend && seen.type == Type::kObject) {
      ondemand::object inner;
      if (value.get_object().get(inner) || !visit_fields(inner, name, false, visit)) return false;
    }
  }
  return true;
}

}  // namespace

bool visit_member_fields(std::string_view text, std::string_view key,
                         const std::function<void(const FieldSeen&)>& visit,
                         const ParseLimits& limits) {
  if (text.size() > limits.max_bytes) return false;
  // As parse(): the thread's parser and padded buffer for usual sizes, its own for a larger text
  // (so that one huge answer does not keep its memory for the thread's life).
  const bool usual = text.size() <= kReusableParserBytes;
  thread_local ondemand::parser reused;
  thread_local std::string buffer;
  std::optional<ondemand::parser> once;
  std::optional<simdjson::padded_string> own;
  if (!usual && own.emplace(text).data() == nullptr) return false;
  const simdjson::padded_string_view padded =
      usual ? padded_in(buffer, text) : simdjson::padded_string_view(*own);
  ondemand::parser& parser = usual ? reused : once.emplace();
  ondemand::document doc;
  ondemand::object root;
  if (parser.iterate(padded).get(doc) || doc.get_object().get(root)) return false;
  for (auto result : root) {
    ondemand::field field;
    std::string_view name;
    if (std::move(result).get(field) || field.unescaped_key().get(name)) return false;
    if (name != key) continue;  // the loop skips the value
    ondemand::object member;
    if (field.value().get_object().get(member)) return false;
    return visit_fields(member, {}, true, visit);
  }
  return false;
}

}  // namespace prefixgate::json
