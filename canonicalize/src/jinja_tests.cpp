// Jinja2's tests (`x is defined`, `n is divisibleby 3`, ...). Python's type rules apply: bool is
// a number but not an `integer` test match, strings and dicts are sequences.
#include "jinja_filters.h"
#include "jinja_unicode.h"

namespace prefixgate::canon::jinja {
namespace {

using TestFn = bool (*)(Interpreter& in, const Value& v, CallArgs& args);

bool t_defined(Interpreter&, const Value& v, CallArgs&) {
  return !v.is_undefined();
}
bool t_undefined(Interpreter&, const Value& v, CallArgs&) {
  return v.is_undefined();
}
bool t_none(Interpreter&, const Value& v, CallArgs&) {
  return v.is_none();
}
bool t_string(Interpreter&, const Value& v, CallArgs&) {
  return v.is_string();
}
bool t_number(Interpreter&, const Value& v, CallArgs&) {
  return v.is_number() || v.is_bool();
}
bool t_integer(Interpreter&, const Value& v, CallArgs&) {
  return v.is_int();
}
bool t_float(Interpreter&, const Value& v, CallArgs&) {
  return v.is_float();
}
bool t_boolean(Interpreter&, const Value& v, CallArgs&) {
  return v.is_bool();
}
bool t_true(Interpreter&, const Value& v, CallArgs&) {
  return v.is_bool() && v.as_bool();
}
bool t_false(Interpreter&, const Value& v, CallArgs&) {
  return v.is_bool() && !v.as_bool();
}
bool t_mapping(Interpreter&, const Value& v, CallArgs&) {
  return v.is_dict() && !v.dict().is_namespace;
}
// Undefined has __iter__, __len__ and __getitem__, so it passes both.
bool t_iterable(Interpreter&, const Value& v, CallArgs&) {
  return v.is_string() || v.is_list() || (v.is_dict() && !v.dict().is_namespace) ||
         v.is_undefined();
}
bool t_sequence(Interpreter& in, const Value& v, CallArgs& a) {
  return t_iterable(in, v, a);
}
bool t_callable(Interpreter&, const Value& v, CallArgs&) {
  return v.is_native() && v.native().callable();
}
bool t_escaped(Interpreter&, const Value&, CallArgs&) {
  return false;
}

bool integer_arg(Interpreter& in, const Value& v, std::int64_t& out) {
  if (v.is_int()) {
    out = v.as_int();
    return true;
  }
  if (v.is_bool()) {
    out = v.as_bool() ? 1 : 0;
    return true;
  }
  in.fail(ErrorKind::kType, "expected an integer, got " + std::string(type_name(v)));
  return false;
}

bool t_odd(Interpreter& in, const Value& v, CallArgs&) {
  std::int64_t n = 0;
  return integer_arg(in, v, n) && (n % 2) != 0;
}
bool t_even(Interpreter& in, const Value& v, CallArgs&) {
  std::int64_t n = 0;
  return integer_arg(in, v, n) && (n % 2) == 0;
}
bool t_divisibleby(Interpreter& in, const Value& v, CallArgs& args) {
  std::int64_t n = 0, d = 0;
  if (!integer_arg(in, v, n) || !integer_arg(in, arg(args, 0, "num"), d)) return false;
  if (d == 0) {
    in.fail(ErrorKind::kType, "integer division or modulo by zero");
    return false;
  }
  return n % d == 0;
}

bool compare(Interpreter& in, const Value& a, const Value& b, bool want_less, bool or_equal) {
  bool ok = true;
  const bool r = or_equal ? !less(want_less ? b : a, want_less ? a : b, ok)
                          : less(want_less ? a : b, want_less ? b : a, ok);
  if (!ok)
    in.fail(ErrorKind::kType, "comparison not supported between instances of '" +
                                  std::string(type_name(a)) + "' and '" +
                                  std::string(type_name(b)) + "'");
  return ok && r;
}

bool t_eq(Interpreter&, const Value& v, CallArgs& args) {
  return equals(v, arg(args, 0, "other"));
}
bool t_ne(Interpreter&, const Value& v, CallArgs& args) {
  return !equals(v, arg(args, 0, "other"));
}
bool t_lt(Interpreter& in, const Value& v, CallArgs& args) {
  return compare(in, v, arg(args, 0, "other"), true, false);
}
bool t_le(Interpreter& in, const Value& v, CallArgs& args) {
  return compare(in, v, arg(args, 0, "other"), true, true);
}
bool t_gt(Interpreter& in, const Value& v, CallArgs& args) {
  return compare(in, v, arg(args, 0, "other"), false, false);
}
bool t_ge(Interpreter& in, const Value& v, CallArgs& args) {
  return compare(in, v, arg(args, 0, "other"), false, true);
}

bool t_in(Interpreter& in, const Value& v, CallArgs& args) {
  const Value seq = arg(args, 0, "seq");
  if (seq.is_string()) {
    if (!v.is_string()) {
      in.fail(ErrorKind::kType, "'in <string>' requires string as left operand");
      return false;
    }
    return seq.as_string().find(v.as_string()) != std::string_view::npos;
  }
  if (seq.is_dict()) return seq.dict().find(v) != nullptr;
  std::vector<Value> items;
  if (!iterate(seq, items)) {
    in.fail(ErrorKind::kType,
            "argument of type '" + std::string(type_name(seq)) + "' is not iterable");
    return false;
  }
  for (const Value& item : items) {
    if (equals(item, v)) return true;
  }
  return false;
}

bool t_sameas(Interpreter&, const Value& v, CallArgs& args) {
  const Value other = arg(args, 0, "other");
  if (v.is_none() || other.is_none()) return v.is_none() && other.is_none();
  if (v.is_bool() || other.is_bool())
    return v.is_bool() && other.is_bool() && v.as_bool() == other.as_bool();
  // CPython caches small ints and templates compare literals; equal ints count as the same.
  if (v.is_int() && other.is_int()) return v.as_int() == other.as_int();
  if (v.is_dict() && other.is_dict()) return &v.dict() == &other.dict();
  if (v.is_list() && other.is_list()) return &v.list() == &other.list();
  if (v.is_native() && other.is_native()) return &v.native() == &other.native();
  return false;
}

bool t_lower(Interpreter& in, const Value& v, CallArgs&) {
  CallArgs none;
  return truthy(call_method(in, str_value(v), "islower", none));
}
bool t_upper(Interpreter& in, const Value& v, CallArgs&) {
  CallArgs none;
  return truthy(call_method(in, str_value(v), "isupper", none));
}

bool t_filter(Interpreter&, const Value& v, CallArgs&) {
  return v.is_string() && find_filter(v.as_string()) >= 0;
}
bool t_test(Interpreter&, const Value& v, CallArgs&) {
  return v.is_string() && find_test(v.as_string()) >= 0;
}

struct TestEntry {
  std::string_view name;
  TestFn fn;
};

constexpr TestEntry kTests[] = {
    {"defined", t_defined},
    {"undefined", t_undefined},
    {"none", t_none},
    {"string", t_string},
    {"number", t_number},
    {"integer", t_integer},
    {"float", t_float},
    {"boolean", t_boolean},
    {"true", t_true},
    {"false", t_false},
    {"mapping", t_mapping},
    {"iterable", t_iterable},
    {"sequence", t_sequence},
    {"callable", t_callable},
    {"escaped", t_escaped},
    {"odd", t_odd},
    {"even", t_even},
    {"divisibleby", t_divisibleby},
    {"eq", t_eq},
    {"equalto", t_eq},
    {"==", t_eq},
    {"ne", t_ne},
    {"!=", t_ne},
    {"lt", t_lt},
    {"lessthan", t_lt},
    {"<", t_lt},
    {"le", t_le},
    {"<=", t_le},
    {"gt", t_gt},
    {"greaterthan", t_gt},
    {">", t_gt},
    {"ge", t_ge},
    {">=", t_ge},
    {"in", t_in},
    {"sameas", t_sameas},
    {"lower", t_lower},
    {"upper", t_upper},
    {"filter", t_filter},
    {"test", t_test},
};

}  // namespace

int find_test(std::string_view name) {
  for (std::size_t i = 0; i < std::size(kTests); ++i) {
    if (kTests[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

bool Interpreter::apply_test(int id, const Value& input, CallArgs& args) {
  if (failed()) return false;
  return kTests[static_cast<std::size_t>(id)].fn(*this, input, args);
}

}  // namespace prefixgate::canon::jinja
