// The parser of jinja_parser.cpp (statements) and jinja_parse_expr.cpp (expressions): one
// class over the token stream, private to canonicalize/.
#pragma once

#include <string>
#include <unordered_map>
#include <vector>

#include "jinja_ast.h"
#include "jinja_lexer.h"

namespace prefixgate::canon::jinja {

class Parser {
 public:
  Parser(Program& program, std::vector<Token>& tokens, ErrorDetail& error)
      : program_(program), tokens_(tokens), error_(error) {
    program_.loop_id = intern("loop");
    program_.caller_id = intern("caller");
    program_.varargs_id = intern("varargs");
    program_.kwargs_id = intern("kwargs");
  }

  bool run() {
    std::string end;
    if (!subparse(program_.body, {}, end)) return false;
    if (cur().type != Tok::kEof) return fail("unexpected end tag '" + end + "'");
    return true;
  }

 private:
  // ---- token stream ----
  const Token& cur() const { return tokens_[pos_]; }
  const Token& peek(std::size_t n = 1) const {
    return tokens_[std::min(pos_ + n, tokens_.size() - 1)];
  }
  void next() {
    if (pos_ + 1 < tokens_.size()) ++pos_;
  }
  bool is_op(const char* op) const { return cur().type == Tok::kOp && cur().value == op; }
  bool is_name(const char* name) const { return cur().type == Tok::kName && cur().value == name; }
  bool skip_op(const char* op) {
    if (!is_op(op)) return false;
    next();
    return true;
  }
  bool skip_name(const char* name) {
    if (!is_name(name)) return false;
    next();
    return true;
  }
  bool expect_op(const char* op) {
    if (skip_op(op)) return true;
    return fail(std::string("expected '") + op + "', got " + describe(cur()));
  }
  bool expect_block_end() {
    if (cur().type == Tok::kBlockEnd) {
      next();
      return true;
    }
    return fail("expected end of statement block, got " + describe(cur()));
  }
  static std::string describe(const Token& t) {
    switch (t.type) {
      case Tok::kEof: return "end of template";
      case Tok::kBlockEnd: return "end of statement block";
      case Tok::kVarEnd: return "end of print statement";
      case Tok::kString: return "string";
      case Tok::kText: return "template data";
      default: return "'" + t.value + "'";
    }
  }

  bool fail(std::string text, ErrorKind kind = ErrorKind::kSyntax) {
    return fail_at(cur().offset, std::move(text), kind);
  }
  bool fail_at(std::uint32_t offset, std::string text, ErrorKind kind = ErrorKind::kSyntax) {
    if (failed_) return false;
    failed_ = true;
    error_.kind = kind;
    line_column(program_.source, offset, error_.line, error_.column);
    error_.text = std::move(text);
    return false;
  }

  int intern(const std::string& name) {
    auto [it, inserted] = ids_.try_emplace(name, static_cast<int>(program_.names.size()));
    if (inserted) program_.names.push_back(name);
    return it->second;
  }

  // ---- statements (jinja_parser.cpp) ----
  // Parses until a block tag named in `ends` (left as the current token, name in `end`) or EOF.
  bool subparse(Body& body, std::initializer_list<const char*> ends, std::string& end);
  // Parses a block body up to one of `ends`, consuming the end tag's name.
  bool block(Body& body, std::initializer_list<const char*> ends, std::string& end);
  bool statement(Body& body);
  bool parse_target(Target& target, bool allow_attr, std::initializer_list<const char*> end_names);
  bool parse_for(Stmt& s);
  bool parse_if(Stmt& s);
  bool parse_set(Stmt& s);
  // `| name(args) | name ...` of a block set or filter block.
  bool parse_filter_chain(std::vector<FilterCall>& filters);
  bool parse_params(std::vector<MacroParam>& params);
  bool parse_macro(Stmt& s);
  bool parse_call_block(Stmt& s);
  bool parse_filter_block(Stmt& s);
  bool parse_with(Stmt& s);

  // ---- expressions (jinja_parse_expr.cpp) ----
  ExprPtr node(ExprKind kind, std::uint32_t offset);
  bool at_tuple_end(std::initializer_list<const char*> extra_end) const;
  ExprPtr parse_tuple(bool with_condexpr, std::initializer_list<const char*> extra_end,
                      bool explicit_parentheses = false);
  ExprPtr parse_expression(bool with_condexpr);
  ExprPtr parse_condexpr();
  ExprPtr parse_or();
  ExprPtr parse_and();
  ExprPtr parse_not();
  ExprPtr parse_compare();
  ExprPtr binary(BinOp op, std::uint32_t offset, ExprPtr left, ExprPtr right);
  ExprPtr parse_math1();
  ExprPtr parse_concat();
  ExprPtr parse_math2();
  ExprPtr parse_pow();
  ExprPtr parse_unary(bool with_filter);
  ExprPtr constant(Value v, std::uint32_t offset);
  ExprPtr parse_primary();
  ExprPtr parse_list();
  ExprPtr parse_dict();
  ExprPtr parse_postfix(ExprPtr n);
  ExprPtr parse_subscript(ExprPtr target);
  // One subscript: an expression, or a slice [start]:[stop][:[step]].
  ExprPtr parse_subscribed(bool& any_slice);
  bool parse_call_args(std::vector<Arg>& args);
  ExprPtr parse_call(ExprPtr target);
  ExprPtr parse_filter_expr(ExprPtr n);
  ExprPtr parse_filter(ExprPtr target);
  ExprPtr parse_test(ExprPtr target);

  static constexpr int kMaxDepth = 200;

  Program& program_;
  std::vector<Token>& tokens_;
  ErrorDetail& error_;
  std::size_t pos_ = 0;
  bool failed_ = false;
  bool filter_block_ = false;
  int loop_depth_ = 0;
  int depth_ = 0;
  std::unordered_map<std::string, int> ids_;
};

}  // namespace prefixgate::canon::jinja
