// The tree-walking interpreter behind Template::render, and the interface the filters, tests and
// methods (jinja_filters.cpp, jinja_tests.cpp, jinja_methods.cpp) are written against.
//
// Errors do not unwind: the first one is recorded (fail()) and every evaluation step returns
// Undefined once failed() is true, so control returns up the tree quickly and nothing throws.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "jinja_ast.h"
#include "jinja_value.h"

namespace prefixgate::canon::jinja {

struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> named;

  // The argument at `index` or named `name` (Python's binding of a parameter); null if absent.
  const Value* get(std::size_t index, std::string_view name) const;
  std::size_t count() const { return positional.size() + named.size(); }
};

struct Scope {
  Scope* parent = nullptr;
  std::vector<std::pair<int, Value>> vars;

  const Value* find_local(int id) const {
    for (const auto& [name, value] : vars) {
      if (name == id) return &value;
    }
    return nullptr;
  }
  void set(int id, Value v) {
    for (auto& [name, value] : vars) {
      if (name == id) {
        value = std::move(v);
        return;
      }
    }
    vars.emplace_back(id, std::move(v));
  }
};

enum class Flow { kNormal, kBreak, kContinue, kError };

class Interpreter {
 public:
  Interpreter(const Program& program, const Context& context, const RenderOptions& options);

  bool render(RenderOutput& out, ErrorDetail& error);

  // Records the first error (at the expression being evaluated) and returns Undefined.
  Value fail(ErrorKind kind, std::string text);
  bool failed() const { return failed_; }

  Value eval(const Expr& e, Scope& scope);
  // Calls a callable value (macro, builtin, bound method, caller()).
  Value call(const Value& callee, CallArgs& args);
  // Jinja2's environment.getattr / getitem.
  Value getattr(const Value& obj, std::string_view name);
  Value getitem(const Value& obj, const Value& key);

  // Applies a filter or test by index, as `value | name(args)` / `value is name(args)` would.
  Value apply_filter(int id, const Value& input, CallArgs& args);
  bool apply_test(int id, const Value& input, CallArgs& args);

  // Counts one loop iteration or one item a filter visits; false (and failed) past the limit.
  bool tick(std::size_t n = 1);
  // Checks a string or list about to be built against max_value_bytes.
  bool check_size(std::size_t bytes);

  const RenderOptions& options() const { return options_; }
  const Context& context() const { return context_; }
  std::size_t& depth() { return depth_; }

  // Renders a macro or caller body with arguments bound; returns its output as a string.
  Value run_macro(const Stmt& def, Scope* parent, CallArgs& args, const Value& caller);

 private:
  Flow exec(const Body& body, Scope& scope);
  Flow exec_stmt(const Stmt& s, Scope& scope);
  Flow exec_for(const Stmt& s, Scope& scope);
  bool assign(const Target& t, const Value& v, Scope& scope);
  Value lookup(int id, Scope& scope);
  Value eval_call(const Expr& e, Scope& scope);
  bool eval_args(const std::vector<Arg>& args, Scope& scope, CallArgs& out);
  Value eval_binary(BinOp op, const Value& a, const Value& b);
  Value eval_compare(const Expr& e, Scope& scope);
  Value capture(const Body& body, Scope& scope);
  Value capture_filtered(const Stmt& s, Scope& scope);
  void emit(const Value& v);

  const Program& program_;
  const Context& context_;
  const RenderOptions& options_;
  Scope root_;
  std::vector<Value> builtins_;  // by name id; Undefined where the name is no builtin
  StrBuilder* out_ = nullptr;
  std::size_t output_bytes_ = 0;
  std::size_t iterations_ = 0;
  std::size_t depth_ = 0;
  std::uint32_t offset_ = 0;  // of the expression or statement being evaluated
  bool failed_ = false;
  ErrorDetail error_;
};

// Methods of str, dict and list values (jinja_methods.cpp). `found` is false when the type has
// no such method (the caller then falls back to attribute or item lookup).
bool has_method(const Value& self, std::string_view name);
Value call_method(Interpreter& in, const Value& self, std::string_view name, CallArgs& args);

// append, pop, update, ...: methods the immutable sandbox refuses.
bool is_mutating_method(std::string_view name);

// A bound method as a first-class value (`{% set f = s.upper %}`).
Value bound_method(const Value& self, std::string_view name);

// Globals: namespace(), range(), dict(), raise_exception(), strftime_now(), cycler(), joiner().
Value make_builtin(std::string_view name);

// Python's json.dumps(value, ensure_ascii=False, indent, separators, sort_keys), as
// transformers' `tojson`. Fails (through `in`) on values JSON cannot hold.
bool dump_json(Interpreter& in, const Value& value, const Value& indent, std::string_view item_sep,
               std::string_view key_sep, bool sort_keys, std::string& out);

// Python's strftime for the directives chat templates use.
std::string format_time(const CivilTime& t, std::string_view format);

}  // namespace prefixgate::canon::jinja
