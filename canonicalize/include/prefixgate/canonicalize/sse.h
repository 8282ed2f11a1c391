// Server-sent events (the WHATWG HTML "event stream" format): a byte stream split into events
// as it arrives, and events written. Each event is its `event:` name ("" when absent) and its
// `data:` lines joined with "\n"; comment lines and other fields are skipped.
//
//   canon::SseReader reader;
//   std::vector<canon::SseEvent> events;
//   reader.feed(bytes_from_the_socket, events);      // whole events only; the rest waits
//   for (const canon::SseEvent& e : events) if (e.data == "[DONE]") ...
//   canon::append_sse(out, "message_stop", R"({"type":"message_stop"})");
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace prefixgate::canon {

struct SseEvent {
  std::string event;
  std::string data;
};

class SseReader {
 public:
  // Appends the events completed by `bytes` (a blank line ends one; "\r\n" and "\r" end lines
  // too). An event with no data line is dropped, as browsers drop it.
  void feed(std::string_view bytes, std::vector<SseEvent>& out);
  // Bytes of an event not yet complete.
  const std::string& pending() const { return pending_; }

 private:
  std::string pending_;
};

// "event: NAME\ndata: DATA\n\n" (no event line for an empty name). `data` holds no newline.
void append_sse(std::string& out, std::string_view event, std::string_view data);

}  // namespace prefixgate::canon
