// Field validation shared by the request parsers (request.cpp, anthropic_request.cpp,
// responses_request.cpp): JSON paths for Error::param and the errors that name them.
#pragma once

#include <cmath>
#include <string>
#include <string_view>

#include "prefixgate/base/status.h"
#include "prefixgate/canonicalize/json.h"

namespace prefixgate::canon::checks {

inline std::string index_path(std::string_view base, std::size_t i) {
  return std::string(base) + "[" + std::to_string(i) + "]";
}

inline std::string field_path(std::string_view base, std::string_view field) {
  return base.empty() ? std::string(field) : std::string(base) + "." + std::string(field);
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

}  // namespace prefixgate::canon::checks
