#include "server/engine_event_scan.h"

#include <array>
#include <charconv>
#include <cstdint>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "prefixgate/canonicalize/json_string_scan.h"
#include "prefixgate/canonicalize/json_token_scan.h"

namespace prefixgate::gateway::server {
namespace {

// A member's value as the scan saw it: a string without escapes, or an unsigned integer.
struct Scalar {
  bool present = false;
  bool is_string = false;
  std::string_view text;     // is_string
  std::uint64_t number = 0;  // !is_string
};

// Advances `i` from inside a string past its closing quote, over printable ASCII without
// escapes; false at anything else. Eight bytes at a time while a word is plain (most of a line is
// its hashes' hex digits), then byte by byte.
bool skip_plain_string(std::string_view s, std::size_t& i) {
  while (i + 8 <= s.size() && json::word_is_plain_ascii(s.data() + i)) i += 8;
  for (; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == '"') {
      ++i;
      return true;
    }
    if (c < 0x20 || c >= 0x80 || c == '\\') return false;
  }
  return false;
}

// Reads the digits at `i` into `v`: false unless there are 1-19 of them without a leading zero
// (a JSON integer that fits in 64 bits; the 20-digit ones are left to the DOM parser).
bool read_uint(std::string_view s, std::size_t& i, std::uint64_t& v) {
  const std::size_t begin = i;
  v = 0;
  while (i < s.size() && i - begin < 20 && s[i] >= '0' && s[i] <= '9') {
    v = v * 10 + static_cast<std::uint64_t>(s[i++] - '0');
  }
  const std::size_t n = i - begin;
  return n >= 1 && n <= 19 && (n == 1 || s[begin] != '0');
}

class Scanner : public json::JsonTokenScan {
 public:
  explicit Scanner(std::string_view s) : JsonTokenScan(s) {}

  // A string of printable ASCII without escapes; false for anything else.
  bool string(std::string_view& out) {
    if (!take('"')) return false;
    const std::size_t begin = at_;
    if (!skip_plain_string(text_, at_)) return false;
    out = text_.substr(begin, at_ - 1 - begin);
    return true;
  }

  // A string, or an unsigned integer of 1-19 digits without a fraction or exponent.
  bool value(Scalar& v) {
    skip_whitespace();
    if (at_ >= text_.size()) return false;
    v.present = true;
    if (text_[at_] == '"') {
      v.is_string = true;
      return string(v.text);
    }
    if (!read_uint(text_, at_, v.number)) return false;
    // A number ends at whitespace, ',' or '}': "1.5", "1e3" or "12ab" are the DOM parser's.
    return at_ == text_.size() || (ends_token(text_[at_]) && text_[at_] != ']');
  }
};

// The fields the line's decoding reads, each seen at most once.
struct Fields {
  Scalar type, seq, hash;

  // False for a duplicate (which one the DOM parser reads is its business).
  bool take(std::string_view key, const Scalar& v) {
    Scalar* slot = key == "type" ? &type : key == "seq" ? &seq : key == "hash" ? &hash : nullptr;
    if (slot == nullptr) return true;
    if (slot->present) return false;
    *slot = v;
    return true;
  }
};

// Each byte's hex digit value, or 0xFF for a byte that is not one: a table lookup per digit
// instead of a branch on digit or letter, which mispredicted on about every other digit of a
// random hash.
constexpr std::array<std::uint8_t, 256> kHexValue = [] {
  std::array<std::uint8_t, 256> t{};
  for (std::size_t c = 0; c < t.size(); ++c) t[c] = 0xFF;
  for (std::uint8_t d = 0; d < 10; ++d) t['0' + d] = d;
  for (std::uint8_t d = 0; d < 6; ++d) {
    t['a' + d] = static_cast<std::uint8_t>(10 + d);
    t['A' + d] = static_cast<std::uint8_t>(10 + d);
  }
  return t;
}();

// The value of the `n` (at most 16) hex digits at `p`; false if any byte is not one. Inlined, so
// that where `n` is a constant the loop unrolls into a table load and a shift per digit.
inline bool hex_digits(const char* p, std::size_t n, std::uint64_t& out) {
  std::uint64_t v = 0;
  std::uint8_t bad = 0;  // the high bit of any byte that was not a digit
  for (std::size_t k = 0; k < n; ++k) {
    const std::uint8_t digit = kHexValue[static_cast<unsigned char>(p[k])];
    bad |= digit;
    v = v << 4 | (digit & 0x0F);
  }
  if (bad & 0x80) return false;
  out = v;
  return true;
}

// hex_digits(p, 16, out): the engine writes every block hash as 16 digits, and the table's
// sixteen loads, shifts and ors a hash were most of a run's decoding (about 100 of the 220
// instructions a block, gateway_bench BM_EngineEventRun). With SSE2 the sixteen bytes are checked
// and converted at once, and the digit pairs packed into bytes; the same answer for every input
// (EngineEventLineTest.EveryByteInEveryPlaceOfAHashDecodesAsTheDomParserDecodesIt).
inline bool hex16_digits(const char* p, std::uint64_t& out) {
#if defined(__SSE2__)
  const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  // Whether each byte of x lies in [lo, lo + span]: x - lo, wrapping, is then at most span.
  const auto in_range = [](__m128i x, char lo, char span) {
    const __m128i d = _mm_sub_epi8(x, _mm_set1_epi8(lo));
    return _mm_cmpeq_epi8(_mm_min_epu8(d, _mm_set1_epi8(span)), d);
  };
  // A digit's bytes have 0x20 set already, so `lower` is each digit as it is and each letter in
  // lower case.
  const __m128i lower = _mm_or_si128(c, _mm_set1_epi8(0x20));
  const __m128i digit = in_range(c, '0', 9);
  const __m128i letter = in_range(lower, 'a', 5);
  if (_mm_movemask_epi8(_mm_or_si128(digit, letter)) != 0xFFFF) return false;
  // Each byte's value: lower - '0', less 39 ('a' - 10 - '0') for a letter.
  const __m128i value = _mm_sub_epi8(_mm_sub_epi8(lower, _mm_set1_epi8('0')),
                                     _mm_and_si128(letter, _mm_set1_epi8('a' - 10 - '0')));
  // Each pair of digits (the first in the low byte of a 16-bit lane) into one byte, first << 4.
  const __m128i high = _mm_slli_epi16(_mm_and_si128(value, _mm_set1_epi16(0x00FF)), 4);
  const __m128i pairs = _mm_or_si128(high, _mm_srli_epi16(value, 8));
  std::uint64_t bytes = 0;  // the first two digits in the lowest byte
  _mm_storel_epi64(reinterpret_cast<__m128i*>(&bytes), _mm_packus_epi16(pairs, pairs));
  out = __builtin_bswap64(bytes);  // x86 is little-endian: the first digits most significant
  return true;
#else
  return hex_digits(p, 16, out);
#endif
}

// std::from_chars(base 16) over all of `s`, without its overflow check for the hashes the engine
// writes: 16 digits or fewer cannot overflow.
bool parse_hex(std::string_view s, std::uint64_t& out) {
  if (s.empty() || s.size() > 16) {
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out, 16);
    return ec == std::errc() && end == s.data() + s.size();
  }
  return s.size() == 16 ? hex16_digits(s.data(), out) : hex_digits(s.data(), s.size(), out);
}

// The lines prefixgate-engine writes (its kv_events handler), matched literally:
//   {"type":"stored","seq":N,"hash":"<16 hex>","parent":"<16 hex>","salt":"S"}
//   {"type":"removed","seq":N,"hash":"<16 hex>","salt":"S"}
// or for a run of blocks (?batch=1) "hashes":["<16 hex>",...] in place of "hash",
// with N of 1-19 digits and a salt of printable ASCII without escapes: a few
// compares and two hex numbers instead of a scan per member. Anything else (other whitespace,
// order or members) is the general scan's.
class EngineLayout {
 public:
  explicit EngineLayout(std::string_view s) : s_(s) {}

  std::optional<EngineEventLine> match() {
    using Kind = EngineEventLine::Kind;
    EngineEventLine e;
    if (!literal(R"({"type":")")) return std::nullopt;
    if (literal(R"(stored","seq":)")) {
      e.kind = Kind::kStored;
    } else if (literal(R"(removed","seq":)")) {
      e.kind = Kind::kRemoved;
    } else {
      return std::nullopt;
    }
    std::uint64_t hash = 0;
    std::uint64_t parent = 0;
    if (!read_uint(s_, i_, e.seq)) return std::nullopt;
    const bool run = !literal(R"(,"hash":")");
    if (run ? !literal(R"(,"hashes":[)") || !hash_array(e.hashes)
            : !hex16(hash) || !literal("\"")) {
      return std::nullopt;
    }
    if (e.kind == Kind::kStored &&
        (!literal(R"(,"parent":")") || !hex16(parent) || !literal("\""))) {
      return std::nullopt;
    }
    if (!literal(R"(,"salt":")") || !plain_string() || !literal("}") || i_ != s_.size()) {
      return std::nullopt;
    }
    e.type = e.kind == Kind::kStored ? "stored" : "removed";
    if (run) {
      e.blocks = e.hashes.size();
    } else {
      e.hash = hash;
    }
    return e;
  }

 private:
  // A literal's length known at compile time: the compare is a few word compares inline, not
  // a call to memcmp per literal.
  template <std::size_t N>
  bool literal(const char (&t)[N]) {
    constexpr std::size_t n = N - 1;
    if (s_.size() - i_ < n || std::memcmp(s_.data() + i_, t, n) != 0) return false;
    i_ += n;
    return true;
  }
  // The engine writes a block's hash as 16 hex digits.
  bool hex16(std::uint64_t& v) {
    if (s_.size() - i_ < 16 || !hex16_digits(s_.data() + i_, v)) return false;
    i_ += 16;
    return true;
  }
  // The elements of a run's "hashes" up to and past its closing bracket: each a string of 16
  // hex digits (anything else is the DOM parser's).
  bool hash_array(std::vector<std::uint64_t>& out) {
    if (literal("]")) return true;
    // Room for as many hashes as the rest of the line can hold ("<16 hex>", 19 bytes each), so
    // that a run of a few dozen is not grown by doubling.
    out.reserve((s_.size() - i_) / 19 + 1);
    do {
      std::uint64_t h = 0;
      if (!literal("\"") || !hex16(h) || !literal("\"")) return false;
      out.push_back(h);
    } while (literal(","));
    return literal("]");
  }
  // The rest of a string up to and past its closing quote.
  bool plain_string() { return skip_plain_string(s_, i_); }

  std::string_view s_;
  std::size_t i_ = 0;
};

}  // namespace

std::optional<EngineEventLine> scan_flat_event_line(std::string_view line) {
  if (std::optional<EngineEventLine> e = EngineLayout(line).match()) return e;
  Scanner in(line);
  Fields f;
  if (!in.take('{')) return std::nullopt;
  if (!in.take('}')) {
    do {
      std::string_view key;
      Scalar v;
      if (!in.string(key) || !in.take(':') || !in.value(v) || !f.take(key, v)) return std::nullopt;
    } while (in.take(','));
    if (!in.take('}')) return std::nullopt;
  }
  if (!in.at_end()) return std::nullopt;

  EngineEventLine e;
  if (!f.type.present || !f.type.is_string) return e;  // no string "type": skipped
  const std::string_view type = f.type.text;
  if (type == "load" || type == "snapshot") return std::nullopt;
  e.type = type;
  // A "seq" that is not a number counts as absent, as in the DOM decoding.
  e.seq = f.seq.present && !f.seq.is_string ? f.seq.number : 0;
  using Kind = EngineEventLine::Kind;
  if (type == "stored" || type == "removed") {
    e.kind = type == "stored" ? Kind::kStored : Kind::kRemoved;
    std::uint64_t h = 0;
    if (f.hash.present && f.hash.is_string && parse_hex(f.hash.text, h)) e.hash = h;
  } else {
    e.kind = type == "cleared" ? Kind::kCleared : Kind::kUnknown;
  }
  return e;
}

}  // namespace prefixgate::gateway::server
