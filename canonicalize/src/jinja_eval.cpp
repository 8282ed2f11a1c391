// Expressions: Python's operators on template values, Jinja2's attribute and item lookup.
#include <cmath>
#include <cstdio>

#include "jinja_interp.h"
#include "jinja_unicode.h"

namespace prefixgate::canon::jinja {
namespace {

// The expression as a reader wrote it, for "'messages[0].foo' is undefined".
std::string describe(const Expr& e) {
  switch (e.kind) {
    case ExprKind::kName: return e.name;
    case ExprKind::kGetAttr: return describe(*e.children[0]) + "." + e.name;
    case ExprKind::kGetItem: {
      const Expr& key = *e.children[1];
      std::string k = "...";
      if (key.kind == ExprKind::kConst) {
        k.clear();
        append_repr(key.constant, k);
      } else if (key.kind == ExprKind::kName) {
        k = key.name;
      }
      return describe(*e.children[0]) + "[" + k + "]";
    }
    default: return "value";
  }
}

bool numeric(const Value& v) {
  return v.is_int() || v.is_float() || v.is_bool();
}
double as_double(const Value& v) {
  if (v.is_float()) return v.as_float();
  if (v.is_bool()) return v.as_bool() ? 1 : 0;
  return static_cast<double>(v.as_int());
}
bool integral(const Value& v) {
  return v.is_int() || v.is_bool();
}
std::int64_t as_int64(const Value& v) {
  return v.is_bool() ? (v.as_bool() ? 1 : 0) : v.as_int();
}

// Python's slice.indices(): clamps start/stop for a sequence of `n` items.
bool slice_indices(Interpreter& in, const Value& start_v, const Value& stop_v, const Value& step_v,
                   std::int64_t n, std::int64_t& start, std::int64_t& stop, std::int64_t& step) {
  auto as_index = [&](const Value& v, std::int64_t& out) {
    if (v.is_none() || v.is_undefined()) return false;
    if (!integral(v)) {
      in.fail(ErrorKind::kType, "slice indices must be integers or None");
      return false;
    }
    out = as_int64(v);
    return true;
  };
  step = 1;
  as_index(step_v, step);
  if (in.failed()) return false;
  if (step == 0) {
    in.fail(ErrorKind::kType, "slice step cannot be zero");
    return false;
  }
  const bool neg = step < 0;
  std::int64_t s = 0, e = 0;
  const bool has_start = as_index(start_v, s);
  const bool has_stop = as_index(stop_v, e);
  if (in.failed()) return false;
  auto clamp = [&](std::int64_t v, bool has, bool is_start) {
    if (!has) return is_start ? (neg ? n - 1 : 0) : (neg ? -1 : n);
    if (v < 0) {
      v += n;
      if (v < 0) v = neg ? -1 : 0;
    } else if (v >= n) {
      v = neg ? n - 1 : n;
    }
    return v;
  };
  start = clamp(s, has_start, true);
  stop = clamp(e, has_stop, false);
  return true;
}

}  // namespace

Value Interpreter::getattr(const Value& obj, std::string_view name) {
  if (obj.is_undefined())
    return fail(ErrorKind::kUndefined,
                "undefined value has no attribute '" + std::string(name) + "'");
  if (obj.is_dict()) {
    const DictData& d = obj.dict();
    if (!d.is_namespace && has_method(obj, name)) {
      if (is_mutating_method(name)) return Value();
      return bound_method(obj, name);
    }
    const Value* v = d.find(name);
    return v != nullptr ? *v : Value();
  }
  if ((obj.is_string() || obj.is_list()) && has_method(obj, name)) {
    // The sandbox hides mutating methods: reading one gives an undefined value (calling it
    // fails in eval_call).
    if (is_mutating_method(name)) return Value();
    return bound_method(obj, name);
  }
  if (obj.is_native()) return obj.native().getattr(name);
  return Value();
}

Value Interpreter::getitem(const Value& obj, const Value& key) {
  if (obj.is_undefined())
    return fail(ErrorKind::kUndefined, "undefined value is not subscriptable");
  if (obj.is_dict()) {
    const Value* v = obj.dict().find(key);
    if (v != nullptr) return *v;
    if (key.is_string()) return getattr(obj, key.as_string());
    return Value();
  }
  if (obj.is_list() && integral(key)) {
    const auto& items = obj.list().items;
    std::int64_t i = as_int64(key);
    const auto n = static_cast<std::int64_t>(items.size());
    if (i < 0) i += n;
    if (i < 0 || i >= n) return Value();
    return items[static_cast<std::size_t>(i)];
  }
  if (obj.is_string() && integral(key)) {
    const StrData& s = obj.str();
    std::int64_t i = as_int64(key);
    if (i < 0) i += static_cast<std::int64_t>(cp_count(s.text));
    if (i < 0) return Value();
    const std::size_t at = cp_offset(s.text, static_cast<std::size_t>(i));
    if (at >= s.text.size()) return Value();
    StrBuilder b;
    b.append_part(s, at, at + decode_utf8(s.text, at).bytes);
    return std::move(b).build();
  }
  if (key.is_string()) return getattr(obj, key.as_string());
  return Value();
}

Value Interpreter::eval_binary(BinOp op, const Value& a, const Value& b) {
  if (a.is_undefined() || b.is_undefined()) {
    return fail(ErrorKind::kUndefined, "undefined value used in arithmetic");
  }
  static constexpr const char* kSymbols[] = {"+", "-", "*", "/", "//", "%", "**"};
  const auto type_error = [&] {
    return fail(ErrorKind::kType, std::string("unsupported operand type(s) for ") +
                                      kSymbols[static_cast<int>(op)] + ": '" +
                                      std::string(type_name(a)) + "' and '" +
                                      std::string(type_name(b)) + "'");
  };
  if (numeric(a) && numeric(b)) {
    const bool ints = integral(a) && integral(b);
    const std::int64_t x = ints ? as_int64(a) : 0, y = ints ? as_int64(b) : 0;
    const double dx = as_double(a), dy = as_double(b);
    std::int64_t r = 0;
    switch (op) {
      case BinOp::kAdd:
        if (!ints) return Value(dx + dy);
        if (__builtin_add_overflow(x, y, &r)) return fail(ErrorKind::kLimit, "integer overflow");
        return Value(r);
      case BinOp::kSub:
        if (!ints) return Value(dx - dy);
        if (__builtin_sub_overflow(x, y, &r)) return fail(ErrorKind::kLimit, "integer overflow");
        return Value(r);
      case BinOp::kMul:
        if (!ints) return Value(dx * dy);
        if (__builtin_mul_overflow(x, y, &r)) return fail(ErrorKind::kLimit, "integer overflow");
        return Value(r);
      case BinOp::kDiv:
        if (dy == 0) return fail(ErrorKind::kType, "division by zero");
        return Value(dx / dy);
      case BinOp::kFloorDiv:
        if (dy == 0) return fail(ErrorKind::kType, "integer division or modulo by zero");
        if (ints) {
          if (x == INT64_MIN && y == -1) return fail(ErrorKind::kLimit, "integer overflow");
          std::int64_t q = x / y;
          if ((x % y != 0) && ((x < 0) != (y < 0))) --q;
          return Value(q);
        }
        return Value(std::floor(dx / dy));
      case BinOp::kMod:
        if (dy == 0) return fail(ErrorKind::kType, "integer division or modulo by zero");
        if (ints) {
          if (y == -1) return Value(std::int64_t{0});
          std::int64_t m = x % y;
          if (m != 0 && ((m < 0) != (y < 0))) m += y;
          return Value(m);
        } else {
          double m = std::fmod(dx, dy);
          if (m != 0 && ((m < 0) != (dy < 0))) m += dy;
          return Value(m);
        }
      case BinOp::kPow:
        if (ints && y >= 0) {
          std::int64_t acc = 1;
          for (std::int64_t i = 0; i < y; ++i) {
            if (__builtin_mul_overflow(acc, x, &acc))
              return fail(ErrorKind::kLimit, "integer overflow");
            if (acc == 0 || acc == 1) break;
          }
          return Value(acc);
        }
        return Value(std::pow(dx, dy));
    }
  }
  if (op == BinOp::kAdd) {
    if (a.is_string() && b.is_string()) {
      if (!check_size(a.as_string().size() + b.as_string().size())) return Value();
      StrBuilder out;
      out.append(a);
      out.append(b);
      return std::move(out).build();
    }
    if (a.is_list() && b.is_list() && a.list().is_tuple == b.list().is_tuple) {
      std::vector<Value> items = a.list().items;
      items.insert(items.end(), b.list().items.begin(), b.list().items.end());
      return a.list().is_tuple ? Value::tuple(std::move(items)) : Value::list(std::move(items));
    }
    if (a.is_string()) {
      return fail(ErrorKind::kType,
                  "can only concatenate str (not \"" + std::string(type_name(b)) + "\") to str");
    }
    return type_error();
  }
  if (op == BinOp::kMul && (a.is_string() || a.is_list() || b.is_string() || b.is_list())) {
    const Value& seq = (a.is_string() || a.is_list()) ? a : b;
    const Value& times = (a.is_string() || a.is_list()) ? b : a;
    if (!integral(times)) return type_error();
    const std::int64_t n = std::max<std::int64_t>(0, as_int64(times));
    const std::size_t unit = seq.is_string() ? seq.as_string().size() : seq.list().items.size();
    if (unit != 0 && static_cast<std::size_t>(n) > options_.limits.max_value_bytes / unit) {
      return fail(ErrorKind::kLimit, "value larger than the render limit");
    }
    if (seq.is_string()) {
      std::string s;
      for (std::int64_t i = 0; i < n; ++i) s += seq.as_string();
      return make_string(std::move(s));
    }
    std::vector<Value> items;
    for (std::int64_t i = 0; i < n; ++i) {
      items.insert(items.end(), seq.list().items.begin(), seq.list().items.end());
    }
    return seq.list().is_tuple ? Value::tuple(std::move(items)) : Value::list(std::move(items));
  }
  if (op == BinOp::kMod && a.is_string()) {
    CallArgs args;
    if (b.is_list() && b.list().is_tuple) {
      args.positional = b.list().items;
    } else {
      args.positional.push_back(b);
    }
    return call_method(*this, a, "__mod__", args);
  }
  return type_error();
}

Value Interpreter::eval_compare(const Expr& e, Scope& scope) {
  Value left = eval(*e.children[0], scope);
  for (std::size_t i = 0; i < e.cmp.size(); ++i) {
    Value right = eval(*e.children[i + 1], scope);
    if (failed_) return Value();
    bool result = false;
    bool ok = true;
    switch (e.cmp[i]) {
      case CmpOp::kEq: result = equals(left, right); break;
      case CmpOp::kNe: result = !equals(left, right); break;
      case CmpOp::kLt: result = less(left, right, ok); break;
      case CmpOp::kGt: result = less(right, left, ok); break;
      case CmpOp::kLe: result = !less(right, left, ok); break;
      case CmpOp::kGe: result = !less(left, right, ok); break;
      case CmpOp::kIn:
      case CmpOp::kNotIn: {
        if (right.is_string()) {
          if (!left.is_string()) {
            return fail(ErrorKind::kType, "'in <string>' requires string as left operand, not " +
                                              std::string(type_name(left)));
          }
          result = right.as_string().find(left.as_string()) != std::string_view::npos;
        } else if (right.is_list()) {
          for (const Value& item : right.list().items) {
            if (equals(item, left)) {
              result = true;
              break;
            }
          }
        } else if (right.is_dict() && !right.dict().is_namespace) {
          result = right.dict().find(left) != nullptr;
        } else if (!right.is_undefined()) {
          return fail(ErrorKind::kType,
                      "argument of type '" + std::string(type_name(right)) + "' is not iterable");
        }
        if (e.cmp[i] == CmpOp::kNotIn) result = !result;
        break;
      }
    }
    if (!ok) {
      if (left.is_undefined() || right.is_undefined()) {
        return fail(ErrorKind::kUndefined, "undefined value used in a comparison");
      }
      return fail(ErrorKind::kType, "comparison not supported between instances of '" +
                                        std::string(type_name(left)) + "' and '" +
                                        std::string(type_name(right)) + "'");
    }
    if (!result) return Value(false);
    left = std::move(right);
  }
  return Value(true);
}

bool Interpreter::eval_args(const std::vector<Arg>& args, Scope& scope, CallArgs& out) {
  for (const Arg& a : args) {
    Value v = eval(*a.value, scope);
    if (failed_) return false;
    if (a.name.empty()) {
      out.positional.push_back(std::move(v));
    } else {
      out.named.emplace_back(a.name, std::move(v));
    }
  }
  return true;
}

Value Interpreter::eval_call(const Expr& e, Scope& scope) {
  const Expr& callee_expr = *e.children[0];
  Value callee;
  if (callee_expr.kind == ExprKind::kGetAttr) {
    Value obj = eval(*callee_expr.children[0], scope);
    if (failed_) return Value();
    // Methods of str, list and dict are called directly, without a bound-method object.
    if ((obj.is_string() || obj.is_list() || (obj.is_dict() && !obj.dict().is_namespace)) &&
        has_method(obj, callee_expr.name)) {
      CallArgs args;
      if (!eval_args(e.args, scope, args)) return Value();
      offset_ = e.offset;
      return call_method(*this, obj, callee_expr.name, args);
    }
    if (obj.is_undefined()) {
      offset_ = callee_expr.offset;
      return fail(ErrorKind::kUndefined,
                  "'" + describe(*callee_expr.children[0]) + "' is undefined");
    }
    callee = getattr(obj, callee_expr.name);
  } else {
    callee = eval(callee_expr, scope);
  }
  if (failed_) return Value();
  CallArgs args;
  if (!eval_args(e.args, scope, args)) return Value();
  offset_ = e.offset;
  if (callee.is_undefined()) {
    return fail(ErrorKind::kUndefined, "'" + describe(callee_expr) + "' is undefined");
  }
  return call(callee, args);
}

Value Interpreter::call(const Value& callee, CallArgs& args) {
  if (callee.is_native() && callee.native().callable()) {
    if (++depth_ > options_.limits.max_call_depth) {
      --depth_;
      return fail(ErrorKind::kLimit, "maximum call depth exceeded");
    }
    Value v = callee.native().call(*this, args);
    --depth_;
    return v;
  }
  return fail(ErrorKind::kType, "'" + std::string(type_name(callee)) + "' object is not callable");
}

Value Interpreter::eval(const Expr& e, Scope& scope) {
  if (failed_) return Value();
  offset_ = e.offset;
  switch (e.kind) {
    case ExprKind::kConst: return e.constant;
    case ExprKind::kName: return lookup(e.id, scope);
    case ExprKind::kList:
    case ExprKind::kTuple: {
      std::vector<Value> items;
      items.reserve(e.children.size());
      for (const ExprPtr& c : e.children) items.push_back(eval(*c, scope));
      if (failed_) return Value();
      return e.kind == ExprKind::kList ? Value::list(std::move(items))
                                       : Value::tuple(std::move(items));
    }
    case ExprKind::kDict: {
      auto d = std::make_shared<DictData>();
      for (std::size_t i = 0; i + 1 < e.children.size(); i += 2) {
        Value k = eval(*e.children[i], scope);
        Value v = eval(*e.children[i + 1], scope);
        if (failed_) return Value();
        if (k.is_list() && !k.list().is_tuple)
          return fail(ErrorKind::kType, "unhashable type: 'list'");
        if (k.is_dict()) return fail(ErrorKind::kType, "unhashable type: 'dict'");
        d->set(std::move(k), std::move(v));
      }
      return Value(std::move(d));
    }
    case ExprKind::kGetAttr: {
      Value obj = eval(*e.children[0], scope);
      if (failed_) return Value();
      offset_ = e.offset;
      if (obj.is_undefined()) {
        return fail(ErrorKind::kUndefined, "'" + describe(*e.children[0]) + "' is undefined");
      }
      return getattr(obj, e.name);
    }
    case ExprKind::kGetItem: {
      Value obj = eval(*e.children[0], scope);
      Value key = eval(*e.children[1], scope);
      if (failed_) return Value();
      offset_ = e.offset;
      if (obj.is_undefined()) {
        return fail(ErrorKind::kUndefined, "'" + describe(*e.children[0]) + "' is undefined");
      }
      return getitem(obj, key);
    }
    case ExprKind::kSlice: {
      Value obj = eval(*e.children[0], scope);
      Value parts[3];
      for (int i = 0; i < 3; ++i) {
        if (e.children[i + 1]) parts[i] = eval(*e.children[i + 1], scope);
      }
      if (failed_) return Value();
      offset_ = e.offset;
      if (obj.is_undefined()) {
        return fail(ErrorKind::kUndefined, "'" + describe(*e.children[0]) + "' is undefined");
      }
      if (!obj.is_string() && !obj.is_list()) return Value();
      const std::int64_t n = py_len(obj);
      std::int64_t start = 0, stop = 0, step = 1;
      if (!slice_indices(*this, parts[0], parts[1], parts[2], n, start, stop, step)) return Value();
      if (obj.is_list()) {
        std::vector<Value> items;
        const auto& src = obj.list().items;
        for (std::int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
          items.push_back(src[static_cast<std::size_t>(i)]);
        }
        return obj.list().is_tuple ? Value::tuple(std::move(items)) : Value::list(std::move(items));
      }
      const StrData& s = obj.str();
      StrBuilder b;
      if (step == 1) {
        if (start < stop) {
          const std::size_t from = cp_offset(s.text, static_cast<std::size_t>(start));
          const std::size_t to = from + cp_offset(std::string_view(s.text).substr(from),
                                                  static_cast<std::size_t>(stop - start));
          b.append_part(s, from, to);
        }
        return std::move(b).build();
      }
      std::vector<std::size_t> offsets;  // byte offset of each code point
      for (std::size_t i = 0; i < s.text.size(); i += decode_utf8(s.text, i).bytes) {
        offsets.push_back(i);
      }
      for (std::int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
        const std::size_t at = offsets[static_cast<std::size_t>(i)];
        b.append_part(s, at, at + decode_utf8(s.text, at).bytes);
      }
      return std::move(b).build();
    }
    case ExprKind::kCall: return eval_call(e, scope);
    case ExprKind::kFilter: {
      Value input = eval(*e.children[0], scope);
      CallArgs args;
      if (failed_ || !eval_args(e.args, scope, args)) return Value();
      offset_ = e.offset;
      return apply_filter(e.id, input, args);
    }
    case ExprKind::kTest: {
      Value input = eval(*e.children[0], scope);
      CallArgs args;
      if (failed_ || !eval_args(e.args, scope, args)) return Value();
      offset_ = e.offset;
      const bool r = apply_test(e.id, input, args);
      if (failed_) return Value();
      return Value(e.negated ? !r : r);
    }
    case ExprKind::kNeg:
    case ExprKind::kPos: {
      Value v = eval(*e.children[0], scope);
      if (failed_) return Value();
      if (v.is_undefined())
        return fail(ErrorKind::kUndefined, "undefined value used in arithmetic");
      if (!numeric(v)) {
        return fail(ErrorKind::kType, "bad operand type for unary " +
                                          std::string(e.kind == ExprKind::kNeg ? "-" : "+") +
                                          ": '" + std::string(type_name(v)) + "'");
      }
      if (e.kind == ExprKind::kPos) return v.is_bool() ? Value(as_int64(v)) : v;
      if (v.is_float()) return Value(-v.as_float());
      if (as_int64(v) == INT64_MIN) return fail(ErrorKind::kLimit, "integer overflow");
      return Value(-as_int64(v));
    }
    case ExprKind::kNot: {
      Value v = eval(*e.children[0], scope);
      if (failed_) return Value();
      return Value(!truthy(v));
    }
    case ExprKind::kBinary: {
      Value a = eval(*e.children[0], scope);
      Value b = eval(*e.children[1], scope);
      if (failed_) return Value();
      offset_ = e.offset;
      return eval_binary(e.bin, a, b);
    }
    case ExprKind::kCompare: return eval_compare(e, scope);
    case ExprKind::kAnd: {
      Value a = eval(*e.children[0], scope);
      if (failed_ || !truthy(a)) return a;
      return eval(*e.children[1], scope);
    }
    case ExprKind::kOr: {
      Value a = eval(*e.children[0], scope);
      if (failed_ || truthy(a)) return a;
      return eval(*e.children[1], scope);
    }
    case ExprKind::kCond: {
      Value cond = eval(*e.children[1], scope);
      if (failed_) return Value();
      if (truthy(cond)) return eval(*e.children[0], scope);
      if (e.children[2]) return eval(*e.children[2], scope);
      return Value();
    }
    case ExprKind::kConcat: {
      StrBuilder b;
      for (const ExprPtr& c : e.children) {
        Value v = eval(*c, scope);
        if (failed_) return Value();
        append_str(v, b);
      }
      if (!check_size(b.size())) return Value();
      return std::move(b).build();
    }
  }
  return Value();
}

}  // namespace prefixgate::canon::jinja
