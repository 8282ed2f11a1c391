// Jinja2 chat templates, rendered byte for byte as Hugging Face transformers renders them.
//
// Every model ships its prompt format as a Jinja2 template (tokenizer_config.json's
// `chat_template`, or chat_template.jinja). Serving engines (vLLM, SGLang) render it with
// transformers, which configures Jinja2 as an ImmutableSandboxedEnvironment with trim_blocks,
// lstrip_blocks and the loop-controls extension, overrides `tojson` with
// json.dumps(ensure_ascii=False, ...) and adds the globals raise_exception() and strftime_now().
// A router that renders differently matches no cached prefix, so this engine follows Python
// Jinja2's semantics exactly: Python's str(), repr() and float formatting, Unicode-aware string
// methods, Jinja2's Undefined, scoping of `set` in loops and macros, whitespace control.
//
//   auto tmpl = jinja::Template::compile(chat_template_text);
//   if (!tmpl) return tmpl.error();                // syntax error at line/column
//   jinja::Context ctx;
//   ctx.set("messages", jinja::Value::from_json(messages_json));
//   ctx.set("add_generation_prompt", jinja::Value(true));
//   auto out = tmpl->render(ctx);                  // out->text: the prompt
//
// Templates are parsed once into an AST; a compiled Template is immutable and may be rendered
// from many threads at once. Rendering never crashes or hangs on any template or context: output
// size, loop iterations and call depth are bounded (RenderLimits), and failures are typed
// (ErrorDetail).
//
// Provenance: a string put into the context with a source id (Context::add_source) keeps it
// through slicing, trim/strip and concatenation; RenderOutput::spans says which output bytes
// came verbatim from which source, so a linter can point at "messages[2].content". Lists and
// dicts may carry a source too: `tools[0] | tojson` is attributed to "tools[0]".
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "prefixgate/base/status.h"
#include "prefixgate/canonicalize/json.h"

namespace prefixgate::canon::jinja {

// An index into Context's table of sources; kNoSource for values of no known origin.
using SourceId = std::uint32_t;
inline constexpr SourceId kNoSource = 0xffffffffu;

struct StrData;
struct ListData;
struct DictData;
class Native;
struct None {
  friend bool operator==(None, None) { return true; }
};
struct Undefined {
  friend bool operator==(Undefined, Undefined) { return true; }
};

// A value of the template language: Python's None, bool, int, float, str, list/tuple, dict, and
// callables (macros, bound methods, the `loop` object). Copying is cheap: strings, lists and
// dicts are shared, immutable (the sandbox forbids mutating them) except namespace() objects.
class Value {
 public:
  Value() = default;                                  // Jinja2's Undefined
  Value(None) : v_(None{}) {}                         // NOLINT
  Value(bool b) : v_(b) {}                            // NOLINT
  Value(int i) : v_(static_cast<std::int64_t>(i)) {}  // NOLINT
  Value(std::int64_t i) : v_(i) {}                    // NOLINT
  Value(double d) : v_(d) {}                          // NOLINT
  Value(std::string_view s, SourceId source = kNoSource);
  Value(const std::string& s, SourceId source = kNoSource)  // NOLINT
      : Value(std::string_view(s), source) {}
  Value(const char* s, SourceId source = kNoSource)  // NOLINT
      : Value(std::string_view(s), source) {}
  static Value list(std::vector<Value> items, SourceId source = kNoSource);
  static Value tuple(std::vector<Value> items);
  static Value dict(std::vector<std::pair<std::string, Value>> items, SourceId source = kNoSource);
  // A JSON document as Python's json.loads() would give it: integers without a fraction or
  // exponent become int, other numbers float, objects dicts in document order.
  static Value from_json(const json::Value& value);

  bool is_undefined() const { return v_.index() == 0; }
  bool is_none() const { return v_.index() == 1; }
  bool is_bool() const { return v_.index() == 2; }
  bool is_int() const { return v_.index() == 3; }
  bool is_float() const { return v_.index() == 4; }
  bool is_number() const { return is_int() || is_float(); }
  bool is_string() const { return v_.index() == 5; }
  bool is_list() const { return v_.index() == 6; }
  bool is_dict() const { return v_.index() == 7; }
  bool is_native() const { return v_.index() == 8; }

  bool as_bool() const { return std::get<2>(v_); }
  std::int64_t as_int() const { return std::get<3>(v_); }
  double as_float() const { return std::get<4>(v_); }
  std::string_view as_string() const;  // is_string() only
  const StrData& str() const { return *std::get<5>(v_); }
  const ListData& list() const { return *std::get<6>(v_); }
  const DictData& dict() const { return *std::get<7>(v_); }
  DictData& mutable_dict() const { return *std::get<7>(v_); }
  Native& native() const { return *std::get<8>(v_); }

  // Internal constructors for shared data.
  explicit Value(std::shared_ptr<const StrData> s) : v_(std::move(s)) {}
  explicit Value(std::shared_ptr<const ListData> l) : v_(std::move(l)) {}
  explicit Value(std::shared_ptr<DictData> d) : v_(std::move(d)) {}
  explicit Value(std::shared_ptr<Native> n) : v_(std::move(n)) {}

 private:
  std::variant<Undefined, None, bool, std::int64_t, double, std::shared_ptr<const StrData>,
               std::shared_ptr<const ListData>, std::shared_ptr<DictData>, std::shared_ptr<Native>>
      v_;
};

// The broken-down local time that strftime_now() formats. canonicalize/ has no clock: the caller
// passes "now" (engines format the server's local time).
struct CivilTime {
  int year = 1970;
  int month = 1;   // 1..12
  int day = 1;     // 1..31
  int hour = 0;    // 0..23
  int minute = 0;  // 0..59
  int second = 0;  // 0..60
};

// The variables a template renders with, and the names of the sources their strings came from.
class Context {
 public:
  void set(std::string_view name, Value value);
  const Value* find(std::string_view name) const;
  // Registers a source ("messages[2].content") and returns the id to tag values with.
  SourceId add_source(std::string name);
  const std::vector<std::string>& sources() const { return sources_; }
  const std::vector<std::pair<std::string, Value>>& vars() const { return vars_; }

 private:
  std::vector<std::pair<std::string, Value>> vars_;
  std::vector<std::string> sources_;
};

struct RenderLimits {
  std::size_t max_output_bytes = 64u << 20;    // kTooLarge beyond
  std::size_t max_loop_iterations = 1u << 22;  // all loops of one render together
  std::size_t max_call_depth = 200;            // macro/caller nesting and expression depth
  std::size_t max_value_bytes = 64u << 20;     // one string or list built while rendering
};

struct RenderOptions {
  std::optional<CivilTime> now;  // for strftime_now(); rendering fails without it if called
  RenderLimits limits;
};

// Output bytes [begin, end) are a verbatim copy of bytes [source_offset, ...) of the string
// registered as `source` (or, for a list or dict source, its tojson/str rendering).
struct ProvenanceSpan {
  std::size_t begin = 0;
  std::size_t end = 0;
  SourceId source = kNoSource;
  std::size_t source_offset = 0;
};

struct RenderOutput {
  std::string text;
  std::vector<ProvenanceSpan> spans;  // in text order, non-overlapping; gaps are template text
};

enum class ErrorKind {
  kSyntax,       // the template does not parse
  kUnsupported,  // valid Jinja2 this engine does not implement (names the construct)
  kRaised,       // the template called raise_exception(message)
  kType,         // an operation Python would reject (adding str and int, calling a non-callable)
  kUndefined,    // an operation Jinja2's Undefined rejects (attribute of an undefined name)
  kLimit,        // RenderLimits exceeded
};

// A typed view of a failed compile or render. Error::message says the same for a person.
struct ErrorDetail {
  ErrorKind kind = ErrorKind::kSyntax;
  int line = 0;      // 1-based position in the template source; 0 when unknown
  int column = 0;    // 1-based, in bytes
  std::string text;  // what went wrong; for kRaised exactly the template's message
};

struct Program;

class Template {
 public:
  // Parses `source`. Errors: kInvalidValue (syntax), kUnsupported; `detail` gets the typed view.
  static Result<Template> compile(std::string_view source, ErrorDetail* detail = nullptr);

  // Renders with `context`. Errors: kInvalidValue (raised, type, undefined), kUnsupported,
  // kTooLarge (limits); `detail` gets the typed view.
  Result<RenderOutput> render(const Context& context, const RenderOptions& options = {},
                              ErrorDetail* detail = nullptr) const;

  // Whether the template calls strftime_now(): its output then changes from day to day (a
  // prompt prefix that embeds today's date is invalidated daily; lint calls it volatile-date).
  bool uses_strftime_now() const;
  // Whether the template loops over a message's content (`for part in message['content']`):
  // engines then pass content as a list of parts rather than a string (vLLM's "openai" content
  // format).
  bool iterates_content() const;

 private:
  explicit Template(std::shared_ptr<const Program> program) : program_(std::move(program)) {}
  std::shared_ptr<const Program> program_;
};

}  // namespace prefixgate::canon::jinja
