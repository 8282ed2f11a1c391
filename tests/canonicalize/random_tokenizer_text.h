// Random texts for the tokenizer property tests (segment cache, token_at_byte), and where the
// real tokenizer.json files are (tests/js/node_modules, scripts/install-js-deps.sh).
#pragma once

#include <random>
#include <string>
#include <vector>

#include "tokenizer_reference.h"

namespace prefixgate::canon::test_text {

using testing_reference::read_file;

inline std::string tokenizer_path(const std::string& family) {
  return testing_reference::package_dir(family) + "/models/tokenizer.json";
}

// Pieces of text that tokenizers treat differently: words, leading and trailing spaces,
// newlines, digits, code, CJK, Cyrillic, emoji, and the special tokens of several families
// (recognised where the tokenizer has them, plain text where it does not).
inline const std::vector<std::string> kPieces = {
    "Hello",      " world",          "  ",           "\n",           "\n\n",        "\t",
    "12345",      " 3.14159",        "don't",        " I'll",        "fn main() {", "}",
    "    return", " x += 1;",        "日本語の文章", "中文",         " Привет",     " мир",
    "😀",          " café",           "e\xCC\x81",    "!!!",          "  ?",         "_",
    "<|eot_id|>", "<|im_start|>",    "<|im_end|>",   "<s>",          "</s>",        "<eos>",
    "<bos>",      "<start_of_turn>", "[INST]",       "<|endoftext|>"};

inline std::string random_text(std::mt19937& rng, std::size_t pieces) {
  std::string out;
  std::uniform_int_distribution<std::size_t> pick(0, kPieces.size() - 1);
  for (std::size_t i = 0; i < pieces; ++i) out += kPieces[pick(rng)];
  return out;
}

}  // namespace prefixgate::canon::test_text
