// Regex::compile(): parses a tokenizer.json pattern (Oniguruma's Ruby syntax, the subset
// tokenizer_regex.h lists) into a tree, then lowers the tree into the program the matcher runs.
#include <utf8proc.h>

#include <memory>

#include "char_class.h"
#include "tokenizer_regex.h"
#include "utf8_decode.h"

namespace prefixgate::canon::internal {
namespace {

using namespace regex_category;

// Expanding X{n,m} copies X; beyond this many copies the pattern is refused.
constexpr std::uint32_t kMaxExpandedRepeat = 64;
constexpr std::uint32_t kUnbounded = ~std::uint32_t{0};

struct Ast {
  enum class Kind { kEmpty, kChar, kSet, kAny, kConcat, kAlternation, kRepeat, kLook };
  Kind kind = Kind::kEmpty;
  char32_t cp = 0;
  bool fold = false;  // kChar under (?i)
  std::uint32_t set = 0;
  std::vector<Ast> children;
  std::uint32_t min = 0, max = 0;
  bool greedy = true;
  bool negative = false;  // kLook
};

bool is_single(const Ast& a) {
  return a.kind == Ast::Kind::kChar || a.kind == Ast::Kind::kSet || a.kind == Ast::Kind::kAny;
}

class Parser {
 public:
  Parser(std::string_view pattern, std::vector<Regex::Set>& sets)
      : pattern_(pattern), sets_(sets) {}

  Result<Ast> parse() {
    auto ast = parse_alternation(/*fold=*/false);
    if (!ast) return ast;
    if (pos_ < pattern_.size()) return malformed("unbalanced ')'");
    return ast;
  }

 private:
  bool at_end() const { return pos_ >= pattern_.size(); }
  char32_t peek() const { return decode_utf8(pattern_, pos_).cp; }
  char32_t take() {
    const DecodedCodePoint d = decode_utf8(pattern_, pos_);
    pos_ += d.bytes;
    return d.cp;
  }
  bool accept(char c) {
    if (!at_end() && pattern_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }

  Error unsupported(std::size_t at, const std::string& what) const {
    return make_error(ErrorCode::kUnsupported, what + " (at offset " + std::to_string(at) +
                                                   " of the pattern) is not supported");
  }
  Error malformed(const std::string& what) const {
    return make_error(ErrorCode::kInvalidValue,
                      "malformed regex: " + what + " at offset " + std::to_string(pos_));
  }

  Result<Ast> parse_alternation(bool fold) {
    Ast alt;
    alt.kind = Ast::Kind::kAlternation;
    while (true) {
      auto branch = parse_concat(fold);
      if (!branch) return branch;
      alt.children.push_back(std::move(*branch));
      if (!accept('|')) break;
    }
    if (alt.children.size() == 1) return std::move(alt.children[0]);
    return alt;
  }

  Result<Ast> parse_concat(bool fold) {
    Ast concat;
    concat.kind = Ast::Kind::kConcat;
    while (!at_end() && pattern_[pos_] != '|' && pattern_[pos_] != ')') {
      const std::size_t atom_at = pos_;
      auto atom = parse_atom(fold);
      if (!atom) return atom;
      auto quantified = parse_quantifier(std::move(*atom), atom_at);
      if (!quantified) return quantified;
      concat.children.push_back(std::move(*quantified));
    }
    if (concat.children.empty()) return Ast{};
    if (concat.children.size() == 1) return std::move(concat.children[0]);
    return concat;
  }

  Result<Ast> parse_quantifier(Ast atom, std::size_t atom_at) {
    while (!at_end()) {
      const std::size_t at = pos_;
      std::uint32_t min = 0, max = 0;
      const char c = pattern_[pos_];
      if (c == '?') {
        min = 0, max = 1;
        ++pos_;
      } else if (c == '*') {
        min = 0, max = kUnbounded;
        ++pos_;
      } else if (c == '+') {
        min = 1, max = kUnbounded;
        ++pos_;
      } else if (c == '{') {
        auto bounds = parse_braces();
        if (!bounds) break;  // not a quantifier: '{' is then a literal, as in Oniguruma
        min = bounds->first, max = bounds->second;
      } else {
        break;
      }
      bool greedy = true;
      if (accept('?')) {
        greedy = false;
      } else if (!at_end() && pattern_[pos_] == '+' && c != '{') {
        return unsupported(pos_, "the possessive quantifier " + std::string(1, c) + "+");
      }
      if (atom.kind == Ast::Kind::kLook || atom.kind == Ast::Kind::kEmpty) {
        return unsupported(at, "a quantifier on an empty or lookahead expression");
      }
      if (!is_single(atom) && max == kUnbounded) {
        return unsupported(atom_at, "a group repeated without bound (" +
                                        std::string(pattern_.substr(atom_at, pos_ - atom_at)) +
                                        ")");
      }
      if (!is_single(atom) && max > kMaxExpandedRepeat) {
        return unsupported(
            atom_at, "a group repeated more than " + std::to_string(kMaxExpandedRepeat) + " times");
      }
      Ast repeat;
      repeat.kind = Ast::Kind::kRepeat;
      repeat.min = min;
      repeat.max = max;
      repeat.greedy = greedy;
      repeat.children.push_back(std::move(atom));
      atom = std::move(repeat);
    }
    return atom;
  }

  // {n}, {n,}, {n,m} at pos_ (a '{'); nullopt (pos_ unchanged) when it is not one.
  std::optional<std::pair<std::uint32_t, std::uint32_t>> parse_braces() {
    std::size_t p = pos_ + 1;
    auto number = [&](std::uint32_t& out) {
      const std::size_t begin = p;
      std::uint64_t v = 0;
      while (p < pattern_.size() && pattern_[p] >= '0' && pattern_[p] <= '9') {
        v = v * 10 + static_cast<std::uint64_t>(pattern_[p] - '0');
        if (v > 100000) return false;
        ++p;
      }
      out = static_cast<std::uint32_t>(v);
      return p > begin;
    };
    std::uint32_t min = 0, max = 0;
    if (!number(min)) return std::nullopt;
    if (p < pattern_.size() && pattern_[p] == '}') {
      max = min;
    } else if (p < pattern_.size() && pattern_[p] == ',') {
      ++p;
      if (p < pattern_.size() && pattern_[p] == '}') {
        max = kUnbounded;
      } else if (!number(max) || max < min) {
        return std::nullopt;
      }
    } else {
      return std::nullopt;
    }
    if (p >= pattern_.size() || pattern_[p] != '}') return std::nullopt;
    pos_ = p + 1;
    return std::pair{min, max};
  }

  Result<Ast> parse_atom(bool fold) {
    const std::size_t at = pos_;
    const char32_t c = take();
    switch (c) {
      case '(': return parse_group(at, fold);
      case '[': {
        if (fold) return unsupported(at, "a character class inside (?i)");
        auto set = parse_class(at);
        if (!set) return set.error();
        return set_ast(std::move(*set));
      }
      case '.': {
        Ast a;
        a.kind = Ast::Kind::kAny;
        return a;
      }
      case '^':
      case '$': return unsupported(at, std::string("the anchor ") + static_cast<char>(c));
      case '*':
      case '+':
      case '?': return malformed("a quantifier with nothing to repeat");
      case '\\': return parse_escape(at, fold);
      default: return char_ast(c, fold);
    }
  }

  Ast char_ast(char32_t c, bool fold) {
    Ast a;
    a.kind = Ast::Kind::kChar;
    a.cp = c;
    // Under (?i) a character matches its case variants; one without any stays a plain char.
    if (fold && (fold_case(c) != c || utf8proc_toupper(static_cast<utf8proc_int32_t>(c)) !=
                                          static_cast<utf8proc_int32_t>(c))) {
      a.fold = true;
      a.cp = fold_case(c);
    }
    return a;
  }

  Ast set_ast(Regex::Set set) {
    sets_.push_back(std::move(set));
    Ast a;
    a.kind = Ast::Kind::kSet;
    a.set = static_cast<std::uint32_t>(sets_.size() - 1);
    return a;
  }

  Result<Ast> parse_group(std::size_t at, bool fold) {
    bool look = false, negative = false;
    if (accept('?')) {
      if (accept(':')) {
      } else if (accept('=')) {
        look = true;
      } else if (accept('!')) {
        look = true;
        negative = true;
      } else if (pattern_.substr(pos_).starts_with("i:")) {
        pos_ += 2;
        fold = true;
      } else if (pattern_.substr(pos_).starts_with("<=") ||
                 pattern_.substr(pos_).starts_with("<!")) {
        return unsupported(at, "lookbehind");
      } else {
        return unsupported(at, "the group syntax " + std::string(pattern_.substr(at, 3)));
      }
    }
    auto inner = parse_alternation(fold);
    if (!inner) return inner;
    if (!accept(')')) return malformed("unbalanced '('");
    if (!look) return inner;
    Ast a;
    a.kind = Ast::Kind::kLook;
    a.negative = negative;
    a.children.push_back(std::move(*inner));
    return a;
  }

  // The code point of an escape that stands for one character, or nullopt.
  std::optional<char32_t> simple_escape(char32_t e) {
    switch (e) {
      case 'n': return U'\n';
      case 'r': return U'\r';
      case 't': return U'\t';
      case 'f': return U'\f';
      case 'v': return U'\v';
      case 'a': return U'\a';
      case 'e': return U'\x1b';
      case '0': return U'\0';
      default: break;
    }
    // Escaped punctuation and symbols stand for themselves (\- \. \' \# ...).
    if (e < 0x80 && !(e >= 'a' && e <= 'z') && !(e >= 'A' && e <= 'Z') && !(e >= '0' && e <= '9')) {
      return e;
    }
    if (e >= 0x80) return e;
    return std::nullopt;
  }

  // \xHH, \x{H...}, \uHHHH after the 'x' or 'u'.
  Result<char32_t> hex_escape(char32_t kind) {
    char32_t v = 0;
    auto digit = [](char c) -> int {
      if (c >= '0' && c <= '9') return c - '0';
      if (c >= 'a' && c <= 'f') return c - 'a' + 10;
      if (c >= 'A' && c <= 'F') return c - 'A' + 10;
      return -1;
    };
    if (kind == 'x' && accept('{')) {
      int n = 0;
      while (!at_end() && digit(pattern_[pos_]) >= 0 && n < 8) {
        v = v * 16 + static_cast<char32_t>(digit(pattern_[pos_++]));
        ++n;
      }
      if (n == 0 || !accept('}')) return malformed("bad \\x{...} escape");
    } else {
      const int want = kind == 'x' ? 2 : 4;
      for (int i = 0; i < want; ++i) {
        if (at_end() || digit(pattern_[pos_]) < 0) return malformed("bad hex escape");
        v = v * 16 + static_cast<char32_t>(digit(pattern_[pos_++]));
      }
    }
    if (v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) return malformed("escape out of range");
    return v;
  }

  // A class escape (\s \d \w \p{..} and negations) as a set item, or nullopt if `e` is not one.
  Result<std::optional<Regex::Set::Item>> class_escape(std::size_t at, char32_t e) {
    using Item = Regex::Set::Item;
    Item item{};
    switch (e) {
      case 's':
      case 'S':
        item.kind = Item::kWhiteSpace;
        item.negated = e == 'S';
        return std::optional<Item>(item);
      case 'd':
      case 'D':
        item.kind = Item::kCategories;
        item.categories = bit(9);
        item.negated = e == 'D';
        return std::optional<Item>(item);
      case 'w':
      case 'W':
        // Oniguruma's Unicode \w: Letter, Mark, Decimal_Number, Connector_Punctuation.
        item.kind = Item::kCategories;
        item.categories = kLetters | kMarks | bit(9) | bit(12);
        item.negated = e == 'W';
        return std::optional<Item>(item);
      case 'p':
      case 'P': {
        if (!accept('{')) return malformed("\\p without {...}");
        const std::size_t close = pattern_.find('}', pos_);
        if (close == std::string_view::npos) return malformed("unterminated \\p{");
        std::string_view name = pattern_.substr(pos_, close - pos_);
        pos_ = close + 1;
        bool negated = e == 'P';
        if (name.starts_with('^')) {
          negated = !negated;
          name.remove_prefix(1);
        }
        const auto mask = category_mask(name);
        if (!mask) {
          return unsupported(
              at, "the Unicode property \\p{" + std::string(name) + "} (general categories are)");
        }
        item.kind = Item::kCategories;
        item.categories = *mask;
        item.negated = negated;
        return std::optional<Item>(item);
      }
      case 'h':
      case 'H': return unsupported(at, "\\h (hexadecimal digit)");
      default: return std::optional<Item>{};
    }
  }

  Result<Ast> parse_escape(std::size_t at, bool fold) {
    if (at_end()) return malformed("trailing backslash");
    const char32_t e = take();
    auto item = class_escape(at, e);
    if (!item) return item.error();
    if (*item) {
      if (fold) return unsupported(at, "a class escape inside (?i)");
      Regex::Set set;
      set.items.push_back(**item);
      return set_ast(std::move(set));
    }
    if (e == 'x' || e == 'u') {
      auto cp = hex_escape(e);
      if (!cp) return cp.error();
      return char_ast(*cp, fold);
    }
    switch (e) {
      case 'b':
      case 'B':
      case 'A':
      case 'z':
      case 'Z':
      case 'G': return unsupported(at, "the anchor \\" + std::string(1, static_cast<char>(e)));
      case 'k':
      case 'g': return unsupported(at, "backreferences and subexpression calls");
      default: break;
    }
    if (e >= '1' && e <= '9') return unsupported(at, "backreferences");
    if (const auto c = simple_escape(e)) return char_ast(*c, fold);
    return unsupported(at, "the escape \\" + std::string(1, static_cast<char>(e)));
  }

  // A bracket class; pos_ is just past the '['.
  Result<Regex::Set> parse_class(std::size_t at) {
    using Item = Regex::Set::Item;
    Regex::Set set;
    if (accept('^')) set.negated = true;
    bool first = true;
    while (true) {
      if (at_end()) return malformed("unterminated character class");
      const std::size_t item_at = pos_;
      // ']' right after '[' or '[^' is a literal, as in Oniguruma.
      if (pattern_[pos_] == ']' && !first) {
        ++pos_;
        break;
      }
      first = false;
      if (pattern_[pos_] == '[') return unsupported(item_at, "a nested character class");
      if (pattern_.substr(pos_).starts_with("&&")) {
        return unsupported(item_at, "character class intersection (&&)");
      }
      char32_t low = 0;
      if (accept('\\')) {
        if (at_end()) return malformed("trailing backslash");
        const char32_t e = take();
        auto item = class_escape(item_at, e);
        if (!item) return item.error();
        if (*item) {
          set.items.push_back(**item);
          continue;
        }
        if (e == 'x' || e == 'u') {
          auto cp = hex_escape(e);
          if (!cp) return cp.error();
          low = *cp;
        } else if (e == 'b') {
          low = U'\b';  // backspace inside a class
        } else if (const auto c = simple_escape(e)) {
          low = *c;
        } else {
          return unsupported(item_at, "the escape \\" + std::string(1, static_cast<char>(e)) +
                                          " in a character class");
        }
      } else {
        low = take();
      }
      char32_t high = low;
      // A range "a-z"; a '-' before ']' is a literal.
      if (pos_ + 1 < pattern_.size() && pattern_[pos_] == '-' && pattern_[pos_ + 1] != ']') {
        ++pos_;
        if (accept('\\')) {
          if (at_end()) return malformed("trailing backslash");
          const char32_t e = take();
          if (e == 'x' || e == 'u') {
            auto cp = hex_escape(e);
            if (!cp) return cp.error();
            high = *cp;
          } else if (const auto c = simple_escape(e)) {
            high = *c;
          } else {
            return malformed("a class escape as the end of a range");
          }
        } else {
          if (pattern_[pos_] == '[') return unsupported(pos_, "a nested character class");
          high = take();
        }
        if (high < low) return malformed("a range whose end is before its start");
      }
      Item item{};
      item.kind = Item::kRange;
      item.low = low;
      item.high = high;
      set.items.push_back(item);
    }
    (void)at;
    return set;
  }

  std::string_view pattern_;
  std::size_t pos_ = 0;
  std::vector<Regex::Set>& sets_;
};

}  // namespace

// Lowers the tree into Regex::nodes_, back to front: each part is compiled knowing the node
// that follows it.
class RegexCompiler {
 public:
  explicit RegexCompiler(Regex& re) : re_(re) {}

  std::uint32_t add(Regex::Node n) {
    re_.nodes_.push_back(n);
    return static_cast<std::uint32_t>(re_.nodes_.size() - 1);
  }

  std::uint32_t atom(const Ast& a, std::uint32_t next) {
    Regex::Node n;
    n.next = next;
    switch (a.kind) {
      case Ast::Kind::kChar:
        n.op = a.fold ? Regex::Node::Op::kCharFold : Regex::Node::Op::kChar;
        n.cp = a.cp;
        break;
      case Ast::Kind::kSet:
        n.op = Regex::Node::Op::kSet;
        n.set = a.set;
        break;
      default: n.op = Regex::Node::Op::kAny; break;
    }
    return add(n);
  }

  std::uint32_t compile(const Ast& a, std::uint32_t next) {
    using Op = Regex::Node::Op;
    switch (a.kind) {
      case Ast::Kind::kEmpty: return next;
      case Ast::Kind::kChar:
      case Ast::Kind::kSet:
      case Ast::Kind::kAny: return atom(a, next);
      case Ast::Kind::kConcat:
        for (auto it = a.children.rbegin(); it != a.children.rend(); ++it)
          next = compile(*it, next);
        return next;
      case Ast::Kind::kAlternation: {
        std::uint32_t cur = compile(a.children.back(), next);
        for (std::size_t i = a.children.size() - 1; i-- > 0;) {
          Regex::Node split;
          split.op = Op::kSplit;
          split.next = compile(a.children[i], next);
          split.alt = cur;
          cur = add(split);
        }
        return cur;
      }
      case Ast::Kind::kRepeat: {
        const Ast& child = a.children[0];
        if (is_single(child)) {
          Regex::Node run;
          run.op = Op::kRun;
          run.atom = atom(child, 0);
          run.min = a.min;
          run.max = a.max;
          run.greedy = a.greedy;
          run.next = next;
          return add(run);
        }
        // X{min,max} = X...X (min times) then (max - min) nested optional copies.
        std::uint32_t cur = next;
        for (std::uint32_t i = a.min; i < a.max; ++i) {
          Regex::Node split;
          split.op = Op::kSplit;
          const std::uint32_t body = compile(child, cur);
          split.next = a.greedy ? body : next;
          split.alt = a.greedy ? next : body;
          cur = add(split);
        }
        for (std::uint32_t i = 0; i < a.min; ++i) cur = compile(child, cur);
        return cur;
      }
      case Ast::Kind::kLook: {
        Regex::Node match;
        match.op = Op::kMatch;
        const std::uint32_t end = add(match);
        Regex::Node look;
        look.op = Op::kLook;
        look.negative = a.negative;
        look.alt = compile(a.children[0], end);
        look.next = next;
        return add(look);
      }
    }
    return next;
  }

 private:
  Regex& re_;
};

Result<Regex> Regex::compile(std::string_view pattern) {
  Regex re;
  Parser parser(pattern, re.sets_);
  auto ast = parser.parse();
  if (!ast) return ast.error();
  for (Set& s : re.sets_) s.finish();
  RegexCompiler compiler(re);
  Node match;
  match.op = Node::Op::kMatch;
  const std::uint32_t end = compiler.add(match);
  re.start_ = compiler.compile(*ast, end);
  return re;
}

Regex Regex::literal(std::string_view text) {
  Regex re;
  RegexCompiler compiler(re);
  Node match;
  match.op = Node::Op::kMatch;
  std::uint32_t next = compiler.add(match);
  std::vector<char32_t> cps;
  for (std::size_t pos = 0; pos < text.size();) {
    const DecodedCodePoint d = decode_utf8(text, pos);
    cps.push_back(d.cp);
    pos += d.bytes;
  }
  for (auto it = cps.rbegin(); it != cps.rend(); ++it) {
    Node n;
    n.op = Node::Op::kChar;
    n.cp = *it;
    n.next = next;
    next = compiler.add(n);
  }
  re.start_ = next;
  return re;
}

}  // namespace prefixgate::canon::internal
