// Jinja2's lexer, configured as transformers configures it: trim_blocks and lstrip_blocks on,
// keep_trailing_newline off, default delimiters, no line statements.
//
// The source is first normalized as Jinja2 does (str.splitlines() then "\n".join()): every line
// break (\r\n, \r, \v, \f, \x1c-\x1e, U+0085, U+2028, U+2029) becomes "\n", and one trailing
// line break is dropped. Whitespace control is applied here, so the parser sees template text
// exactly as it will be output.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "prefixgate/canonicalize/jinja.h"

namespace prefixgate::canon::jinja {

enum class Tok : std::uint8_t {
  kText,        // template data, value = the text
  kVarBegin,    // {{
  kVarEnd,      // }}
  kBlockBegin,  // {%
  kBlockEnd,    // %}
  kName,
  kString,  // value = the decoded string
  kInt,
  kFloat,
  kOp,  // value = the operator ("+", "//", "==", "(", ...)
  kEof,
};

struct Token {
  Tok type = Tok::kEof;
  std::uint32_t offset = 0;  // in the normalized source
  std::string value;
  std::int64_t int_value = 0;
  double float_value = 0;
};

struct LexResult {
  std::string source;  // normalized
  std::vector<Token> tokens;
};

// On failure returns false and fills `error` (kSyntax with a position).
bool lex(std::string_view source, LexResult& out, ErrorDetail& error);

// 1-based line and column of a byte offset of the normalized source.
void line_column(std::string_view source, std::uint32_t offset, int& line, int& column);

}  // namespace prefixgate::canon::jinja
