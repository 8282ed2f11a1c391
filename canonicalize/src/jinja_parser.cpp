// Jinja2's grammar (jinja2/parser.py), statement by statement and with its operator precedence:
//   expr    := or ['if' or ['else' expr]]
//   or      := and ('or' and)*          and := not ('and' not)*
//   not     := 'not' not | compare      compare := math1 (cmpop math1)*
//   math1   := concat (('+'|'-') concat)*   concat := math2 ('~' math2)*
//   math2   := pow (('*'|'/'|'//'|'%') pow)*   pow := unary ('**' unary)*
//   unary   := ('-'|'+') unary | primary postfix* (filter | test | call)*
// Note that unary minus binds tighter than `**` (Jinja2 differs from Python there).
#include <unordered_map>

#include "jinja_ast.h"
#include "jinja_lexer.h"

namespace prefixgate::canon::jinja {
namespace {

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

  // ---- statements ----

  // Parses until a block tag named in `ends` (left as the current token, name in `end`) or EOF.
  bool subparse(Body& body, std::initializer_list<const char*> ends, std::string& end) {
    for (;;) {
      const Token& t = cur();
      if (t.type == Tok::kEof) {
        if (ends.size() == 0) return true;
        return fail(std::string("unexpected end of template; expected '") + *ends.begin() + "'");
      }
      if (t.type == Tok::kText) {
        auto s = std::make_unique<Stmt>();
        s->kind = StmtKind::kText;
        s->offset = t.offset;
        s->text = t.value;
        body.push_back(std::move(s));
        next();
      } else if (t.type == Tok::kVarBegin) {
        auto s = std::make_unique<Stmt>();
        s->kind = StmtKind::kOutput;
        s->offset = t.offset;
        next();
        ExprPtr e = parse_tuple(true, {});
        if (!e) return false;
        s->exprs.push_back(std::move(e));
        if (cur().type != Tok::kVarEnd)
          return fail("expected end of print statement, got " + describe(cur()));
        next();
        body.push_back(std::move(s));
      } else if (t.type == Tok::kBlockBegin) {
        next();
        if (cur().type != Tok::kName) return fail("expected a statement name");
        for (const char* e : ends) {
          if (cur().value == e) {
            end = e;
            return true;
          }
        }
        if (!statement(body)) return false;
      } else {
        return fail("unexpected " + describe(t));
      }
    }
  }

  // Parses a block body up to one of `ends`, consuming the end tag's name.
  bool block(Body& body, std::initializer_list<const char*> ends, std::string& end) {
    if (!subparse(body, ends, end)) return false;
    next();  // the end tag's name
    return true;
  }

  bool statement(Body& body) {
    const Token& t = cur();
    const std::string name = t.value;
    auto s = std::make_unique<Stmt>();
    s->offset = t.offset;
    next();
    bool ok = false;
    if (name == "for") {
      ok = parse_for(*s);
    } else if (name == "if") {
      ok = parse_if(*s);
    } else if (name == "set") {
      ok = parse_set(*s);
    } else if (name == "macro") {
      ok = parse_macro(*s);
    } else if (name == "call") {
      ok = parse_call_block(*s);
    } else if (name == "filter") {
      ok = parse_filter_block(*s);
    } else if (name == "with") {
      ok = parse_with(*s);
    } else if (name == "break" || name == "continue") {
      if (loop_depth_ == 0) return fail_at(s->offset, "'" + name + "' outside of a loop");
      s->kind = name == "break" ? StmtKind::kBreak : StmtKind::kContinue;
      ok = expect_block_end();
    } else if (name == "generation") {
      // transformers' AssistantTracker extension: marks assistant text; renders as is.
      s->kind = StmtKind::kScope;
      s->bodies.emplace_back();
      std::string end;
      ok = expect_block_end() && block(s->bodies[0], {"endgeneration"}, end) && expect_block_end();
    } else if (name == "block" || name == "extends" || name == "include" || name == "import" ||
               name == "from" || name == "autoescape" || name == "do" || name == "trans" ||
               name == "pluralize") {
      return fail_at(s->offset, "the '" + name + "' statement is not supported",
                     ErrorKind::kUnsupported);
    } else {
      return fail_at(s->offset, "encountered unknown tag '" + name + "'");
    }
    if (!ok) return false;
    body.push_back(std::move(s));
    return true;
  }

  bool parse_target(Target& target, bool allow_attr, std::initializer_list<const char*> end_names) {
    if (cur().type != Tok::kName)
      return fail("expected a name to assign to, got " + describe(cur()));
    if (allow_attr && peek().type == Tok::kOp && peek().value == ".") {
      target.object = intern(cur().value);
      next();
      next();
      if (cur().type != Tok::kName) return fail("expected an attribute name");
      target.attr = cur().value;
      next();
      return true;
    }
    const bool parenthesized = skip_op("(");
    for (;;) {
      if (cur().type != Tok::kName)
        return fail("expected a name to assign to, got " + describe(cur()));
      target.names.push_back(intern(cur().value));
      next();
      if (!skip_op(",")) break;
      target.is_tuple = true;
      bool at_end = cur().type != Tok::kName;
      for (const char* e : end_names) at_end = at_end || is_name(e);
      if (at_end) break;
    }
    if (parenthesized && !expect_op(")")) return false;
    return true;
  }

  bool parse_for(Stmt& s) {
    s.kind = StmtKind::kFor;
    if (!parse_target(s.target, false, {"in"})) return false;
    if (!skip_name("in")) return fail("expected 'in', got " + describe(cur()));
    ExprPtr iter = parse_tuple(false, {"recursive"});
    if (!iter) return false;
    s.exprs.push_back(std::move(iter));
    ExprPtr cond;
    if (skip_name("if")) {
      cond = parse_expression(true);
      if (!cond) return false;
    }
    s.exprs.push_back(std::move(cond));
    if (is_name("recursive")) {
      return fail("recursive loops are not supported", ErrorKind::kUnsupported);
    }
    if (!expect_block_end()) return false;
    s.bodies.resize(2);
    std::string end;
    ++loop_depth_;
    const bool body_ok = block(s.bodies[0], {"endfor", "else"}, end);
    --loop_depth_;
    if (!body_ok) return false;
    if (end == "else") {
      s.has_else = true;
      if (!expect_block_end() || !block(s.bodies[1], {"endfor"}, end)) return false;
    }
    return expect_block_end();
  }

  bool parse_if(Stmt& s) {
    s.kind = StmtKind::kIf;
    for (;;) {
      ExprPtr cond = parse_tuple(false, {});
      if (!cond) return false;
      s.exprs.push_back(std::move(cond));
      if (!expect_block_end()) return false;
      s.bodies.emplace_back();
      std::string end;
      if (!block(s.bodies.back(), {"elif", "else", "endif"}, end)) return false;
      if (end == "elif") continue;
      if (end == "else") {
        s.has_else = true;
        s.bodies.emplace_back();
        if (!expect_block_end() || !block(s.bodies.back(), {"endif"}, end)) return false;
      }
      return expect_block_end();
    }
  }

  bool parse_set(Stmt& s) {
    if (!parse_target(s.target, true, {})) return false;
    if (skip_op("=")) {
      s.kind = StmtKind::kSet;
      ExprPtr value = parse_tuple(true, {});
      if (!value) return false;
      s.exprs.push_back(std::move(value));
      return expect_block_end();
    }
    s.kind = StmtKind::kSetBlock;
    if (s.target.is_tuple) return fail("a block set assigns to one name");
    if (!parse_filter_chain(s.filters) || !expect_block_end()) return false;
    s.bodies.emplace_back();
    std::string end;
    return block(s.bodies[0], {"endset"}, end) && expect_block_end();
  }

  // `| name(args) | name ...` of a block set or filter block.
  bool parse_filter_chain(std::vector<FilterCall>& filters) {
    while (skip_op("|") || (filters.empty() && cur().type == Tok::kName && filter_block_)) {
      filter_block_ = false;
      if (cur().type != Tok::kName) return fail("expected a filter name");
      FilterCall f;
      f.name = cur().value;
      f.offset = cur().offset;
      f.id = find_filter(f.name);
      if (f.id < 0) return fail("no filter named '" + f.name + "'", ErrorKind::kUnsupported);
      next();
      if (is_op("(") && !parse_call_args(f.args)) return false;
      filters.push_back(std::move(f));
    }
    return true;
  }

  bool parse_params(std::vector<MacroParam>& params) {
    if (!expect_op("(")) return false;
    while (!is_op(")")) {
      if (!params.empty() && !expect_op(",")) return false;
      if (is_op(")")) break;
      if (cur().type != Tok::kName) return fail("expected a parameter name");
      MacroParam p;
      p.name = intern(cur().value);
      next();
      if (skip_op("=")) {
        p.default_value = parse_expression(true);
        if (!p.default_value) return false;
      } else if (!params.empty() && params.back().default_value) {
        return fail("non-default argument follows default argument");
      }
      params.push_back(std::move(p));
    }
    next();
    return true;
  }

  bool parse_macro(Stmt& s) {
    s.kind = StmtKind::kMacro;
    if (cur().type != Tok::kName) return fail("expected a macro name");
    s.macro_name = cur().value;
    s.target.names.push_back(intern(cur().value));
    next();
    if (!parse_params(s.params) || !expect_block_end()) return false;
    s.bodies.emplace_back();
    std::string end;
    const int saved_loop_depth = loop_depth_;
    loop_depth_ = 0;
    const bool ok = block(s.bodies[0], {"endmacro"}, end);
    loop_depth_ = saved_loop_depth;
    if (!ok) return false;
    if (cur().type == Tok::kName) next();  // {% endmacro name %}
    return expect_block_end();
  }

  bool parse_call_block(Stmt& s) {
    s.kind = StmtKind::kCallBlock;
    if (is_op("(") && !parse_params(s.params)) return false;
    ExprPtr call = parse_expression(true);
    if (!call) return false;
    if (call->kind != ExprKind::kCall) return fail_at(call->offset, "expected a call");
    s.exprs.push_back(std::move(call));
    if (!expect_block_end()) return false;
    s.bodies.emplace_back();
    std::string end;
    return block(s.bodies[0], {"endcall"}, end) && expect_block_end();
  }

  bool parse_filter_block(Stmt& s) {
    s.kind = StmtKind::kFilterBlock;
    filter_block_ = true;
    if (!parse_filter_chain(s.filters)) return false;
    if (s.filters.empty()) return fail("expected a filter name");
    if (!expect_block_end()) return false;
    s.bodies.emplace_back();
    std::string end;
    return block(s.bodies[0], {"endfilter"}, end) && expect_block_end();
  }

  bool parse_with(Stmt& s) {
    s.kind = StmtKind::kWith;
    while (cur().type != Tok::kBlockEnd) {
      if (!s.targets.empty() && !expect_op(",")) return false;
      Target t;
      if (!parse_target(t, false, {})) return false;
      if (!expect_op("=")) return false;
      ExprPtr value = parse_expression(true);
      if (!value) return false;
      s.targets.push_back(std::move(t));
      s.exprs.push_back(std::move(value));
    }
    next();
    s.bodies.emplace_back();
    std::string end;
    return block(s.bodies[0], {"endwith"}, end) && expect_block_end();
  }

  // ---- expressions ----

  ExprPtr node(ExprKind kind, std::uint32_t offset) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->offset = offset;
    return e;
  }

  bool at_tuple_end(std::initializer_list<const char*> extra_end) const {
    const Token& t = cur();
    if (t.type == Tok::kVarEnd || t.type == Tok::kBlockEnd || t.type == Tok::kEof) return true;
    if (t.type == Tok::kOp && t.value == ")") return true;
    for (const char* e : extra_end) {
      if (t.type == Tok::kName && t.value == e) return true;
    }
    return false;
  }

  ExprPtr parse_tuple(bool with_condexpr, std::initializer_list<const char*> extra_end,
                      bool explicit_parentheses = false) {
    const std::uint32_t offset = cur().offset;
    std::vector<ExprPtr> items;
    bool is_tuple = false;
    for (;;) {
      if (!items.empty() && !expect_op(",")) return nullptr;
      if (at_tuple_end(extra_end)) break;
      ExprPtr e = parse_expression(with_condexpr);
      if (!e) return nullptr;
      items.push_back(std::move(e));
      if (is_op(",")) {
        is_tuple = true;
      } else {
        break;
      }
    }
    if (!is_tuple) {
      if (!items.empty()) return std::move(items[0]);
      if (!explicit_parentheses) {
        fail("expected an expression, got " + describe(cur()));
        return nullptr;
      }
    }
    ExprPtr t = node(ExprKind::kTuple, offset);
    t->children = std::move(items);
    return t;
  }

  ExprPtr parse_expression(bool with_condexpr) {
    if (++depth_ > kMaxDepth) {
      fail("expression nested too deeply", ErrorKind::kLimit);
      return nullptr;
    }
    ExprPtr e = with_condexpr ? parse_condexpr() : parse_or();
    --depth_;
    return e;
  }

  ExprPtr parse_condexpr() {
    const std::uint32_t offset = cur().offset;
    ExprPtr expr1 = parse_or();
    if (!expr1) return nullptr;
    while (skip_name("if")) {
      ExprPtr cond = parse_or();
      if (!cond) return nullptr;
      ExprPtr otherwise;
      if (skip_name("else")) {
        otherwise = parse_condexpr();
        if (!otherwise) return nullptr;
      }
      ExprPtr c = node(ExprKind::kCond, offset);
      c->children.push_back(std::move(expr1));
      c->children.push_back(std::move(cond));
      c->children.push_back(std::move(otherwise));
      expr1 = std::move(c);
    }
    return expr1;
  }

  ExprPtr parse_or() {
    ExprPtr left = parse_and();
    while (left && is_name("or")) {
      const std::uint32_t offset = cur().offset;
      next();
      ExprPtr right = parse_and();
      if (!right) return nullptr;
      ExprPtr n = node(ExprKind::kOr, offset);
      n->children.push_back(std::move(left));
      n->children.push_back(std::move(right));
      left = std::move(n);
    }
    return left;
  }

  ExprPtr parse_and() {
    ExprPtr left = parse_not();
    while (left && is_name("and")) {
      const std::uint32_t offset = cur().offset;
      next();
      ExprPtr right = parse_not();
      if (!right) return nullptr;
      ExprPtr n = node(ExprKind::kAnd, offset);
      n->children.push_back(std::move(left));
      n->children.push_back(std::move(right));
      left = std::move(n);
    }
    return left;
  }

  ExprPtr parse_not() {
    if (is_name("not")) {
      const std::uint32_t offset = cur().offset;
      next();
      if (++depth_ > kMaxDepth) {
        fail("expression nested too deeply", ErrorKind::kLimit);
        return nullptr;
      }
      ExprPtr operand = parse_not();
      --depth_;
      if (!operand) return nullptr;
      ExprPtr n = node(ExprKind::kNot, offset);
      n->children.push_back(std::move(operand));
      return n;
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
    const std::uint32_t offset = cur().offset;
    ExprPtr first = parse_math1();
    if (!first) return nullptr;
    ExprPtr cmp;
    for (;;) {
      CmpOp op;
      if (cur().type == Tok::kOp &&
          (cur().value == "==" || cur().value == "!=" || cur().value == "<" || cur().value == ">" ||
           cur().value == "<=" || cur().value == ">=")) {
        const std::string& v = cur().value;
        op = v == "=="   ? CmpOp::kEq
             : v == "!=" ? CmpOp::kNe
             : v == "<"  ? CmpOp::kLt
             : v == ">"  ? CmpOp::kGt
             : v == "<=" ? CmpOp::kLe
                         : CmpOp::kGe;
        next();
      } else if (is_name("in")) {
        op = CmpOp::kIn;
        next();
      } else if (is_name("not") && peek().type == Tok::kName && peek().value == "in") {
        op = CmpOp::kNotIn;
        next();
        next();
      } else {
        break;
      }
      ExprPtr operand = parse_math1();
      if (!operand) return nullptr;
      if (!cmp) {
        cmp = node(ExprKind::kCompare, offset);
        cmp->children.push_back(std::move(first));
      }
      cmp->cmp.push_back(op);
      cmp->children.push_back(std::move(operand));
    }
    return cmp ? std::move(cmp) : std::move(first);
  }

  ExprPtr binary(BinOp op, std::uint32_t offset, ExprPtr left, ExprPtr right) {
    ExprPtr n = node(ExprKind::kBinary, offset);
    n->bin = op;
    n->children.push_back(std::move(left));
    n->children.push_back(std::move(right));
    return n;
  }

  ExprPtr parse_math1() {
    ExprPtr left = parse_concat();
    while (left && (is_op("+") || is_op("-"))) {
      const BinOp op = is_op("+") ? BinOp::kAdd : BinOp::kSub;
      const std::uint32_t offset = cur().offset;
      next();
      ExprPtr right = parse_concat();
      if (!right) return nullptr;
      left = binary(op, offset, std::move(left), std::move(right));
    }
    return left;
  }

  ExprPtr parse_concat() {
    const std::uint32_t offset = cur().offset;
    ExprPtr first = parse_math2();
    if (!first || !is_op("~")) return first;
    ExprPtr n = node(ExprKind::kConcat, offset);
    n->children.push_back(std::move(first));
    while (skip_op("~")) {
      ExprPtr operand = parse_math2();
      if (!operand) return nullptr;
      n->children.push_back(std::move(operand));
    }
    return n;
  }

  ExprPtr parse_math2() {
    ExprPtr left = parse_pow();
    while (left && (is_op("*") || is_op("/") || is_op("//") || is_op("%"))) {
      const BinOp op = is_op("*")    ? BinOp::kMul
                       : is_op("/")  ? BinOp::kDiv
                       : is_op("//") ? BinOp::kFloorDiv
                                     : BinOp::kMod;
      const std::uint32_t offset = cur().offset;
      next();
      ExprPtr right = parse_pow();
      if (!right) return nullptr;
      left = binary(op, offset, std::move(left), std::move(right));
    }
    return left;
  }

  ExprPtr parse_pow() {
    ExprPtr left = parse_unary(true);
    while (left && is_op("**")) {
      const std::uint32_t offset = cur().offset;
      next();
      ExprPtr right = parse_unary(true);
      if (!right) return nullptr;
      left = binary(BinOp::kPow, offset, std::move(left), std::move(right));
    }
    return left;
  }

  ExprPtr parse_unary(bool with_filter) {
    const std::uint32_t offset = cur().offset;
    ExprPtr n;
    if (is_op("-") || is_op("+")) {
      const ExprKind kind = is_op("-") ? ExprKind::kNeg : ExprKind::kPos;
      next();
      if (++depth_ > kMaxDepth) {
        fail("expression nested too deeply", ErrorKind::kLimit);
        return nullptr;
      }
      ExprPtr operand = parse_unary(false);
      --depth_;
      if (!operand) return nullptr;
      n = node(kind, offset);
      n->children.push_back(std::move(operand));
    } else {
      n = parse_primary();
    }
    if (!n) return nullptr;
    n = parse_postfix(std::move(n));
    if (n && with_filter) n = parse_filter_expr(std::move(n));
    return n;
  }

  ExprPtr constant(Value v, std::uint32_t offset) {
    ExprPtr n = node(ExprKind::kConst, offset);
    n->constant = std::move(v);
    return n;
  }

  ExprPtr parse_primary() {
    const Token& t = cur();
    const std::uint32_t offset = t.offset;
    switch (t.type) {
      case Tok::kName: {
        const std::string& v = t.value;
        if (v == "true" || v == "True") return next(), constant(Value(true), offset);
        if (v == "false" || v == "False") return next(), constant(Value(false), offset);
        if (v == "none" || v == "None") return next(), constant(Value(None{}), offset);
        ExprPtr n = node(ExprKind::kName, offset);
        n->name = v;
        n->id = intern(v);
        if (v == "strftime_now") program_.uses_strftime_now = true;
        next();
        return n;
      }
      case Tok::kString: {
        std::string s = t.value;
        next();
        while (cur().type == Tok::kString) {  // adjacent literals concatenate, as in Python
          s += cur().value;
          next();
        }
        return constant(Value(std::string_view(s)), offset);
      }
      case Tok::kInt: {
        Value v(t.int_value);
        next();
        return constant(std::move(v), offset);
      }
      case Tok::kFloat: {
        Value v(t.float_value);
        next();
        return constant(std::move(v), offset);
      }
      case Tok::kOp:
        if (t.value == "(") {
          next();
          ExprPtr e = parse_tuple(true, {}, true);
          if (!e || !expect_op(")")) return nullptr;
          return e;
        }
        if (t.value == "[") return parse_list();
        if (t.value == "{") return parse_dict();
        break;
      default: break;
    }
    fail("unexpected " + describe(t));
    return nullptr;
  }

  ExprPtr parse_list() {
    ExprPtr n = node(ExprKind::kList, cur().offset);
    next();
    while (!is_op("]")) {
      if (!n->children.empty() && !expect_op(",")) return nullptr;
      if (is_op("]")) break;
      ExprPtr e = parse_expression(true);
      if (!e) return nullptr;
      n->children.push_back(std::move(e));
    }
    next();
    return n;
  }

  ExprPtr parse_dict() {
    ExprPtr n = node(ExprKind::kDict, cur().offset);
    next();
    while (!is_op("}")) {
      if (!n->children.empty() && !expect_op(",")) return nullptr;
      if (is_op("}")) break;
      ExprPtr key = parse_expression(true);
      if (!key || !expect_op(":")) return nullptr;
      ExprPtr value = parse_expression(true);
      if (!value) return nullptr;
      n->children.push_back(std::move(key));
      n->children.push_back(std::move(value));
    }
    next();
    return n;
  }

  ExprPtr parse_postfix(ExprPtr n) {
    while (n) {
      if (is_op(".") || is_op("[")) {
        n = parse_subscript(std::move(n));
      } else if (is_op("(")) {
        n = parse_call(std::move(n));
      } else {
        break;
      }
    }
    return n;
  }

  ExprPtr parse_subscript(ExprPtr target) {
    const std::uint32_t offset = cur().offset;
    if (skip_op(".")) {
      if (cur().type == Tok::kName) {
        ExprPtr n = node(ExprKind::kGetAttr, offset);
        n->name = cur().value;
        next();
        n->children.push_back(std::move(target));
        return n;
      }
      if (cur().type == Tok::kInt) {
        ExprPtr n = node(ExprKind::kGetItem, offset);
        n->children.push_back(std::move(target));
        n->children.push_back(constant(Value(cur().int_value), cur().offset));
        next();
        return n;
      }
      fail("expected a name or number after '.'");
      return nullptr;
    }
    next();  // '['
    std::vector<ExprPtr> parts;
    bool any_slice = false;
    for (;;) {
      if (!parts.empty() && !expect_op(",")) return nullptr;
      if (is_op("]")) break;
      ExprPtr p = parse_subscribed(any_slice);
      if (!p) return nullptr;
      parts.push_back(std::move(p));
      if (!is_op(",")) break;
    }
    if (!expect_op("]")) return nullptr;
    if (parts.empty()) {
      fail_at(offset, "expected a subscript");
      return nullptr;
    }
    if (parts.size() == 1 && any_slice) {
      // parse_subscribed returns a slice without its target; attach it.
      ExprPtr slice = std::move(parts[0]);
      slice->children.insert(slice->children.begin(), std::move(target));
      return slice;
    }
    if (any_slice) {
      fail_at(offset, "slices inside tuple subscripts are not supported", ErrorKind::kUnsupported);
      return nullptr;
    }
    ExprPtr n = node(ExprKind::kGetItem, offset);
    n->children.push_back(std::move(target));
    if (parts.size() == 1) {
      n->children.push_back(std::move(parts[0]));
    } else {
      ExprPtr t = node(ExprKind::kTuple, offset);
      t->children = std::move(parts);
      n->children.push_back(std::move(t));
    }
    return n;
  }

  // One subscript: an expression, or a slice [start]:[stop][:[step]].
  ExprPtr parse_subscribed(bool& any_slice) {
    const std::uint32_t offset = cur().offset;
    ExprPtr first;
    if (!is_op(":")) {
      first = parse_expression(true);
      if (!first) return nullptr;
      if (!is_op(":")) return first;
    }
    any_slice = true;
    next();  // ':'
    std::vector<ExprPtr> parts(3);
    parts[0] = std::move(first);
    if (!is_op("]") && !is_op(",") && !is_op(":")) {
      parts[1] = parse_expression(true);
      if (!parts[1]) return nullptr;
    }
    if (skip_op(":") && !is_op("]") && !is_op(",")) {
      parts[2] = parse_expression(true);
      if (!parts[2]) return nullptr;
    }
    ExprPtr slice = node(ExprKind::kSlice, offset);
    slice->children = std::move(parts);
    return slice;
  }

  bool parse_call_args(std::vector<Arg>& args) {
    if (!expect_op("(")) return false;
    bool seen_kwarg = false;
    while (!is_op(")")) {
      if (!args.empty() && !expect_op(",")) return false;
      if (is_op(")")) break;
      if (is_op("*") || is_op("**")) {
        return fail("*args and **kwargs in calls are not supported", ErrorKind::kUnsupported);
      }
      Arg a;
      if (cur().type == Tok::kName && peek().type == Tok::kOp && peek().value == "=") {
        a.name = cur().value;
        next();
        next();
        seen_kwarg = true;
      } else if (seen_kwarg) {
        return fail("positional argument follows keyword argument");
      }
      a.value = parse_expression(true);
      if (!a.value) return false;
      args.push_back(std::move(a));
    }
    next();
    return true;
  }

  ExprPtr parse_call(ExprPtr target) {
    ExprPtr n = node(ExprKind::kCall, cur().offset);
    if (!parse_call_args(n->args)) return nullptr;
    n->children.push_back(std::move(target));
    return n;
  }

  ExprPtr parse_filter_expr(ExprPtr n) {
    while (n) {
      if (is_op("|")) {
        n = parse_filter(std::move(n));
      } else if (is_name("is")) {
        n = parse_test(std::move(n));
      } else if (is_op("(")) {
        n = parse_call(std::move(n));
      } else {
        break;
      }
    }
    return n;
  }

  ExprPtr parse_filter(ExprPtr target) {
    next();  // '|'
    if (cur().type != Tok::kName) {
      fail("expected a filter name, got " + describe(cur()));
      return nullptr;
    }
    ExprPtr n = node(ExprKind::kFilter, cur().offset);
    n->name = cur().value;
    n->id = find_filter(n->name);
    if (n->id < 0) {
      fail("no filter named '" + n->name + "'", ErrorKind::kUnsupported);
      return nullptr;
    }
    next();
    if (is_op("(") && !parse_call_args(n->args)) return nullptr;
    n->children.push_back(std::move(target));
    return n;
  }

  ExprPtr parse_test(ExprPtr target) {
    next();  // 'is'
    ExprPtr n = node(ExprKind::kTest, cur().offset);
    if (skip_name("not")) n->negated = true;
    if (cur().type != Tok::kName) {
      // `is none` and friends are names; `is ==` style tests use operator names.
      fail("expected a test name, got " + describe(cur()));
      return nullptr;
    }
    n->name = cur().value;
    n->id = find_test(n->name);
    if (n->id < 0) {
      fail("no test named '" + n->name + "'", ErrorKind::kUnsupported);
      return nullptr;
    }
    next();
    if (is_op("(")) {
      if (!parse_call_args(n->args)) return nullptr;
    } else if ((cur().type == Tok::kName || cur().type == Tok::kString || cur().type == Tok::kInt ||
                cur().type == Tok::kFloat ||
                (cur().type == Tok::kOp &&
                 (cur().value == "(" || cur().value == "[" || cur().value == "{"))) &&
               !is_name("else") && !is_name("or") && !is_name("and")) {
      if (is_name("is")) {
        fail("you cannot chain multiple tests with is");
        return nullptr;
      }
      ExprPtr arg = parse_primary();
      if (!arg) return nullptr;
      arg = parse_postfix(std::move(arg));
      if (!arg) return nullptr;
      n->args.push_back(Arg{{}, std::move(arg)});
    }
    n->children.push_back(std::move(target));
    return n;
  }

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

// vLLM's content-format detection looks for a loop over a message's content: `for x in
// <anything>.content` or `<anything>['content']`.
bool loops_over_content(const Body& body);

bool expr_is_content(const Expr* e) {
  if (e == nullptr) return false;
  if (e->kind == ExprKind::kGetAttr) return e->name == "content";
  if (e->kind == ExprKind::kGetItem && e->children.size() == 2 &&
      e->children[1]->kind == ExprKind::kConst && e->children[1]->constant.is_string()) {
    return e->children[1]->constant.as_string() == "content";
  }
  return false;
}

bool loops_over_content(const Body& body) {
  for (const StmtPtr& s : body) {
    if (s->kind == StmtKind::kFor && !s->exprs.empty() && expr_is_content(s->exprs[0].get()))
      return true;
    for (const Body& b : s->bodies) {
      if (loops_over_content(b)) return true;
    }
  }
  return false;
}

}  // namespace

bool parse_program(std::string_view source, Program& program, ErrorDetail& error) {
  LexResult lexed;
  if (!lex(source, lexed, error)) return false;
  program.source = std::move(lexed.source);
  Parser parser(program, lexed.tokens, error);
  if (!parser.run()) return false;
  program.iterates_content = loops_over_content(program.body);
  return true;
}

}  // namespace prefixgate::canon::jinja
