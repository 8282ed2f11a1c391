// jinja::Value and the Python semantics of its kinds: truthiness, ==, <, str(), repr(), len().
#include "jinja_value.h"

#include <utf8proc.h>

#include <charconv>
#include <cmath>
#include <cstdio>

#include "jinja_interp.h"
#include "jinja_unicode.h"

namespace prefixgate::canon::jinja {

Value::Value(std::string_view s, SourceId source) {
  auto data = std::make_shared<StrData>();
  data->text.assign(s);
  if (source != kNoSource && !s.empty()) {
    data->spans.push_back(Span{0, static_cast<std::uint32_t>(s.size()), source, 0});
  }
  v_ = std::shared_ptr<const StrData>(std::move(data));
}

std::string_view Value::as_string() const {
  return std::get<5>(v_)->text;
}

Value Value::list(std::vector<Value> items, SourceId source) {
  auto data = std::make_shared<ListData>();
  data->items = std::move(items);
  data->source = source;
  return Value(std::shared_ptr<const ListData>(std::move(data)));
}

Value Value::tuple(std::vector<Value> items) {
  auto data = std::make_shared<ListData>();
  data->items = std::move(items);
  data->is_tuple = true;
  return Value(std::shared_ptr<const ListData>(std::move(data)));
}

Value Value::dict(std::vector<std::pair<std::string, Value>> items, SourceId source) {
  auto data = std::make_shared<DictData>();
  data->items.reserve(items.size());
  for (auto& [key, value] : items) data->items.emplace_back(Value(key), std::move(value));
  data->source = source;
  return Value(std::move(data));
}

namespace {

// json.loads() gives an int for a number with neither fraction nor exponent.
Value number_from_json(const json::Number& n) {
  const std::string& src = n.source;
  const bool integral_text = !src.empty() && src.find_first_of(".eE") == std::string::npos;
  if (integral_text) {
    std::int64_t i = 0;
    const auto r = std::from_chars(src.data(), src.data() + src.size(), i);
    if (r.ec == std::errc() && r.ptr == src.data() + src.size()) return Value(i);
  }
  if (src.empty() && std::isfinite(n.value) && n.value == std::trunc(n.value) &&
      std::fabs(n.value) < 9.0e15) {
    return Value(static_cast<std::int64_t>(n.value));
  }
  return Value(n.value);
}

}  // namespace

Value Value::from_json(const json::Value& value) {
  switch (value.type()) {
    case json::Type::kNull: return Value(None{});
    case json::Type::kBool: return Value(value.as_bool());
    case json::Type::kNumber: return number_from_json(value.as_number());
    case json::Type::kString: return Value(std::string_view(value.as_string()));
    case json::Type::kArray: {
      std::vector<Value> items;
      items.reserve(value.as_array().size());
      for (const json::Value& v : value.as_array()) items.push_back(from_json(v));
      return list(std::move(items));
    }
    case json::Type::kObject: {
      auto data = std::make_shared<DictData>();
      data->items.reserve(value.as_object().size());
      for (const json::Member& m : value.as_object()) {
        data->items.emplace_back(Value(std::string_view(m.key)), from_json(m.value));
      }
      return Value(std::move(data));
    }
  }
  return Value();
}

const Value* DictData::find(std::string_view key) const {
  for (const auto& [k, v] : items) {
    if (k.is_string() && k.as_string() == key) return &v;
  }
  return nullptr;
}

const Value* DictData::find(const Value& key) const {
  if (key.is_string()) return find(key.as_string());
  for (const auto& [k, v] : items) {
    if (equals(k, key)) return &v;
  }
  return nullptr;
}

void DictData::set(Value key, Value value) {
  for (auto& [k, v] : items) {
    if (equals(k, key)) {
      v = std::move(value);
      return;
    }
  }
  items.emplace_back(std::move(key), std::move(value));
}

Value Native::getattr(std::string_view) const {
  return Value();
}

Value Native::call(Interpreter& in, CallArgs&) {
  return in.fail(ErrorKind::kType, "'" + std::string(type_name()) + "' object is not callable");
}

void Context::set(std::string_view name, Value value) {
  for (auto& [k, v] : vars_) {
    if (k == name) {
      v = std::move(value);
      return;
    }
  }
  vars_.emplace_back(std::string(name), std::move(value));
}

const Value* Context::find(std::string_view name) const {
  for (const auto& [k, v] : vars_) {
    if (k == name) return &v;
  }
  return nullptr;
}

SourceId Context::add_source(std::string name) {
  sources_.push_back(std::move(name));
  return static_cast<SourceId>(sources_.size() - 1);
}

// ---- StrBuilder ----

void StrBuilder::append_tagged(std::string_view text, SourceId source, std::size_t source_offset) {
  if (text.empty()) return;
  const auto begin = static_cast<std::uint32_t>(text_.size());
  text_.append(text);
  const auto end = static_cast<std::uint32_t>(text_.size());
  const auto offset = static_cast<std::uint32_t>(source_offset);
  if (!spans_.empty()) {
    Span& last = spans_.back();
    if (last.end == begin && last.source == source &&
        last.source_offset + (last.end - last.begin) == offset) {
      last.end = end;
      return;
    }
  }
  spans_.push_back(Span{begin, end, source, offset});
}

void StrBuilder::append_part(const StrData& s, std::size_t from, std::size_t to) {
  if (to <= from) return;
  if (s.spans.empty()) {
    text_.append(s.text, from, to - from);
    return;
  }
  std::size_t pos = from;
  for (const Span& sp : s.spans) {
    if (sp.end <= pos) continue;
    if (sp.begin >= to) break;
    const std::size_t b = std::max<std::size_t>(sp.begin, pos);
    const std::size_t e = std::min<std::size_t>(sp.end, to);
    if (b > pos) text_.append(s.text, pos, b - pos);
    append_tagged(std::string_view(s.text).substr(b, e - b), sp.source,
                  sp.source_offset + (b - sp.begin));
    pos = e;
  }
  if (pos < to) text_.append(s.text, pos, to - pos);
}

void StrBuilder::append(const Value& string_value) {
  const StrData& s = string_value.str();
  append_part(s, 0, s.text.size());
}

Value StrBuilder::build() && {
  auto data = std::make_shared<StrData>();
  data->text = std::move(text_);
  data->spans = std::move(spans_);
  return Value(std::shared_ptr<const StrData>(std::move(data)));
}

Value make_string(std::string text) {
  auto data = std::make_shared<StrData>();
  data->text = std::move(text);
  return Value(std::shared_ptr<const StrData>(std::move(data)));
}

Value make_list(std::vector<Value> items) {
  return Value::list(std::move(items));
}

// ---- Python semantics ----

bool truthy(const Value& v) {
  if (v.is_undefined() || v.is_none()) return false;
  if (v.is_bool()) return v.as_bool();
  if (v.is_int()) return v.as_int() != 0;
  if (v.is_float()) return v.as_float() != 0.0;
  if (v.is_string()) return !v.as_string().empty();
  if (v.is_list()) return !v.list().items.empty();
  if (v.is_dict()) return v.dict().is_namespace || !v.dict().items.empty();
  return true;
}

namespace {

// bool and int compare as numbers in Python (True == 1).
bool as_number(const Value& v, double& d, std::int64_t& i, bool& is_int) {
  if (v.is_bool()) {
    i = v.as_bool() ? 1 : 0;
    is_int = true;
    return true;
  }
  if (v.is_int()) {
    i = v.as_int();
    is_int = true;
    return true;
  }
  if (v.is_float()) {
    d = v.as_float();
    is_int = false;
    return true;
  }
  return false;
}

}  // namespace

bool equals(const Value& a, const Value& b) {
  double da = 0, db = 0;
  std::int64_t ia = 0, ib = 0;
  bool a_int = false, b_int = false;
  if (as_number(a, da, ia, a_int) && as_number(b, db, ib, b_int)) {
    if (a_int && b_int) return ia == ib;
    return (a_int ? static_cast<double>(ia) : da) == (b_int ? static_cast<double>(ib) : db);
  }
  if (a.is_string() && b.is_string()) return a.as_string() == b.as_string();
  if (a.is_undefined() || b.is_undefined()) return a.is_undefined() && b.is_undefined();
  if (a.is_none() || b.is_none()) return a.is_none() && b.is_none();
  if (a.is_list() && b.is_list()) {
    const ListData& la = a.list();
    const ListData& lb = b.list();
    if (la.is_tuple != lb.is_tuple || la.items.size() != lb.items.size()) return false;
    for (std::size_t i = 0; i < la.items.size(); ++i) {
      if (!equals(la.items[i], lb.items[i])) return false;
    }
    return true;
  }
  if (a.is_dict() && b.is_dict()) {
    if (&a.dict() == &b.dict()) return true;
    if (a.dict().is_namespace || b.dict().is_namespace) return false;
    if (a.dict().items.size() != b.dict().items.size()) return false;
    for (const auto& [k, v] : a.dict().items) {
      const Value* other = b.dict().find(k);
      if (other == nullptr || !equals(v, *other)) return false;
    }
    return true;
  }
  if (a.is_native() && b.is_native()) return &a.native() == &b.native();
  return false;
}

bool less(const Value& a, const Value& b, bool& ok) {
  ok = true;
  double da = 0, db = 0;
  std::int64_t ia = 0, ib = 0;
  bool a_int = false, b_int = false;
  if (as_number(a, da, ia, a_int) && as_number(b, db, ib, b_int)) {
    if (a_int && b_int) return ia < ib;
    return (a_int ? static_cast<double>(ia) : da) < (b_int ? static_cast<double>(ib) : db);
  }
  // UTF-8 byte order is code point order, which is how Python orders str.
  if (a.is_string() && b.is_string()) return a.as_string() < b.as_string();
  if (a.is_list() && b.is_list() && a.list().is_tuple == b.list().is_tuple) {
    const auto& la = a.list().items;
    const auto& lb = b.list().items;
    for (std::size_t i = 0; i < la.size() && i < lb.size(); ++i) {
      if (equals(la[i], lb[i])) continue;
      return less(la[i], lb[i], ok);
    }
    return la.size() < lb.size();
  }
  ok = false;
  return false;
}

void append_float(double x, std::string& out) {
  if (std::isnan(x)) {
    out += "nan";
    return;
  }
  if (std::isinf(x)) {
    out += x < 0 ? "-inf" : "inf";
    return;
  }
  // Shortest round-trip digits, then Python's repr layout: positional for exponents -4..15.
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, x, std::chars_format::scientific);
  std::string_view sci(buf, static_cast<std::size_t>(r.ptr - buf));
  const std::size_t e_pos = sci.find('e');
  std::string_view mantissa = sci.substr(0, e_pos);
  int exponent = 0;
  std::from_chars(sci.data() + e_pos + 1 + (sci[e_pos + 1] == '+' ? 1 : 0), sci.data() + sci.size(),
                  exponent);
  bool negative = false;
  if (!mantissa.empty() && mantissa[0] == '-') {
    negative = true;
    mantissa.remove_prefix(1);
  }
  std::string digits;
  for (char c : mantissa) {
    if (c != '.') digits += c;
  }
  if (negative) out += '-';
  if (exponent >= -4 && exponent < 16) {
    if (exponent < 0) {
      out += "0.";
      out.append(static_cast<std::size_t>(-exponent - 1), '0');
      out += digits;
    } else {
      const auto int_digits = static_cast<std::size_t>(exponent) + 1;
      if (digits.size() <= int_digits) {
        out += digits;
        out.append(int_digits - digits.size(), '0');
        out += ".0";
      } else {
        out.append(digits, 0, int_digits);
        out += '.';
        out.append(digits, int_digits, std::string::npos);
      }
    }
    return;
  }
  out += digits[0];
  if (digits.size() > 1) {
    out += '.';
    out.append(digits, 1, std::string::npos);
  }
  out += exponent < 0 ? "e-" : "e+";
  const int abs_exp = exponent < 0 ? -exponent : exponent;
  if (abs_exp < 10) out += '0';
  out += std::to_string(abs_exp);
}

namespace {

// Python's str.isprintable() for one code point, which decides repr()'s escapes.
bool printable(char32_t cp) {
  if (cp == ' ') return true;
  if (cp < 0x20 || cp == 0x7F) return false;
  if (cp < 0x7F) return true;
  if (cp > 0x10FFFF) return false;
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(cp))) {
    case UTF8PROC_CATEGORY_CC:
    case UTF8PROC_CATEGORY_CF:
    case UTF8PROC_CATEGORY_CS:
    case UTF8PROC_CATEGORY_CO:
    case UTF8PROC_CATEGORY_CN:
    case UTF8PROC_CATEGORY_ZL:
    case UTF8PROC_CATEGORY_ZP:
    case UTF8PROC_CATEGORY_ZS: return false;
    default: return true;
  }
}

void append_repr_string(std::string_view s, std::string& out) {
  const bool has_single = s.find('\'') != std::string_view::npos;
  const bool has_double = s.find('"') != std::string_view::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  out += quote;
  for (std::size_t i = 0; i < s.size();) {
    const auto d = decode_utf8(s, i);
    const char32_t cp = d.cp;
    if (cp == static_cast<char32_t>(quote) || cp == '\\') {
      out += '\\';
      out += static_cast<char>(cp);
    } else if (cp == '\n') {
      out += "\\n";
    } else if (cp == '\r') {
      out += "\\r";
    } else if (cp == '\t') {
      out += "\\t";
    } else if (cp == internal::kInvalidCodePoint) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned char>(s[i]));
      out += buf;
    } else if (!printable(cp)) {
      char buf[16];
      if (cp < 0x100) {
        std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned>(cp));
      } else if (cp < 0x10000) {
        std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(cp));
      } else {
        std::snprintf(buf, sizeof buf, "\\U%08x", static_cast<unsigned>(cp));
      }
      out += buf;
    } else {
      out.append(s.substr(i, d.bytes));
    }
    i += d.bytes;
  }
  out += quote;
}

}  // namespace

void append_repr(const Value& v, std::string& out) {
  if (v.is_string()) {
    append_repr_string(v.as_string(), out);
  } else if (v.is_list()) {
    const ListData& l = v.list();
    out += l.is_tuple ? '(' : '[';
    for (std::size_t i = 0; i < l.items.size(); ++i) {
      if (i > 0) out += ", ";
      append_repr(l.items[i], out);
    }
    if (l.is_tuple && l.items.size() == 1) out += ',';
    out += l.is_tuple ? ')' : ']';
  } else if (v.is_dict()) {
    const DictData& d = v.dict();
    if (d.is_namespace) {
      out += "<Namespace {";
    } else {
      out += '{';
    }
    for (std::size_t i = 0; i < d.items.size(); ++i) {
      if (i > 0) out += ", ";
      append_repr(d.items[i].first, out);
      out += ": ";
      append_repr(d.items[i].second, out);
    }
    out += d.is_namespace ? "}>" : "}";
  } else if (v.is_undefined()) {
    out += "Undefined";
  } else {
    out += to_str(v);
  }
}

std::string to_str(const Value& v) {
  if (v.is_string()) return std::string(v.as_string());
  std::string out;
  if (v.is_undefined()) return out;
  if (v.is_none()) return "None";
  if (v.is_bool()) return v.as_bool() ? "True" : "False";
  if (v.is_int()) return std::to_string(v.as_int());
  if (v.is_float()) {
    append_float(v.as_float(), out);
    return out;
  }
  if (v.is_list() || v.is_dict()) {
    append_repr(v, out);
    return out;
  }
  if (v.is_native()) {
    out = "<";
    out += v.native().type_name();
    out += ">";
  }
  return out;
}

void append_str(const Value& v, StrBuilder& out) {
  if (v.is_string()) {
    out.append(v);
    return;
  }
  SourceId source = kNoSource;
  if (v.is_list()) source = v.list().source;
  if (v.is_dict()) source = v.dict().source;
  if (source != kNoSource) {
    out.append_tagged(to_str(v), source, 0);
    return;
  }
  out.append(to_str(v));
}

Value str_value(const Value& v) {
  if (v.is_string()) return v;
  StrBuilder b;
  append_str(v, b);
  return std::move(b).build();
}

std::string_view type_name(const Value& v) {
  if (v.is_undefined()) return "undefined";
  if (v.is_none()) return "NoneType";
  if (v.is_bool()) return "bool";
  if (v.is_int()) return "int";
  if (v.is_float()) return "float";
  if (v.is_string()) return "str";
  if (v.is_list()) return v.list().is_tuple ? "tuple" : "list";
  if (v.is_dict()) return v.dict().is_namespace ? "Namespace" : "dict";
  return v.native().type_name();
}

std::int64_t py_len(const Value& v) {
  if (v.is_string()) return static_cast<std::int64_t>(cp_count(v.as_string()));
  if (v.is_list()) return static_cast<std::int64_t>(v.list().items.size());
  if (v.is_dict()) return static_cast<std::int64_t>(v.dict().items.size());
  if (v.is_undefined()) return 0;
  return -1;
}

bool iterate(const Value& v, std::vector<Value>& out) {
  if (v.is_list()) {
    out = v.list().items;
    return true;
  }
  if (v.is_dict()) {
    if (v.dict().is_namespace) return false;
    out.reserve(v.dict().items.size());
    for (const auto& [k, val] : v.dict().items) out.push_back(k);
    return true;
  }
  if (v.is_string()) {
    const StrData& s = v.str();
    for (std::size_t i = 0; i < s.text.size();) {
      const std::size_t n = decode_utf8(s.text, i).bytes;
      StrBuilder b;
      b.append_part(s, i, i + n);
      out.push_back(std::move(b).build());
      i += n;
    }
    return true;
  }
  return v.is_undefined();
}

}  // namespace prefixgate::canon::jinja
