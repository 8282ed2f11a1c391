#include "sse_json_event.h"

#include <charconv>

#include "prefixgate/canonicalize/json.h"

namespace prefixgate::canon {

SseJsonEvent::SseJsonEvent(std::string& out, std::string_view type) : out_(out) {
  out_ += "event: ";
  out_.append(type);
  out_ += "\ndata: {\"type\":\"";
  out_.append(type);
  out_ += '"';
}

void SseJsonEvent::key(std::string_view key) {
  // Every member but an object's first follows another: open() writes the first without one.
  if (out_.back() != '{') out_ += ',';
  out_ += '"';
  out_.append(key);  // a name that needs no escape (the header says so)
  out_ += "\":";
}

SseJsonEvent& SseJsonEvent::string(std::string_view key, std::string_view value) {
  this->key(key);
  json::append_quoted(value, out_);
  return *this;
}

SseJsonEvent& SseJsonEvent::number(std::string_view key, std::size_t value) {
  this->key(key);
  char digits[24];
  out_.append(digits, std::to_chars(digits, digits + sizeof digits, value).ptr);
  return *this;
}

SseJsonEvent& SseJsonEvent::json(std::string_view key, std::string_view value) {
  this->key(key);
  out_.append(value);
  return *this;
}

SseJsonEvent& SseJsonEvent::open(std::string_view key) {
  this->key(key);
  out_ += '{';
  return *this;
}

SseJsonEvent& SseJsonEvent::close() {
  out_ += '}';
  return *this;
}

void SseJsonEvent::end() {
  out_ += "}\n\n";
}

}  // namespace prefixgate::canon
