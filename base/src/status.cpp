#include "prefixgate/base/status.h"

namespace prefixgate {

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
    case ErrorCode::kResourceExhausted: return "rate_limit_exceeded";
    case ErrorCode::kUnavailable: return "service_unavailable";
    case ErrorCode::kInternal: return "internal_error";
  }
  return "invalid_request";
}

int http_status(const Error& error) {
  switch (error.code) {
    case ErrorCode::kTooLarge: return 413;
    case ErrorCode::kNotFound: return 404;
    case ErrorCode::kResourceExhausted: return 429;
    case ErrorCode::kUnavailable: return 503;
    case ErrorCode::kInternal: return 500;
    default: return 400;
  }
}

bool is_client_error(ErrorCode code) {
  switch (code) {
    case ErrorCode::kResourceExhausted:
    case ErrorCode::kUnavailable:
    case ErrorCode::kInternal: return false;
    default: return true;
  }
}

}  // namespace prefixgate
