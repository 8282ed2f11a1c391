#include "nfc_normalizer.h"

#include <utf8proc.h>

#include <algorithm>
#include <cstdlib>
#include <memory>

#include "prefixgate/base/check.h"
#include "utf8_decode.h"

namespace prefixgate::canon::internal {
namespace {

constexpr std::uint8_t kBoundary = 1;
constexpr std::uint8_t kSuspect = 2;
constexpr char32_t kCodePoints = 0x110000;

// NFC of a whole string, by utf8proc; false when utf8proc rejects it. Used only on single code
// points, where utf8proc's quadratic reordering (below) cannot bite.
bool utf8proc_nfc(std::string_view in, std::string& out) {
  utf8proc_uint8_t* result = nullptr;
  const utf8proc_ssize_t n =
      utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(in.data()),
                   static_cast<utf8proc_ssize_t>(in.size()), &result,
                   static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
  const std::unique_ptr<utf8proc_uint8_t, decltype(&std::free)> owner(result, &std::free);
  if (n < 0) return false;
  out.assign(reinterpret_cast<const char*>(result), static_cast<std::size_t>(n));
  return true;
}

int combining_class(utf8proc_int32_t cp) {
  return utf8proc_get_property(cp)->combining_class;
}

// NFC of a chunk of well-formed UTF-8: canonical decomposition, canonical ordering, then
// utf8proc's composition (linear). utf8proc_map would do the ordering with a gnome sort, which
// is quadratic in the length of a run of combining marks: a client could send a long run to
// stall us. Here each run is stably sorted instead. False if utf8proc fails (it should not:
// chunks hold only well-formed code points); then the chunk is left as it is.
bool nfc_chunk(std::string_view chunk, std::vector<utf8proc_int32_t>& code_points,
               std::string& out) {
  code_points.clear();
  for (std::size_t pos = 0; pos < chunk.size();) {
    const DecodedCodePoint d = decode_utf8(chunk, pos);
    PG_DCHECK(d.cp != kInvalidCodePoint);
    pos += d.bytes;
    const std::size_t at = code_points.size();
    code_points.resize(at + 4);
    utf8proc_ssize_t n =
        utf8proc_decompose_char(static_cast<utf8proc_int32_t>(d.cp), code_points.data() + at, 4,
                                UTF8PROC_DECOMPOSE, nullptr);
    if (n > 4) {  // longer than any canonical decomposition today; utf8proc said how long
      code_points.resize(at + static_cast<std::size_t>(n));
      n = utf8proc_decompose_char(static_cast<utf8proc_int32_t>(d.cp), code_points.data() + at, n,
                                  UTF8PROC_DECOMPOSE, nullptr);
    }
    if (n < 0) return false;
    code_points.resize(at + static_cast<std::size_t>(n));
  }
  // Canonical ordering (UAX #15 section 3.3 of the Unicode Standard, D109): within each run of
  // non-starters, by combining class, keeping the order of equal classes.
  for (auto it = code_points.begin(); it != code_points.end();) {
    if (combining_class(*it) == 0) {
      ++it;
      continue;
    }
    auto end = it;
    while (end != code_points.end() && combining_class(*end) != 0) ++end;
    std::stable_sort(it, end, [](utf8proc_int32_t a, utf8proc_int32_t b) {
      return combining_class(a) < combining_class(b);
    });
    it = end;
  }
  const utf8proc_ssize_t n = utf8proc_normalize_utf32(
      code_points.data(), static_cast<utf8proc_ssize_t>(code_points.size()),
      static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
  if (n < 0) return false;
  out.clear();
  for (utf8proc_ssize_t i = 0; i < n; ++i) append_utf8(static_cast<char32_t>(code_points[i]), out);
  return true;
}

std::vector<std::uint8_t> build_flags() {
  std::vector<std::uint8_t> flags(kCodePoints, kBoundary);
  utf8proc_int32_t decomposed[32];
  for (char32_t cp = 0; cp < kCodePoints; ++cp) {
    if (cp >= 0xD800 && cp <= 0xDFFF) continue;  // never decoded
    const auto c = static_cast<utf8proc_int32_t>(cp);
    if (utf8proc_get_property(c)->combining_class != 0) flags[cp] = kSuspect;
    const utf8proc_ssize_t n =
        utf8proc_decompose_char(c, decomposed, 32, UTF8PROC_DECOMPOSE, nullptr);
    if (n == 1 && decomposed[0] == c) continue;
    // cp has a canonical decomposition: NFC may recompose it with what follows, so text is not
    // cut in front of it; whether it is a suspect depends on whether NFC gives it back alone.
    flags[cp] &= static_cast<std::uint8_t>(~kBoundary);
    std::string utf8;
    append_utf8(cp, utf8);
    std::string nfc;
    if (!utf8proc_nfc(utf8, nfc) || nfc != utf8) flags[cp] |= kSuspect;
    // The last code point of a decomposition is the second of a composition pair (NFC_QC
    // "Maybe", or a Hangul vowel or trailing consonant): it can join what precedes it.
    if (n >= 2) flags[static_cast<char32_t>(decomposed[n - 1])] = kSuspect;
  }
  return flags;
}

}  // namespace

NfcNormalizer::NfcNormalizer() {
  static const std::vector<std::uint8_t> flags = build_flags();
  flags_ = flags.data();
}

bool NfcNormalizer::normalize(std::string_view input, NfcResult& out) const {
  out.text.clear();
  out.changes.clear();
  bool changed = false;
  std::size_t copied = 0;    // input before this is already in out.text
  std::size_t boundary = 0;  // the latest position where the text may be cut
  std::string chunk_nfc;
  std::vector<utf8proc_int32_t> code_points;
  std::size_t pos = 0;
  while (pos < input.size()) {
    if (static_cast<unsigned char>(input[pos]) < 0x80) {  // ASCII: always a boundary
      boundary = pos++;
      continue;
    }
    const DecodedCodePoint d = decode_utf8(input, pos);
    if (d.cp == kInvalidCodePoint) {
      boundary = ++pos;  // a malformed byte combines with nothing: cut on both sides of it
      continue;
    }
    const std::uint8_t f = flags_[d.cp];
    if (f & kBoundary) boundary = pos;
    if (!(f & kSuspect)) {
      pos += d.bytes;
      continue;
    }
    // The chunk runs from the last boundary to the next one.
    const std::size_t begin = boundary;
    std::size_t end = pos + d.bytes;
    while (end < input.size()) {
      if (static_cast<unsigned char>(input[end]) < 0x80) break;
      const DecodedCodePoint e = decode_utf8(input, end);
      if (e.cp == kInvalidCodePoint || (flags_[e.cp] & kBoundary)) break;
      end += e.bytes;
    }
    const std::string_view chunk = input.substr(begin, end - begin);
    if (nfc_chunk(chunk, code_points, chunk_nfc) && chunk_nfc != chunk) {
      if (!changed) {
        changed = true;
        out.text.reserve(input.size() + 16);
      }
      out.text.append(input.substr(copied, begin - copied));
      const std::size_t normalized_begin = out.text.size();
      out.text += chunk_nfc;
      out.changes.push_back({begin, end, normalized_begin, out.text.size()});
      copied = end;
    }
    boundary = end;
    pos = end;
  }
  if (!changed) return false;
  out.text.append(input.substr(copied));
  return true;
}

}  // namespace prefixgate::canon::internal
