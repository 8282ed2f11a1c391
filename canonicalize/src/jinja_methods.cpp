// Methods templates call on values: Python's str, dict and list methods that the sandbox allows
// (none that mutate), with Python's Unicode rules. Results that are parts of a string (strip,
// split, slices) keep the provenance of those parts.
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>

#include "jinja_interp.h"
#include "jinja_unicode.h"

namespace prefixgate::canon::jinja {
namespace {

constexpr std::string_view kStrMethods[] = {
    "startswith", "endswith", "split",   "rsplit",     "strip",    "lstrip",  "rstrip",
    "upper",      "lower",    "title",   "capitalize", "replace",  "format",  "find",
    "rfind",      "index",    "count",   "join",       "isdigit",  "isalpha", "isalnum",
    "isspace",    "islower",  "isupper", "splitlines", "swapcase", "zfill",   "__mod__"};
constexpr std::string_view kDictMethods[] = {"items", "keys", "values", "get"};
constexpr std::string_view kListMethods[] = {"index", "count"};
// Methods Python has but the immutable sandbox refuses: calling one is a SecurityError there.
constexpr std::string_view kMutatingMethods[] = {"append", "extend",     "insert", "pop",
                                                 "remove", "clear",      "sort",   "reverse",
                                                 "update", "setdefault", "popitem"};

template <std::size_t N>
bool contains(const std::string_view (&list)[N], std::string_view name) {
  for (std::string_view m : list) {
    if (m == name) return true;
  }
  return false;
}

Value arg_or_undefined(const CallArgs& args, std::size_t i, std::string_view name) {
  const Value* v = args.get(i, name);
  return v != nullptr ? *v : Value();
}

Value slice_of(const StrData& s, std::size_t from, std::size_t to) {
  StrBuilder b;
  b.append_part(s, from, to);
  return std::move(b).build();
}

// Which code points strip() removes: whitespace, or those of `chars`.
struct StripSet {
  bool whitespace = true;
  std::string_view chars;
  bool has(std::string_view s, std::size_t pos, std::size_t& n) const {
    const auto d = decode_utf8(s, pos);
    n = d.bytes;
    if (whitespace) return py_isspace(d.cp);
    // One of chars' code points, compared whole: a malformed byte is not part of "\u3000".
    const std::string_view cp = s.substr(pos, n);
    for (std::size_t i = 0; i < chars.size();) {
      const std::size_t len = decode_utf8(chars, i).bytes;
      if (chars.substr(i, len) == cp) return true;
      i += len;
    }
    return false;
  }
};

// Where the trailing run of stripped code points in text[from, to) begins, walking back from
// the end: a message's content is trimmed on every render, and a walk over all of it was a fifth
// of a long prompt's render. Each ASCII byte decodes as a code point of its own (a multi-byte
// sequence takes only continuation bytes), so the walk goes back byte by byte over ASCII and,
// over a run of non-ASCII bytes, decodes forward from the ASCII byte before it as a forward walk
// from `from` would.
std::size_t strip_end(std::string_view text, std::size_t from, std::size_t to,
                      const StripSet& set) {
  std::size_t n = 0;
  while (to > from) {
    if (static_cast<unsigned char>(text[to - 1]) < 0x80) {
      if (!set.has(text, to - 1, n)) return to;
      --to;
      continue;
    }
    std::size_t start = to - 1;
    while (start > from && static_cast<unsigned char>(text[start - 1]) >= 0x80) --start;
    std::size_t kept_end = start;  // past the last code point of the run that stays
    for (std::size_t i = start; i < to;) {
      const bool strip = set.has(text, i, n);
      i += n;
      if (!strip) kept_end = i;
    }
    if (kept_end > start) return kept_end;
    to = start;
  }
  return to;
}

Value do_strip(Interpreter& in, const Value& self, const CallArgs& args, bool left, bool right) {
  StripSet set;
  const Value chars = arg_or_undefined(args, 0, "chars");
  if (chars.is_string()) {
    set.whitespace = false;
    set.chars = chars.as_string();
  } else if (!chars.is_undefined() && !chars.is_none()) {
    return in.fail(ErrorKind::kType, "strip arg must be None or str");
  }
  const StrData& s = self.str();
  std::size_t from = 0, to = s.text.size();
  std::size_t n = 0;
  if (left) {
    while (from < to && set.has(s.text, from, n)) from += n;
  }
  if (right) to = strip_end(s.text, from, to, set);
  if (from == 0 && to == s.text.size()) return self;
  return slice_of(s, from, to);
}

Value do_split(Interpreter& in, const Value& self, const CallArgs& args, bool from_right) {
  const Value sep = arg_or_undefined(args, 0, "sep");
  const Value max_v = arg_or_undefined(args, 1, "maxsplit");
  std::int64_t maxsplit = -1;
  if (max_v.is_int()) maxsplit = max_v.as_int();
  const StrData& s = self.str();
  std::string_view text = s.text;
  std::vector<std::pair<std::size_t, std::size_t>> parts;
  if (sep.is_string()) {
    const std::string_view sp = sep.as_string();
    if (sp.empty()) return in.fail(ErrorKind::kType, "empty separator");
    if (!from_right) {
      std::size_t pos = 0;
      for (std::int64_t k = 0; maxsplit < 0 || k < maxsplit; ++k) {
        const std::size_t at = text.find(sp, pos);
        if (at == std::string_view::npos) break;
        parts.emplace_back(pos, at);
        pos = at + sp.size();
      }
      parts.emplace_back(pos, text.size());
    } else {
      std::size_t end = text.size();
      std::int64_t k = 0;
      while (maxsplit < 0 || k < maxsplit) {
        if (end < sp.size()) break;
        const std::size_t at = text.rfind(sp, end - sp.size());
        if (at == std::string_view::npos) break;
        parts.emplace_back(at + sp.size(), end);
        end = at;
        ++k;
      }
      parts.emplace_back(0, end);
      std::reverse(parts.begin(), parts.end());
    }
  } else if (sep.is_undefined() || sep.is_none()) {
    // Runs of whitespace separate; leading and trailing whitespace yields no empty parts.
    std::vector<std::pair<std::size_t, std::size_t>> words;
    for (std::size_t i = 0; i < text.size();) {
      auto d = decode_utf8(text, i);
      if (py_isspace(d.cp)) {
        i += d.bytes;
        continue;
      }
      const std::size_t start = i;
      while (i < text.size() && !py_isspace(d.cp = decode_utf8(text, i).cp)) {
        i += decode_utf8(text, i).bytes;
      }
      words.emplace_back(start, i);
    }
    if (maxsplit < 0 || static_cast<std::size_t>(maxsplit) + 1 >= words.size()) {
      parts = std::move(words);
    } else if (!from_right) {
      for (std::int64_t k = 0; k < maxsplit; ++k)
        parts.push_back(words[static_cast<std::size_t>(k)]);
      // Python keeps the rest as it is from the next word on, trailing whitespace included.
      parts.emplace_back(words[static_cast<std::size_t>(maxsplit)].first, text.size());
    } else {
      const std::size_t keep = words.size() - static_cast<std::size_t>(maxsplit);
      parts.emplace_back(0, words[keep - 1].second);  // rsplit keeps leading whitespace
      for (std::size_t k = keep; k < words.size(); ++k) parts.push_back(words[k]);
    }
  } else {
    return in.fail(ErrorKind::kType, "must be str or None, not " + std::string(type_name(sep)));
  }
  std::vector<Value> items;
  items.reserve(parts.size());
  for (const auto& [b, e] : parts) items.push_back(slice_of(s, b, e));
  return Value::list(std::move(items));
}

bool affix_match(const Value& self, const Value& affix, bool prefix) {
  const std::string_view s = self.as_string();
  const std::string_view a = affix.as_string();
  return prefix ? s.starts_with(a) : s.ends_with(a);
}

Value do_affix(Interpreter& in, const Value& self, const CallArgs& args, bool prefix) {
  const Value affix = arg_or_undefined(args, 0, "prefix");
  if (affix.is_string()) return Value(affix_match(self, affix, prefix));
  if (affix.is_list() && affix.list().is_tuple) {
    for (const Value& a : affix.list().items) {
      if (!a.is_string())
        return in.fail(ErrorKind::kType, "tuple for startswith must only contain str");
      if (affix_match(self, a, prefix)) return Value(true);
    }
    return Value(false);
  }
  return in.fail(ErrorKind::kType, std::string(prefix ? "startswith" : "endswith") +
                                       " first arg must be str or a tuple of str");
}

Value do_replace(Interpreter& in, const Value& self, const CallArgs& args) {
  const Value old_v = arg_or_undefined(args, 0, "old");
  const Value new_v = arg_or_undefined(args, 1, "new");
  const Value count_v = arg_or_undefined(args, 2, "count");
  if (!old_v.is_string() || !new_v.is_string()) {
    return in.fail(ErrorKind::kType, "replace() arguments must be str");
  }
  std::int64_t count = count_v.is_int() ? count_v.as_int() : -1;
  const StrData& s = self.str();
  const std::string_view old_s = old_v.as_string();
  StrBuilder b;
  std::size_t pos = 0;
  if (old_s.empty()) {
    // Python inserts `new` before every code point and at the end.
    for (std::size_t i = 0; i <= s.text.size() && count != 0; --count) {
      b.append(new_v);
      if (i == s.text.size()) {
        pos = i;
        break;
      }
      const std::size_t n = decode_utf8(s.text, i).bytes;
      b.append_part(s, i, i + n);
      i += n;
      pos = i;
      if (!in.check_size(b.size())) return Value();
    }
    b.append_part(s, pos, s.text.size());
    return std::move(b).build();
  }
  while (count != 0) {
    const std::size_t at = s.text.find(old_s, pos);
    if (at == std::string::npos) break;
    b.append_part(s, pos, at);
    b.append(new_v);
    pos = at + old_s.size();
    if (count > 0) --count;
    if (!in.check_size(b.size())) return Value();
  }
  b.append_part(s, pos, s.text.size());
  return std::move(b).build();
}

std::string title_case(std::string_view s) {
  std::string out;
  bool prev_cased = false;
  for (std::size_t i = 0; i < s.size();) {
    const auto d = decode_utf8(s, i);
    const bool cased = py_iscased_lower(d.cp) || py_iscased_upper(d.cp);
    if (cased) {
      if (prev_cased) {
        append_lower(d.cp, out);
      } else {
        append_title(d.cp, out);
      }
    } else {
      out.append(s.substr(i, d.bytes));
    }
    prev_cased = cased;
    i += d.bytes;
  }
  return out;
}

std::string capitalize(std::string_view s) {
  std::string out;
  for (std::size_t i = 0; i < s.size();) {
    const auto d = decode_utf8(s, i);
    if (i == 0) {
      append_title(d.cp, out);
    } else {
      append_lower(d.cp, out);
    }
    i += d.bytes;
  }
  return out;
}

// str.format(): positional {} / {0} and named {name} fields, without format specs.
Value do_format(Interpreter& in, const Value& self, const CallArgs& args) {
  const std::string_view f = self.as_string();
  StrBuilder b;
  std::size_t auto_index = 0;
  for (std::size_t i = 0; i < f.size(); ++i) {
    const char c = f[i];
    if (c == '{' && i + 1 < f.size() && f[i + 1] == '{') {
      b.append("{");
      ++i;
    } else if (c == '}' && i + 1 < f.size() && f[i + 1] == '}') {
      b.append("}");
      ++i;
    } else if (c == '{') {
      const std::size_t close = f.find('}', i);
      if (close == std::string_view::npos)
        return in.fail(ErrorKind::kType, "single '{' encountered in format string");
      const std::string_view field = f.substr(i + 1, close - i - 1);
      if (field.find_first_of(":!.[") != std::string_view::npos) {
        return in.fail(ErrorKind::kUnsupported, "format specs in str.format() are not supported");
      }
      const Value* v = nullptr;
      if (field.empty()) {
        v = auto_index < args.positional.size() ? &args.positional[auto_index] : nullptr;
        ++auto_index;
      } else if (field.find_first_not_of("0123456789") == std::string_view::npos) {
        const std::size_t k = std::stoul(std::string(field));
        v = k < args.positional.size() ? &args.positional[k] : nullptr;
      } else {
        for (const auto& [name, value] : args.named) {
          if (name == field) v = &value;
        }
      }
      if (v == nullptr)
        return in.fail(ErrorKind::kType,
                       "missing argument for format field {" + std::string(field) + "}");
      append_str(*v, b);
      i = close;
    } else if (c == '}') {
      return in.fail(ErrorKind::kType, "single '}' encountered in format string");
    } else {
      b.append(f.substr(i, 1));
    }
  }
  return std::move(b).build();
}

// printf-style `"%s: %d" % (a, b)`: %s %r %d %i %f %x %%, with flags, width and precision.
Value do_percent(Interpreter& in, const Value& self, const CallArgs& args) {
  const std::string_view f = self.as_string();
  StrBuilder b;
  std::size_t next = 0;
  for (std::size_t i = 0; i < f.size(); ++i) {
    if (f[i] != '%') {
      b.append(f.substr(i, 1));
      continue;
    }
    std::size_t j = i + 1;
    std::string spec = "%";
    while (j < f.size() && std::string_view("-+ 0#").find(f[j]) != std::string_view::npos)
      spec += f[j++];
    while (j < f.size() && std::isdigit(static_cast<unsigned char>(f[j]))) spec += f[j++];
    if (j < f.size() && f[j] == '.') {
      spec += f[j++];
      while (j < f.size() && std::isdigit(static_cast<unsigned char>(f[j]))) spec += f[j++];
    }
    if (j >= f.size()) return in.fail(ErrorKind::kType, "incomplete format");
    const char conv = f[j];
    i = j;
    if (conv == '%') {
      b.append("%");
      continue;
    }
    if (next >= args.positional.size())
      return in.fail(ErrorKind::kType, "not enough arguments for format string");
    const Value& v = args.positional[next++];
    char buf[128];
    if (conv == 's' || conv == 'r') {
      std::string text;
      if (conv == 'r') {
        append_repr(v, text);
      } else if (spec == "%") {
        append_str(v, b);
        continue;
      } else {
        text = to_str(v);
      }
      std::snprintf(buf, sizeof buf, (spec + "s").c_str(), text.c_str());
      b.append(std::strlen(buf) + 1 < sizeof buf ? std::string_view(buf) : std::string_view(text));
    } else if (conv == 'd' || conv == 'i' || conv == 'x' || conv == 'X' || conv == 'o') {
      if (!v.is_int() && !v.is_bool() && !v.is_float())
        return in.fail(ErrorKind::kType, "%d format: a number is required");
      const long long n = v.is_float()  ? static_cast<long long>(v.as_float())
                          : v.is_bool() ? (v.as_bool() ? 1 : 0)
                                        : v.as_int();
      std::snprintf(buf, sizeof buf, (spec + "ll" + (conv == 'i' ? 'd' : conv)).c_str(), n);
      b.append(buf);
    } else if (conv == 'f' || conv == 'F' || conv == 'e' || conv == 'g') {
      if (!v.is_int() && !v.is_bool() && !v.is_float())
        return in.fail(ErrorKind::kType, "must be real number");
      const double x = v.is_float()  ? v.as_float()
                       : v.is_bool() ? (v.as_bool() ? 1 : 0)
                                     : static_cast<double>(v.as_int());
      std::snprintf(buf, sizeof buf, (spec + conv).c_str(), x);
      b.append(buf);
    } else {
      return in.fail(ErrorKind::kUnsupported,
                     std::string("format character '") + conv + "' is not supported");
    }
  }
  if (next < args.positional.size())
    return in.fail(ErrorKind::kType, "not all arguments converted during string formatting");
  return std::move(b).build();
}

Value string_method(Interpreter& in, const Value& self, std::string_view name, CallArgs& args) {
  const std::string_view s = self.as_string();
  if (name == "startswith") return do_affix(in, self, args, true);
  if (name == "endswith") return do_affix(in, self, args, false);
  if (name == "split") return do_split(in, self, args, false);
  if (name == "rsplit") return do_split(in, self, args, true);
  if (name == "strip") return do_strip(in, self, args, true, true);
  if (name == "lstrip") return do_strip(in, self, args, true, false);
  if (name == "rstrip") return do_strip(in, self, args, false, true);
  if (name == "upper") return make_string(py_upper(s));
  if (name == "lower") return make_string(py_lower(s));
  if (name == "title") return make_string(title_case(s));
  if (name == "capitalize") return make_string(capitalize(s));
  if (name == "replace") return do_replace(in, self, args);
  if (name == "format") return do_format(in, self, args);
  if (name == "__mod__") return do_percent(in, self, args);
  if (name == "join") {
    const Value items_v = arg_or_undefined(args, 0, "iterable");
    std::vector<Value> items;
    if (!iterate(items_v, items) || items_v.is_undefined())
      return in.fail(ErrorKind::kType, "can only join an iterable");
    StrBuilder b;
    for (std::size_t i = 0; i < items.size(); ++i) {
      if (!items[i].is_string())
        return in.fail(ErrorKind::kType, "sequence item " + std::to_string(i) +
                                             ": expected str instance, " +
                                             std::string(type_name(items[i])) + " found");
      if (i > 0) b.append(self);
      b.append(items[i]);
      if (!in.check_size(b.size())) return Value();
    }
    return std::move(b).build();
  }
  if (name == "find" || name == "rfind" || name == "index" || name == "count") {
    const Value sub = arg_or_undefined(args, 0, "sub");
    if (!sub.is_string())
      return in.fail(ErrorKind::kType, "must be str, not " + std::string(type_name(sub)));
    const std::string_view needle = sub.as_string();
    if (name == "count") {
      if (needle.empty()) return Value(static_cast<std::int64_t>(cp_count(s) + 1));
      std::int64_t n = 0;
      for (std::size_t at = s.find(needle); at != std::string_view::npos;
           at = s.find(needle, at + needle.size()))
        ++n;
      return Value(n);
    }
    const std::size_t at = name == "rfind" ? s.rfind(needle) : s.find(needle);
    if (at == std::string_view::npos) {
      if (name == "index") return in.fail(ErrorKind::kType, "substring not found");
      return Value(std::int64_t{-1});
    }
    return Value(static_cast<std::int64_t>(cp_count(s.substr(0, at))));
  }
  if (name == "splitlines") {
    std::vector<Value> lines;
    std::size_t start = 0;
    for (std::size_t i = 0; i < s.size();) {
      const auto d = decode_utf8(s, i);
      const char32_t cp = d.cp;
      const bool brk = cp == '\n' || cp == '\r' || cp == '\v' || cp == '\f' || cp == 0x1C ||
                       cp == 0x1D || cp == 0x1E || cp == 0x85 || cp == 0x2028 || cp == 0x2029;
      if (!brk) {
        i += d.bytes;
        continue;
      }
      lines.push_back(slice_of(self.str(), start, i));
      i += d.bytes;
      if (cp == '\r' && i < s.size() && s[i] == '\n') ++i;
      start = i;
    }
    if (start < s.size()) lines.push_back(slice_of(self.str(), start, s.size()));
    return Value::list(std::move(lines));
  }
  if (name == "swapcase") {
    std::string out;
    for (std::size_t i = 0; i < s.size();) {
      const auto d = decode_utf8(s, i);
      if (py_iscased_upper(d.cp)) {
        append_lower(d.cp, out);
      } else {
        append_upper(d.cp, out);
      }
      i += d.bytes;
    }
    return make_string(std::move(out));
  }
  if (name == "zfill") {
    const Value w = arg_or_undefined(args, 0, "width");
    if (!w.is_int()) return in.fail(ErrorKind::kType, "zfill() needs an integer width");
    const auto len = static_cast<std::int64_t>(cp_count(s));
    if (w.as_int() <= len) return self;
    if (!in.check_size(static_cast<std::size_t>(w.as_int()))) return Value();
    std::string out(s);
    const std::size_t sign = !out.empty() && (out[0] == '-' || out[0] == '+') ? 1 : 0;
    out.insert(sign, static_cast<std::size_t>(w.as_int() - len), '0');
    return make_string(std::move(out));
  }
  // The is* predicates: true when non-empty and every code point qualifies.
  bool (*pred)(char32_t) = nullptr;
  if (name == "isdigit") pred = py_isdigit;
  if (name == "isalpha") pred = py_isalpha;
  if (name == "isalnum") pred = py_isalnum;
  if (name == "isspace") pred = py_isspace;
  if (pred != nullptr) {
    if (s.empty()) return Value(false);
    for (std::size_t i = 0; i < s.size();) {
      const auto d = decode_utf8(s, i);
      if (!pred(d.cp)) return Value(false);
      i += d.bytes;
    }
    return Value(true);
  }
  if (name == "islower" || name == "isupper") {
    bool any_cased = false;
    for (std::size_t i = 0; i < s.size();) {
      const auto d = decode_utf8(s, i);
      const bool lo = py_iscased_lower(d.cp), up = py_iscased_upper(d.cp);
      if ((name == "islower" && up) || (name == "isupper" && lo)) return Value(false);
      any_cased = any_cased || lo || up;
      i += d.bytes;
    }
    return Value(any_cased);
  }
  return in.fail(ErrorKind::kUnsupported, "str." + std::string(name) + "() is not supported");
}

Value dict_method(Interpreter& in, const Value& self, std::string_view name, CallArgs& args) {
  const DictData& d = self.dict();
  if (name == "get") {
    const Value key = arg_or_undefined(args, 0, "key");
    const Value* v = d.find(key);
    if (v != nullptr) return *v;
    const Value* dflt = args.get(1, "default");
    return dflt != nullptr ? *dflt : Value(None{});
  }
  std::vector<Value> out;
  out.reserve(d.items.size());
  for (const auto& [k, v] : d.items) {
    if (name == "items") {
      out.push_back(Value::tuple({k, v}));
    } else {
      out.push_back(name == "keys" ? k : v);
    }
  }
  (void)in;
  return Value::list(std::move(out));
}

Value list_method(Interpreter& in, const Value& self, std::string_view name, CallArgs& args) {
  const Value x = arg_or_undefined(args, 0, "value");
  const auto& items = self.list().items;
  std::int64_t n = 0;
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (!equals(items[i], x)) continue;
    if (name == "index") return Value(static_cast<std::int64_t>(i));
    ++n;
  }
  if (name == "index") return in.fail(ErrorKind::kType, "value is not in list");
  return Value(n);
}

class BoundMethod : public Native {
 public:
  BoundMethod(Value self, std::string name) : self_(std::move(self)), name_(std::move(name)) {}
  std::string_view type_name() const override { return "builtin_function_or_method"; }
  bool callable() const override { return true; }
  Value call(Interpreter& in, CallArgs& args) override {
    return call_method(in, self_, name_, args);
  }

 private:
  Value self_;
  std::string name_;
};

}  // namespace

bool is_mutating_method(std::string_view name) {
  return contains(kMutatingMethods, name);
}

bool has_method(const Value& self, std::string_view name) {
  if (contains(kMutatingMethods, name)) return self.is_list() || self.is_dict();
  if (self.is_string()) return contains(kStrMethods, name);
  if (self.is_dict()) return !self.dict().is_namespace && contains(kDictMethods, name);
  if (self.is_list()) return contains(kListMethods, name);
  return false;
}

Value call_method(Interpreter& in, const Value& self, std::string_view name, CallArgs& args) {
  if (contains(kMutatingMethods, name)) {
    return in.fail(ErrorKind::kType, "access to attribute '" + std::string(name) + "' of '" +
                                         std::string(type_name(self)) +
                                         "' object is unsafe (the sandbox forbids mutation)");
  }
  if (self.is_string()) return string_method(in, self, name, args);
  if (self.is_dict()) return dict_method(in, self, name, args);
  if (self.is_list()) return list_method(in, self, name, args);
  return in.fail(ErrorKind::kType, "'" + std::string(type_name(self)) +
                                       "' object has no attribute '" + std::string(name) + "'");
}

Value bound_method(const Value& self, std::string_view name) {
  return Value(std::make_shared<BoundMethod>(self, std::string(name)));
}

}  // namespace prefixgate::canon::jinja
