// Throughput of json::parse and the two writers on a ~32 KB `tools` array, the shape of body an
// agent sends with every chat request and the gateway canonicalizes to hash the prompt prefix.
#include <benchmark/benchmark.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "prefixgate/canonicalize/json.h"

namespace {

using prefixgate::json::parse;
using prefixgate::json::Value;

// A chat request whose `tools` hold JSON-Schema function definitions, members deliberately out
// of RFC 8785 order (as clients send them) so canonicalization has sorting to do. Grows until
// it is at least `min_bytes`.
std::string ToolSchemaDocument(std::size_t min_bytes) {
  std::string doc =
      R"({"model":"llama-3.1-70b-instruct","stream":true,"temperature":0.7,"messages":[)"
      R"({"role":"system","content":"You are a careful coding agent. Use the tools."},)"
      R"({"role":"user","content":"Find the failing test and fix it \u2014 caf\u00e9 \ud83d\ude00"}],)"
      R"("tools":[)";
  for (int i = 0; doc.size() < min_bytes; ++i) {
    if (i > 0) doc += ',';
    const std::string n = std::to_string(i);
    doc += R"({"type":"function","function":{"name":"tool_)" + n +
           R"(","description":"Reads part of file number )" + n +
           R"( and returns its lines.\nLines are numbered from 1; \"limit\" caps them.",)"
           R"("parameters":{"type":"object","properties":{)"
           R"("path":{"type":"string","description":"Absolute path, e.g. \/srv\/app\/main.py"},)"
           R"("offset":{"type":"integer","minimum":0,"default":0},)"
           R"("limit":{"type":"integer","minimum":1,"maximum":2000,"default":250},)"
           R"("mode":{"type":"string","enum":["text","bytes","lines"]},)"
           R"("ratio":{"type":"number","minimum":1e-3,"maximum":1.0E2,"default":0.25},)"
           R"("tags":{"type":"array","items":{"type":"string"},"maxItems":)" +
           n + R"(}},"required":["path"],"additionalProperties":false},"strict":true}})";
  }
  doc += "]}";
  return doc;
}

const std::string& Document() {
  static const std::string doc = ToolSchemaDocument(32 * 1024);
  return doc;
}

const Value& ParsedDocument() {
  static const Value value = *parse(Document());
  return value;
}

void BM_Parse(benchmark::State& state) {
  const std::string& doc = Document();
  for (auto _ : state) {
    auto result = parse(doc);
    if (!result.ok()) state.SkipWithError(result.error().message.c_str());
    benchmark::DoNotOptimize(result);
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) *
                          static_cast<std::int64_t>(doc.size()));
}
BENCHMARK(BM_Parse);

void BM_ToCanonicalJson(benchmark::State& state) {
  const Value& value = ParsedDocument();
  for (auto _ : state) {
    auto canonical = prefixgate::json::to_canonical_json(value);
    benchmark::DoNotOptimize(canonical);
  }
  // Bytes of input document, so the figure compares with BM_Parse's.
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) *
                          static_cast<std::int64_t>(Document().size()));
}
BENCHMARK(BM_ToCanonicalJson);

void BM_ToJson(benchmark::State& state) {
  const Value& value = ParsedDocument();
  for (auto _ : state) {
    std::string out = prefixgate::json::to_json(value);
    benchmark::DoNotOptimize(out);
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) *
                          static_cast<std::int64_t>(Document().size()));
}
BENCHMARK(BM_ToJson);

// What the gateway does per request: parse the body, then canonicalize it.
void BM_ParseThenCanonicalize(benchmark::State& state) {
  const std::string& doc = Document();
  for (auto _ : state) {
    auto value = parse(doc);
    auto canonical = prefixgate::json::to_canonical_json(*value);
    benchmark::DoNotOptimize(canonical);
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) *
                          static_cast<std::int64_t>(doc.size()));
}
BENCHMARK(BM_ParseThenCanonicalize);

}  // namespace
