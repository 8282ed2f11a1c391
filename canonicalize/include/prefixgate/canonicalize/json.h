// An order-preserving JSON document model, its parser, and its two writers.
//
// Requests are parsed once into json::Value, which keeps object members in the order the client
// sent them and keeps each number's source text, so a proxy can re-serialize a body it has only
// partly rewritten without disturbing the fields it does not understand. Two writers:
//   - to_json(): compact, members in stored order, numbers as their source text;
//   - to_canonical_json(): RFC 8785 (JSON Canonicalization Scheme): members sorted by UTF-16
//     code units, numbers in ECMAScript's shortest round-trip form, minimal string escapes.
//
//   auto doc = json::parse(R"({"b":1,"a":[1e2,"x"]})");
//   if (!doc) return doc.error();
//   std::string canonical = *json::to_canonical_json(*doc);   // {"a":[100,"x"],"b":1}
//
// Parsing uses simdjson (On Demand). All strings held here are valid UTF-8.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "prefixgate/base/status.h"

namespace prefixgate::json {

class Value;
struct Member;
using Array = std::vector<Value>;
using Object = std::vector<Member>;  // members in document order; parse() rejects duplicates

struct Null {
  friend bool operator==(Null, Null) { return true; }
};

// A JSON number: its IEEE-754 double value and, when it came from a document, its source text
// (so `1.0`, `1e2` and 123456789012345678901234 survive a pass-through unchanged).
struct Number {
  double value = 0;
  std::string source;  // empty when the number was made from a double
  friend bool operator==(const Number& a, const Number& b) { return a.value == b.value; }
};

enum class Type { kNull, kBool, kNumber, kString, kArray, kObject };

class Value {
 public:
  // Defined after Member: constructing the variant needs Member complete (clang instantiates
  // the constexpr constructors of std::variant and std::vector where they are first used).
  Value();                    // null
  Value(Null);                // NOLINT
  Value(bool b);              // NOLINT
  Value(double d);            // NOLINT
  Value(int i);               // NOLINT
  Value(Number n);            // NOLINT
  Value(std::string s);       // NOLINT
  Value(std::string_view s);  // NOLINT
  Value(const char* s);       // NOLINT
  Value(Array a);             // NOLINT
  Value(Object o);            // NOLINT

  // A value that refers to `target`, which must not change while any refers to it: copying it
  // copies the reference, not the tree (a tool list kept by the canonicalizer's memo is shared
  // by every request that sends it). Reading it reads `target`; the first access that may
  // modify it (a non-const accessor, find, set or erase) gives it a copy of its own first.
  static Value shared(std::shared_ptr<const Value> target);
  // Whether this value refers to a shared one (for tests and the memo).
  bool is_shared() const { return v_.index() == kShared; }
  // `part`, a value inside this one, as a value that refers to it where this one refers to a
  // shared tree (std::shared_ptr's aliasing constructor keeps the whole tree alive), and as a
  // copy of it otherwise: a converted request takes its tool schemas from the client's tool list,
  // shared by every request that sends it, without copying them.
  Value share_part(const Value& part) const;

  Type type() const { return static_cast<Type>(read().v_.index()); }
  bool is_null() const { return type() == Type::kNull; }
  bool is_bool() const { return type() == Type::kBool; }
  bool is_number() const { return type() == Type::kNumber; }
  bool is_string() const { return type() == Type::kString; }
  bool is_array() const { return type() == Type::kArray; }
  bool is_object() const { return type() == Type::kObject; }

  // Accessors assert the type; check it first.
  bool as_bool() const { return std::get<bool>(read().v_); }
  const Number& as_number() const { return std::get<Number>(read().v_); }
  const std::string& as_string() const { return std::get<std::string>(read().v_); }
  std::string& as_string() { return std::get<std::string>(write().v_); }
  const Array& as_array() const { return std::get<Array>(read().v_); }
  Array& as_array() { return std::get<Array>(write().v_); }
  const Object& as_object() const { return std::get<Object>(read().v_); }
  Object& as_object() { return std::get<Object>(write().v_); }

  // Object lookup by key; nullptr when this is not an object or has no such member.
  const Value* find(std::string_view key) const;
  Value* find(std::string_view key);
  // Sets (replacing in place, keeping position) or appends a member. This must be an object.
  void set(std::string_view key, Value value);
  // Removes a member if present; returns whether it was.
  bool erase(std::string_view key);

  friend bool operator==(const Value& a, const Value& b);

 private:
  static constexpr std::size_t kShared = 6;  // v_'s index of a reference to a shared value
  // The value this one reads: itself, or the shared one it refers to (never itself shared).
  const Value& read() const { return v_.index() == kShared ? *std::get<kShared>(v_) : *this; }
  // This value, with a copy of its own first if it referred to a shared one.
  Value& write() {
    if (v_.index() == kShared) unshare();
    return *this;
  }
  void unshare();

  std::variant<Null, bool, Number, std::string, Array, Object, std::shared_ptr<const Value>> v_;
};

struct Member {
  Member() = default;
  // A member with a null value, its key constructed in place (the parser builds each member
  // where it stays, then its value).
  explicit Member(std::string_view k) : key(k) {}
  Member(std::string k, Value v) : key(std::move(k)), value(std::move(v)) {}

  std::string key;
  Value value;
  friend bool operator==(const Member& a, const Member& b) {
    return a.key == b.key && a.value == b.value;
  }
};

inline Value::Value() = default;
inline Value::Value(Null) {}
inline Value::Value(bool b) : v_(b) {}
inline Value::Value(double d) : v_(Number{d, {}}) {}
inline Value::Value(int i) : v_(Number{static_cast<double>(i), {}}) {}
inline Value::Value(Number n) : v_(std::move(n)) {}
inline Value::Value(std::string s) : v_(std::move(s)) {}
inline Value::Value(std::string_view s) : v_(std::in_place_type<std::string>, s) {}
inline Value::Value(const char* s) : v_(std::in_place_type<std::string>, s) {}
inline Value::Value(Array a) : v_(std::move(a)) {}
inline Value::Value(Object o) : v_(std::move(o)) {}
inline bool operator==(const Value& a, const Value& b) {
  return a.read().v_ == b.read().v_;
}

// Name of a type for error messages: "null", "boolean", "number", "string", "array", "object".
const char* type_name(Type type);

struct ParseLimits {
  std::size_t max_bytes = 16u << 20;  // larger input is kTooLarge
  std::size_t max_depth = 64;         // deeper nesting is kTooDeep
  // parse() and the writers recurse once per level of nesting, so max_depth also bounds their
  // stack use; parse() checks it before each descent.
  // Bytes after the text that lie in the same allocation and may be read (never written), with
  // any content: from kParsePadding on, the text is parsed where it lies; with fewer it is
  // first copied into a padded buffer (the parser reads up to that many bytes past the end).
  std::size_t readable_past_end = 0;
};
// What the parser may read past the end of its input (simdjson's SIMDJSON_PADDING).
inline constexpr std::size_t kParsePadding = 64;

// Parses one JSON document. Errors: kTooLarge, kInvalidJson (syntax, trailing content),
// kInvalidUtf8 (bad bytes or a lone surrogate escape), kTooDeep, kDuplicateKey. Never throws.
// Also kInvalidValue for a number too large for a double (1e400): JSON.parse would make it
// Infinity, which neither writer can write back. Numbers too small underflow to 0, as there.
// Messages say where ("... (at byte 17)"); param is the JSON path of the offending value
// ("messages[2].content"), empty at the root.
Result<Value> parse(std::string_view text, const ParseLimits& limits = {});

// One field met by visit_member_fields: its key, the key of the object it lies in below the
// member (empty for the member's own fields), its type and, for a number, its value. The views
// live until the visitor returns.
struct FieldSeen {
  std::string_view object;
  std::string_view key;
  Type type = Type::kNull;
  double number = 0;  // 0 unless type is kNumber
};
// Calls `visit` for each field of the root object's member `key`, and then for the fields of
// each object directly inside it, in document order, without building a tree: what reading an
// answer's usage counts takes, on every response. Other members and deeper values are skipped
// over (checked for structure, not read: their UTF-8, control characters and scalars are not
// checked). False when the text is not a JSON object, has no such member or it is not an
// object, or a value met is malformed (`visit` may have seen the fields before it). Unlike
// parse() it does not look for repeated keys. Where parse() accepts the text, the fields are
// those of parse()'s tree.
bool visit_member_fields(std::string_view text, std::string_view key,
                         const std::function<void(const FieldSeen&)>& visit,
                         const ParseLimits& limits = {});
// The same for a member that usually comes last (an answer's usage, which every API's answer
// ends with): looked for from the end of the text, so the members before it are not passed
// over, nor checked; where the text does not end with it, visit_member_fields() reads it. Where
// parse() accepts the text, the fields and the outcome are visit_member_fields()'s.
bool visit_last_member_fields(std::string_view text, std::string_view key,
                              const std::function<void(const FieldSeen&)>& visit,
                              const ParseLimits& limits = {});

// Where a root object's member values lie in the parsed text: [begin, end) byte offsets of each
// value (not its key), in document order, the same order as the parsed object's members.
struct MemberSpan {
  std::size_t begin = 0;
  std::size_t end = 0;
};
// What parse() may take from the thread's memos instead of building: values parsed before, by
// their bytes, from the second time the same bytes come. The tree is the one parse() builds, but
// those values refer to the kept one (Value::shared), so a change to one copies it first.
struct MemoKeys {
  // Root members whose array or object values are kept whole (a request's tool list, sent
  // unchanged turn after turn, is built once).
  std::span<const std::string_view> shared = {};
  // Root members whose array values have their object and array elements kept one by one (a
  // conversation's messages: every turn resends the earlier ones). With them, a body that shares
  // a body parsed lately up to a ',' in the first such list is also parsed from that ',' on,
  // joined to what came before (json_document_memo.h).
  std::span<const std::string_view> elements = {};
};
// parse(), also recording each root member's span when the root is an object (nothing
// otherwise), taking what `memo_keys` names from the thread's memos.
Result<Value> parse(std::string_view text, const ParseLimits& limits,
                    std::vector<MemberSpan>& root_members, const MemoKeys& memo_keys = {});

// Compact JSON, members in stored order, numbers as their source text when they have one.
// A NaN or infinite number without source text is written `null`, as JSON.stringify does.
std::string to_json(const Value& value);
void append_json(const Value& value, std::string& out);

// A root member as the client sent it: its key and the bytes of its value.
struct SourceMember {
  std::string key;
  std::string_view text;
};
// append_json of an object, except that a member found in `source` by key and not named in
// `rewritten` is written as its source text: a proxy forwards what nothing changed as the
// client's bytes instead of serializing it again. The result parses to the same value as
// to_json(object) does whenever each such member still holds what its text parses to.
void append_json_reusing(const Value& object, const std::vector<SourceMember>& source,
                         const std::vector<std::string_view>& rewritten, std::string& out);

// RFC 8785 canonical form. Fails (kInvalidValue) on a NaN or infinite number, which no parsed
// document can hold but a constructed one can.
// Also fails (kDuplicateKey) on an object with a repeated key, which likewise only a
// constructed value can have: its canonical order would depend on the order of the input.
Result<std::string> to_canonical_json(const Value& value);

// Returns a copy with every object's members in RFC 8785 order and every number's source text
// dropped, so that to_json() of the result equals to_canonical_json() of the input.
Value canonicalized(const Value& value);
// canonicalized() without the copy: members re-ordered and number sources dropped in place.
void canonicalize_in_place(Value& value);
// Whether to_json(value) already equals to_json(canonicalized(value)): every object's members in
// RFC 8785 order and every number's source text (if any) in ECMAScript form. Allocation-free,
// so a gateway can check a request's tool schemas without serializing them.
bool is_canonical(const Value& value);

// Appends `s` as a JSON string literal with RFC 8785's minimal escaping.
// `s` should be UTF-8: bytes >= 0x80 are copied as they are.
void append_quoted(std::string_view s, std::string& out);

// ECMAScript Number::toString(x) (ECMA-262 7.1.12.1): shortest round-trip digits, decimal form
// for 1e-6 <= |x| < 1e21, exponent form otherwise, -0 as "0". x must be finite.
// (Given NaN or an infinity it returns "NaN", "Infinity" or "-Infinity", as ECMAScript does;
// none of these is JSON.)
std::string format_number(double x);
void append_number(double x, std::string& out);

// Orders two UTF-8 strings by their UTF-16 code units, as RFC 8785 section 3.2.3 sorts keys.
bool utf16_less(std::string_view a, std::string_view b);

// JSON paths for Error::param, built from the innermost segment outwards as an error unwinds:
//
//   std::string path = "content";        // or empty for the value itself
//   prepend_path_index(2, path);         // "[2].content"
//   prepend_path_key("messages", path);  // "messages[2].content"
//
// A key that is not an identifier ([A-Za-z_][A-Za-z0-9_]*) is written as a quoted
// subscript: prepend_path_key("a.b", path) gives `["a.b"]...`, so paths are never ambiguous.
void prepend_path_key(std::string_view key, std::string& path);
void prepend_path_index(std::size_t index, std::string& path);

}  // namespace prefixgate::json
