// Errors as API clients expect them, with the HTTP status of the Error's code: the OpenAI error
// body `{"error":{"message","type","param","code"}}`, or, on Anthropic's Messages API
// (/v1/messages and the paths under it), Anthropic's `{"type":"error","error":{"type",
// "message"}}`. error_response() picks the shape from the request's path, so every error a
// server answers on /v1/messages is Anthropic-shaped, its own refusals included.
//
//   if (!plan) co_return co_await write_response(c, error_response(req, plan.error(), keep));
#pragma once

#include <string>
#include <string_view>

#include "prefixgate/base/status.h"
#include "prefixgate/serving/http.h"

namespace prefixgate::serving {

// OpenAI's error `type` for an HTTP status: "authentication_error" (401), "rate_limit_error"
// (429), "server_error" (5xx), "invalid_request_error" (other 4xx).
const char* openai_error_type(int status);

// `{"error":{"message":...,"type":...,"param":...|null,"code":...}}`.
std::string openai_error_body(int status, std::string_view message, std::string_view code,
                              std::string_view param = {});
std::string openai_error_body(const Error& error);

enum class ErrorShape { kOpenAi, kAnthropic };
// kAnthropic for /v1/messages and the paths under it (a query string is ignored).
ErrorShape error_shape_for(std::string_view target);
// The body of `shape` for a status, message, machine-readable code and offending field
// (Anthropic's body has no place for the last two).
std::string error_body(ErrorShape shape, int status, std::string_view message,
                       std::string_view code, std::string_view param = {});

// The Error's status and body, shaped for the request's path.
Response error_response(const Request& req, const Error& error, bool keep_alive);
// A status and message of the server's own (405, 401, 503 ...), with a machine-readable code.
Response error_response(const Request& req, http::status status, std::string_view message,
                        std::string_view code, bool keep_alive);

}  // namespace prefixgate::serving
