// The template globals: Jinja2's namespace(), range(), dict(), cycler(), joiner(), and the two
// transformers adds, raise_exception() and strftime_now().
#include <array>
#include <cstdio>
#include <memory>

#include "jinja_interp.h"

namespace prefixgate::canon::jinja {
namespace {

// Jinja2's sandbox caps range() at this many items.
constexpr std::int64_t kMaxRange = 100000;

class Builtin : public Native {
 public:
  using Fn = Value (*)(Interpreter& in, CallArgs& args);
  Builtin(std::string_view name, Fn fn) : name_(name), fn_(fn) {}
  std::string_view type_name() const override { return name_; }
  bool callable() const override { return true; }
  Value call(Interpreter& in, CallArgs& args) override { return fn_(in, args); }

 private:
  std::string_view name_;
  Fn fn_;
};

Value b_namespace(Interpreter& in, CallArgs& args) {
  auto d = std::make_shared<DictData>();
  d->is_namespace = true;
  for (const Value& a : args.positional) {
    if (!a.is_dict())
      return in.fail(ErrorKind::kType, "namespace() takes a mapping and keyword arguments");
    for (const auto& [k, v] : a.dict().items) d->set(k, v);
  }
  for (const auto& [k, v] : args.named) d->set(Value(std::string_view(k)), v);
  return Value(std::move(d));
}

Value b_dict(Interpreter& in, CallArgs& args) {
  auto d = std::make_shared<DictData>();
  for (const Value& a : args.positional) {
    if (!a.is_dict())
      return in.fail(ErrorKind::kType, "dict() takes a mapping and keyword arguments");
    for (const auto& [k, v] : a.dict().items) d->set(k, v);
  }
  for (const auto& [k, v] : args.named) d->set(Value(std::string_view(k)), v);
  return Value(std::move(d));
}

Value b_range(Interpreter& in, CallArgs& args) {
  std::array<std::int64_t, 3> n{0, 0, 1};
  if (args.positional.empty() || args.positional.size() > 3 || !args.named.empty()) {
    return in.fail(ErrorKind::kType, "range expected 1 to 3 integer arguments");
  }
  for (std::size_t i = 0; i < args.positional.size(); ++i) {
    const Value& v = args.positional[i];
    if (!v.is_int() && !v.is_bool())
      return in.fail(ErrorKind::kType, "'" + std::string(type_name(v)) +
                                           "' object cannot be interpreted as an integer");
    n[i] = v.is_int() ? v.as_int() : v.as_bool();
  }
  std::int64_t start = 0, stop = n[0], step = 1;
  if (args.positional.size() >= 2) {
    start = n[0];
    stop = n[1];
  }
  if (args.positional.size() == 3) step = n[2];
  if (step == 0) return in.fail(ErrorKind::kType, "range() arg 3 must not be zero");
  std::vector<Value> out;
  for (std::int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
    if (static_cast<std::int64_t>(out.size()) >= kMaxRange) {
      return in.fail(ErrorKind::kLimit, "range too big, maximum size for range is 100000");
    }
    out.emplace_back(i);
  }
  return Value::list(std::move(out));
}

Value b_raise_exception(Interpreter& in, CallArgs& args) {
  const Value* msg = args.get(0, "message");
  std::string text = msg != nullptr ? to_str(*msg) : std::string();
  // The message reaches the client as the 400's error message: never an empty one.
  if (text.empty()) text = "the chat template raised an exception without a message";
  return in.fail(ErrorKind::kRaised, std::move(text));
}

Value b_strftime_now(Interpreter& in, CallArgs& args) {
  const Value* fmt = args.get(0, "format");
  if (fmt == nullptr || !fmt->is_string())
    return in.fail(ErrorKind::kType, "strftime_now() takes a format string");
  if (!in.options().now) {
    return in.fail(ErrorKind::kUnsupported,
                   "the template calls strftime_now() but no date was given to render with");
  }
  return make_string(format_time(*in.options().now, fmt->as_string()));
}

class Cycler : public Native, public std::enable_shared_from_this<Cycler> {
 public:
  explicit Cycler(std::vector<Value> items) : items_(std::move(items)) {}
  std::string_view type_name() const override { return "Cycler"; }
  Value getattr(std::string_view name) const override {
    if (name == "current") return items_.empty() ? Value() : items_[pos_];
    if (name == "next" || name == "reset") {
      auto self = std::const_pointer_cast<Cycler>(shared_from_this());
      return Value(std::make_shared<Method>(std::move(self), name == "next"));
    }
    return Value();
  }

 private:
  class Method : public Native {
   public:
    Method(std::shared_ptr<Cycler> c, bool next) : c_(std::move(c)), next_(next) {}
    std::string_view type_name() const override { return "method"; }
    bool callable() const override { return true; }
    Value call(Interpreter&, CallArgs&) override {
      if (!next_) {
        c_->pos_ = 0;
        return Value(None{});
      }
      if (c_->items_.empty()) return Value();
      const std::size_t at = c_->pos_;
      c_->pos_ = (at + 1) % c_->items_.size();
      return c_->items_[at];
    }

   private:
    std::shared_ptr<Cycler> c_;
    bool next_;
  };
  std::vector<Value> items_;
  std::size_t pos_ = 0;
};

Value b_cycler(Interpreter& in, CallArgs& args) {
  if (args.positional.empty())
    return in.fail(ErrorKind::kType, "at least one item has to be provided");
  return Value(std::make_shared<Cycler>(args.positional));
}

class Joiner : public Native {
 public:
  explicit Joiner(Value sep) : sep_(std::move(sep)) {}
  std::string_view type_name() const override { return "Joiner"; }
  bool callable() const override { return true; }
  Value call(Interpreter&, CallArgs&) override {
    if (!used_) {
      used_ = true;
      return Value("");
    }
    return sep_;
  }

 private:
  Value sep_;
  bool used_ = false;
};

Value b_joiner(Interpreter&, CallArgs& args) {
  const Value* sep = args.get(0, "sep");
  return Value(std::make_shared<Joiner>(sep != nullptr ? str_value(*sep) : Value(", ")));
}

int days_from_civil(int y, int m, int d) {
  y -= m <= 2;
  const int era = (y >= 0 ? y : y - 399) / 400;
  const int yoe = y - era * 400;
  const int doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const int doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

}  // namespace

Value make_builtin(std::string_view name) {
  static constexpr std::pair<std::string_view, Builtin::Fn> kBuiltins[] = {
      {"namespace", b_namespace},
      {"dict", b_dict},
      {"range", b_range},
      {"raise_exception", b_raise_exception},
      {"strftime_now", b_strftime_now},
      {"cycler", b_cycler},
      {"joiner", b_joiner},
  };
  for (const auto& [n, fn] : kBuiltins) {
    if (n == name) return Value(std::make_shared<Builtin>(n, fn));
  }
  return Value();
}

// The C locale's strftime (what Python gives in a server process), for the directives chat
// templates use; others are copied as written.
std::string format_time(const CivilTime& t, std::string_view format) {
  static constexpr const char* kDays[] = {"Monday", "Tuesday",  "Wednesday", "Thursday",
                                          "Friday", "Saturday", "Sunday"};
  static constexpr const char* kMonths[] = {"January",   "February", "March",    "April",
                                            "May",       "June",     "July",     "August",
                                            "September", "October",  "November", "December"};
  const int month = t.month >= 1 && t.month <= 12 ? t.month : 1;
  const int days = days_from_civil(t.year, month, t.day);
  const int weekday = ((days % 7) + 7 + 3) % 7;  // 1970-01-01 was a Thursday (index 3)
  const int yday = days - days_from_civil(t.year, 1, 1) + 1;
  const auto two = [](int v) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "%02d", v);
    return std::string(buf);
  };
  std::string out;
  for (std::size_t i = 0; i < format.size(); ++i) {
    if (format[i] != '%' || i + 1 == format.size()) {
      out += format[i];
      continue;
    }
    char c = format[++i];
    bool no_pad = false;
    if (c == '-' && i + 1 < format.size()) {  // glibc's %-d: no padding
      no_pad = true;
      c = format[++i];
    }
    const auto num = [&](int v) { return no_pad ? std::to_string(v) : two(v); };
    switch (c) {
      case 'Y': out += std::to_string(t.year); break;
      case 'y': out += two(t.year % 100); break;
      case 'm': out += num(month); break;
      case 'd': out += num(t.day); break;
      case 'e': out += (t.day < 10 ? " " : "") + std::to_string(t.day); break;
      case 'H': out += num(t.hour); break;
      case 'I': out += num(t.hour % 12 == 0 ? 12 : t.hour % 12); break;
      case 'M': out += num(t.minute); break;
      case 'S': out += num(t.second); break;
      case 'p': out += t.hour < 12 ? "AM" : "PM"; break;
      case 'A': out += kDays[weekday]; break;
      case 'a': out += std::string(kDays[weekday], 3); break;
      case 'B': out += kMonths[month - 1]; break;
      case 'b':
      case 'h': out += std::string(kMonths[month - 1], 3); break;
      case 'j': {
        char buf[16];
        std::snprintf(buf, sizeof buf, no_pad ? "%d" : "%03d", yday);
        out += buf;
        break;
      }
      case 'F': out += std::to_string(t.year) + "-" + two(month) + "-" + two(t.day); break;
      case '%': out += '%'; break;
      default:
        out += '%';
        if (no_pad) out += '-';
        out += c;
    }
  }
  return out;
}

}  // namespace prefixgate::canon::jinja
