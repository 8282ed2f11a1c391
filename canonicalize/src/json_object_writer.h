// A JSON object written as it goes: the bytes json::to_json() would give for the same members
// in the same order, without building the object as a tree first. For what a translated stream
// writes for every token (a text or arguments delta event), where building and serializing a
// tree was most of what translating a chunk cost, and for a response object that repeats
// members already written once (a Responses reply's echo of its request).
//
//   sse_json_event(out, "content_block_delta")   // event: content_block_delta
//       .number("index", 0)                       // data: {"type":"content_block_delta","index":0,
//       .open("delta")                            //   "delta":{"type":"text_delta","text":"Hi"}}
//       .string("type", "text_delta")
//       .string("text", "Hi")
//       .close()
//       .end();
//
// Keys are written as they are: names of ASCII letters, digits, '_' and '.', which JSON needs
// no escape for. Values are escaped.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "prefixgate/canonicalize/json.h"

namespace prefixgate::canon {

class JsonObjectWriter {
 public:
  // Opens an object at the end of `out`.
  explicit JsonObjectWriter(std::string& out);

  JsonObjectWriter& string(std::string_view key, std::string_view value);
  JsonObjectWriter& number(std::string_view key, std::size_t value);
  JsonObjectWriter& null(std::string_view key);
  JsonObjectWriter& value(std::string_view key, const json::Value& value);
  JsonObjectWriter& array(std::string_view key, const json::Array& elements);
  // A member whose value is already JSON text (e.g. "[]").
  JsonObjectWriter& json(std::string_view key, std::string_view value);
  // Members already written as JSON text ("a":1,"b":2; none when empty).
  JsonObjectWriter& members(std::string_view text);
  JsonObjectWriter& open(std::string_view key);  // a member whose value is an object
  JsonObjectWriter& close();                     // ends the innermost open()
  void end();                                    // ends the object (and an event, for SSE)

 private:
  friend JsonObjectWriter sse_json_event(std::string& out, std::string_view type);
  JsonObjectWriter(std::string& out, std::string_view closing) : out_(out), closing_(closing) {}
  void key(std::string_view key);

  std::string& out_;
  std::string_view closing_ = "}";
};

// A server-sent event whose data is an object: its event line, then the object opened with its
// "type" member, `type` again; end() also ends the event.
JsonObjectWriter sse_json_event(std::string& out, std::string_view type);

}  // namespace prefixgate::canon
