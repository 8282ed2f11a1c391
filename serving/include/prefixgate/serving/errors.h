// Errors as API clients expect them: the OpenAI error body
// `{"error":{"message","type","param","code"}}` with the HTTP status of the Error's code.
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

// The Error's status and OpenAI body.
Response error_response(const Request& req, const Error& error, bool keep_alive);
// A status and message of the server's own (405, 401, 503 ...), with a machine-readable code.
Response error_response(const Request& req, http::status status, std::string_view message,
                        std::string_view code, bool keep_alive);

}  // namespace prefixgate::serving
