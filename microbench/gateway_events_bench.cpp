// Decoding prefixgate-engine's /v1/kv_events lines, the gateway's busiest path after the
// requests themselves: an engine stores or evicts about 24 blocks per request on an agent
// conversation, a line each, or with ?batch=1 (which the gateway asks for) a run of them per
// line. `scan` is parse_engine_event_line (its plain scan for these lines), `dom` the same line
// through simdjson's DOM parser alone; BM_EngineEventRun decodes a run of 12 blocks, its bytes
// and items counted per block, to set against BM_EngineEventLine's block a line.
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

// A stored run of 12 blocks, as the engine writes one for a prompt's new blocks.
std::string run_line() {
  std::string line = R"({"type":"stored","seq":123457,"hashes":[)";
  for (int k = 0; k < 12; ++k) {
    line += k == 0 ? "\"" : ",\"";
    line += "f8224153302dd4" + std::to_string(10 + k);
    line += '"';
  }
  return line + R"(],"parent":"8199f17be7202b19","salt":""})";
}

template <EngineEventLine (*Parse)(std::string_view)>
void BM_EngineEventRun(benchmark::State& state) {
  const std::string line = run_line();
  for (auto _ : state) benchmark::DoNotOptimize(Parse(line));
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()) * 12);
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * line.size()));
}
BENCHMARK(BM_EngineEventRun<parse_engine_event_line>)->Name("BM_EngineEventRun/scan");
BENCHMARK(BM_EngineEventRun<parse_engine_event_line_dom>)->Name("BM_EngineEventRun/dom");

}  // namespace
}  // namespace prefixgate::gateway::server
