// Identifiers with a fixed shape: UUIDs (RFC 9562), ULIDs, W3C traceparent headers, JWTs
// (RFC 7519 compact form) and the prefixed ids LLM providers return ("chatcmpl-...",
// "msg_...", "toolu_...").
#include <array>

#include "volatile_internal.h"

namespace prefixgate::canon::volatile_detail {
namespace {

Candidate make_id(std::size_t begin, std::size_t end, const char* kind) {
  Candidate c;
  c.begin = begin;
  c.end = end;
  c.rule = Rule::kId;
  c.severity = Severity::kError;
  c.kind = kind;
  c.priority = kPriorityStructuredId;
  return c;
}

bool hex_run(std::string_view text, std::size_t pos, std::size_t count) {
  if (pos + count > text.size()) return false;
  for (std::size_t i = pos; i < pos + count; ++i) {
    if (!is_hex(text[i])) return false;
  }
  return true;
}

// Hex groups of the given sizes joined by '-', then a word boundary; returns the end or kNoPos.
template <std::size_t N>
std::size_t hex_groups(std::string_view text, std::size_t pos,
                       const std::array<std::size_t, N>& sizes) {
  std::size_t i = pos;
  for (std::size_t k = 0; k < N; ++k) {
    if (k > 0) {
      if (!char_at(text, i, '-')) return kNoPos;
      ++i;
    }
    if (!hex_run(text, i, sizes[k])) return kNoPos;
    i += sizes[k];
  }
  if (alnum_at(text, i) || (char_at(text, i, '-') && alnum_at(text, i + 1))) return kNoPos;
  return i;
}

// 26 characters of Crockford base32 (no I, L, O, U), one case, the first 0-7 (the 48-bit
// timestamp), and both digits and letters as random data has: "01ARZ3NDEKTSV4RRFFQ69G5FAV".
bool is_ulid(std::string_view word) {
  if (word.size() != 26 || word[0] < '0' || word[0] > '7') return false;
  int digits = 0;
  int letters = 0;
  for (char c : word) {
    if (is_digit(c)) {
      ++digits;
      continue;
    }
    const char upper = is_lower(c) ? static_cast<char>(c - 'a' + 'A') : c;
    if (upper == 'I' || upper == 'L' || upper == 'O' || upper == 'U') return false;
    ++letters;
  }
  return digits >= 3 && letters >= 3;
}

bool is_base64url(char c) {
  return is_alnum(c) || c == '-' || c == '_';
}

std::size_t base64url_end(std::string_view text, std::size_t pos) {
  while (pos < text.size() && is_base64url(text[pos])) ++pos;
  return pos;
}

// header.payload.signature, the header being base64url JSON and so starting "eyJ" ('{"').
// The signature may be empty (alg "none"); a JWE has five segments.
std::size_t jwt_end(std::string_view text, std::size_t pos) {
  const std::size_t header_end = base64url_end(text, pos);
  if (header_end - pos < 10 || !char_at(text, header_end, '.')) return kNoPos;
  const std::size_t payload_end = base64url_end(text, header_end + 1);
  if (payload_end - (header_end + 1) < 3 || !char_at(text, payload_end, '.')) return kNoPos;
  std::size_t end = base64url_end(text, payload_end + 1);
  if (char_at(text, end, '.') && end + 1 < text.size() && is_base64url(text[end + 1])) {
    const std::size_t fourth_end = base64url_end(text, end + 1);
    if (!char_at(text, fourth_end, '.')) return kNoPos;
    end = base64url_end(text, fourth_end + 1);
    if (char_at(text, end, '.') && end + 1 < text.size() && is_base64url(text[end + 1])) {
      return kNoPos;
    }
  }
  return end;
}

// Id prefixes of OpenAI, Anthropic and OpenRouter responses, runs, files and tool calls.
constexpr std::array<std::string_view, 25> kProviderPrefixes = {
    "asst",  "batch",    "call", "chatcmpl", "cmpl",  "conv",  "evt", "fc",  "file",
    "ftjob", "gen",      "modr", "msg",      "req",   "resp",  "rs",  "run", "sess",
    "span",  "srvtoolu", "step", "thread",   "toolu", "trace", "vs",
};

// "msg_01XFDUDYJgAACzvnptvVoYEL" yes; "call_getWeather2", "run_tests", "req_validation" no.
std::size_t provider_id_end(std::string_view text, const Token& token) {
  const char sep = token.end < text.size() ? text[token.end] : '\0';
  if (token.classes != kHasLower || (sep != '_' && sep != '-')) return kNoPos;
  if (token.begin > 0 && text[token.begin - 1] == '_') return kNoPos;  // "my_run_..."
  const std::string_view prefix = text.substr(token.begin, token.size());
  bool known = false;
  for (std::string_view p : kProviderPrefixes) known = known || p == prefix;
  if (!known) return kNoPos;
  std::size_t i = token.end + 1;
  int digits = 0, upper = 0, lower = 0;
  while (alnum_at(text, i)) {
    digits += is_digit(text[i]) ? 1 : 0;
    upper += is_upper(text[i]) ? 1 : 0;
    lower += is_lower(text[i]) ? 1 : 0;
    ++i;
  }
  const std::size_t len = i - (token.end + 1);
  const int letters = upper + lower;
  const bool random = len >= 8 && ((digits >= 2 && letters >= 1) || (letters == 0 && len >= 10) ||
                                   (len >= 16 && digits >= 1 && upper >= 1 && lower >= 1));
  return random ? i : kNoPos;
}

}  // namespace

void detect_structured_ids(std::string_view text, const Token& token, std::vector<Candidate>& out) {
  const std::size_t pos = token.begin;
  const std::size_t n = token.size();
  // Every structured id either goes on with '-' or '_' after its first token, is a ULID's 26
  // characters, or starts "eyJ"; anything else is dismissed at once.
  const char next = token.end < text.size() ? text[token.end] : '\0';
  // A JWT starts a base64url run; requiring that also keeps "eyJ-eyJ-eyJ-..." linear.
  const bool jwt_start = n >= 3 && text[pos] == 'e' && text[pos + 1] == 'y' &&
                         text[pos + 2] == 'J' && (pos == 0 || !is_base64url(text[pos - 1]));
  if (next != '-' && next != '_' && n != 26 && !jwt_start) return;
  if (n == 8 && next == '-') {
    static constexpr std::array<std::size_t, 5> kUuid = {8, 4, 4, 4, 12};
    const std::size_t end = hex_groups(text, pos, kUuid);
    if (end != kNoPos) out.push_back(make_id(pos, end, "uuid"));
  } else if (n == 2 && next == '-' && text.substr(pos, 2) != "ff") {
    // W3C Trace Context: version-traceid-parentid-flags; version ff is invalid.
    static constexpr std::array<std::size_t, 4> kTraceparent = {2, 32, 16, 2};
    const std::size_t end = hex_groups(text, pos, kTraceparent);
    if (end != kNoPos) out.push_back(make_id(pos, end, "traceparent"));
  } else if (n == 26 && (token.classes & kHasDigit) != 0 &&
             (token.classes & (kHasUpper | kHasLower)) != (kHasUpper | kHasLower)) {
    if (is_ulid(text.substr(pos, n))) out.push_back(make_id(pos, token.end, "ulid"));
  }
  if (jwt_start) {
    const std::size_t end = jwt_end(text, pos);
    if (end != kNoPos) out.push_back(make_id(pos, end, "jwt"));
  }
  if (is_lower(text[pos])) {
    const std::size_t end = provider_id_end(text, token);
    if (end != kNoPos) out.push_back(make_id(pos, end, "provider-id"));
  }
}

}  // namespace prefixgate::canon::volatile_detail
