// The backtracking matcher of tokenizer_regex.h.
//
// run(node, pos) follows the program from `node` at text position `pos` and returns where the
// match ends, or kNoMatch. It recurses only at choice points (kSplit, each candidate length of a
// kRun, lookaheads), whose nesting the pattern bounds: repetition of more than one code point is
// expanded at compile time, so the depth never grows with the text.
#include "tokenizer_regex.h"

#include <utf8proc.h>

#include "prefixgate/base/check.h"
#include "utf8_decode.h"

namespace prefixgate::canon::internal {

class RegexMatcher {
 public:
  static constexpr std::size_t kNoMatch = ~std::size_t{0};

  RegexMatcher(const Regex& re, std::string_view text) : re_(re), text_(text) {}

  std::size_t run(std::uint32_t node, std::size_t pos) {
    using Op = Regex::Node::Op;
    while (true) {
      const Regex::Node& n = re_.nodes_[node];
      switch (n.op) {
        case Op::kMatch: return pos;
        case Op::kChar:
        case Op::kCharFold:
        case Op::kSet:
        case Op::kAny: {
          const std::size_t end = step(n, pos);
          if (end == kNoMatch) return kNoMatch;
          pos = end;
          node = n.next;
          break;
        }
        case Op::kSplit: {
          const std::size_t end = run(n.next, pos);
          if (end != kNoMatch) return end;
          node = n.alt;
          break;
        }
        case Op::kLook: {
          const bool found = run(n.alt, pos) != kNoMatch;
          if (found == n.negative) return kNoMatch;
          node = n.next;
          break;
        }
        case Op::kRun: return run_repeat(n, pos);
      }
    }
  }

 private:
  // The end of one code point at `pos` matched by the atom `n`, or kNoMatch.
  std::size_t step(const Regex::Node& n, std::size_t pos) const {
    using Op = Regex::Node::Op;
    if (pos >= text_.size()) return kNoMatch;
    const auto byte = static_cast<unsigned char>(text_[pos]);
    DecodedCodePoint d{byte, 1};
    if (byte >= 0x80) d = decode_utf8(text_, pos);
    bool ok = false;
    switch (n.op) {
      case Op::kChar: ok = d.cp == n.cp; break;
      case Op::kCharFold: ok = fold_case(d.cp) == n.cp; break;
      case Op::kSet: ok = re_.sets_[n.set].contains(d.cp); break;
      case Op::kAny: ok = d.cp != '\n'; break;
      default: PG_DCHECK(false, "not an atom"); break;
    }
    return ok ? pos + d.bytes : kNoMatch;
  }

  std::size_t run_repeat(const Regex::Node& n, std::size_t pos) {
    const Regex::Node& atom = re_.nodes_[n.atom];
    // The end of each repetition, so that a greedy run can give back one code point at a time
    // (malformed bytes make stepping backwards ambiguous).
    const std::size_t base = ends_.size();
    ends_.push_back(pos);
    std::size_t result = kNoMatch;
    if (n.greedy) {
      std::size_t count = 0;
      for (std::size_t p = pos; count < n.max; ++count) {
        p = step(atom, p);
        if (p == kNoMatch) break;
        ends_.push_back(p);
      }
      for (std::size_t k = count + 1; k-- > n.min;) {
        result = run(n.next, ends_[base + k]);
        if (result != kNoMatch) break;
      }
    } else {
      std::size_t p = pos;
      for (std::size_t count = 0;; ++count) {
        if (count >= n.min) {
          result = run(n.next, p);
          if (result != kNoMatch || count == n.max) break;
        }
        p = step(atom, p);
        if (p == kNoMatch) break;
      }
    }
    ends_.resize(base);
    return result;
  }

  const Regex& re_;
  std::string_view text_;
  std::vector<std::size_t> ends_;
};

std::optional<RegexMatch> Regex::find(std::string_view text, std::size_t from) const {
  RegexMatcher matcher(*this, text);
  for (std::size_t pos = from; pos <= text.size();) {
    const std::size_t end = matcher.run(start_, pos);
    if (end != RegexMatcher::kNoMatch) return RegexMatch{pos, end};
    if (pos == text.size()) break;
    pos += decode_utf8(text, pos).bytes;
  }
  return std::nullopt;
}

void Regex::find_all(std::string_view text, std::vector<RegexMatch>& out) const {
  RegexMatcher matcher(*this, text);
  std::size_t search = 0;
  std::size_t last_end = RegexMatcher::kNoMatch;
  while (search <= text.size()) {
    std::optional<RegexMatch> m;
    for (std::size_t pos = search; pos <= text.size();) {
      const std::size_t end = matcher.run(start_, pos);
      if (end != RegexMatcher::kNoMatch) {
        m = RegexMatch{pos, end};
        break;
      }
      if (pos == text.size()) break;
      pos += decode_utf8(text, pos).bytes;
    }
    if (!m) return;
    if (m->begin == m->end && m->end == last_end) {
      // Oniguruma's iterator: no empty match where the previous one ended; look one code point on.
      if (search >= text.size()) return;
      search += decode_utf8(text, search).bytes;
      continue;
    }
    out.push_back(*m);
    search = m->end;
    last_end = m->end;
  }
}

}  // namespace prefixgate::canon::internal
