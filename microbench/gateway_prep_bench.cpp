// The gateway's per-request CPU before routing: prepare_request (parse, canonicalization stage,
// tenant salt, stream usage, render, tokenize, block hashes, prompt lint) on the request that
// `prefixgate-bench overhead` sends through wrk, with the gateway's default rules and model. This
// is the part of the overhead that is ours rather than the kernel's TCP; compare runs side by
// side.
#include <benchmark/benchmark.h>

#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>

#include "prefixgate/serving/request_body.h"
#include "server/canonicalize_stage.h"
#include "server/model_registry.h"
#include "server/request_prep.h"

namespace prefixgate::gateway::server {
namespace {

std::string overhead_request_body() {
  std::ifstream in(PREFIXGATE_OVERHEAD_REQUEST, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " PREFIXGATE_OVERHEAD_REQUEST);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

struct Gateway {
  GatewayConfig config;
  std::unique_ptr<ModelRegistry> models;
  std::unique_ptr<CanonicalizeStage> stage;
  PrepOptions prep;

  explicit Gateway(const CanonicalizationConfig& rules) {
    config.canonicalization = rules;
    auto loaded = ModelRegistry::load(config.models);
    if (!loaded) throw std::runtime_error(loaded.error().message);
    models = std::move(*loaded);
    stage = std::make_unique<CanonicalizeStage>(config.canonicalization);
    prep.stage = stage.get();
    prep.models = models.get();
    prep.lint = stage->mode(canon::kRuleTimestamp) == RuleMode::kObserve;
  }
};

void run(benchmark::State& state, const CanonicalizationConfig& rules) {
  const Gateway gw(rules);
  // As the server reads it: with the JSON parser's padding past its end.
  std::string body = overhead_request_body();
  body.reserve(body.size() + serving::kReadablePastEnd);
  for (auto _ : state) {
    auto prep = prepare_request(body, canon::Api::kChatCompletions, Tenant{}, gw.prep,
                                serving::readable_past_end(body));
    if (!prep) {
      state.SkipWithError(prep.error().message.c_str());
      return;
    }
    benchmark::DoNotOptimize(prep->block_hashes.data());
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * body.size()));
}

// The defaults: tool rules rewritten, timestamps observed (with the prompt lint).
void BM_PrepareRequestDefaultRules(benchmark::State& state) {
  run(state, CanonicalizationConfig{});
}
BENCHMARK(BM_PrepareRequestDefaultRules);

// Every rule off: parse, render, tokenize and hash only, the floor of the stage's cost.
void BM_PrepareRequestRulesOff(benchmark::State& state) {
  CanonicalizationConfig off;
  off.tool_json = off.tool_order = off.response_format = off.timestamp = off.whitespace =
      RuleMode::kOff;
  run(state, off);
}
BENCHMARK(BM_PrepareRequestRulesOff);

// An agent's request as a coding agent sends it: a 2 KB system prompt, range(0) tools of ~1.5 KB
// each (a description and six described parameters, keys in the order a JavaScript client writes
// them, which is not RFC 8785's), and eight turns. The same content as a Chat Completions body and
// as an Anthropic Messages body, so the cost of the Messages path (conversion, write-back, two
// bodies written) shows beside the chat path's.
std::string agent_text(std::size_t bytes, std::size_t seed) {
  static const char* kWords[] = {"the",    "file", "tool",    "returns", "path",   "when",   "edit",
                                 "search", "line", "content", "must",    "before", "command"};
  std::string out;
  for (std::size_t i = 0; out.size() < bytes; ++i) {
    out += kWords[(i * 7 + seed * 13) % 13];
    out += ' ';
  }
  return out;
}

std::string agent_schema(std::size_t tool) {
  std::string props;
  for (std::size_t p = 0; p < 6; ++p) {
    if (p > 0) props += ',';
    props += "\"arg" + std::to_string(p) + "\":{\"type\":\"string\",\"description\":\"" +
             agent_text(80, tool * 6 + p) + "\"}";
  }
  return "{\"properties\":{" + props + "},\"required\":[\"arg0\"],\"type\":\"object\"}";
}

std::string agent_request(bool messages_api, std::size_t tools) {
  const std::string system = agent_text(2048, 1);
  std::string turns;
  for (std::size_t t = 0; t < 8; ++t) {
    turns += std::string(",{\"role\":\"") + (t % 2 ? "assistant" : "user") + "\",\"content\":\"" +
             agent_text(400, 100 + t) + "\"}";
  }
  std::string list;
  for (std::size_t i = 0; i < tools; ++i) {
    if (i > 0) list += ',';
    const std::string name = "tool_" + std::to_string(tools - i);  // not sorted by name
    const std::string desc = agent_text(600, 50 + i);
    list += messages_api ? "{\"name\":\"" + name + "\",\"description\":\"" + desc +
                               "\",\"input_schema\":" + agent_schema(i) + "}"
                         : "{\"type\":\"function\",\"function\":{\"name\":\"" + name +
                               "\",\"description\":\"" + desc +
                               "\",\"parameters\":" + agent_schema(i) + "}}";
  }
  if (messages_api) {
    return "{\"model\":\"m\",\"max_tokens\":256,\"system\":\"" + system + "\",\"messages\":[" +
           turns.substr(1) + "],\"tools\":[" + list + "]}";
  }
  return "{\"model\":\"m\",\"max_tokens\":256,\"messages\":[{\"role\":\"system\",\"content\":\"" +
         system + "\"}" + turns + "],\"tools\":[" + list + "]}";
}

void BM_PrepareAgentRequest(benchmark::State& state, canon::Api api) {
  const Gateway gw{CanonicalizationConfig{}};
  std::string body =
      agent_request(api == canon::Api::kMessages, static_cast<std::size_t>(state.range(0)));
  body.reserve(body.size() + serving::kReadablePastEnd);
  for (auto _ : state) {
    auto prep = prepare_request(body, api, Tenant{}, gw.prep, serving::readable_past_end(body));
    if (!prep) {
      state.SkipWithError(prep.error().message.c_str());
      return;
    }
    benchmark::DoNotOptimize(prep->block_hashes.data());
  }
  state.counters["body_bytes"] = static_cast<double>(body.size());
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * body.size()));
}
BENCHMARK_CAPTURE(BM_PrepareAgentRequest, chat, canon::Api::kChatCompletions)
    ->Arg(2)
    ->Arg(20)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_PrepareAgentRequest, messages, canon::Api::kMessages)
    ->Arg(2)
    ->Arg(20)
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace prefixgate::gateway::server
