// Typed errors: what went wrong, whose fault it is, and the HTTP status it becomes.
//
// No module throws across its boundary. A function that can fail returns Result<T> (a value or
// an Error) or Status (nothing or an Error). The code says whose fault it was: the client's
// (bad JSON, a wrong type, too large: 4xx) or ours (a device failure, an upstream that is down,
// a full queue: 5xx and 429), so a GPU failure never reaches a client as "400 bad request".
// The servers turn an Error into an API-shaped body (serving/errors.h).
//
//   Result<json::Value> doc = json::parse(body);
//   if (!doc) return reply(http_status(doc.error()), openai_error_body(doc.error()));
//   use(*doc);
//
//   if (!weights) return make_error(ErrorCode::kInternal, "cannot read weights: " + why);
#pragma once

#include <string>
#include <utility>
#include <variant>

#include "prefixgate/base/check.h"

namespace prefixgate {

enum class ErrorCode {
  // The client's fault (4xx).
  kInvalidJson,   // not JSON at all, or trailing garbage
  kInvalidUtf8,   // bytes that are not UTF-8, or a lone surrogate escape
  kTooDeep,       // nesting deeper than the configured limit
  kTooLarge,      // body larger than the configured limit (413)
  kDuplicateKey,  // an object names the same key twice
  kWrongType,     // a known field has the wrong JSON type
  kMissingField,  // a required field is absent
  kInvalidValue,  // right type, unacceptable value (unknown role, NaN, ...)
  kUnsupported,   // well-formed but not something we implement
  kNotFound,      // a named resource (template, tokenizer, model) does not exist (404)
  // Not the client's fault.
  kResourceExhausted,  // a limit or a queue is full; retrying later may succeed (429)
  kUnavailable,        // a dependency (replica, device) cannot serve now (503)
  kInternal,           // our failure: a device error, unreadable weights, a broken promise (500)
};

struct Error {
  ErrorCode code;
  std::string message;  // for a person: what is wrong and, where it helps, how to fix it
  std::string param;    // JSON path of the offending field ("messages[2].content"), or empty
};

// The machine-readable code string of an API error body ("invalid_json", "internal_error", ...).
const char* error_code_name(ErrorCode code);

// 400 for what a client sent, 404 kNotFound, 413 kTooLarge, 429 kResourceExhausted,
// 503 kUnavailable, 500 kInternal.
int http_status(const Error& error);

// True for the codes that are the client's fault (4xx but 429).
bool is_client_error(ErrorCode code);

// Either a T or an Error. A small stand-in for C++23 std::expected.
template <class T>
class [[nodiscard]] Result {
 public:
  // A value is moved in once (taken by value, it would be moved twice: a prepared request is
  // a few hundred bytes of members).
  Result(T&& value) : state_(std::in_place_index<0>, std::move(value)) {}    // NOLINT
  Result(const T& value) : state_(std::in_place_index<0>, value) {}          // NOLINT
  Result(Error error) : state_(std::in_place_index<1>, std::move(error)) {}  // NOLINT

  bool ok() const { return state_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & {
    PG_DCHECK(ok(), "value() of an error Result");
    return std::get<0>(state_);
  }
  const T& value() const& {
    PG_DCHECK(ok(), "value() of an error Result");
    return std::get<0>(state_);
  }
  T&& value() && {
    PG_DCHECK(ok(), "value() of an error Result");
    return std::get<0>(std::move(state_));
  }
  const Error& error() const {
    PG_DCHECK(!ok(), "error() of an ok Result");
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
    PG_DCHECK(!ok_, "error() of an ok Status");
    return error_;
  }

 private:
  Error error_{ErrorCode::kInvalidValue, {}, {}};
  bool ok_ = true;
};

inline Error make_error(ErrorCode code, std::string message, std::string param = {}) {
  return Error{code, std::move(message), std::move(param)};
}

}  // namespace prefixgate
