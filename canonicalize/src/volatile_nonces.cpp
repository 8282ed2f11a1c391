// Random-looking strings with no fixed shape: long hex nonces (hashes, trace and request ids)
// and base64 nonces (session tokens, signatures).
//
// Both are judged by how random they look, and both err on the side of silence: an identifier
// in camelCase or snake_case, a path, a model name or a version must not be reported, so
// "internationalization", "XMLHttpRequest2Handler" and "src/components/UserProfile2Card" are
// not nonces. Very long runs (data: URIs, hex dumps) are content, not nonces, and are skipped.
#include <cmath>
#include <cstdint>

#include "volatile_internal.h"

namespace prefixgate::canon::volatile_detail {
namespace {

constexpr std::size_t kMinHexDigits = 16;
constexpr std::size_t kMaxHexDigits = 128;  // a SHA-512 digest
constexpr std::size_t kMinBase64 = 20;
constexpr std::size_t kMaxBase64 = 256;
// Average length of the "word pieces" a camelCase reader would cut (a capitalised word, an
// acronym, a lower-case word, a number): about 1.2-1.8 for random base64, 2.4 and up for names,
// even acronym-heavy ones ("NID_pbe_WithSHA1And128BitRC4"). Measured on 20k random strings and
// ~900 long mixed-case identifiers from system headers and Python sources: at 2.2 about 90% of
// random strings pass and no identifier does.
constexpr double kMaxAveragePiece = 2.2;
// Distinct characters, relative to what a random string of the same length shows: rules out
// repetitive runs ("aB1aB1aB1...") that cut into short pieces.
constexpr double kMinDistinctRatio = 0.6;

Candidate make_nonce(std::size_t begin, std::size_t end, const char* kind, int priority) {
  Candidate c;
  c.begin = begin;
  c.end = end;
  c.rule = Rule::kId;
  c.severity = Severity::kError;
  c.kind = kind;
  c.priority = priority;
  return c;
}

bool is_base64_symbol(char c) {
  return c == '+' || c == '/' || c == '-' || c == '_';
}
bool in_base64(char c) {
  return is_alnum(c) || is_base64_symbol(c);
}

// 0..63 for the base64 alphabets (both symbol pairs share slots 62 and 63).
int base64_index(char c) {
  if (is_upper(c)) return c - 'A';
  if (is_lower(c)) return 26 + (c - 'a');
  if (is_digit(c)) return 52 + (c - '0');
  return c == '+' || c == '-' ? 62 : 63;
}

// Number of word pieces in `run`: [A-Z]?[a-z]+, [A-Z]+ not followed by [a-z], [0-9]+.
int count_pieces(std::string_view run) {
  int pieces = 0;
  std::size_t i = 0;
  while (i < run.size()) {
    const char c = run[i];
    if (is_digit(c)) {
      while (i < run.size() && is_digit(run[i])) ++i;
    } else if (is_lower(c)) {
      while (i < run.size() && is_lower(run[i])) ++i;
    } else if (is_upper(c)) {
      std::size_t j = i;
      while (j < run.size() && is_upper(run[j])) ++j;
      if (j < run.size() && is_lower(run[j])) {
        if (j - i > 1) ++pieces;  // the acronym before a capitalised word: "XMLHttp"
        i = j;
        while (i < run.size() && is_lower(run[i])) ++i;
      } else {
        i = j;
      }
    } else {
      ++i;  // a symbol separates pieces and is not one
      continue;
    }
    ++pieces;
  }
  return pieces;
}

bool looks_random_base64(std::string_view run) {
  // "0xb5026f5aa96619e9ULL": a hex literal in code.
  if (run.size() > 2 && run[0] == '0' && (run[1] == 'x' || run[1] == 'X') && is_hex(run[2])) {
    return false;
  }
  int upper = 0, lower = 0, digits = 0, symbols = 0;
  std::uint64_t seen = 0;
  for (std::size_t i = 0; i < run.size(); ++i) {
    const char c = run[i];
    if (i > 0 && c == '/' && run[i - 1] == '/') return false;  // a URL or a path, not a nonce
    seen |= std::uint64_t{1} << base64_index(c);
    upper += is_upper(c) ? 1 : 0;
    lower += is_lower(c) ? 1 : 0;
    digits += is_digit(c) ? 1 : 0;
    symbols += is_base64_symbol(c) ? 1 : 0;
  }
  const int alnum = upper + lower + digits;
  // Random base64 has a symbol every 16 characters on average; names have one every few.
  if (upper < 2 || lower < 2 || digits < 1 || symbols * 8 > alnum) return false;
  if (static_cast<double>(alnum) / count_pieces(run) >= kMaxAveragePiece) return false;
  const double expected_distinct =
      64.0 * (1.0 - std::pow(63.0 / 64.0, static_cast<double>(run.size())));
  int distinct = 0;
  for (std::uint64_t bits = seen; bits != 0; bits &= bits - 1) ++distinct;
  return distinct >= kMinDistinctRatio * expected_distinct;
}

}  // namespace

void detect_hex_nonce(std::string_view text, const Token& token, std::vector<Candidate>& out) {
  std::size_t digits_begin = token.begin;
  if (token.size() > 2 && text[token.begin] == '0' &&
      (text[token.begin + 1] == 'x' || text[token.begin + 1] == 'X')) {
    digits_begin += 2;
  }
  const std::size_t len = token.end - digits_begin;
  if (len < kMinHexDigits || len > kMaxHexDigits) return;
  int digits = 0, lower = 0, upper = 0;
  for (std::size_t i = digits_begin; i < token.end; ++i) {
    const char c = text[i];
    if (is_digit(c)) {
      ++digits;
    } else if (c >= 'a' && c <= 'f') {
      ++lower;
    } else if (c >= 'A' && c <= 'F') {
      ++upper;
    } else {
      return;
    }
  }
  // Digits alone are a number; mixed-case hex is more likely a word or a base64 string.
  if (digits == 0 || lower + upper == 0 || (lower > 0 && upper > 0)) return;
  out.push_back(make_nonce(token.begin, token.end, "hex-nonce", kPriorityHex));
}

std::size_t detect_base64_run(std::string_view text, std::size_t token_begin,
                              std::vector<Candidate>& out) {
  std::size_t begin = token_begin;
  while (begin > 0 && is_base64_symbol(text[begin - 1])) --begin;
  std::size_t run_end = token_begin;
  while (run_end < text.size() && in_base64(text[run_end])) ++run_end;
  const std::size_t len = run_end - begin;
  if (len < kMinBase64 || len > kMaxBase64) return run_end;
  if (!looks_random_base64(text.substr(begin, len))) return run_end;
  // A URL path before the nonce is not part of it: "docs.google.com/document/d/1yrYZJ2t...".
  for (std::size_t slash = text.find('/', begin); slash < run_end; slash = text.find('/', begin)) {
    bool path_word = slash > begin;
    for (std::size_t i = begin; i < slash && path_word; ++i) path_word = is_lower(text[i]);
    if (!path_word || run_end - (slash + 1) < kMinBase64 ||
        !looks_random_base64(text.substr(slash + 1, run_end - (slash + 1)))) {
      break;
    }
    begin = slash + 1;
  }
  // Padding belongs to the nonce unless it is a "key=value" separator.
  std::size_t end = run_end;
  while (end < text.size() && text[end] == '=' && end - run_end < 2) ++end;
  if (alnum_at(text, end)) end = run_end;
  out.push_back(make_nonce(begin, end, "base64-nonce", kPriorityBase64));
  return run_end;
}

}  // namespace prefixgate::canon::volatile_detail
