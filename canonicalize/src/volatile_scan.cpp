// find_volatile: one pass over the text, cutting it into tokens and running at each token only
// the detectors whose formats can start with it; then overlapping finds are resolved, the
// longest winning. Results for long texts are memoized per thread (see ScanMemo).
#include <algorithm>
#include <array>
#include <cstring>
#include <iterator>
#include <map>
#include <numeric>
#include <string>

#include "bulk_hash.h"
#include "volatile_internal.h"

namespace prefixgate::canon {
namespace volatile_detail {
namespace {

// TokenClass bits per byte; 0 for everything that is not an ASCII letter or digit.
constexpr std::array<unsigned char, 256> kByteClass = [] {
  std::array<unsigned char, 256> table{};
  for (int c = '0'; c <= '9'; ++c) table[static_cast<std::size_t>(c)] = kHasDigit;
  for (int c = 'A'; c <= 'Z'; ++c) table[static_cast<std::size_t>(c)] = kHasUpper;
  for (int c = 'a'; c <= 'z'; ++c) table[static_cast<std::size_t>(c)] = kHasLower;
  return table;
}();

unsigned byte_class(char c) {
  return kByteClass[static_cast<unsigned char>(c)];
}

bool is_base64_symbol_at(std::string_view text, std::size_t i) {
  if (i >= text.size()) return false;
  const char c = text[i];
  return c == '+' || c == '/' || c == '-' || c == '_';
}

void detect_at_token(std::string_view text, const Token& token, std::vector<Candidate>& out) {
  if (is_digit(text[token.begin])) {
    detect_iso_dates(text, token, out);
    detect_numeric_dates(text, token, out);
    detect_time_of_day(text, token, out);
    detect_epoch(text, token, out);
  }
  detect_textual_dates(text, token, out);  // "Thursday, ...", "Aug 20, 2026", "20 Aug 2026"
  detect_structured_ids(text, token, out);
  if ((token.classes & kHasDigit) != 0) detect_hex_nonce(text, token, out);
}

// Keeps the longest of overlapping candidates (then the higher priority, then the earlier),
// returning the survivors sorted by begin.
std::vector<Candidate> resolve_overlaps(std::vector<Candidate> found) {
  std::vector<std::size_t> order(found.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(), [&found](std::size_t a, std::size_t b) {
    const Candidate& x = found[a];
    const Candidate& y = found[b];
    if (x.end - x.begin != y.end - y.begin) return x.end - x.begin > y.end - y.begin;
    if (x.priority != y.priority) return x.priority > y.priority;
    return x.begin < y.begin;
  });
  std::map<std::size_t, std::size_t> kept;  // begin -> index into found
  for (std::size_t index : order) {
    const Candidate& c = found[index];
    const auto next = kept.lower_bound(c.begin);
    if (next != kept.end() && found[next->second].begin < c.end) continue;
    if (next != kept.begin() && found[std::prev(next)->second].end > c.begin) continue;
    kept.emplace(c.begin, index);
  }
  std::vector<Candidate> result;
  result.reserve(kept.size());
  for (const auto& entry : kept) result.push_back(std::move(found[entry.second]));
  return result;
}

std::vector<Candidate> scan_uncached(std::string_view text);

// The same text is scanned again and again: a system prompt or a tool schema repeats verbatim
// across requests (the premise of prefix caching), and the gateway scans it twice per request
// (timestamp rule, then prompt lint). A small memo per thread returns the earlier result. It is
// set-associative (kWays entries per set, least recently used replaced): a direct-mapped table of
// the same size let two segments of one conversation that landed on the same slot evict each
// other on every request, so a 30 KB agent turn rescanned most of its earlier turns.
//
// A text of up to kMaxKeptBytes is kept and compared byte for byte, its set chosen by a hash of
// its length and its first and last bytes: comparing 2 KB that match costs a fifth of hashing
// them. A longer one is named by its XXH3-128 and length, as comparing would keep too much.
// Bounded: kSets * kWays entries (a system prompt, its tools' descriptions, the turns of a few
// conversations; at most kMaxKeptBytes of text each), texts of at least kMinBytes (below that,
// looking up costs about what scanning does) and results of at most kMaxCandidates spans, so an
// adversarial text cannot pin memory.
class ScanMemo {
 public:
  static constexpr std::size_t kMinBytes = 48;
  static constexpr std::size_t kMaxKeptBytes = std::size_t{8} << 10;
  static constexpr std::size_t kMaxCandidates = 64;
  static constexpr std::size_t kSets = 64;
  static constexpr std::size_t kWays = 4;
  static constexpr std::size_t kSampleBytes = 32;

  // The result lives here until the next call.
  const std::vector<Candidate>& scan(std::string_view text) {
    if (text.size() < kMinBytes) return scratch_ = scan_uncached(text);
    const bool kept = text.size() <= kMaxKeptBytes;
    const internal::Hash128 hash = kept ? sample_hash(text) : internal::bulk_hash128(text);
    std::array<Entry, kWays>& set = sets_[hash.low % kSets];
    ++clock_;
    Entry* victim = &set[0];
    for (Entry& e : set) {
      if (e.used != 0 && e.size == text.size() && e.hash == hash &&
          (!kept || std::memcmp(e.text.data(), text.data(), text.size()) == 0)) {
        e.used = clock_;
        return e.found;
      }
      if (e.used < victim->used) victim = &e;
    }
    std::vector<Candidate> found = scan_uncached(text);
    if (found.size() > kMaxCandidates) return scratch_ = std::move(found);
    victim->used = clock_;
    victim->hash = hash;
    victim->size = text.size();
    if (kept) {
      victim->text.assign(text);
    } else {
      victim->text.clear();
      victim->text.shrink_to_fit();
    }
    victim->found = std::move(found);
    return victim->found;
  }

 private:
  struct Entry {
    std::uint64_t used = 0;  // clock_ at the last hit or store; 0: empty
    internal::Hash128 hash{};
    std::size_t size = 0;
    std::string text;  // a kept text's bytes; empty for a longer one
    std::vector<Candidate> found;
  };

  // The hash of a text's length and its first and last kSampleBytes: it only picks the set and
  // rules entries out, the bytes decide.
  static internal::Hash128 sample_hash(std::string_view text) {
    if (text.size() <= 2 * kSampleBytes) return internal::bulk_hash128(text, text.size());
    char sample[2 * kSampleBytes];
    std::memcpy(sample, text.data(), kSampleBytes);
    std::memcpy(sample + kSampleBytes, text.data() + text.size() - kSampleBytes, kSampleBytes);
    return internal::bulk_hash128(std::string_view(sample, sizeof sample), text.size());
  }

  std::array<std::array<Entry, kWays>, kSets> sets_;
  std::uint64_t clock_ = 0;
  std::vector<Candidate> scratch_;  // a result not kept
};

}  // namespace

const std::vector<Candidate>& scan(std::string_view text) {
  thread_local ScanMemo memo;
  return memo.scan(text);
}

namespace {

std::vector<Candidate> scan_uncached(std::string_view text) {
  std::vector<Candidate> found;
  std::size_t base64_checked_until = 0;  // end of the last base64 run looked at
  const std::size_t n = text.size();
  std::size_t i = 0;
  while (i < n) {
    if (byte_class(text[i]) == 0) {
      // A JSON escape's letter is whitespace, not the start of a word: "\n2026-08-20".
      const bool escape = text[i] == '\\' && i + 1 < n &&
                          (text[i + 1] == 'n' || text[i + 1] == 't' || text[i + 1] == 'r');
      i += escape ? 2 : 1;
      continue;
    }
    Token token;
    token.begin = i;
    unsigned classes = 0;
    for (unsigned cls; i < n && (cls = byte_class(text[i])) != 0; ++i) classes |= cls;
    token.end = i;
    token.classes = classes;
    // A base64 nonce has a digit, so a run worth looking at has a digit in its first token or
    // goes on past it with '+', '/', '-' or '_' (before or after).
    if (token.begin >= base64_checked_until &&
        ((classes & kHasDigit) != 0 || is_base64_symbol_at(text, token.end) ||
         (token.begin > 0 && is_base64_symbol_at(text, token.begin - 1)))) {
      base64_checked_until = detect_base64_run(text, token.begin, found);
    }
    detect_at_token(text, token, found);
  }
  return resolve_overlaps(std::move(found));
}

}  // namespace
}  // namespace volatile_detail

const char* rule_id(Rule rule) {
  switch (rule) {
    case Rule::kTimestamp: return "volatile-timestamp";
    case Rule::kDate: return "volatile-date";
    case Rule::kId: return "volatile-id";
  }
  return "volatile-unknown";
}

const char* severity_name(Severity severity) {
  switch (severity) {
    case Severity::kInfo: return "info";
    case Severity::kWarning: return "warning";
    case Severity::kError: return "error";
  }
  return "unknown";
}

std::vector<VolatileSpan> find_volatile(std::string_view text) {
  std::vector<VolatileSpan> spans;
  for (const volatile_detail::Candidate& c : volatile_detail::scan(text)) {
    spans.push_back(VolatileSpan{c.rule, c.severity, c.begin, c.end, c.kind});
  }
  return spans;
}

}  // namespace prefixgate::canon
