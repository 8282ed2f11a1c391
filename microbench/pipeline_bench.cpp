// End-to-end cost of what the gateway does per request before routing: parse, canonicalize,
// render, tokenize (byte tokenizer) and hash into prefix blocks. Reported as bytes of request
// body per second; also block hashing alone, in bytes of token ids per second.
#include <benchmark/benchmark.h>

#include <random>
#include <string>

#include "prefixgate/canonicalize/lint.h"
#include "prefixgate/canonicalize/policy.h"
#include "prefixgate/canonicalize/prompt.h"

namespace prefixgate::canon {
namespace {

// A chat request of about `bytes` bytes: a long system prompt with a timestamp, a few tools,
// and a conversation.
std::string make_request(std::size_t bytes) {
  std::mt19937 rng(42);
  const char* words[] = {"cache",   "prefix", "replica", "token",  "the",  "of",
                         "request", "model",  "answer",  "policy", "user", "tool",
                         "schema",  "and",    "is",      "a"};
  auto sentence = [&](std::size_t n) {
    std::string s;
    for (std::size_t i = 0; i < n; ++i) {
      s += words[rng() % 16];
      s += ' ';
    }
    return s;
  };
  std::string tools = R"([{"type":"function","function":{"name":"search","description":")" +
                      sentence(20) +
                      R"(","parameters":{"type":"object","properties":{"q":{"type":"string"},)"
                      R"("limit":{"type":"integer","minimum":1}},"required":["q"]}}},)"
                      R"({"type":"function","function":{"parameters":{"properties":{"id":)"
                      R"({"type":"string"}},"type":"object"},"name":"fetch"}}])";
  std::string body = R"({"model":"m","messages":[{"role":"system","content":"Now: )"
                     R"(2026-08-20T14:33:07Z. )";
  const std::size_t target = bytes > 600 ? bytes - 600 : 64;
  std::string system = sentence(8);
  while (body.size() + system.size() < target / 2) system += sentence(16);
  body += system + R"("})";
  std::size_t turn = 0;
  while (body.size() < target) {
    body += std::string(R"(,{"role":")") + (turn++ % 2 == 0 ? "user" : "assistant") +
            R"(","content":")" + sentence(24) + R"("})";
  }
  body += R"(,{"role":"user","content":"and now?"}],"tools":)" + tools + "}";
  return body;
}

// As the gateway routes without lint: no token byte offsets (ByteOffsets::kSkip). With `lint`,
// as it routes by default: the prompt linted too, its findings' tokens found from the offsets
// (kKeep) or from the stretches (kOnDemand, what the gateway does).
void parse_canonicalize_render_hash(benchmark::State& state, ByteOffsets offsets,
                                    bool lint = false) {
  const std::string body = make_request(static_cast<std::size_t>(state.range(0)));
  auto tokenizer = make_byte_tokenizer();
  const PromptModel model{ChatTemplate::kLlama3, tokenizer.get(), 16, "builtin:tiny"};
  const CanonicalizationPolicy policy;
  AnalyzedPrompt p;  // as the gateway keeps one per thread: its vectors' capacity is reused
  for (auto _ : state) {
    auto req = parse_request(body, Endpoint::kChatCompletions);
    if (!req) {
      state.SkipWithError(req.error().message.c_str());
      return;
    }
    // As the gateway runs it: the rules rewrite the parsed request in place.
    canonicalize_in_place(*req, policy, CanonicalizationPolicy::none());
    if (!analyze_prompt_into(*req, model, p, {}, offsets)) {
      state.SkipWithError("analyze_prompt_into failed");
      return;
    }
    if (lint) benchmark::DoNotOptimize(lint_prompt(p, {.explain = false}).stable_prefix_tokens);
    benchmark::DoNotOptimize(p.block_hashes.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * body.size()));
}
void BM_ParseCanonicalizeRenderHash(benchmark::State& state) {
  parse_canonicalize_render_hash(state, ByteOffsets::kSkip);
}
void BM_ParseCanonicalizeRenderHashWithOffsets(benchmark::State& state) {
  parse_canonicalize_render_hash(state, ByteOffsets::kKeep);
}
void BM_ParseCanonicalizeRenderHashLint(benchmark::State& state) {
  parse_canonicalize_render_hash(state, ByteOffsets::kOnDemand, /*lint=*/true);
}
void BM_ParseCanonicalizeRenderHashLintWithOffsets(benchmark::State& state) {
  parse_canonicalize_render_hash(state, ByteOffsets::kKeep, /*lint=*/true);
}
BENCHMARK(BM_ParseCanonicalizeRenderHash)->Arg(1 << 10)->Arg(32 << 10)->Arg(1 << 20);
BENCHMARK(BM_ParseCanonicalizeRenderHashWithOffsets)->Arg(32 << 10);
BENCHMARK(BM_ParseCanonicalizeRenderHashLint)->Arg(32 << 10);
BENCHMARK(BM_ParseCanonicalizeRenderHashLintWithOffsets)->Arg(32 << 10);

// Lint of a 32 KB conversation as the gateway runs it (the volatile tail left out), its prompt
// analyzed through the thread's prompt memo: with the scans kept with its text looked up
// (range(0) = 1, an agent's next turn finds its earlier turns' there), or every segment handed
// to the scanner (0), whose own memo compares each with its copy.
void BM_LintConversation(benchmark::State& state) {
  const std::string body = make_request(32 << 10);
  auto tokenizer = make_byte_tokenizer();
  PromptModel model{ChatTemplate::kLlama3, tokenizer.get(), 16, "builtin:tiny"};
  model.remember_block_hashes = true;
  auto req = parse_request(body, Endpoint::kChatCompletions);
  AnalyzedPrompt p;
  if (!req || !analyze_prompt_into(*req, model, p, {}, ByteOffsets::kOnDemand, TokenIds::kCount)) {
    state.SkipWithError("analyze_prompt_into failed");
    return;
  }
  if (state.range(0) == 0) p.memo_generation = 0;  // not the memo's: scanned
  const LintOptions options{.explain = false, .volatile_tail = false};
  benchmark::DoNotOptimize(lint_prompt(p, options).stable_prefix_tokens);  // keeps the scans
  for (auto _ : state) {
    benchmark::DoNotOptimize(lint_prompt(p, options).stable_prefix_tokens);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * p.rendered.text.size()));
}
BENCHMARK(BM_LintConversation)->Arg(0)->Arg(1);

void BM_BlockHashes(benchmark::State& state) {
  std::vector<TokenId> tokens(static_cast<std::size_t>(state.range(0)));
  std::mt19937 rng(7);
  for (TokenId& t : tokens) t = rng() % 128256;
  const std::uint64_t root = block_hash_root("builtin:tiny");
  for (auto _ : state) {
    auto hashes = block_hashes(tokens, 16, root);
    benchmark::DoNotOptimize(hashes.data());
  }
  state.SetBytesProcessed(
      static_cast<int64_t>(state.iterations() * tokens.size() * sizeof(TokenId)));
}
BENCHMARK(BM_BlockHashes)->Arg(32 << 10)->Arg(1 << 20);

}  // namespace
}  // namespace prefixgate::canon
