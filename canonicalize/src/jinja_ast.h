// The parsed form of a template: a tree of statements and expressions that the interpreter
// walks. Names are interned to small integers at parse time, and filters and tests resolved to
// their implementations, so rendering does no string lookups for either.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "jinja_value.h"
#include "prefixgate/canonicalize/jinja.h"

namespace prefixgate::canon::jinja {

enum class ExprKind : std::uint8_t {
  kConst,
  kName,
  kList,
  kTuple,
  kDict,     // children: key, value, key, value, ...
  kGetAttr,  // children[0].name
  kGetItem,  // children[0][children[1]]
  kSlice,    // children[0][children[1]:children[2]:children[3]], absent parts null
  kCall,     // children[0](args)
  kFilter,   // children[0] | name(args)
  kTest,     // children[0] is [not] name(args)
  kNeg,
  kPos,
  kNot,
  kBinary,   // children[0] op children[1]
  kCompare,  // children[0] ops[0] children[1] ops[1] children[2] ...
  kAnd,
  kOr,
  kCond,    // children[0] if children[1] else children[2] (null: undefined)
  kConcat,  // children joined with ~
};

enum class BinOp : std::uint8_t { kAdd, kSub, kMul, kDiv, kFloorDiv, kMod, kPow };
enum class CmpOp : std::uint8_t { kEq, kNe, kLt, kLe, kGt, kGe, kIn, kNotIn };

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Arg {
  std::string name;  // empty for a positional argument
  ExprPtr value;
};

struct Expr {
  ExprKind kind = ExprKind::kConst;
  std::uint32_t offset = 0;  // in the normalized source, for error positions
  Value constant;            // kConst
  int id = -1;               // kName: interned name; kFilter/kTest: implementation index
  std::string name;          // kName, kGetAttr attribute, kFilter/kTest name
  BinOp bin = BinOp::kAdd;
  bool negated = false;  // kTest: `is not`
  std::vector<CmpOp> cmp;
  std::vector<ExprPtr> children;
  std::vector<Arg> args;  // kCall, kFilter, kTest
};

// Where `set`, `for` and `with` assign: one name, several (tuple unpacking), or ns.attr.
struct Target {
  std::vector<int> names;
  bool is_tuple = false;
  int object = -1;  // ns.attr: the namespace variable
  std::string attr;
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct MacroParam {
  int name = -1;
  ExprPtr default_value;  // null: required
};

struct FilterCall {
  int id = -1;
  std::string name;
  std::vector<Arg> args;
  std::uint32_t offset = 0;
};

enum class StmtKind : std::uint8_t {
  kText,
  kOutput,       // {{ expr }}
  kIf,           // exprs: conditions; bodies: one per condition, then else
  kFor,          // exprs: iterable, filter condition (or null); bodies: body, else
  kSet,          // exprs[0] assigned to target
  kSetBlock,     // bodies[0] rendered, filtered, assigned to target
  kMacro,        // name in target.names[0]
  kCallBlock,    // exprs[0]: the call; params/bodies[0]: caller()
  kFilterBlock,  // bodies[0] rendered then filtered
  kWith,         // targets with exprs, then bodies[0]
  kBreak,
  kContinue,
  kScope,  // bodies[0] as is ({% generation %} of transformers)
};

struct Stmt {
  StmtKind kind = StmtKind::kText;
  std::uint32_t offset = 0;
  std::string text;  // kText
  std::vector<ExprPtr> exprs;
  std::vector<Body> bodies;
  Target target;
  std::vector<Target> targets;      // kWith
  std::vector<MacroParam> params;   // kMacro, kCallBlock
  std::vector<FilterCall> filters;  // kSetBlock, kFilterBlock
  bool has_else = false;
  std::string macro_name;
  bool uses_varargs = false;  // macro body mentions varargs/kwargs
};

struct Program {
  std::string source;  // normalized, for error positions
  Body body;
  std::vector<std::string> names;
  bool uses_strftime_now = false;
  bool iterates_content = false;
  // Interned ids of the names the interpreter treats specially.
  int loop_id = -1, caller_id = -1, varargs_id = -1, kwargs_id = -1;
};

// Parses a lexed template. False on failure, with `error` filled.
bool parse_program(std::string_view source, Program& program, ErrorDetail& error);

// Filter and test implementations by name (jinja_filters.cpp, jinja_tests.cpp); -1 if unknown.
int find_filter(std::string_view name);
int find_test(std::string_view name);

}  // namespace prefixgate::canon::jinja
