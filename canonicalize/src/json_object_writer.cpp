#include "json_object_writer.h"

#include <charconv>

namespace prefixgate::canon {

JsonObjectWriter::JsonObjectWriter(std::string& out) : out_(out) {
  out_ += '{';
}

JsonObjectWriter sse_json_event(std::string& out, std::string_view type) {
  out += "event: ";
  out.append(type);
  out += "\ndata: {\"type\":\"";
  out.append(type);
  out += '"';
  return JsonObjectWriter(out, "}\n\n");
}

void JsonObjectWriter::key(std::string_view key) {
  // Every member but an object's first follows another.
  if (out_.back() != '{') out_ += ',';
  out_ += '"';
  out_.append(key);
  out_ += "\":";
}

JsonObjectWriter& JsonObjectWriter::string(std::string_view key, std::string_view value) {
  this->key(key);
  json::append_quoted(value, out_);
  return *this;
}

JsonObjectWriter& JsonObjectWriter::number(std::string_view key, std::size_t value) {
  this->key(key);
  char digits[24];
  out_.append(digits, std::to_chars(digits, digits + sizeof digits, value).ptr);
  return *this;
}

JsonObjectWriter& JsonObjectWriter::null(std::string_view key) {
  this->key(key);
  out_ += "null";
  return *this;
}

JsonObjectWriter& JsonObjectWriter::value(std::string_view key, const json::Value& value) {
  this->key(key);
  json::append_json(value, out_);
  return *this;
}

JsonObjectWriter& JsonObjectWriter::array(std::string_view key, const json::Array& elements) {
  this->key(key);
  out_ += '[';
  for (std::size_t i = 0; i < elements.size(); ++i) {
    if (i > 0) out_ += ',';
    json::append_json(elements[i], out_);
  }
  out_ += ']';
  return *this;
}

JsonObjectWriter& JsonObjectWriter::json(std::string_view key, std::string_view value) {
  this->key(key);
  out_.append(value);
  return *this;
}

JsonObjectWriter& JsonObjectWriter::members(std::string_view text) {
  if (text.empty()) return *this;
  if (out_.back() != '{') out_ += ',';
  out_.append(text);
  return *this;
}

JsonObjectWriter& JsonObjectWriter::open(std::string_view key) {
  this->key(key);
  out_ += '{';
  return *this;
}

JsonObjectWriter& JsonObjectWriter::close() {
  out_ += '}';
  return *this;
}

void JsonObjectWriter::end() {
  out_.append(closing_);
}

}  // namespace prefixgate::canon
