// Jinja2's built-in filters on strings and numbers, transformers' `tojson`, and the filter
// table the parser resolves names against. Sequence filters live in jinja_filters_seq.cpp.
#include "jinja_filters.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "jinja_unicode.h"

namespace prefixgate::canon::jinja {

Value arg(const CallArgs& args, std::size_t index, std::string_view name, Value fallback) {
  const Value* v = args.get(index, name);
  return v != nullptr ? *v : fallback;
}

namespace {

Value string_method_filter(Interpreter& in, const Value& input, std::string_view method,
                           CallArgs& args) {
  return call_method(in, str_value(input), method, args);
}

Value f_trim(Interpreter& in, const Value& input, CallArgs& args) {
  return string_method_filter(in, input, "strip", args);
}
Value f_upper(Interpreter& in, const Value& input, CallArgs& args) {
  return string_method_filter(in, input, "upper", args);
}
Value f_lower(Interpreter& in, const Value& input, CallArgs& args) {
  return string_method_filter(in, input, "lower", args);
}
Value f_capitalize(Interpreter& in, const Value& input, CallArgs& args) {
  return string_method_filter(in, input, "capitalize", args);
}
Value f_replace(Interpreter& in, const Value& input, CallArgs& args) {
  return string_method_filter(in, input, "replace", args);
}

// Jinja2's title filter is not str.title(): words start after '-', whitespace, '(', '{', '['
// or '<', and the rest of each word is lowered.
Value f_title(Interpreter&, const Value& input, CallArgs&) {
  const std::string s = to_str(input);
  std::string out;
  bool word_start = true;
  for (std::size_t i = 0; i < s.size();) {
    const auto d = decode_utf8(s, i);
    const bool sep =
        py_isspace(d.cp) || d.cp == '-' || d.cp == '(' || d.cp == '{' || d.cp == '[' || d.cp == '<';
    if (sep) {
      out.append(s, i, d.bytes);
      word_start = true;
    } else if (word_start) {
      append_upper(d.cp, out);
      word_start = false;
    } else {
      append_lower(d.cp, out);
    }
    i += d.bytes;
  }
  return make_string(std::move(out));
}

Value f_string(Interpreter&, const Value& input, CallArgs&) {
  return str_value(input);
}

Value f_safe(Interpreter&, const Value& input, CallArgs&) {
  return input;
}

Value f_escape(Interpreter&, const Value& input, CallArgs&) {
  const std::string s = to_str(input);
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return make_string(std::move(out));
}

Value f_default(Interpreter&, const Value& input, CallArgs& args) {
  const Value fallback = arg(args, 0, "default_value", Value(""));
  const bool boolean = truthy(arg(args, 1, "boolean", Value(false)));
  if (input.is_undefined() || (boolean && !truthy(input))) return fallback;
  return input;
}

Value f_length(Interpreter& in, const Value& input, CallArgs&) {
  const std::int64_t n = py_len(input);
  if (n < 0) {
    return in.fail(ErrorKind::kType,
                   "object of type '" + std::string(type_name(input)) + "' has no len()");
  }
  return Value(n);
}

Value f_first(Interpreter& in, const Value& input, CallArgs&) {
  std::vector<Value> items;
  if (!iterate(input, items))
    return in.fail(ErrorKind::kType,
                   "'" + std::string(type_name(input)) + "' object is not iterable");
  return items.empty() ? Value() : items.front();
}

Value f_last(Interpreter& in, const Value& input, CallArgs&) {
  std::vector<Value> items;
  if (!iterate(input, items))
    return in.fail(ErrorKind::kType,
                   "'" + std::string(type_name(input)) + "' object is not iterable");
  return items.empty() ? Value() : items.back();
}

Value f_list(Interpreter& in, const Value& input, CallArgs&) {
  std::vector<Value> items;
  if (!iterate(input, items))
    return in.fail(ErrorKind::kType,
                   "'" + std::string(type_name(input)) + "' object is not iterable");
  return Value::list(std::move(items));
}

Value f_items(Interpreter& in, const Value& input, CallArgs& args) {
  if (input.is_undefined()) return Value::list({});
  if (!input.is_dict() || input.dict().is_namespace) {
    return in.fail(ErrorKind::kType, "can only get item pairs from a mapping");
  }
  return call_method(in, input, "items", args);
}

Value f_reverse(Interpreter& in, const Value& input, CallArgs&) {
  if (input.is_string()) {
    const StrData& s = input.str();
    StrBuilder b;
    for (std::size_t end = s.text.size(); end > 0;) {
      std::size_t begin = end - 1;
      while (begin > 0 && (static_cast<unsigned char>(s.text[begin]) & 0xC0) == 0x80) --begin;
      b.append_part(s, begin, end);
      end = begin;
    }
    return std::move(b).build();
  }
  std::vector<Value> items;
  if (!iterate(input, items))
    return in.fail(ErrorKind::kType, "argument to reverse() must be a sequence");
  std::reverse(items.begin(), items.end());
  return Value::list(std::move(items));
}

// Python's int() of a string: optional sign and surrounding whitespace, '_' between digits.
bool parse_int(std::string_view s, int base, std::int64_t& out) {
  std::string digits;
  std::size_t i = 0;
  while (i < s.size() && py_isspace(static_cast<unsigned char>(s[i]))) ++i;
  std::size_t end = s.size();
  while (end > i && py_isspace(static_cast<unsigned char>(s[end - 1]))) --end;
  if (i < end && (s[i] == '+' || s[i] == '-')) digits += s[i++];
  bool prev_digit = false;
  for (; i < end; ++i) {
    if (s[i] == '_' && prev_digit && i + 1 < end) {
      prev_digit = false;
      continue;
    }
    if (!std::isalnum(static_cast<unsigned char>(s[i]))) return false;
    digits += s[i];
    prev_digit = true;
  }
  if (digits.empty() || digits == "+" || digits == "-") return false;
  errno = 0;
  char* stop = nullptr;
  const long long v = std::strtoll(digits.c_str(), &stop, base);
  if (*stop != '\0' || errno == ERANGE) return false;
  out = v;
  return true;
}

bool parse_float(std::string_view s, double& out) {
  std::string t(s);
  std::size_t b = t.find_first_not_of(" \t\n\r\f\v");
  std::size_t e = t.find_last_not_of(" \t\n\r\f\v");
  if (b == std::string::npos) return false;
  t = t.substr(b, e - b + 1);
  t.erase(std::remove(t.begin(), t.end(), '_'), t.end());
  if (t.find_first_of("xXpP") != std::string::npos) return false;  // strtod's hex floats
  char* stop = nullptr;
  out = std::strtod(t.c_str(), &stop);
  return stop != nullptr && *stop == '\0';
}

Value f_int(Interpreter& in, const Value& input, CallArgs& args) {
  const Value fallback = arg(args, 0, "default", Value(std::int64_t{0}));
  const Value base_v = arg(args, 1, "base", Value(std::int64_t{10}));
  const int base = base_v.is_int() ? static_cast<int>(base_v.as_int()) : 10;
  if (input.is_int()) return input;
  if (input.is_bool()) return Value(std::int64_t{input.as_bool() ? 1 : 0});
  if (input.is_float()) {
    if (!std::isfinite(input.as_float()))
      return in.fail(ErrorKind::kType, "cannot convert float infinity or NaN to integer");
    return Value(static_cast<std::int64_t>(std::trunc(input.as_float())));
  }
  if (input.is_string()) {
    std::int64_t i = 0;
    if (parse_int(input.as_string(), base, i)) return Value(i);
    double d = 0;
    if (parse_float(input.as_string(), d) && std::isfinite(d)) {
      return Value(static_cast<std::int64_t>(std::trunc(d)));
    }
  }
  return fallback;
}

Value f_float(Interpreter&, const Value& input, CallArgs& args) {
  const Value fallback = arg(args, 0, "default", Value(0.0));
  if (input.is_float()) return input;
  if (input.is_int()) return Value(static_cast<double>(input.as_int()));
  if (input.is_bool()) return Value(input.as_bool() ? 1.0 : 0.0);
  if (input.is_string()) {
    double d = 0;
    if (parse_float(input.as_string(), d)) return Value(d);
  }
  return fallback;
}

Value f_abs(Interpreter& in, const Value& input, CallArgs&) {
  if (input.is_int()) return Value(input.as_int() < 0 ? -input.as_int() : input.as_int());
  if (input.is_bool()) return Value(std::int64_t{input.as_bool() ? 1 : 0});
  if (input.is_float()) return Value(std::fabs(input.as_float()));
  return in.fail(ErrorKind::kType,
                 "bad operand type for abs(): '" + std::string(type_name(input)) + "'");
}

// round(value, precision=0, method='common'): 'common' is Python's round(), which rounds the
// exact binary value half to even (round(2.675, 2) is 2.67); printf's %.*f does the same.
Value f_round(Interpreter& in, const Value& input, CallArgs& args) {
  const Value precision_v = arg(args, 0, "precision", Value(std::int64_t{0}));
  const Value method_v = arg(args, 1, "method", Value("common"));
  const int precision = precision_v.is_int() ? static_cast<int>(precision_v.as_int()) : 0;
  const std::string method = to_str(method_v);
  if (method != "common" && method != "ceil" && method != "floor") {
    return in.fail(ErrorKind::kType, "method must be common, ceil or floor");
  }
  if (input.is_int() || input.is_bool()) {
    if (method == "common") return input.is_bool() ? Value(std::int64_t{input.as_bool()}) : input;
  }
  if (!input.is_number() && !input.is_bool())
    return in.fail(ErrorKind::kType,
                   "type " + std::string(type_name(input)) + " doesn't define __round__ method");
  const double x = input.is_float() ? input.as_float()
                   : input.is_int() ? static_cast<double>(input.as_int())
                                    : (input.as_bool() ? 1.0 : 0.0);
  if (!std::isfinite(x)) return Value(x);
  if (method == "common") {
    if (precision < 0 || precision > 30) return Value(x);
    char buf[512];
    std::snprintf(buf, sizeof buf, "%.*f", precision, x);
    return Value(std::strtod(buf, nullptr));
  }
  const double scale = std::pow(10.0, precision);
  return Value((method == "ceil" ? std::ceil(x * scale) : std::floor(x * scale)) / scale);
}

// indent(width=4, first=False, blank=False), as Jinja 3.1 writes it (splitlines semantics).
Value f_indent(Interpreter& in, const Value& input, CallArgs& args) {
  const Value width = arg(args, 0, "width", Value(std::int64_t{4}));
  const bool first = truthy(arg(args, 1, "first", Value(false)));
  const bool blank = truthy(arg(args, 2, "blank", Value(false)));
  std::string indention;
  if (width.is_string()) {
    indention = std::string(width.as_string());
  } else if (width.is_int()) {
    if (width.as_int() > 0 && !in.check_size(static_cast<std::size_t>(width.as_int())))
      return Value();
    indention.assign(static_cast<std::size_t>(std::max<std::int64_t>(0, width.as_int())), ' ');
  } else {
    return in.fail(ErrorKind::kType, "indent width must be an int or a string");
  }
  CallArgs none;
  const Value text = make_string(to_str(input) + "\n");
  const Value lines_v = call_method(in, text, "splitlines", none);
  if (in.failed()) return Value();
  const auto& lines = lines_v.list().items;
  std::string out;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const std::string_view line = lines[i].as_string();
    if (i > 0) out += '\n';
    if (i > 0 && (blank || !line.empty())) out += indention;
    out += line;
    if (!in.check_size(out.size())) return Value();
  }
  if (first) out = indention + out;
  return make_string(std::move(out));
}

Value f_wordcount(Interpreter&, const Value& input, CallArgs&) {
  const std::string s = to_str(input);
  std::int64_t n = 0;
  bool in_word = false;
  for (std::size_t i = 0; i < s.size();) {
    const auto d = decode_utf8(s, i);
    const bool word = d.cp == '_' || py_isalnum(d.cp);
    if (word && !in_word) ++n;
    in_word = word;
    i += d.bytes;
  }
  return Value(n);
}

Value f_format(Interpreter& in, const Value& input, CallArgs& args) {
  CallArgs pos;
  pos.positional = args.positional;
  return call_method(in, str_value(input), "__mod__", pos);
}

Value f_attr(Interpreter& in, const Value& input, CallArgs& args) {
  return in.getattr(input, to_str(arg(args, 0, "name")));
}

// transformers' tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False).
Value f_tojson(Interpreter& in, const Value& input, CallArgs& args) {
  const bool ensure_ascii = truthy(arg(args, 0, "ensure_ascii", Value(false)));
  const Value indent = arg(args, 1, "indent", Value(None{}));
  const Value separators = arg(args, 2, "separators", Value(None{}));
  const bool sort_keys = truthy(arg(args, 3, "sort_keys", Value(false)));
  if (ensure_ascii)
    return in.fail(ErrorKind::kUnsupported, "tojson(ensure_ascii=True) is not supported");
  // json.dumps' defaults: ', ' between items unless indenting, ': ' after keys.
  std::string item_sep = indent.is_none() ? ", " : ",";
  std::string key_sep = ": ";
  if (!separators.is_none() && !separators.is_undefined()) {
    if (!separators.is_list() || separators.list().items.size() != 2 ||
        !separators.list().items[0].is_string() || !separators.list().items[1].is_string()) {
      return in.fail(ErrorKind::kType, "separators must be a (item_separator, key_separator) pair");
    }
    item_sep = std::string(separators.list().items[0].as_string());
    key_sep = std::string(separators.list().items[1].as_string());
  }
  std::string out;
  if (!dump_json(in, input, indent, item_sep, key_sep, sort_keys, out)) return Value();
  SourceId source = kNoSource;
  if (input.is_list()) source = input.list().source;
  if (input.is_dict()) source = input.dict().source;
  if (source == kNoSource) return make_string(std::move(out));
  StrBuilder b;
  b.append_tagged(out, source, 0);
  return std::move(b).build();
}

struct FilterEntry {
  std::string_view name;
  FilterFn fn;
};

constexpr FilterEntry kFilters[] = {
    {"abs", f_abs},
    {"attr", f_attr},
    {"batch", filter_batch},
    {"capitalize", f_capitalize},
    {"count", f_length},
    {"d", f_default},
    {"default", f_default},
    {"dictsort", filter_dictsort},
    {"e", f_escape},
    {"escape", f_escape},
    {"first", f_first},
    {"float", f_float},
    {"format", f_format},
    {"indent", f_indent},
    {"int", f_int},
    {"items", f_items},
    {"join", filter_join},
    {"last", f_last},
    {"length", f_length},
    {"list", f_list},
    {"lower", f_lower},
    {"map", filter_map},
    {"max", filter_max},
    {"min", filter_min},
    {"reject", filter_reject},
    {"rejectattr", filter_rejectattr},
    {"replace", f_replace},
    {"reverse", f_reverse},
    {"round", f_round},
    {"safe", f_safe},
    {"select", filter_select},
    {"selectattr", filter_selectattr},
    {"sort", filter_sort},
    {"string", f_string},
    {"sum", filter_sum},
    {"title", f_title},
    {"tojson", f_tojson},
    {"trim", f_trim},
    {"unique", filter_unique},
    {"upper", f_upper},
    {"wordcount", f_wordcount},
};

}  // namespace

int find_filter(std::string_view name) {
  for (std::size_t i = 0; i < std::size(kFilters); ++i) {
    if (kFilters[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

Value Interpreter::apply_filter(int id, const Value& input, CallArgs& args) {
  if (failed()) return Value();
  // Filters see Undefined as Jinja2's Undefined: str() is "", iteration is empty. Only the
  // filters that take it apart (attribute access) fail on it.
  return kFilters[static_cast<std::size_t>(id)].fn(*this, input, args);
}

}  // namespace prefixgate::canon::jinja
