// Decoding prefixgate-engine's /v1/kv_events lines, the gateway's busiest path after the
// requests themselves: an engine sends a line per block it stores or evicts, about 24 per request
// on an agent conversation. `scan` is parse_engine_event_line (its plain scan for these lines),
// `dom` the same line through simdjson's DOM parser alone.
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "server/engine_events.h"

namespace prefixgate::gateway::server {
namespace {

// As the engine writes them: a stored line, a removed line, alternating.
const std::vector<std::string> kLines = {
    R"({"type":"stored","seq":123457,"hash":"f8224153302dd4b0","parent":"8199f17be7202b19","salt":""})",
    R"({"type":"removed","seq":123458,"hash":"21e528b2985b0063","salt":""})"};

template <EngineEventLine (*Parse)(std::string_view)>
void BM_EngineEventLine(benchmark::State& state) {
  std::size_t i = 0;
  std::size_t bytes = 0;
  for (auto _ : state) {
    const std::string& line = kLines[i++ % kLines.size()];
    benchmark::DoNotOptimize(Parse(line));
    bytes += line.size();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(bytes));
}
BENCHMARK(BM_EngineEventLine<parse_engine_event_line>)->Name("BM_EngineEventLine/scan");
BENCHMARK(BM_EngineEventLine<parse_engine_event_line_dom>)->Name("BM_EngineEventLine/dom");

}  // namespace
}  // namespace prefixgate::gateway::server
