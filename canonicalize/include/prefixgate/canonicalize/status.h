// Typed errors for bad input, and the OpenAI-shaped error body they become over HTTP.
//
// canonicalize/ never throws across its boundary: a function that can fail on what a client
// sent returns Result<T>, which holds either a value or an Error. The gateway and the engine
// turn an Error into `{"error":{"message","type","param","code"}}` with http_status(error).
//
//   Result<json::Value> doc = json::parse(body);
//   if (!doc) return reply(http_status(doc.error()), openai_error_body(doc.error()));
//   use(*doc);
#pragma once

#include <cassert>
#include <string>
#include <utility>
#include <variant>

namespace prefixgate::canon {

enum class ErrorCode {
  kInvalidJson,   // not JSON at all, or trailing garbage
  kInvalidUtf8,   // bytes that are not UTF-8, or a lone surrogate escape
  kTooDeep,       // nesting deeper than the configured limit
  kTooLarge,      // body larger than the configured limit (HTTP 413)
  kDuplicateKey,  // an object names the same key twice
  kWrongType,     // a known field has the wrong JSON type
  kMissingField,  // a required field is absent
  kInvalidValue,  // right type, unacceptable value (unknown role, NaN, ...)
  kUnsupported,   // well-formed but not something we implement
  kNotFound,      // a named resource (template, tokenizer) does not exist
};

struct Error {
  ErrorCode code;
  std::string message;  // for a person: what is wrong and, where it helps, how to fix it
  std::string param;    // JSON path of the offending field ("messages[2].content"), or empty
};

// The machine-readable code string of the OpenAI error body ("invalid_json", ...).
const char* error_code_name(ErrorCode code);

// 413 for kTooLarge, 404 for kNotFound, 400 for everything else a client can send.
int http_status(const Error& error);

// `{"error":{"message":...,"type":"invalid_request_error","param":...|null,"code":...}}`
std::string openai_error_body(const Error& error);

// Either a T or an Error. A small stand-in for C++23 std::expected.
template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : state_(std::in_place_index<0>, std::move(value)) {}      // NOLINT
  Result(Error error) : state_(std::in_place_index<1>, std::move(error)) {}  // NOLINT

  bool ok() const { return state_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & {
    assert(ok());
    return std::get<0>(state_);
  }
  const T& value() const& {
    assert(ok());
    return std::get<0>(state_);
  }
  T&& value() && {
    assert(ok());
    return std::get<0>(std::move(state_));
  }
  const Error& error() const {
    assert(!ok());
    return std::get<1>(state_);
  }

  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  std::variant<T, Error> state_;
};

// Result<void>: success or an Error.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Error error) : error_(std::move(error)), ok_(false) {}  // NOLINT
  bool ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
  const Error& error() const {
    assert(!ok_);
    return error_;
  }

 private:
  Error error_{ErrorCode::kInvalidValue, {}, {}};
  bool ok_ = true;
};

inline Error make_error(ErrorCode code, std::string message, std::string param = {}) {
  return Error{code, std::move(message), std::move(param)};
}

}  // namespace prefixgate::canon
