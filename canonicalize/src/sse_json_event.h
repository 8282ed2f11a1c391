// A server-sent event whose data is a JSON object, written as it goes: the bytes append_sse()
// of json::to_json() would give for the same members in the same order, without building the
// object as a tree first. For the events a translated stream sends for every token (a text or
// arguments delta), where building and serializing a tree was most of what translating a chunk
// cost.
//
//   SseJsonEvent(out, "content_block_delta")   // event: content_block_delta
//       .number("index", 0)                     // data: {"type":"content_block_delta","index":0,
//       .open("delta")                          //   "delta":{"type":"text_delta","text":"Hi"}}
//       .string("type", "text_delta")
//       .string("text", "Hi")
//       .close()
//       .end();
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace prefixgate::canon {

// Event types and keys are written as they are: names of ASCII letters, digits, '_' and '.',
// which JSON needs no escape for. Values are escaped.
class SseJsonEvent {
 public:
  // Writes the event line and opens the data object with its "type" member, `type` again.
  SseJsonEvent(std::string& out, std::string_view type);
  SseJsonEvent& string(std::string_view key, std::string_view value);
  SseJsonEvent& number(std::string_view key, std::size_t value);
  // A member whose value is already JSON text (e.g. "[]").
  SseJsonEvent& json(std::string_view key, std::string_view value);
  SseJsonEvent& open(std::string_view key);  // a member whose value is an object
  SseJsonEvent& close();                     // ends the innermost open()
  void end();                                // ends the data object and the event

 private:
  void key(std::string_view key);
  std::string& out_;
};

}  // namespace prefixgate::canon
