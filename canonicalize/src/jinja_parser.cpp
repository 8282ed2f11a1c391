// Jinja2's statements (jinja2/parser.py): for, if/elif/else, set (plain, tuple, attribute and
// block), macro, call, filter, with, break/continue, and transformers' generation block.
#include "jinja_parser.h"

namespace prefixgate::canon::jinja {

// Parses until a block tag named in `ends` (left as the current token, name in `end`) or EOF.
bool Parser::subparse(Body& body, std::initializer_list<const char*> ends, std::string& end) {
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
bool Parser::block(Body& body, std::initializer_list<const char*> ends, std::string& end) {
  if (!subparse(body, ends, end)) return false;
  next();  // the end tag's name
  return true;
}

bool Parser::statement(Body& body) {
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

bool Parser::parse_target(Target& target, bool allow_attr,
                          std::initializer_list<const char*> end_names) {
  if (cur().type != Tok::kName) return fail("expected a name to assign to, got " + describe(cur()));
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

bool Parser::parse_for(Stmt& s) {
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

bool Parser::parse_if(Stmt& s) {
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

bool Parser::parse_set(Stmt& s) {
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
bool Parser::parse_filter_chain(std::vector<FilterCall>& filters) {
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

bool Parser::parse_params(std::vector<MacroParam>& params) {
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

bool Parser::parse_macro(Stmt& s) {
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

bool Parser::parse_call_block(Stmt& s) {
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

bool Parser::parse_filter_block(Stmt& s) {
  s.kind = StmtKind::kFilterBlock;
  filter_block_ = true;
  if (!parse_filter_chain(s.filters)) return false;
  if (s.filters.empty()) return fail("expected a filter name");
  if (!expect_block_end()) return false;
  s.bodies.emplace_back();
  std::string end;
  return block(s.bodies[0], {"endfilter"}, end) && expect_block_end();
}

bool Parser::parse_with(Stmt& s) {
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
namespace {

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
