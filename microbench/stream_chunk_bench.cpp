// Reading one chunk of a streamed chat answer, as the gateway does for every token it translates
// into the Messages or Responses API: the tree-free read (parse_plain_chat_chunk) against
// json::parse and parse_chat_chunk, for a token's text and for a piece of a tool call's
// arguments, vLLM's shapes of both.
#include <benchmark/benchmark.h>

#include <string>

#include "prefixgate/canonicalize/chat_reply.h"
#include "prefixgate/canonicalize/json.h"

namespace {

namespace canon = prefixgate::canon;
namespace json = prefixgate::json;

const std::string kTextChunk =
    R"({"id":"chatcmpl-5b0c","object":"chat.completion.chunk","created":1796559598,)"
    R"("model":"meta-llama/Llama-3.1-8B-Instruct","choices":[{"index":0,"delta":)"
    R"({"content":" prefix"},"logprobs":null,"finish_reason":null}]})";
const std::string kToolChunk =
    R"({"id":"chatcmpl-5b0c","object":"chat.completion.chunk","created":1796559598,)"
    R"("model":"meta-llama/Llama-3.1-8B-Instruct","choices":[{"index":0,"delta":)"
    R"({"tool_calls":[{"index":0,"function":{"arguments":"\"path\": \"src"}}]},)"
    R"("logprobs":null,"finish_reason":null}]})";

const std::string& chunk_of(const benchmark::State& state) {
  return state.range(0) == 0 ? kTextChunk : kToolChunk;
}

void BM_ChatChunkRead(benchmark::State& state) {
  const std::string& chunk = chunk_of(state);
  for (auto _ : state) {
    auto reply = canon::parse_plain_chat_chunk(chunk);
    if (!reply) {
      state.SkipWithError("the chunk was not read");
      return;
    }
    benchmark::DoNotOptimize(reply);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_ChatChunkRead)->ArgName("tool_call")->Arg(0)->Arg(1);

void BM_ChatChunkParseTree(benchmark::State& state) {
  const std::string& chunk = chunk_of(state);
  for (auto _ : state) {
    auto doc = json::parse(chunk);
    auto reply = canon::parse_chat_chunk(*doc);
    benchmark::DoNotOptimize(reply);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_ChatChunkParseTree)->ArgName("tool_call")->Arg(0)->Arg(1);

}  // namespace
