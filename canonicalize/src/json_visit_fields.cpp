// json::visit_member_fields: the fields of one root member, and of the objects directly in it,
// read from the text without building a tree (what reading an answer's usage takes).
//
// A scan of our own rather than simdjson's On Demand: the gateway reads the usage of every
// answer it relays, most of them a few hundred bytes, where simdjson's fixed costs (its first
// pass over the whole text, a padded copy, its iterators) were 4,400 instructions a request, the
// largest single cost of relaying a short answer. The scan passes over the members before the
// one asked for by their structure (a string found with memchr up to its closing quote,
// brackets matched), and reads the member's own fields as parse() reads values: numbers by
// read_number(), literals spelled out, strings with escapes checked by parse() itself.
#include <array>
#include <cstdint>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "json_parse_text.h"
#include "prefixgate/canonicalize/json.h"
#include "prefixgate/canonicalize/json_token_scan.h"

namespace prefixgate::json {
namespace {

using parse_text_detail::NumberRead;

// The bytes a pass over a container stops at: a string's quote and the brackets.
constexpr std::array<bool, 256> kStructural = [] {
  std::array<bool, 256> table{};
  for (const char c : {'"', '{', '}', '[', ']'}) table[static_cast<unsigned char>(c)] = true;
  return table;
}();

class Scanner : public JsonTokenScan {
 public:
  explicit Scanner(std::string_view text) : JsonTokenScan(text) {}

  void seek(std::size_t at) { at_ = at; }

  // A string's text between its quotes, as written (escapes not undone), after whitespace.
  std::optional<std::string_view> raw_string() {
    skip_whitespace();
    if (at_ >= text_.size() || text_[at_] != '"') return std::nullopt;
    const std::size_t begin = ++at_;
    for (;;) {
      const void* quote = std::memchr(text_.data() + at_, '"', text_.size() - at_);
      if (quote == nullptr) return std::nullopt;
      const auto end = static_cast<std::size_t>(static_cast<const char*>(quote) - text_.data());
      at_ = end + 1;
      // A quote after an odd number of backslashes is escaped: the string goes on.
      std::size_t backslashes = 0;
      while (end - backslashes > begin && text_[end - backslashes - 1] == '\\') ++backslashes;
      if (backslashes % 2 == 0) return text_.substr(begin, end - begin);
    }
  }

  // A key, its escapes undone (into `unescaped` when it has any), and the colon after it.
  std::optional<std::string_view> key(std::string& unescaped) {
    std::optional<std::string_view> raw = raw_string();
    if (!raw || !take(':')) return std::nullopt;
    if (raw->find('\\') == std::string_view::npos) return raw;
    std::optional<std::string> text = unescape(*raw);
    if (!text) return std::nullopt;
    unescaped = std::move(*text);
    return std::string_view(unescaped);
  }

  // Passes over one value by its structure: strings to their closing quote, brackets matched.
  bool skip_value() {
    const char first = peek();
    if (first == '"') return raw_string().has_value();
    if (first != '{' && first != '[') return !scalar_token().empty();
    std::size_t depth = 0;
    while (at_ < text_.size()) {
      while (at_ < text_.size() && !kStructural[static_cast<unsigned char>(text_[at_])]) ++at_;
      if (at_ == text_.size()) break;
      const char c = text_[at_];
      if (c == '"') {
        if (!raw_string()) return false;
        continue;
      }
      ++at_;
      if (c == '{' || c == '[') ++depth;
      if ((c == '}' || c == ']') && --depth == 0) return true;
    }
    return false;
  }

  // A string value's escapes, checked as parse() checks them (the text itself is not needed).
  static bool valid_string(std::string_view raw) {
    return raw.find('\\') == std::string_view::npos || unescape(raw).has_value();
  }

 private:
  // `raw` lies in the text between its quotes: parse() decodes it with them.
  static std::optional<std::string> unescape(std::string_view raw) {
    return parse_text_detail::decode_string_literal(
        std::string_view(raw.data() - 1, raw.size() + 2));
  }
};

// What a field's value is, its number read when it is one, taken from the scan; containers are
// left for the caller (their first byte is next). False for a value parse() would refuse.
bool describe_field(Scanner& scan, FieldSeen& seen) {
  seen.number = 0;
  switch (scan.peek()) {
    case '{': seen.type = Type::kObject; return true;
    case '[': seen.type = Type::kArray; return true;
    case '"': {
      seen.type = Type::kString;
      const std::optional<std::string_view> raw = scan.raw_string();
      return raw && Scanner::valid_string(*raw);
    }
    default: break;
  }
  const std::string_view token = scan.scalar_token();
  if (token == "true" || token == "false") {
    seen.type = Type::kBool;
    return true;
  }
  if (token == "null") {
    seen.type = Type::kNull;
    return true;
  }
  seen.type = Type::kNumber;
  return parse_text_detail::read_number(token, seen.number) == NumberRead::kOk;
}

// The fields of the object whose '{' is next, and (when `descend`) of the objects directly
// inside it; `outer` names the field whose value the object is (empty for the member itself).
bool visit_fields(Scanner& scan, std::string_view outer, bool descend,
                  const std::function<void(const FieldSeen&)>& visit) {
  if (!scan.take('{')) return false;
  if (scan.take('}')) return true;
  do {
    std::string unescaped;
    const std::optional<std::string_view> name = scan.key(unescaped);
    if (!name) return false;
    FieldSeen seen{outer, *name, Type::kNull, 0};
    if (!describe_field(scan, seen)) return false;
    visit(seen);
    if (seen.type == Type::kObject && descend) {
      if (!visit_fields(scan, *name, false, visit)) return false;
    } else if (seen.type == Type::kObject || seen.type == Type::kArray) {
      if (!scan.skip_value()) return false;
    }
  } while (scan.take(','));
  return scan.take('}');
}

// Where the root member `key` would start if it were the document's last: the opening quote of
// the last `"key"` in the text's final kLastMemberReach bytes whose opening quote is not
// escaped and which is followed by a colon. In a text parse() accepts such a quote opens a key:
// inside a string every quote is escaped, and a string value is never followed by a colon.
// Whether it is the root's last member is the caller's to check.
constexpr std::size_t kLastMemberReach = 4096;

std::optional<std::size_t> last_member_value(std::string_view text, std::string_view key) {
  const std::size_t quoted = key.size() + 2;
  if (text.size() < quoted) return std::nullopt;
  const std::size_t lowest = text.size() > kLastMemberReach ? text.size() - kLastMemberReach : 0;
  // From quote to quote (memrchr), not byte by byte: a usage object has a few dozen of them.
  for (std::size_t end = text.size() - quoted + 1; end > lowest;) {
    const void* found = memrchr(text.data() + lowest, '"', end - lowest);
    if (found == nullptr) break;
    const auto quote = static_cast<std::size_t>(static_cast<const char*>(found) - text.data());
    end = quote;
    if (text[quote + quoted - 1] != '"' || text.compare(quote + 1, key.size(), key) != 0) {
      continue;
    }
    std::size_t backslashes = 0;
    while (quote > backslashes && text[quote - 1 - backslashes] == '\\') ++backslashes;
    if (backslashes % 2 != 0) continue;
    Scanner after(text.substr(quote + quoted));
    if (!after.take(':') || after.peek() != '{') continue;
    return quote;
  }
  return std::nullopt;
}

// The fields of the value the scan is at, kept (their views are the text's) rather than
// visited, so that nothing is visited until the member is known to be the root's last one.
// False when the value is malformed, there are more fields than the room, or a key had escapes
// (its undone text does not outlive the scan).
class KeptFields {
 public:
  explicit KeptFields(std::string_view text) : text_(text) {}

  bool read(Scanner& scan) {
    // The visitor holds one pointer: within std::function's own room, no allocation.
    const bool ok = visit_fields(scan, {}, true, [this](const FieldSeen& f) { keep(f); });
    return ok && kept_;
  }
  void replay(const std::function<void(const FieldSeen&)>& visit) const {
    for (std::size_t i = 0; i < size_; ++i) visit(fields_[i]);
  }

 private:
  bool in_text(std::string_view v) const {
    return v.empty() ||
           (v.data() >= text_.data() && v.data() + v.size() <= text_.data() + text_.size());
  }
  void keep(const FieldSeen& f) {
    if (!kept_ || size_ == fields_.size() || !in_text(f.key) || !in_text(f.object)) {
      kept_ = false;
      return;
    }
    fields_[size_++] = f;
  }

  std::string_view text_;
  bool kept_ = true;
  std::size_t size_ = 0;
  std::array<FieldSeen, 16> fields_;  // a usage object has a dozen at most
};

}  // namespace

bool visit_last_member_fields(std::string_view text, std::string_view key,
                              const std::function<void(const FieldSeen&)>& visit,
                              const ParseLimits& limits) {
  if (text.size() > limits.max_bytes) return false;
  if (const std::optional<std::size_t> begin = last_member_value(text, key)) {
    Scanner scan(text);
    scan.seek(*begin);
    std::string unescaped;  // none: the key was found as written
    KeptFields kept(text);
    // The member is the root's last when its object is followed by the '}' that ends the text:
    // a member's value is followed by a ',' or by the '}' of the object that holds it, and only
    // the root's ends the text (a valid document that ends in '}' is an object).
    if (scan.key(unescaped) && kept.read(scan) && scan.take('}') && scan.at_end()) {
      kept.replay(visit);
      return true;
    }
  }
  return visit_member_fields(text, key, visit, limits);
}

bool visit_member_fields(std::string_view text, std::string_view key,
                         const std::function<void(const FieldSeen&)>& visit,
                         const ParseLimits& limits) {
  if (text.size() > limits.max_bytes) return false;
  Scanner scan(text);
  if (!scan.take('{') || scan.take('}')) return false;
  do {
    std::string unescaped;
    const std::optional<std::string_view> name = scan.key(unescaped);
    if (!name) return false;
    if (*name == key) return scan.peek() == '{' && visit_fields(scan, {}, true, visit);
    if (!scan.skip_value()) return false;
  } while (scan.take(','));
  return false;
}

}  // namespace prefixgate::json
