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
  const std::string body = overhead_request_body();
  for (auto _ : state) {
    auto prep = prepare_request(body, canon::Api::kChatCompletions, Tenant{}, gw.prep);
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

}  // namespace
}  // namespace prefixgate::gateway::server
