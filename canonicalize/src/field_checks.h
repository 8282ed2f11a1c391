// Field validation shared by the request parsers (request.cpp, anthropic_request.cpp,
// responses_request.cpp): JSON paths for Error::param and the errors that name them.
#pragma once

#include <charconv>
#include <cmath>
#include <string>
#include <string_view>

#include "prefixgate/base/status.h"
#include "prefixgate/canonicalize/json.h"

namespace prefixgate::canon::checks {

// Written in one allocation at most: a tool list's paths are built on every request.
inline std::string index_path(std::string_view base, std::size_t i) {
  char digits[24];
  const char* end = std::to_chars(digits, digits + sizeof digits, i).ptr;
  std::string out;
  out.reserve(base.size() + static_cast<std::size_t>(end - digits) + 2);
  out.append(base)
      .append(1, '[')
      .append(digits, static_cast<std::size_t>(end - digits))
      .append(1, ']');
  return out;
}

inline std::string field_path(std::string_view base, std::string_view field) {
  if (base.empty()) return std::string(field);
  std::string out;
  out.reserve(base.size() + 1 + field.size());
  out.append(base).append(1, '.').append(field);
  return out;
}

inline Error wrong_type(const std::string& path, std::string_view expected,
                        const json::Value& got) {
  return make_error(
      ErrorCode::kWrongType,
      "'" + path + "' must be " + std::string(expected) + ", got " + json::type_name(got.type()),
      path);
}

inline Error missing(const std::string& path) {
  return make_error(ErrorCode::kMissingField, "'" + path + "' is required", path);
}

inline Error invalid(const std::string& path, std::string_view why) {
  return make_error(ErrorCode::kInvalidValue, "'" + path + "' " + std::string(why), path);
}

inline Error unsupported(const std::string& path, std::string_view why) {
  return make_error(ErrorCode::kUnsupported, "'" + path + "' " + std::string(why), path);
}

inline bool is_integer(const json::Value& v) {
  if (!v.is_number()) return false;
  const double d = v.as_number().value;
  return std::isfinite(d) && std::floor(d) == d;
}

// A member that is absent or null reads as absent.
inline const json::Value* present(const json::Value& object, std::string_view key) {
  const json::Value* v = object.find(key);
  return v == nullptr || v->is_null() ? nullptr : v;
}

// A sampling parameter (temperature, top_p, top_k): absent, or a number (an integer when
// `integer`) within [lo, hi]. Copied into the chat equivalent's `chat` when present.
inline Status copy_number_in_range(const json::Value& body, const char* key, double lo, double hi,
                                   bool integer, json::Object& chat) {
  const json::Value* v = present(body, key);
  if (v == nullptr) return {};
  if (integer ? !is_integer(*v) : !v->is_number()) {
    return wrong_type(key, integer ? "an integer" : "a number", *v);
  }
  const double x = v->as_number().value;
  if (!(x >= lo && x <= hi)) {
    return invalid(
        key, "must be between " + json::format_number(lo) + " and " + json::format_number(hi));
  }
  chat.push_back({key, *v});
  return {};
}

// `stream`: absent (false) or a boolean; a streamed chat equivalent asks for usage in its last
// chunk, which the client's own API reports.
inline Result<bool> copy_stream_flag(const json::Value& body, json::Object& chat) {
  const json::Value* stream = present(body, "stream");
  if (stream == nullptr) return false;
  if (!stream->is_bool()) return wrong_type("stream", "a boolean", *stream);
  chat.push_back({"stream", stream->as_bool()});
  if (stream->as_bool()) chat.push_back({"stream_options", json::Object{{"include_usage", true}}});
  return stream->as_bool();
}

}  // namespace prefixgate::canon::checks
