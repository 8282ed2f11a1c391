#include "prefixgate/canonicalize/status.h"

#include "prefixgate/canonicalize/json.h"

namespace prefixgate::canon {

const char* error_code_name(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidJson: return "invalid_json";
    case ErrorCode::kInvalidUtf8: return "invalid_utf8";
    case ErrorCode::kTooDeep: return "nesting_too_deep";
    case ErrorCode::kTooLarge: return "request_too_large";
    case ErrorCode::kDuplicateKey: return "duplicate_key";
    case ErrorCode::kWrongType: return "invalid_type";
    case ErrorCode::kMissingField: return "missing_required_parameter";
    case ErrorCode::kInvalidValue: return "invalid_value";
    case ErrorCode::kUnsupported: return "unsupported_value";
    case ErrorCode::kNotFound: return "not_found";
  }
  return "invalid_request";
}

int http_status(const Error& error) {
  switch (error.code) {
    case ErrorCode::kTooLarge: return 413;
    case ErrorCode::kNotFound: return 404;
    default: return 400;
  }
}

std::string openai_error_body(const Error& error) {
  std::string out = R"({"error":{"message":)";
  json::append_quoted(error.message, out);
  out += R"(,"type":"invalid_request_error","param":)";
  if (error.param.empty()) {
    out += "null";
  } else {
    json::append_quoted(error.param, out);
  }
  out += R"(,"code":")";
  out += error_code_name(error.code);
  out += "\"}}";
  return out;
}

}  // namespace prefixgate::canon
