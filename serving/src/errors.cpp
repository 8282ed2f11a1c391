#include "prefixgate/serving/errors.h"

#include "prefixgate/canonicalize/anthropic_reply.h"
#include "prefixgate/canonicalize/json.h"

namespace prefixgate::serving {

const char* openai_error_type(int status) {
  if (status == 401) return "authentication_error";
  if (status == 429) return "rate_limit_error";
  if (status >= 500) return "server_error";
  return "invalid_request_error";
}

std::string openai_error_body(int status, std::string_view message, std::string_view code,
                              std::string_view param) {
  std::string out = R"({"error":{"message":)";
  json::append_quoted(message, out);
  out += R"(,"type":")";
  out += openai_error_type(status);
  out += R"(","param":)";
  if (param.empty()) {
    out += "null";
  } else {
    json::append_quoted(param, out);
  }
  out += R"(,"code":)";
  json::append_quoted(code, out);
  out += "}}";
  return out;
}

std::string openai_error_body(const Error& error) {
  return openai_error_body(http_status(error), error.message, error_code_name(error.code),
                           error.param);
}

ErrorShape error_shape_for(std::string_view target) {
  const std::string_view path = path_of(target);
  constexpr std::string_view kMessages = "/v1/messages";
  if (!path.starts_with(kMessages)) return ErrorShape::kOpenAi;
  return path.size() == kMessages.size() || path[kMessages.size()] == '/' ? ErrorShape::kAnthropic
                                                                          : ErrorShape::kOpenAi;
}

std::string error_body(ErrorShape shape, int status, std::string_view message,
                       std::string_view code, std::string_view param) {
  if (shape == ErrorShape::kAnthropic) return canon::messages_error_body(status, message);
  return openai_error_body(status, message, code, param);
}

Response error_response(const Request& req, const Error& error, bool keep_alive) {
  const int status = http_status(error);
  return make_response(req, static_cast<http::status>(status), "application/json",
                       error_body(error_shape_for(req.target()), status, error.message,
                                  error_code_name(error.code), error.param),
                       keep_alive);
}

Response error_response(const Request& req, http::status status, std::string_view message,
                        std::string_view code, bool keep_alive) {
  const int s = static_cast<int>(status);
  return make_response(req, status, "application/json",
                       error_body(error_shape_for(req.target()), s, message, code), keep_alive);
}

}  // namespace prefixgate::serving
