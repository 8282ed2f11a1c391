// Jinja2's filters over sequences: join, map, select/reject(attr), unique, sort, dictsort,
// batch, min/max, sum. Jinja2 returns generators from several of these; a list renders the
// same wherever a template can observe the difference (loops, |list, |join, |length).
#include <algorithm>

#include "jinja_filters.h"
#include "jinja_unicode.h"

namespace prefixgate::canon::jinja {
namespace {

bool items_of(Interpreter& in, const Value& input, std::vector<Value>& items) {
  if (!iterate(input, items)) {
    in.fail(ErrorKind::kType, "'" + std::string(type_name(input)) + "' object is not iterable");
    return false;
  }
  return in.tick(items.size());
}

// The positional arguments after the first `skip`, for a test or filter applied per item.
CallArgs rest(const CallArgs& args, std::size_t skip) {
  CallArgs out;
  for (std::size_t i = skip; i < args.positional.size(); ++i)
    out.positional.push_back(args.positional[i]);
  return out;
}

// select/reject(test, *args) and selectattr/rejectattr(attr, test, *args).
Value select_impl(Interpreter& in, const Value& input, CallArgs& args, bool by_attr, bool keep) {
  std::vector<Value> items;
  if (!items_of(in, input, items)) return Value();
  std::string attribute;
  std::size_t next = 0;
  if (by_attr) {
    const Value a = arg(args, 0, "attribute");
    if (!a.is_string()) return in.fail(ErrorKind::kType, "selectattr needs an attribute name");
    attribute = std::string(a.as_string());
    next = 1;
  }
  int test = -1;
  if (next < args.positional.size()) {
    const Value& name = args.positional[next];
    if (!name.is_string()) return in.fail(ErrorKind::kType, "test name must be a string");
    test = find_test(name.as_string());
    if (test < 0)
      return in.fail(ErrorKind::kUnsupported,
                     "no test named '" + std::string(name.as_string()) + "'");
  }
  CallArgs test_args = rest(args, next + 1);
  std::vector<Value> out;
  for (const Value& item : items) {
    const Value subject = by_attr ? lookup_attribute(in, item, attribute) : item;
    if (in.failed()) return Value();
    CallArgs call_args = test_args;
    const bool pass = test < 0 ? truthy(subject) : in.apply_test(test, subject, call_args);
    if (in.failed()) return Value();
    if (pass == keep) out.push_back(item);
  }
  return Value::list(std::move(out));
}

// The sort key of Jinja2's sort/unique/dictsort: strings lowered unless case_sensitive.
Value sort_key(const Value& v, bool case_sensitive) {
  if (!case_sensitive && v.is_string()) return make_string(py_lower(v.as_string()));
  return v;
}

// Splits "a,b" into the attributes sort() orders by.
std::vector<std::string> attributes(const Value& attribute) {
  std::vector<std::string> out;
  if (attribute.is_none() || attribute.is_undefined()) return out;
  const std::string s = to_str(attribute);
  std::size_t start = 0;
  for (std::size_t comma; (comma = s.find(',', start)) != std::string::npos; start = comma + 1) {
    out.push_back(s.substr(start, comma - start));
  }
  out.push_back(s.substr(start));
  return out;
}

// Stable sort by `keys`, failing (TypeError) on keys Python cannot order.
bool sort_by_keys(Interpreter& in, std::vector<std::pair<Value, Value>>& keyed, bool reverse) {
  bool ok = true;
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& a, const auto& b) {
    bool this_ok = true;
    const bool r = reverse ? less(b.first, a.first, this_ok) : less(a.first, b.first, this_ok);
    ok = ok && this_ok;
    return this_ok && r;
  });
  if (!ok) in.fail(ErrorKind::kType, "'<' not supported between the items being sorted");
  return ok;
}

Value key_for(Interpreter& in, const Value& item, const std::vector<std::string>& attrs,
              bool case_sensitive) {
  if (attrs.empty()) return sort_key(item, case_sensitive);
  if (attrs.size() == 1) return sort_key(lookup_attribute(in, item, attrs[0]), case_sensitive);
  std::vector<Value> parts;
  for (const std::string& a : attrs)
    parts.push_back(sort_key(lookup_attribute(in, item, a), case_sensitive));
  return Value::list(std::move(parts));
}

Value min_max(Interpreter& in, const Value& input, CallArgs& args, bool want_max) {
  std::vector<Value> items;
  if (!items_of(in, input, items)) return Value();
  if (items.empty()) return Value();
  const bool case_sensitive = truthy(arg(args, 0, "case_sensitive", Value(false)));
  const std::vector<std::string> attrs = attributes(arg(args, 1, "attribute"));
  std::size_t best = 0;
  Value best_key = key_for(in, items[0], attrs, case_sensitive);
  for (std::size_t i = 1; i < items.size(); ++i) {
    Value k = key_for(in, items[i], attrs, case_sensitive);
    bool ok = true;
    const bool better = want_max ? less(best_key, k, ok) : less(k, best_key, ok);
    if (!ok) return in.fail(ErrorKind::kType, "'<' not supported between the items compared");
    if (better) {
      best = i;
      best_key = std::move(k);
    }
  }
  return items[best];
}

}  // namespace

Value lookup_attribute(Interpreter& in, const Value& item, std::string_view attribute) {
  Value v = item;
  std::size_t start = 0;
  for (;;) {
    const std::size_t dot = attribute.find('.', start);
    const std::string_view part = attribute.substr(
        start, dot == std::string_view::npos ? std::string_view::npos : dot - start);
    Value key{part};
    if (!part.empty() && part.find_first_not_of("0123456789") == std::string_view::npos) {
      key = Value(static_cast<std::int64_t>(std::stoll(std::string(part))));
    }
    if (v.is_undefined()) return Value();
    v = in.getitem(v, key);
    if (in.failed() || dot == std::string_view::npos) return v;
    start = dot + 1;
  }
}

Value filter_join(Interpreter& in, const Value& input, CallArgs& args) {
  std::vector<Value> items;
  if (!items_of(in, input, items)) return Value();
  const Value sep = arg(args, 0, "d", Value(""));
  const Value attribute = arg(args, 1, "attribute", Value(None{}));
  StrBuilder b;
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i > 0) append_str(sep, b);
    if (!attribute.is_none()) {
      append_str(lookup_attribute(in, items[i], to_str(attribute)), b);
    } else {
      append_str(items[i], b);
    }
    if (in.failed() || !in.check_size(b.size())) return Value();
  }
  return std::move(b).build();
}

// map('filter', *args) or map(attribute='a.b', default=...).
Value filter_map(Interpreter& in, const Value& input, CallArgs& args) {
  std::vector<Value> items;
  if (!items_of(in, input, items)) return Value();
  std::vector<Value> out;
  out.reserve(items.size());
  if (args.positional.empty()) {
    const Value attribute = arg(args, 99, "attribute");
    if (!attribute.is_string())
      return in.fail(ErrorKind::kType, "map needs a filter name or attribute=");
    const Value* fallback = args.get(99, "default");
    for (const Value& item : items) {
      Value v = lookup_attribute(in, item, attribute.as_string());
      if (in.failed()) return Value();
      if (v.is_undefined() && fallback != nullptr) v = *fallback;
      out.push_back(std::move(v));
    }
    return Value::list(std::move(out));
  }
  const Value& name = args.positional[0];
  const int filter = name.is_string() ? find_filter(name.as_string()) : -1;
  if (filter < 0) return in.fail(ErrorKind::kUnsupported, "no filter named '" + to_str(name) + "'");
  CallArgs filter_args = rest(args, 1);
  filter_args.named = args.named;
  for (const Value& item : items) {
    CallArgs call_args = filter_args;
    out.push_back(in.apply_filter(filter, item, call_args));
    if (in.failed()) return Value();
  }
  return Value::list(std::move(out));
}

Value filter_select(Interpreter& in, const Value& input, CallArgs& args) {
  return select_impl(in, input, args, false, true);
}
Value filter_reject(Interpreter& in, const Value& input, CallArgs& args) {
  return select_impl(in, input, args, false, false);
}
Value filter_selectattr(Interpreter& in, const Value& input, CallArgs& args) {
  return select_impl(in, input, args, true, true);
}
Value filter_rejectattr(Interpreter& in, const Value& input, CallArgs& args) {
  return select_impl(in, input, args, true, false);
}

Value filter_unique(Interpreter& in, const Value& input, CallArgs& args) {
  std::vector<Value> items;
  if (!items_of(in, input, items)) return Value();
  const bool case_sensitive = truthy(arg(args, 0, "case_sensitive", Value(false)));
  const std::vector<std::string> attrs = attributes(arg(args, 1, "attribute"));
  std::vector<Value> seen, out;
  for (const Value& item : items) {
    Value k = key_for(in, item, attrs, case_sensitive);
    if (in.failed()) return Value();
    bool dup = false;
    for (const Value& s : seen) {
      if (equals(s, k)) {
        dup = true;
        break;
      }
    }
    if (dup) continue;
    seen.push_back(std::move(k));
    out.push_back(item);
  }
  return Value::list(std::move(out));
}

Value filter_sort(Interpreter& in, const Value& input, CallArgs& args) {
  std::vector<Value> items;
  if (!items_of(in, input, items)) return Value();
  const bool reverse = truthy(arg(args, 0, "reverse", Value(false)));
  const bool case_sensitive = truthy(arg(args, 1, "case_sensitive", Value(false)));
  const std::vector<std::string> attrs = attributes(arg(args, 2, "attribute"));
  std::vector<std::pair<Value, Value>> keyed;
  for (Value& item : items) {
    Value k = key_for(in, item, attrs, case_sensitive);
    keyed.emplace_back(std::move(k), std::move(item));
  }
  if (in.failed() || !sort_by_keys(in, keyed, reverse)) return Value();
  std::vector<Value> out;
  for (auto& [k, v] : keyed) out.push_back(std::move(v));
  return Value::list(std::move(out));
}

Value filter_dictsort(Interpreter& in, const Value& input, CallArgs& args) {
  if (!input.is_dict() || input.dict().is_namespace)
    return in.fail(ErrorKind::kType, "dictsort needs a mapping");
  const bool case_sensitive = truthy(arg(args, 0, "case_sensitive", Value(false)));
  const std::string by = to_str(arg(args, 1, "by", Value("key")));
  const bool reverse = truthy(arg(args, 2, "reverse", Value(false)));
  if (by != "key" && by != "value")
    return in.fail(ErrorKind::kType, "You can only sort by either \"key\" or \"value\"");
  std::vector<std::pair<Value, Value>> keyed;
  for (const auto& [k, v] : input.dict().items) {
    keyed.emplace_back(sort_key(by == "key" ? k : v, case_sensitive), Value::tuple({k, v}));
  }
  if (!sort_by_keys(in, keyed, reverse)) return Value();
  std::vector<Value> out;
  for (auto& [k, v] : keyed) out.push_back(std::move(v));
  return Value::list(std::move(out));
}

Value filter_batch(Interpreter& in, const Value& input, CallArgs& args) {
  std::vector<Value> items;
  if (!items_of(in, input, items)) return Value();
  const Value count_v = arg(args, 0, "linecount");
  if (!count_v.is_int() || count_v.as_int() <= 0)
    return in.fail(ErrorKind::kType, "batch needs a positive line count");
  const auto count = static_cast<std::size_t>(count_v.as_int());
  const Value* fill = args.get(1, "fill_with");
  std::vector<Value> out, row;
  for (Value& item : items) {
    row.push_back(std::move(item));
    if (row.size() == count) {
      out.push_back(Value::list(std::move(row)));
      row.clear();
    }
  }
  if (!row.empty()) {
    if (fill != nullptr && !fill->is_none()) {
      while (row.size() < count) row.push_back(*fill);
    }
    out.push_back(Value::list(std::move(row)));
  }
  return Value::list(std::move(out));
}

Value filter_max(Interpreter& in, const Value& input, CallArgs& args) {
  return min_max(in, input, args, true);
}
Value filter_min(Interpreter& in, const Value& input, CallArgs& args) {
  return min_max(in, input, args, false);
}

Value filter_sum(Interpreter& in, const Value& input, CallArgs& args) {
  std::vector<Value> items;
  if (!items_of(in, input, items)) return Value();
  const Value attribute = arg(args, 0, "attribute", Value(None{}));
  Value total = arg(args, 1, "start", Value(std::int64_t{0}));
  for (const Value& item : items) {
    const Value v = attribute.is_none() ? item : lookup_attribute(in, item, to_str(attribute));
    if (!v.is_number() && !v.is_bool())
      return in.fail(ErrorKind::kType, "unsupported operand type(s) for +");
    if (total.is_int() && v.is_int()) {
      std::int64_t r = 0;
      if (__builtin_add_overflow(total.as_int(), v.as_int(), &r))
        return in.fail(ErrorKind::kLimit, "integer overflow");
      total = Value(r);
    } else {
      const double a = total.is_float() ? total.as_float()
                       : total.is_int() ? static_cast<double>(total.as_int())
                                        : 0.0;
      const double b = v.is_float() ? v.as_float()
                       : v.is_int() ? static_cast<double>(v.as_int())
                                    : (v.as_bool() ? 1.0 : 0.0);
      total = Value(a + b);
    }
  }
  return total;
}

}  // namespace prefixgate::canon::jinja
