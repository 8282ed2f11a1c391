// Jinja2's expression grammar (jinja2/parser.py), with its operator precedence:
//   expr    := or ['if' or ['else' expr]]
//   or      := and ('or' and)*          and := not ('and' not)*
//   not     := 'not' not | compare      compare := math1 (cmpop math1)*
//   math1   := concat (('+'|'-') concat)*   concat := math2 ('~' math2)*
//   math2   := pow (('*'|'/'|'//'|'%') pow)*   pow := unary ('**' unary)*
//   unary   := ('-'|'+') unary | primary postfix* (filter | test | call)*
// Note that unary minus binds tighter than `**` (Jinja2 differs from Python there).
#include "jinja_parser.h"

namespace prefixgate::canon::jinja {

ExprPtr Parser::node(ExprKind kind, std::uint32_t offset) {
  auto e = std::make_unique<Expr>();
  e->kind = kind;
  e->offset = offset;
  return e;
}

bool Parser::at_tuple_end(std::initializer_list<const char*> extra_end) const {
  const Token& t = cur();
  if (t.type == Tok::kVarEnd || t.type == Tok::kBlockEnd || t.type == Tok::kEof) return true;
  if (t.type == Tok::kOp && t.value == ")") return true;
  for (const char* e : extra_end) {
    if (t.type == Tok::kName && t.value == e) return true;
  }
  return false;
}

ExprPtr Parser::parse_tuple(bool with_condexpr, std::initializer_list<const char*> extra_end,
                            bool explicit_parentheses) {
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

ExprPtr Parser::parse_expression(bool with_condexpr) {
  if (++depth_ > kMaxDepth) {
    fail("expression nested too deeply", ErrorKind::kLimit);
    return nullptr;
  }
  ExprPtr e = with_condexpr ? parse_condexpr() : parse_or();
  --depth_;
  return e;
}

ExprPtr Parser::parse_condexpr() {
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

ExprPtr Parser::parse_or() {
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

ExprPtr Parser::parse_and() {
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

ExprPtr Parser::parse_not() {
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

ExprPtr Parser::parse_compare() {
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

ExprPtr Parser::binary(BinOp op, std::uint32_t offset, ExprPtr left, ExprPtr right) {
  ExprPtr n = node(ExprKind::kBinary, offset);
  n->bin = op;
  n->children.push_back(std::move(left));
  n->children.push_back(std::move(right));
  return n;
}

ExprPtr Parser::parse_math1() {
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

ExprPtr Parser::parse_concat() {
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

ExprPtr Parser::parse_math2() {
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

ExprPtr Parser::parse_pow() {
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

ExprPtr Parser::parse_unary(bool with_filter) {
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

ExprPtr Parser::constant(Value v, std::uint32_t offset) {
  ExprPtr n = node(ExprKind::kConst, offset);
  n->constant = std::move(v);
  return n;
}

ExprPtr Parser::parse_primary() {
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

ExprPtr Parser::parse_list() {
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

ExprPtr Parser::parse_dict() {
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

ExprPtr Parser::parse_postfix(ExprPtr n) {
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

ExprPtr Parser::parse_subscript(ExprPtr target) {
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
ExprPtr Parser::parse_subscribed(bool& any_slice) {
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

bool Parser::parse_call_args(std::vector<Arg>& args) {
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

ExprPtr Parser::parse_call(ExprPtr target) {
  ExprPtr n = node(ExprKind::kCall, cur().offset);
  if (!parse_call_args(n->args)) return nullptr;
  n->children.push_back(std::move(target));
  return n;
}

ExprPtr Parser::parse_filter_expr(ExprPtr n) {
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

ExprPtr Parser::parse_filter(ExprPtr target) {
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

ExprPtr Parser::parse_test(ExprPtr target) {
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
}  // namespace prefixgate::canon::jinja
