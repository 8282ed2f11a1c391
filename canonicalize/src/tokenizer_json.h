// Reading tokenizer.json with simdjson's DOM, for the loader (bpe_loader.cpp) and the readers
// of its components (tokenizer_normalizer.cpp, tokenizer_pre_tokenizer.cpp,
// tokenizer_decoder.cpp). Every error names the JSON path of what it is about in Error::param
// ("pre_tokenizer.pretokenizers[1].type"), so an operator can find it in the file.
#pragma once

#include <simdjson.h>

#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "prefixgate/base/status.h"

namespace prefixgate::canon::internal {

// A value of the document and its JSON path ("" for the root).
struct Field {
  simdjson::dom::element value;
  std::string path;

  std::string child_path(std::string_view key) const {
    return path.empty() ? std::string(key) : path + "." + std::string(key);
  }
  std::string index_path(std::size_t i) const { return path + "[" + std::to_string(i) + "]"; }
};

inline Error wrong_type(const Field& f, const char* expected) {
  return make_error(ErrorCode::kWrongType, f.path + " must be " + expected, f.path);
}

// kUnsupported: the file asks for something we do not implement; `what` says what.
inline Error unsupported(const std::string& path, const std::string& what) {
  return make_error(ErrorCode::kUnsupported, path + ": " + what, path);
}

inline Error invalid(const std::string& path, const std::string& what) {
  return make_error(ErrorCode::kInvalidValue, path + ": " + what, path);
}

// obj[key], or nullopt when absent (or when obj is not an object).
inline std::optional<Field> member(const Field& obj, std::string_view key) {
  simdjson::dom::object o;
  if (obj.value.get_object().get(o) != simdjson::SUCCESS) return std::nullopt;
  simdjson::dom::element e;
  if (o.at_key(key).get(e) != simdjson::SUCCESS) return std::nullopt;
  return Field{e, obj.child_path(key)};
}

inline Result<Field> required_member(const Field& obj, std::string_view key) {
  auto f = member(obj, key);
  if (!f) {
    const std::string path = obj.child_path(key);
    return make_error(ErrorCode::kMissingField, "tokenizer.json has no " + path, path);
  }
  return *f;
}

// A string member, or nullopt when absent or null.
inline Result<std::optional<std::string_view>> optional_string(const Field& obj,
                                                               std::string_view key) {
  auto f = member(obj, key);
  if (!f || f->value.is_null()) return std::optional<std::string_view>{};
  std::string_view s;
  if (f->value.get_string().get(s) != simdjson::SUCCESS) return wrong_type(*f, "a string");
  return std::optional<std::string_view>{s};
}

inline Result<std::string_view> required_string(const Field& obj, std::string_view key) {
  auto f = required_member(obj, key);
  if (!f) return f.error();
  std::string_view s;
  if (f->value.get_string().get(s) != simdjson::SUCCESS) return wrong_type(*f, "a string");
  return s;
}

inline Result<bool> optional_bool(const Field& obj, std::string_view key, bool absent) {
  auto f = member(obj, key);
  if (!f || f->value.is_null()) return absent;
  bool b = false;
  if (f->value.get_bool().get(b) != simdjson::SUCCESS) return wrong_type(*f, "a boolean");
  return b;
}

inline Result<std::uint64_t> optional_uint(const Field& obj, std::string_view key,
                                           std::uint64_t absent) {
  auto f = member(obj, key);
  if (!f || f->value.is_null()) return absent;
  std::uint64_t v = 0;
  if (f->value.get_uint64().get(v) != simdjson::SUCCESS) {
    return wrong_type(*f, "a non-negative integer");
  }
  return v;
}

// The "type" of a component object; kWrongType when `f` is not an object.
inline Result<std::string_view> component_type(const Field& f) {
  if (!f.value.is_object()) return wrong_type(f, "an object");
  return required_string(f, "type");
}

// Refuses any key of the object that is not in `known`: an option we do not read could change
// the ids.
inline Status check_known_keys(const Field& f, std::string_view type,
                               std::initializer_list<std::string_view> known) {
  simdjson::dom::object o;
  if (f.value.get_object().get(o) != simdjson::SUCCESS) return wrong_type(f, "an object");
  for (const auto kv : o) {
    if (kv.key == "type") continue;
    bool ok = false;
    for (std::string_view k : known) ok = ok || kv.key == k;
    if (!ok) {
      return unsupported(f.child_path(kv.key), std::string(type) + " option \"" +
                                                   std::string(kv.key) + "\" is not supported");
    }
  }
  return {};
}

// A {"String": "..."} or {"Regex": "..."} pattern object.
struct PatternSpec {
  bool is_regex = false;
  std::string_view text;
  std::string path;  // of the "String" or "Regex" member
};

inline Result<PatternSpec> read_pattern(const Field& owner) {
  auto f = required_member(owner, "pattern");
  if (!f) return f.error();
  if (!f->value.is_object()) return wrong_type(*f, "an object");
  auto s = optional_string(*f, "String");
  if (!s) return s.error();
  if (*s) return PatternSpec{false, **s, f->child_path("String")};
  auto r = optional_string(*f, "Regex");
  if (!r) return r.error();
  if (*r) return PatternSpec{true, **r, f->child_path("Regex")};
  return unsupported(f->path, "a pattern must be {\"String\": ...} or {\"Regex\": ...}");
}

// Parses `json` as the value of root[key] and reads it with `reader` (a read_normalizer-like
// function of the root): for building one component from its JSON alone.
template <class Reader>
auto read_component(std::string_view key, std::string_view json, Reader reader)
    -> decltype(reader(std::declval<const Field&>())) {
  const std::string doc = "{\"" + std::string(key) + "\":" + std::string(json) + "}";
  simdjson::dom::parser parser;
  const simdjson::padded_string padded(doc);
  simdjson::dom::element root;
  if (const auto err = parser.parse(padded).get(root); err != simdjson::SUCCESS) {
    return make_error(ErrorCode::kInvalidJson,
                      std::string(key) + " is not valid JSON: " + simdjson::error_message(err));
  }
  return reader(Field{root, ""});
}

}  // namespace prefixgate::canon::internal
