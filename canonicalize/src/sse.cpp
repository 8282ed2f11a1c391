#include "prefixgate/canonicalize/sse.h"

#include <cstring>

namespace prefixgate::canon {
namespace {

// Where the first line end ('\r' or '\n') at or after `pos` is: a vectorized search for '\n',
// then one for '\r' before it. find_first_of("\r\n") looks the set up for every byte, which
// for a streamed chat chunk was most of what reading it cost.
std::size_t find_line_end(std::string_view text, std::size_t pos) {
  const char* from = text.data() + pos;
  const std::size_t left = text.size() - pos;
  const auto* lf = static_cast<const char*>(std::memchr(from, '\n', left));
  const std::size_t before_lf = lf != nullptr ? static_cast<std::size_t>(lf - from) : left;
  const auto* cr = static_cast<const char*>(std::memchr(from, '\r', before_lf));
  if (cr != nullptr) return pos + static_cast<std::size_t>(cr - from);
  return lf != nullptr ? pos + before_lf : std::string_view::npos;
}

// Applies one line to the event being built; returns true when the line was blank (the end).
bool apply_line(std::string_view line, SseEvent& event, bool& has_data) {
  if (line.empty()) return true;
  if (line.front() == ':') return false;  // a comment
  const std::size_t colon = line.find(':');
  const std::string_view field = line.substr(0, colon);
  std::string_view value =
      colon == std::string_view::npos ? std::string_view() : line.substr(colon + 1);
  if (value.starts_with(' ')) value.remove_prefix(1);
  if (field == "event") {
    event.event = std::string(value);
  } else if (field == "data") {
    if (has_data) event.data += '\n';
    event.data.append(value);
    has_data = true;
  }
  return false;
}

}  // namespace

void SseReader::feed(std::string_view bytes, std::vector<SseEvent>& out) {
  pending_.append(bytes);
  std::size_t consumed = 0;  // bytes of whole events taken from pending_
  std::size_t pos = 0;
  SseEvent event;
  bool has_data = false;
  while (pos < pending_.size()) {
    const std::size_t eol = find_line_end(pending_, pos);
    if (eol == std::string::npos) break;
    // "\r\n" is one line end; a lone "\r" at the end of the bytes may be the first half of one.
    std::size_t next = eol + 1;
    if (pending_[eol] == '\r') {
      if (eol + 1 == pending_.size()) break;
      if (pending_[eol + 1] == '\n') next = eol + 2;
    }
    const std::string_view line(pending_.data() + pos, eol - pos);
    pos = next;
    if (apply_line(line, event, has_data)) {
      if (has_data) out.push_back(std::move(event));
      event = SseEvent{};
      has_data = false;
      consumed = pos;
    }
  }
  pending_.erase(0, consumed);
}

void append_sse(std::string& out, std::string_view event, std::string_view data) {
  if (!event.empty()) {
    out += "event: ";
    out.append(event);
    out += '\n';
  }
  out += "data: ";
  out.append(data);
  out += "\n\n";
}

}  // namespace prefixgate::canon
