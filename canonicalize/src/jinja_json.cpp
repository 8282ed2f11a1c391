// transformers' `tojson`: Python's json.dumps(x, ensure_ascii=False, indent, separators,
// sort_keys). Differences from a generic JSON writer that change prompts: ", " and ": "
// separators by default, floats as Python's repr ("1.0", "1e-05"), NaN/Infinity allowed,
// non-ASCII written as is, and only C0 controls, '"' and '\' escaped.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "jinja_interp.h"

namespace prefixgate::canon::jinja {
namespace {

void quote(std::string_view s, std::string& out) {
  out += '"';
  for (char c : s) {
    const auto b = static_cast<unsigned char>(c);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (b < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", b);
          out += buf;
        } else {
          out += c;
        }
    }
  }
  out += '"';
}

class Dumper {
 public:
  Dumper(Interpreter& in, std::string indent, bool indenting, std::string_view item_sep,
         std::string_view key_sep, bool sort_keys, std::string& out)
      : in_(in),
        indent_(std::move(indent)),
        indenting_(indenting),
        item_sep_(item_sep),
        key_sep_(key_sep),
        sort_keys_(sort_keys),
        out_(out) {}

  bool dump(const Value& v, std::size_t level) {
    if (level > in_.options().limits.max_call_depth) {
      in_.fail(ErrorKind::kLimit, "tojson: value nested too deeply");
      return false;
    }
    if (out_.size() > in_.options().limits.max_value_bytes) {
      in_.fail(ErrorKind::kLimit, "value larger than the render limit");
      return false;
    }
    if (v.is_none()) {
      out_ += "null";
    } else if (v.is_bool()) {
      out_ += v.as_bool() ? "true" : "false";
    } else if (v.is_int()) {
      out_ += std::to_string(v.as_int());
    } else if (v.is_float()) {
      float_text(v.as_float());
    } else if (v.is_string()) {
      quote(v.as_string(), out_);
    } else if (v.is_list()) {
      const auto& items = v.list().items;
      if (items.empty()) {
        out_ += "[]";
        return true;
      }
      out_ += '[';
      for (std::size_t i = 0; i < items.size(); ++i) {
        if (i > 0) out_ += item_sep_;
        newline(level + 1);
        if (!dump(items[i], level + 1)) return false;
      }
      newline(level);
      out_ += ']';
    } else if (v.is_dict() && !v.dict().is_namespace) {
      return dump_dict(v.dict(), level);
    } else {
      in_.fail(ErrorKind::kType,
               "Object of type " + std::string(type_name(v)) + " is not JSON serializable");
      return false;
    }
    return true;
  }

 private:
  void float_text(double x) {
    if (std::isnan(x)) {
      out_ += "NaN";
    } else if (std::isinf(x)) {
      out_ += x < 0 ? "-Infinity" : "Infinity";
    } else {
      append_float(x, out_);
    }
  }

  void newline(std::size_t level) {
    if (!indenting_) return;
    out_ += '\n';
    for (std::size_t i = 0; i < level; ++i) out_ += indent_;
  }

  // Keys become strings as json.dumps makes them: str as is, bool/None/int/float converted.
  bool key_text(const Value& k, std::string& out) {
    if (k.is_string()) {
      out = std::string(k.as_string());
    } else if (k.is_bool()) {
      out = k.as_bool() ? "true" : "false";
    } else if (k.is_none()) {
      out = "null";
    } else if (k.is_int()) {
      out = std::to_string(k.as_int());
    } else if (k.is_float()) {
      std::string saved;
      saved.swap(out_);
      float_text(k.as_float());
      out.swap(out_);
      out_.swap(saved);
    } else {
      in_.fail(ErrorKind::kType,
               "keys must be str, int, float, bool or None, not " + std::string(type_name(k)));
      return false;
    }
    return true;
  }

  bool dump_dict(const DictData& d, std::size_t level) {
    if (d.items.empty()) {
      out_ += "{}";
      return true;
    }
    std::vector<const std::pair<Value, Value>*> order;
    order.reserve(d.items.size());
    for (const auto& item : d.items) order.push_back(&item);
    if (sort_keys_) {
      bool ok = true;
      std::stable_sort(order.begin(), order.end(), [&](const auto* a, const auto* b) {
        bool this_ok = true;
        const bool r = less(a->first, b->first, this_ok);
        ok = ok && this_ok;
        return this_ok && r;
      });
      if (!ok) {
        in_.fail(ErrorKind::kType, "tojson(sort_keys=True): keys of different types");
        return false;
      }
    }
    out_ += '{';
    std::string key;
    for (std::size_t i = 0; i < order.size(); ++i) {
      if (i > 0) out_ += item_sep_;
      newline(level + 1);
      if (!key_text(order[i]->first, key)) return false;
      quote(key, out_);
      out_ += key_sep_;
      if (!dump(order[i]->second, level + 1)) return false;
    }
    newline(level);
    out_ += '}';
    return true;
  }

  Interpreter& in_;
  std::string indent_;
  bool indenting_;
  std::string_view item_sep_;
  std::string_view key_sep_;
  bool sort_keys_;
  std::string& out_;
};

}  // namespace

bool dump_json(Interpreter& in, const Value& value, const Value& indent, std::string_view item_sep,
               std::string_view key_sep, bool sort_keys, std::string& out) {
  std::string unit;
  bool indenting = false;
  if (indent.is_int()) {
    indenting = true;
    const std::int64_t n = std::clamp<std::int64_t>(indent.as_int(), 0, 64);
    unit.assign(static_cast<std::size_t>(n), ' ');
  } else if (indent.is_string()) {
    indenting = true;
    unit = std::string(indent.as_string());
  } else if (!indent.is_none() && !indent.is_undefined()) {
    in.fail(ErrorKind::kType, "tojson indent must be an int or a string");
    return false;
  }
  return Dumper(in, std::move(unit), indenting, item_sep, key_sep, sort_keys, out).dump(value, 0);
}

}  // namespace prefixgate::canon::jinja
