// The gateway's per-request CPU before routing: prepare_request (parse, canonicalization stage,
// tenant salt, stream usage, render, tokenize, block hashes, prompt lint) on the request that
// `prefixgate-bench overhead` sends through wrk, with the gateway's default rules and model. This
// is the part of the overhead that is ours rather than the kernel's TCP; compare runs side by
// side. BM_RequestPathThreads adds the route through the shared ReplicaSet, from one server
// thread and from two.
#include <benchmark/benchmark.h>

#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>

#include "healthy_replica_set.h"
#include "prefixgate/gateway/engine_block_keys.h"
#include "prefixgate/gateway/routing.h"
#include "prefixgate/serving/request_body.h"
#include "server/canonicalize_stage.h"
#include "server/model_registry.h"
#include "server/replica_set.h"
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

// Prepares the overhead request once an iteration, handing each prepared request to `then`.
template <class Then>
void prepare_each(benchmark::State& state, const CanonicalizationConfig& rules, Then then) {
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
    then(*prep);
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * body.size()));
}

void run(benchmark::State& state, const CanonicalizationConfig& rules) {
  prepare_each(state, rules, [](const PreparedRequest& prep) {
    benchmark::DoNotOptimize(prep.block_hashes.data());
  });
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

// The gateway's own work per request, from one server thread and from two at once: the 3 KB chat
// prepared as above, then routed through the one ReplicaSet every server thread shares (route, the
// first token settling its predictions, the end). Each thread keeps its own memos and caches, so
// the ReplicaSet's lock is all the threads share on this path, and with a core free per thread
// the requests/s of two threads against one's shows what that sharing costs. The live `overhead`
// run cannot show it on a 2-core host, where the engine and wrk take the CPU a second proxy
// thread would need.
void BM_RequestPathThreads(benchmark::State& state) {
  static ReplicaSet& replicas = healthy_replica_set(8);
  std::vector<KeyChange> stored;
  prepare_each(state, CanonicalizationConfig{}, [&](const PreparedRequest& prep) {
    const RouteRequest request{prep.block_hashes, prep.prompt_tokens, prep.block_size, {}};
    const RouteDecision d = replicas.route(request, {}, Clock::now());
    replicas.prefilled(d, prep.block_hashes, prep.prompt_tokens);
    const std::size_t cached_blocks = d.predicted_cached_tokens / prep.block_size;
    if (cached_blocks < prep.block_hashes.size()) {
      // The engine's events for the blocks it stored, as they come after a prefill.
      stored.clear();
      for (std::size_t i = cached_blocks; i < prep.block_hashes.size(); ++i) {
        stored.push_back({prep.block_hashes[i], KeyState::kPrimary});
      }
      replicas.apply_key_changes(d.replica, stored);
    }
    replicas.finish(d, prep.block_hashes, true, 0);
  });
  state.counters["requests_per_s"] =
      benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_RequestPathThreads)->Threads(1)->Threads(2)->UseRealTime();

}  // namespace
}  // namespace prefixgate::gateway::server
