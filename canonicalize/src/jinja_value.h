// The shared data behind jinja::Value, and the Python semantics every part of the engine uses:
// truthiness, equality and ordering, str() and repr(). Private to canonicalize/.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "prefixgate/canonicalize/jinja.h"

namespace prefixgate::canon::jinja {

// Bytes [begin, end) of a string came from bytes [source_offset, ...) of source `source`.
struct Span {
  std::uint32_t begin = 0;
  std::uint32_t end = 0;
  SourceId source = kNoSource;
  std::uint32_t source_offset = 0;
};

// An immutable string with provenance. `spans` is empty for strings of no known origin, which
// keeps the common case (template literals, numbers printed) to one allocation.
struct StrData {
  std::string text;
  std::vector<Span> spans;  // sorted, non-overlapping
};

struct ListData {
  std::vector<Value> items;
  SourceId source = kNoSource;
  bool is_tuple = false;
};

// Python dicts keep insertion order. Keys are Values (Jinja2 allows any hashable); chat
// templates use strings, so lookup is a linear scan that compares strings first.
struct DictData {
  std::vector<std::pair<Value, Value>> items;
  SourceId source = kNoSource;
  bool is_namespace = false;  // namespace(): the one object templates may assign attributes to

  const Value* find(const Value& key) const;
  const Value* find(std::string_view key) const;
  void set(Value key, Value value);
};

class Interpreter;
struct CallArgs;

// Callables and objects with attributes: macros, builtins, bound methods, `loop`.
class Native {
 public:
  virtual ~Native() = default;
  virtual std::string_view type_name() const = 0;
  // Attribute lookup; Undefined when there is none.
  virtual Value getattr(std::string_view name) const;
  virtual bool callable() const { return false; }
  // Reports an error through `in` and returns Undefined on failure.
  virtual Value call(Interpreter& in, CallArgs& args);
};

// Builds a string with provenance, merging adjacent pieces from the same place of one source.
class StrBuilder {
 public:
  void append(std::string_view text) { text_.append(text); }
  void append(const std::string& text) { text_.append(text); }
  void append(const char* text) { text_.append(text); }
  void append(const Value& string_value);  // is_string()
  // Appends bytes [from, to) of a string value, keeping the provenance of that part.
  void append_part(const StrData& s, std::size_t from, std::size_t to);
  void append_tagged(std::string_view text, SourceId source, std::size_t source_offset);
  std::size_t size() const { return text_.size(); }
  std::string& text() { return text_; }
  std::vector<Span>& spans() { return spans_; }
  Value build() &&;

 private:
  std::string text_;
  std::vector<Span> spans_;
};

Value make_string(std::string text);
Value make_list(std::vector<Value> items);

// Python's bool(x).
bool truthy(const Value& v);
// Python's ==: 1 == 1.0 == True, lists and dicts element-wise; Undefined equals Undefined.
bool equals(const Value& a, const Value& b);
// Python's <, for numbers with numbers, strings with strings (code point order), lists
// element-wise. `ok` is false where Python raises TypeError.
bool less(const Value& a, const Value& b, bool& ok);

// Python's str(x) (Undefined is ""), appended with provenance for strings.
void append_str(const Value& v, StrBuilder& out);
std::string to_str(const Value& v);
Value str_value(const Value& v);  // str(x) as a Value, keeping provenance of strings
// Python's repr(x).
void append_repr(const Value& v, std::string& out);
// Python's repr() of a float: shortest round trip, '1.0', '1e+16', 'inf', 'nan'.
void append_float(double x, std::string& out);

// Python's type name, for error messages ("str", "int", "dict", "undefined").
std::string_view type_name(const Value& v);

// Length in Python terms (code points for strings); -1 for values without len().
std::int64_t py_len(const Value& v);

// Items of an iterable as Python iterates them: list items, dict keys, string characters,
// nothing for Undefined. False for values that are not iterable.
bool iterate(const Value& v, std::vector<Value>& out);

}  // namespace prefixgate::canon::jinja
