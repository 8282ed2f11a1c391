// Statements: output, if, for (with `loop`), set, macro/call, filter blocks, and the scoping
// rules of Jinja2: a `for` body gets a fresh scope each iteration (assignments inside do not
// leak, which is why templates use namespace()), `if` opens no scope, and a macro sees the
// template's top-level names as they are when it is called.
#include "jinja_interp.h"
#include "jinja_lexer.h"

namespace prefixgate::canon::jinja {
namespace {

class LoopObject : public Native {
 public:
  explicit LoopObject(std::vector<Value> items) : items_(std::move(items)) {}
  const std::vector<Value>& items() const { return items_; }
  std::string_view type_name() const override { return "LoopContext"; }
  void set_index(std::size_t i) { index_ = i; }

  Value getattr(std::string_view name) const override {
    const auto n = static_cast<std::int64_t>(items_.size());
    const auto i = static_cast<std::int64_t>(index_);
    if (name == "index") return Value(i + 1);
    if (name == "index0") return Value(i);
    if (name == "revindex") return Value(n - i);
    if (name == "revindex0") return Value(n - i - 1);
    if (name == "first") return Value(i == 0);
    if (name == "last") return Value(i == n - 1);
    if (name == "length") return Value(n);
    if (name == "depth") return Value(std::int64_t{1});
    if (name == "depth0") return Value(std::int64_t{0});
    if (name == "previtem") return i > 0 ? items_[index_ - 1] : Value();
    if (name == "nextitem") return i + 1 < n ? items_[index_ + 1] : Value();
    if (name == "cycle") return Value(std::make_shared<Cycle>(index_));
    return Value();
  }

 private:
  // loop.cycle(a, b, ...): the argument at the iteration's index modulo their number.
  class Cycle : public Native {
   public:
    explicit Cycle(std::size_t index) : index_(index) {}
    std::string_view type_name() const override { return "method"; }
    bool callable() const override { return true; }
    Value call(Interpreter& in, CallArgs& args) override {
      if (args.positional.empty()) return in.fail(ErrorKind::kType, "no items for cycling given");
      return args.positional[index_ % args.positional.size()];
    }

   private:
    std::size_t index_;
  };

  std::vector<Value> items_;  // owned: `loop` may outlive the statement (set ns.l = loop)
  std::size_t index_ = 0;
};

class Macro : public Native {
 public:
  Macro(const Stmt& def, Scope* parent) : def_(def), parent_(parent) {}
  std::string_view type_name() const override { return "Macro"; }
  bool callable() const override { return true; }
  Value getattr(std::string_view name) const override {
    if (name == "name") return Value(std::string_view(def_.macro_name));
    return Value();
  }
  Value call(Interpreter& in, CallArgs& args) override {
    Value caller;
    for (auto it = args.named.begin(); it != args.named.end(); ++it) {
      if (it->first == "caller") {
        caller = std::move(it->second);
        args.named.erase(it);
        break;
      }
    }
    return in.run_macro(def_, parent_, args, caller);
  }

 private:
  const Stmt& def_;
  Scope* parent_;  // null: the template's top-level scope
};

// caller() inside a macro invoked by {% call %}: renders the call block's body in the scope
// of the call site, which is alive for as long as the macro call runs.
class Caller : public Native {
 public:
  Caller(const Stmt& block, Scope& scope, std::shared_ptr<const bool> alive)
      : block_(block), scope_(scope), alive_(std::move(alive)) {}
  std::string_view type_name() const override { return "Macro"; }
  bool callable() const override { return true; }
  Value call(Interpreter& in, CallArgs& args) override {
    if (!*alive_)
      return in.fail(ErrorKind::kUnsupported, "caller() used after its call block ended");
    return in.run_macro(block_, &scope_, args, Value());
  }

 private:
  const Stmt& block_;
  Scope& scope_;
  std::shared_ptr<const bool> alive_;  // false once the call block has ended
};

}  // namespace

const Value* CallArgs::get(std::size_t index, std::string_view name) const {
  if (index < positional.size()) return &positional[index];
  for (const auto& [k, v] : named) {
    if (k == name) return &v;
  }
  return nullptr;
}

Interpreter::Interpreter(const Program& program, const Context& context,
                         const RenderOptions& options)
    : program_(program), context_(context), options_(options) {
  // Only the names the template mentions are bound; the rest of the context is never looked at.
  builtins_.resize(program.names.size());
  for (std::size_t id = 0; id < program.names.size(); ++id) {
    const std::string& name = program.names[id];
    if (const Value* v = context.find(name)) {
      root_.vars.emplace_back(static_cast<int>(id), *v);
    } else {
      builtins_[id] = make_builtin(name);
    }
  }
}

Value Interpreter::fail(ErrorKind kind, std::string text) {
  if (!failed_) {
    failed_ = true;
    error_.kind = kind;
    line_column(program_.source, offset_, error_.line, error_.column);
    error_.text = std::move(text);
  }
  return Value();
}

bool Interpreter::tick(std::size_t n) {
  iterations_ += n;
  if (iterations_ > options_.limits.max_loop_iterations) {
    fail(ErrorKind::kLimit, "loop iteration limit exceeded");
    return false;
  }
  return true;
}

bool Interpreter::check_size(std::size_t bytes) {
  if (bytes > options_.limits.max_value_bytes) {
    fail(ErrorKind::kLimit, "value larger than the render limit");
    return false;
  }
  return true;
}

Value Interpreter::lookup(int id, Scope& scope) {
  for (Scope* s = &scope; s != nullptr; s = s->parent) {
    if (const Value* v = s->find_local(id)) return *v;
  }
  return builtins_[static_cast<std::size_t>(id)];
}

void Interpreter::emit(const Value& v) {
  if (failed_) return;
  append_str(v, *out_);
  if (out_->size() > options_.limits.max_output_bytes) {
    fail(ErrorKind::kLimit, "output larger than the render limit");
  }
}

Value Interpreter::capture(const Body& body, Scope& scope) {
  StrBuilder buffer;
  StrBuilder* saved = out_;
  out_ = &buffer;
  exec(body, scope);
  out_ = saved;
  if (failed_) return Value();
  return std::move(buffer).build();
}

bool Interpreter::assign(const Target& t, const Value& v, Scope& scope) {
  if (t.object >= 0) {
    Value ns = lookup(t.object, scope);
    if (!ns.is_dict() || !ns.dict().is_namespace) {
      fail(ErrorKind::kType, "cannot assign attribute on non-namespace object");
      return false;
    }
    ns.mutable_dict().set(Value(std::string_view(t.attr)), v);
    return true;
  }
  if (!t.is_tuple) {
    scope.set(t.names[0], v);
    return true;
  }
  std::vector<Value> items;
  if (!iterate(v, items) || v.is_undefined()) {
    fail(ErrorKind::kType, "cannot unpack non-iterable " + std::string(type_name(v)) + " object");
    return false;
  }
  if (items.size() != t.names.size()) {
    fail(ErrorKind::kType, "expected " + std::to_string(t.names.size()) +
                               " values to unpack, got " + std::to_string(items.size()));
    return false;
  }
  for (std::size_t i = 0; i < items.size(); ++i) scope.set(t.names[i], items[i]);
  return true;
}

Value Interpreter::run_macro(const Stmt& def, Scope* parent, CallArgs& args, const Value& caller) {
  Scope scope;
  scope.parent = parent != nullptr ? parent : &root_;
  const auto& params = def.params;
  std::vector<Value> varargs;
  for (std::size_t i = 0; i < args.positional.size(); ++i) {
    if (i < params.size()) {
      scope.set(params[i].name, args.positional[i]);
    } else {
      varargs.push_back(args.positional[i]);
    }
  }
  auto kwargs = std::make_shared<DictData>();
  for (auto& [name, value] : args.named) {
    bool bound = false;
    for (std::size_t i = 0; i < params.size(); ++i) {
      if (program_.names[static_cast<std::size_t>(params[i].name)] == name) {
        if (i < args.positional.size()) {
          return fail(ErrorKind::kType, "macro got multiple values for argument '" + name + "'");
        }
        scope.set(params[i].name, value);
        bound = true;
        break;
      }
    }
    if (!bound) kwargs->set(Value(std::string_view(name)), value);
  }
  for (const MacroParam& p : params) {
    if (scope.find_local(p.name) != nullptr) continue;
    // Defaults are evaluated at call time, and may refer to earlier parameters.
    scope.set(p.name, p.default_value ? eval(*p.default_value, scope) : Value());
    if (failed_) return Value();
  }
  scope.set(program_.varargs_id, Value::tuple(std::move(varargs)));
  scope.set(program_.kwargs_id, Value(std::move(kwargs)));
  if (!caller.is_undefined()) scope.set(program_.caller_id, caller);
  return capture(def.bodies[0], scope);
}

Flow Interpreter::exec(const Body& body, Scope& scope) {
  for (const StmtPtr& s : body) {
    const Flow f = exec_stmt(*s, scope);
    if (f != Flow::kNormal) return f;
  }
  return failed_ ? Flow::kError : Flow::kNormal;
}

Flow Interpreter::exec_for(const Stmt& s, Scope& scope) {
  Value iterable = eval(*s.exprs[0], scope);
  if (failed_) return Flow::kError;
  std::vector<Value> items;
  if (!iterate(iterable, items)) {
    fail(ErrorKind::kType, "'" + std::string(type_name(iterable)) + "' object is not iterable");
    return Flow::kError;
  }
  if (!tick(items.size())) return Flow::kError;
  if (s.exprs[1]) {
    // `for x in xs if cond`: filtered before the loop, so loop.length counts what is kept.
    std::vector<Value> kept;
    for (Value& item : items) {
      Scope probe;
      probe.parent = &scope;
      if (!assign(s.target, item, probe)) return Flow::kError;
      const Value keep = eval(*s.exprs[1], probe);
      if (failed_) return Flow::kError;
      if (truthy(keep)) kept.push_back(std::move(item));
    }
    items = std::move(kept);
  }
  if (items.empty()) {
    if (!s.has_else) return Flow::kNormal;
    Scope else_scope;
    else_scope.parent = &scope;
    const Flow f = exec(s.bodies[1], else_scope);
    return f == Flow::kError ? f : Flow::kNormal;
  }
  auto loop = std::make_shared<LoopObject>(std::move(items));
  const Value loop_value(loop);
  const std::vector<Value>& loop_items = loop->items();
  for (std::size_t i = 0; i < loop_items.size(); ++i) {
    loop->set_index(i);
    Scope body_scope;
    body_scope.parent = &scope;
    body_scope.vars.emplace_back(program_.loop_id, loop_value);
    if (!assign(s.target, loop_items[i], body_scope)) return Flow::kError;
    const Flow f = exec(s.bodies[0], body_scope);
    if (f == Flow::kError) return f;
    if (f == Flow::kBreak) break;
  }
  return Flow::kNormal;
}

// The body of a block `set` or a `filter` block, rendered and passed through its filters.
Value Interpreter::capture_filtered(const Stmt& s, Scope& scope) {
  Value v = capture(s.bodies[0], scope);
  for (const FilterCall& f : s.filters) {
    CallArgs args;
    if (failed_ || !eval_args(f.args, scope, args)) return Value();
    offset_ = f.offset;
    v = apply_filter(f.id, v, args);
  }
  return v;
}

Flow Interpreter::exec_stmt(const Stmt& s, Scope& scope) {
  if (failed_) return Flow::kError;
  offset_ = s.offset;
  switch (s.kind) {
    case StmtKind::kText:
      out_->append(s.text);
      if (out_->size() > options_.limits.max_output_bytes) {
        fail(ErrorKind::kLimit, "output larger than the render limit");
        return Flow::kError;
      }
      return Flow::kNormal;
    case StmtKind::kOutput: {
      const Value v = eval(*s.exprs[0], scope);
      emit(v);
      return failed_ ? Flow::kError : Flow::kNormal;
    }
    case StmtKind::kIf: {
      for (std::size_t i = 0; i < s.exprs.size(); ++i) {
        const Value cond = eval(*s.exprs[i], scope);
        if (failed_) return Flow::kError;
        if (truthy(cond)) return exec(s.bodies[i], scope);
      }
      if (s.has_else) return exec(s.bodies.back(), scope);
      return Flow::kNormal;
    }
    case StmtKind::kFor: {
      if (++depth_ > options_.limits.max_call_depth) {
        fail(ErrorKind::kLimit, "loops nested too deeply");
        return Flow::kError;
      }
      const Flow f = exec_for(s, scope);
      --depth_;
      return f;
    }
    case StmtKind::kSet: {
      const Value v = eval(*s.exprs[0], scope);
      if (failed_ || !assign(s.target, v, scope)) return Flow::kError;
      return Flow::kNormal;
    }
    case StmtKind::kSetBlock: {
      const Value v = capture_filtered(s, scope);
      if (failed_ || !assign(s.target, v, scope)) return Flow::kError;
      return Flow::kNormal;
    }
    case StmtKind::kFilterBlock: {
      const Value v = capture_filtered(s, scope);
      if (failed_) return Flow::kError;
      emit(v);
      return failed_ ? Flow::kError : Flow::kNormal;
    }
    case StmtKind::kMacro: {
      // A macro sees the template's top-level names (not the locals of a block it is defined
      // in: a macro value can outlive that block, and chat templates define macros at the top).
      scope.set(s.target.names[0], Value(std::make_shared<Macro>(s, nullptr)));
      return Flow::kNormal;
    }
    case StmtKind::kCallBlock: {
      const Expr& call_expr = *s.exprs[0];
      Value callee = eval(*call_expr.children[0], scope);
      CallArgs args;
      if (failed_ || !eval_args(call_expr.args, scope, args)) return Flow::kError;
      auto alive = std::make_shared<bool>(true);
      args.named.emplace_back("caller", Value(std::make_shared<Caller>(s, scope, alive)));
      offset_ = call_expr.offset;
      const Value v = call(callee, args);
      *alive = false;
      emit(v);
      return failed_ ? Flow::kError : Flow::kNormal;
    }
    case StmtKind::kWith: {
      Scope inner;
      inner.parent = &scope;
      for (std::size_t i = 0; i < s.targets.size(); ++i) {
        const Value v = eval(*s.exprs[i], scope);
        if (failed_ || !assign(s.targets[i], v, inner)) return Flow::kError;
      }
      return exec(s.bodies[0], inner);
    }
    case StmtKind::kBreak: return Flow::kBreak;
    case StmtKind::kContinue: return Flow::kContinue;
    case StmtKind::kScope: return exec(s.bodies[0], scope);
  }
  return Flow::kNormal;
}

bool Interpreter::render(RenderOutput& out, ErrorDetail& error) {
  StrBuilder buffer;
  out_ = &buffer;
  exec(program_.body, root_);
  if (failed_) {
    error = error_;
    return false;
  }
  out.text = std::move(buffer.text());
  out.spans.clear();
  out.spans.reserve(buffer.spans().size());
  for (const Span& s : buffer.spans()) {
    out.spans.push_back(ProvenanceSpan{s.begin, s.end, s.source, s.source_offset});
  }
  return true;
}

}  // namespace prefixgate::canon::jinja
