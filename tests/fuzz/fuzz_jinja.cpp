// The Jinja2 chat-template engine on arbitrary templates and contexts. Input: the template,
// then optionally a NUL byte and a JSON object whose members become the context's variables
// (a fixed chat context otherwise). Compiling and rendering answer a Template/text or an Error,
// within the render limits, and the provenance spans stay ordered and inside the output.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "prefixgate/canonicalize/jinja.h"

namespace {

using namespace prefixgate;
using namespace prefixgate::canon::jinja;

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "fuzz_jinja: %s\n", what);
  std::abort();
}

constexpr std::string_view kDefaultContext = R"({
  "messages": [{"role": "system", "content": "  be brief  "},
               {"role": "user", "content": "héllo 😀"},
               {"role": "assistant", "content": "<think>x</think>ok",
                "tool_calls": [{"id": "abcdefghi", "type": "function",
                                "function": {"name": "f", "arguments": {"a": [1, 2.5, null]}}}]},
               {"role": "tool", "tool_call_id": "abcdefghi", "content": "r"}],
  "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
  "add_generation_prompt": true, "bos_token": "<s>", "eos_token": "</s>"})";

Context make_context(std::string_view context_json) {
  Context ctx;
  auto doc = json::parse(context_json.empty() ? kDefaultContext : context_json);
  if (!doc || !doc->is_object()) doc = json::parse(kDefaultContext);
  for (const json::Member& m : doc->as_object()) {
    // Strings with provenance exercise the span bookkeeping of slices, strip and concatenation.
    ctx.set(m.key, m.value.is_string() ? Value(m.value.as_string(), ctx.add_source(m.key))
                                       : Value::from_json(m.value));
  }
  return ctx;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  std::string_view context_json;
  if (const std::size_t nul = input.find('\0'); nul != std::string_view::npos) {
    context_json = input.substr(nul + 1);
    input = input.substr(0, nul);
  }
  auto tmpl = Template::compile(input);
  if (!tmpl) {
    if (tmpl.error().message.empty()) fail("a compile error without a message");
    return 0;
  }
  RenderOptions options;
  options.now = CivilTime{2024, 7, 26, 12, 0, 0};
  options.limits.max_output_bytes = 1 << 20;
  options.limits.max_value_bytes = 1 << 20;
  options.limits.max_loop_iterations = 100000;
  options.limits.max_call_depth = 64;
  const Context ctx = make_context(context_json);
  auto out = tmpl->render(ctx, options);
  if (!out) {
    if (out.error().message.empty()) fail("a render error without a message");
    return 0;
  }
  if (out->text.size() > options.limits.max_output_bytes) fail("output over the limit");
  std::size_t pos = 0;
  for (const ProvenanceSpan& s : out->spans) {
    if (s.begin < pos || s.begin >= s.end || s.end > out->text.size()) fail("a span out of order");
    pos = s.end;
  }
  return 0;
}
