#include "jinja_lexer.h"

#include <cctype>
#include <charconv>
#include <cstring>

#include "jinja_unicode.h"

namespace prefixgate::canon::jinja {
namespace {

// str.splitlines() + "\n".join(): see the header.
std::string normalize_newlines(std::string_view src) {
  std::string out;
  out.reserve(src.size());
  for (std::size_t i = 0; i < src.size();) {
    const unsigned char c = static_cast<unsigned char>(src[i]);
    if (c == '\r') {
      out += '\n';
      i += (i + 1 < src.size() && src[i + 1] == '\n') ? 2 : 1;
    } else if (c == '\v' || c == '\f' || c == 0x1C || c == 0x1D || c == 0x1E) {
      out += '\n';
      ++i;
    } else if (c >= 0x80) {
      const auto d = decode_utf8(src, i);
      if (d.cp == 0x85 || d.cp == 0x2028 || d.cp == 0x2029) {
        out += '\n';
      } else {
        out.append(src.substr(i, d.bytes));
      }
      i += d.bytes;
    } else {
      out += static_cast<char>(c);
      ++i;
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

// Byte length of the Python-whitespace code point at s[pos], or 0.
std::size_t space_at(std::string_view s, std::size_t pos) {
  const auto d = decode_utf8(s, pos);
  return py_isspace(d.cp) ? d.bytes : 0;
}

std::size_t skip_space(std::string_view s, std::size_t pos) {
  while (pos < s.size()) {
    const std::size_t n = space_at(s, pos);
    if (n == 0) break;
    pos += n;
  }
  return pos;
}

// Python's str.rstrip() of s[from, to): the new end.
std::size_t rstrip_end(std::string_view s, std::size_t from, std::size_t to) {
  std::size_t end = from;
  for (std::size_t i = from; i < to;) {
    const auto d = decode_utf8(s, i);
    i += d.bytes;
    if (!py_isspace(d.cp)) end = i;
  }
  return end;
}

class Lexer {
 public:
  Lexer(std::string source, LexResult& out, ErrorDetail& error) : out_(out), error_(error) {
    out_.source = std::move(source);
    src_ = out_.source;
  }

  bool run() {
    std::size_t pos = 0;
    bool line_starting = true;
    while (pos < src_.size()) {
      const std::size_t open = find_opener(pos);
      if (open == std::string_view::npos) {
        emit_text(pos, src_.size());
        break;
      }
      const char kind = src_[open + 1];  // '{', '%' or '#'
      const char sign = open + 2 < src_.size() ? src_[open + 2] : '\0';
      std::size_t text_end = open;
      if (sign == '-') {
        text_end = rstrip_end(src_, pos, open);
      } else if (sign != '+' && kind != '{') {
        // lstrip_blocks: drop the whitespace between the line's start and a block or comment.
        const std::size_t nl = src_.rfind('\n', open == 0 ? 0 : open - 1);
        const std::size_t line_begin = (nl == std::string_view::npos || nl < pos) ? pos : nl + 1;
        if (line_begin > pos || line_starting) {
          bool only_space = true;
          for (std::size_t i = line_begin; i < open;) {
            const std::size_t n = space_at(src_, i);
            if (n == 0) {
              only_space = false;
              break;
            }
            i += n;
          }
          if (only_space) text_end = line_begin;
        }
      }
      emit_text(pos, text_end);
      const std::size_t body = open + 2 + (sign == '-' || sign == '+' ? 1 : 0);
      std::size_t next = 0;
      if (kind == '#') {
        if (!comment(open, body, next)) return false;
      } else if (kind == '%' && is_raw(body)) {
        if (!raw(open, body, next)) return false;
      } else {
        if (!tag(kind == '{', open, body, next)) return false;
      }
      pos = next;
      line_starting = pos > 0 && src_[pos - 1] == '\n';
    }
    push(Tok::kEof, static_cast<std::uint32_t>(src_.size()));
    return true;
  }

 private:
  std::size_t find_opener(std::size_t pos) const {
    for (std::size_t i = src_.find('{', pos); i != std::string_view::npos;
         i = src_.find('{', i + 1)) {
      if (i + 1 < src_.size() && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#'))
        return i;
    }
    return std::string_view::npos;
  }

  void emit_text(std::size_t from, std::size_t to) {
    if (to <= from) return;
    Token t;
    t.type = Tok::kText;
    t.offset = static_cast<std::uint32_t>(from);
    t.value.assign(src_.substr(from, to - from));
    out_.tokens.push_back(std::move(t));
  }

  Token& push(Tok type, std::uint32_t offset, std::string value = {}) {
    Token t;
    t.type = type;
    t.offset = offset;
    t.value = std::move(value);
    out_.tokens.push_back(std::move(t));
    return out_.tokens.back();
  }

  bool fail(std::size_t offset, std::string text) {
    error_.kind = ErrorKind::kSyntax;
    line_column(src_, static_cast<std::uint32_t>(offset), error_.line, error_.column);
    error_.text = std::move(text);
    return false;
  }

  // After a block or comment end: "-" strips all whitespace, "+" nothing, otherwise trim_blocks
  // drops one newline.
  std::size_t after_block_end(std::size_t end, char sign) const {
    if (sign == '-') return skip_space(src_, end);
    if (sign != '+' && end < src_.size() && src_[end] == '\n') return end + 1;
    return end;
  }

  bool comment(std::size_t open, std::size_t body, std::size_t& next) {
    const std::size_t close = src_.find("#}", body);
    if (close == std::string_view::npos) return fail(open, "missing end of comment tag");
    const char sign = close > body ? src_[close - 1] : '\0';
    next = after_block_end(close + 2, sign == '-' ? '-' : '\0');
    return true;
  }

  bool is_raw(std::size_t body) const {
    const std::size_t p = skip_space(src_, body);
    if (src_.compare(p, 3, "raw") != 0) return false;
    const std::size_t q = skip_space(src_, p + 3);
    return src_.compare(q, 2, "%}") == 0 || src_.compare(q, 3, "-%}") == 0;
  }

  // {% raw %}...{% endraw %}: the content is text as it stands. The opening tag's end gets no
  // trim_blocks newline removal (Jinja2's raw rule has none); the closing tag's does.
  bool raw(std::size_t open, std::size_t body, std::size_t& next) {
    std::size_t p = skip_space(src_, skip_space(src_, body) + 3);
    if (src_[p] == '-') {
      p = skip_space(src_, p + 3);
    } else {
      p += 2;
    }
    for (std::size_t search = p;;) {
      const std::size_t end_open = src_.find("{%", search);
      if (end_open == std::string_view::npos) return fail(open, "missing end of raw directive");
      const char sign = end_open + 2 < src_.size() ? src_[end_open + 2] : '\0';
      std::size_t q = end_open + 2 + (sign == '-' || sign == '+' ? 1 : 0);
      q = skip_space(src_, q);
      if (src_.compare(q, 6, "endraw") != 0) {
        search = end_open + 2;
        continue;
      }
      q = skip_space(src_, q + 6);
      char close_sign = '\0';
      if (src_.compare(q, 3, "-%}") == 0 || src_.compare(q, 3, "+%}") == 0) {
        close_sign = src_[q];
        q += 3;
      } else if (src_.compare(q, 2, "%}") == 0) {
        q += 2;
      } else {
        search = end_open + 2;
        continue;
      }
      std::size_t text_end = end_open;
      if (sign == '-') {
        text_end = rstrip_end(src_, p, end_open);
      } else if (sign != '+') {
        const std::size_t nl = src_.rfind('\n', end_open == 0 ? 0 : end_open - 1);
        if (nl != std::string_view::npos && nl >= p) {
          bool only_space = true;
          for (std::size_t i = nl + 1; i < end_open;) {
            const std::size_t n = space_at(src_, i);
            if (n == 0) {
              only_space = false;
              break;
            }
            i += n;
          }
          if (only_space) text_end = nl + 1;
        }
      }
      emit_text(p, text_end);
      next = after_block_end(q, close_sign);
      return true;
    }
  }

  // {{ ... }} or {% ... %}: expression tokens up to the closing delimiter at bracket depth 0.
  bool tag(bool is_var, std::size_t open, std::size_t body, std::size_t& next) {
    push(is_var ? Tok::kVarBegin : Tok::kBlockBegin, static_cast<std::uint32_t>(open));
    int depth = 0;
    const char close = is_var ? '}' : '%';
    std::size_t p = body;
    for (;;) {
      p = skip_space(src_, p);
      if (p >= src_.size()) {
        return fail(open, is_var ? "unexpected end of template, expected '}}'"
                                 : "unexpected end of template, expected '%}'");
      }
      if (depth == 0) {
        const auto at = [&](std::size_t i, char ch) { return i < src_.size() && src_[i] == ch; };
        char sign = '\0';
        std::size_t q = p;
        if ((src_[q] == '-' || (!is_var && src_[q] == '+')) && at(q + 1, close) && at(q + 2, '}')) {
          sign = src_[q];
          ++q;
        }
        if (at(q, close) && at(q + 1, '}')) {
          push(is_var ? Tok::kVarEnd : Tok::kBlockEnd, static_cast<std::uint32_t>(p));
          const std::size_t end = q + 2;
          next = is_var ? (sign == '-' ? skip_space(src_, end) : end) : after_block_end(end, sign);
          return true;
        }
      }
      if (!token(p, depth)) return false;
    }
  }

  bool token(std::size_t& p, int& depth) {
    const char c = src_[p];
    const auto start = static_cast<std::uint32_t>(p);
    if (c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
      std::size_t q = p + 1;
      while (q < src_.size() &&
             (src_[q] == '_' || std::isalnum(static_cast<unsigned char>(src_[q]))))
        ++q;
      push(Tok::kName, start, std::string(src_.substr(p, q - p)));
      p = q;
      return true;
    }
    if (c >= '0' && c <= '9') return number(p);
    if (c == '\'' || c == '"') return string(p);
    static constexpr const char* kOps[] = {"//", "**", "==", "!=", ">=", "<=", "+", "-", "/",
                                           "*",  "%",  "~",  "[",  "]",  "(",  ")", "{", "}",
                                           ">",  "<",  "=",  ".",  ":",  "|",  ",", ";"};
    for (const char* op : kOps) {
      const std::size_t n = std::strlen(op);
      if (src_.compare(p, n, op) == 0) {
        if (op[0] == '(' || op[0] == '[' || op[0] == '{') ++depth;
        if ((op[0] == ')' || op[0] == ']' || op[0] == '}') && n == 1) {
          if (depth == 0) return fail(p, std::string("unexpected '") + op + "'");
          --depth;
        }
        push(Tok::kOp, start, op);
        p += n;
        return true;
      }
    }
    return fail(
        p, "unexpected char '" + std::string(src_.substr(p, decode_utf8(src_, p).bytes)) + "'");
  }

  bool number(std::size_t& p) {
    const auto start = static_cast<std::uint32_t>(p);
    std::string digits;
    std::size_t q = p;
    auto take_digits = [&] {
      while (q < src_.size() && (std::isdigit(static_cast<unsigned char>(src_[q])) ||
                                 (src_[q] == '_' && q + 1 < src_.size() &&
                                  std::isdigit(static_cast<unsigned char>(src_[q + 1]))))) {
        if (src_[q] != '_') digits += src_[q];
        ++q;
      }
    };
    take_digits();
    bool is_float = false;
    if (q + 1 < src_.size() && src_[q] == '.' &&
        std::isdigit(static_cast<unsigned char>(src_[q + 1]))) {
      is_float = true;
      digits += '.';
      ++q;
      take_digits();
    }
    if (q < src_.size() && (src_[q] == 'e' || src_[q] == 'E')) {
      std::size_t e = q + 1;
      if (e < src_.size() && (src_[e] == '+' || src_[e] == '-')) ++e;
      if (e < src_.size() && std::isdigit(static_cast<unsigned char>(src_[e]))) {
        is_float = true;
        digits += 'e';
        digits.append(src_.substr(q + 1, e - q - 1));
        q = e;
        take_digits();
      }
    }
    Token& t = push(is_float ? Tok::kFloat : Tok::kInt, start, digits);
    if (is_float) {
      t.float_value = std::strtod(digits.c_str(), nullptr);
    } else {
      const auto r = std::from_chars(digits.data(), digits.data() + digits.size(), t.int_value);
      if (r.ec != std::errc()) return fail(p, "integer literal too large: " + digits);
    }
    p = q;
    return true;
  }

  // A Python string literal, with Python's escapes (Jinja2 decodes them with unicode-escape):
  // unknown escapes such as "\d" stay as written.
  bool string(std::size_t& p) {
    const char quote = src_[p];
    const auto start = static_cast<std::uint32_t>(p);
    std::string value;
    std::size_t q = p + 1;
    for (;;) {
      if (q >= src_.size()) return fail(p, "unterminated string literal");
      const char c = src_[q];
      if (c == quote) break;
      if (c != '\\') {
        value += c;
        ++q;
        continue;
      }
      if (q + 1 >= src_.size()) return fail(p, "unterminated string literal");
      const char e = src_[q + 1];
      q += 2;
      switch (e) {
        case 'n': value += '\n'; break;
        case 't': value += '\t'; break;
        case 'r': value += '\r'; break;
        case '\\': value += '\\'; break;
        case '\'': value += '\''; break;
        case '"': value += '"'; break;
        case 'a': value += '\a'; break;
        case 'b': value += '\b'; break;
        case 'f': value += '\f'; break;
        case 'v': value += '\v'; break;
        case '\n': break;  // line continuation
        case 'x':
        case 'u':
        case 'U': {
          const std::size_t n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          if (q + n > src_.size())
            return fail(q - 2, "truncated \\" + std::string(1, e) + " escape");
          std::uint32_t cp = 0;
          const auto r = std::from_chars(src_.data() + q, src_.data() + q + n, cp, 16);
          if (r.ec != std::errc() || r.ptr != src_.data() + q + n || cp > 0x10FFFF ||
              (cp >= 0xD800 && cp <= 0xDFFF)) {
            return fail(q - 2, "invalid \\" + std::string(1, e) + " escape");
          }
          append_utf8(cp, value);
          q += n;
          break;
        }
        default:
          if (e >= '0' && e <= '7') {
            std::uint32_t cp = static_cast<std::uint32_t>(e - '0');
            for (int k = 0; k < 2 && q < src_.size() && src_[q] >= '0' && src_[q] <= '7'; ++k, ++q)
              cp = cp * 8 + static_cast<std::uint32_t>(src_[q] - '0');
            append_utf8(cp, value);
          } else {
            value += '\\';
            value += e;
          }
      }
    }
    push(Tok::kString, start, std::move(value));
    p = q + 1;
    return true;
  }

  LexResult& out_;
  ErrorDetail& error_;
  std::string_view src_;
};

}  // namespace

void line_column(std::string_view source, std::uint32_t offset, int& line, int& column) {
  line = 1;
  std::size_t line_start = 0;
  for (std::size_t i = 0; i < offset && i < source.size(); ++i) {
    if (source[i] == '\n') {
      ++line;
      line_start = i + 1;
    }
  }
  column = static_cast<int>(offset - line_start) + 1;
}

bool lex(std::string_view source, LexResult& out, ErrorDetail& error) {
  return Lexer(normalize_newlines(source), out, error).run();
}

}  // namespace prefixgate::canon::jinja
