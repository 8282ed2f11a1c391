// The pieces of the tokenizer.json pipeline, each on its own, against what Hugging Face
// tokenizers does (its documented examples and its source's behaviour): normalizers, each Split
// behavior, Digits, ByteLevel, Metaspace and its prepend schemes, the decoders, the
// SentencePiece-style model (byte fallback, unknown tokens), and the added-token flags.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "../../canonicalize/src/tokenizer_decoder.h"
#include "../../canonicalize/src/tokenizer_normalizer.h"
#include "../../canonicalize/src/tokenizer_pre_tokenizer.h"
#include "prefixgate/canonicalize/tokenizer.h"

namespace prefixgate::canon::internal {
namespace {

using Strings = std::vector<std::string>;

// A component from its JSON, which must load.
template <class T>
T load(Result<T> r, std::string_view json) {
  EXPECT_TRUE(r.ok()) << json << ": " << r.error().message;
  return r ? std::move(*r) : T{};
}

Error read_error(std::string_view key, std::string_view json) {
  Status s;
  if (key == "normalizer") {
    auto r = normalizer_from_json(json);
    if (!r) s = r.error();
  } else if (key == "pre_tokenizer") {
    auto r = pre_tokenizer_from_json(json);
    if (!r) s = r.error();
  } else {
    auto r = decoder_from_json(json);
    if (!r) s = r.error();
  }
  EXPECT_FALSE(s.ok()) << json;
  return s.ok() ? Error{} : s.error();
}

std::string normalize(std::string_view json, std::string_view text,
                      std::vector<std::uint32_t>* origin = nullptr) {
  const Normalizer n = load(normalizer_from_json(json), json);
  AlignedText out;
  if (!n.normalize(text, 0, origin != nullptr, out)) return std::string(text);
  if (origin) *origin = out.origin;
  return out.text;
}

Strings pre_tokenize(std::string_view json, std::string_view text) {
  const PreTokenizer p = load(pre_tokenizer_from_json(json), json);
  std::vector<std::uint32_t> origin(text.size() + 1);
  for (std::size_t i = 0; i < origin.size(); ++i) origin[i] = static_cast<std::uint32_t>(i);
  PreTokenizerScratch s;
  p.run(text, origin.data(), s);
  Strings out;
  for (const PieceRange r : s.pieces) out.emplace_back(s.text.substr(r.begin, r.end - r.begin));
  return out;
}

std::string decode(std::string_view json, Strings tokens) {
  const Decoder d = load(decoder_from_json(json), json);
  return d.decode(std::move(tokens));
}

std::string split(const char* behavior, bool invert = false) {
  return std::string(R"({"type":"Split","pattern":{"String":"-"},"behavior":")") + behavior +
         R"(","invert":)" + (invert ? "true" : "false") + "}";
}

// ---------------------------------------------------------------------------------------------
// Normalizers

TEST(TokenizerNormalizerTest, PrependReplaceStripAndSequence) {
  EXPECT_EQ(normalize(R"({"type":"Prepend","prepend":"▁"})", "hi"), "▁hi");
  EXPECT_EQ(normalize(R"({"type":"Prepend","prepend":"▁"})", ""), "");  // nothing to prepend to
  EXPECT_EQ(normalize(R"({"type":"Replace","pattern":{"String":" "},"content":"▁"})", "a b  c"),
            "a▁b▁▁c");
  EXPECT_EQ(normalize(R"({"type":"Replace","pattern":{"Regex":"\\s+"},"content":"_"})", "a \t b"),
            "a_b");
  EXPECT_EQ(normalize(R"({"type":"Strip","strip_left":true,"strip_right":false})", " \u3000a "),
            "a ");
  EXPECT_EQ(normalize(R"({"type":"Strip","strip_left":true,"strip_right":true})", "\n a b \t"),
            "a b");
  EXPECT_EQ(normalize(R"({"type":"Sequence","normalizers":[{"type":"Prepend","prepend":"▁"},)"
                      R"({"type":"Replace","pattern":{"String":" "},"content":"▁"}]})",
                      "Hello world"),
            "▁Hello▁world");
  EXPECT_EQ(normalize(R"({"type":"Sequence","normalizers":[]})", "as is"), "as is");
  EXPECT_EQ(normalize(R"({"type":"NFC"})", "e\xcc\x81"), "\xc3\xa9");
}

TEST(TokenizerNormalizerTest, OriginPointsInsertedBytesAtTheirCharacter) {
  std::vector<std::uint32_t> origin;
  const std::string out =
      normalize(R"({"type":"Sequence","normalizers":[{"type":"Prepend","prepend":"▁"},)"
                R"({"type":"Replace","pattern":{"String":" "},"content":"▁"}]})",
                "ab c", &origin);
  ASSERT_EQ(out, "▁ab▁c");
  // "▁" (3 bytes) from 'a', "a", "b", "▁" from the space (input 2), "c", end.
  EXPECT_EQ(origin, (std::vector<std::uint32_t>{0, 0, 0, 0, 1, 2, 2, 2, 3, 4}));
}

TEST(TokenizerNormalizerTest, RefusesWhatItDoesNotImplement) {
  for (const char* type : {"NFD", "NFKC", "NFKD", "Lowercase", "BertNormalizer", "StripAccents",
                           "Precompiled", "ByteLevel"}) {
    const Error e = read_error("normalizer", std::string(R"({"type":")") + type + "\"}");
    EXPECT_EQ(e.code, ErrorCode::kUnsupported) << type;
    EXPECT_EQ(e.param, "normalizer.type") << type;
    EXPECT_NE(e.message.find(type), std::string::npos) << e.message;
  }
  const Error e = read_error("normalizer", R"({"type":"Prepend","prepend":"x","twice":true})");
  EXPECT_EQ(e.param, "normalizer.twice");
  const Error re =
      read_error("normalizer", R"({"type":"Replace","pattern":{"Regex":"(?<=a)b"},"content":""})");
  EXPECT_EQ(re.code, ErrorCode::kUnsupported);
  EXPECT_EQ(re.param, "normalizer.pattern.Regex");
}

// ---------------------------------------------------------------------------------------------
// Pre-tokenizers

// Hugging Face's documented example: splitting "the-final--countdown" on '-'.
TEST(TokenizerPreTokenizerTest, SplitBehaviorsAsHuggingFaceDocumentsThem) {
  const std::string text = "the-final--countdown";
  EXPECT_EQ(pre_tokenize(split("Removed"), text), (Strings{"the", "final", "countdown"}));
  EXPECT_EQ(pre_tokenize(split("Isolated"), text),
            (Strings{"the", "-", "final", "-", "-", "countdown"}));
  EXPECT_EQ(pre_tokenize(split("MergedWithPrevious"), text),
            (Strings{"the-", "final-", "-", "countdown"}));
  EXPECT_EQ(pre_tokenize(split("MergedWithNext"), text),
            (Strings{"the", "-final", "-", "-countdown"}));
  EXPECT_EQ(pre_tokenize(split("Contiguous"), text),
            (Strings{"the", "-", "final", "--", "countdown"}));
  // invert: what the pattern matches is kept, the rest is the delimiter.
  EXPECT_EQ(pre_tokenize(split("Removed", true), text), (Strings{"-", "-", "-"}));
  EXPECT_EQ(pre_tokenize(R"({"type":"Split","pattern":{"Regex":"\\w+"},"behavior":"Removed",)"
                         R"("invert":true})",
                         "Hey, you!"),
            (Strings{"Hey", "you"}));
}

TEST(TokenizerPreTokenizerTest, DigitsAndSequences) {
  EXPECT_EQ(pre_tokenize(R"({"type":"Digits","individual_digits":true})", "a123b٣"),
            (Strings{"a", "1", "2", "3", "b", "٣"}));
  EXPECT_EQ(pre_tokenize(R"({"type":"Digits","individual_digits":false})", "a123b"),
            (Strings{"a", "123", "b"}));
  EXPECT_EQ(pre_tokenize(R"({"type":"Sequence","pretokenizers":[)"
                         R"({"type":"Split","pattern":{"String":" "},"behavior":"Removed"},)"
                         R"({"type":"Digits","individual_digits":true}]})",
                         "ab 12"),
            (Strings{"ab", "1", "2"}));
}

TEST(TokenizerPreTokenizerTest, ByteLevelPrefixSpaceAndRegex) {
  EXPECT_EQ(pre_tokenize(R"({"type":"ByteLevel","add_prefix_space":true,"use_regex":true})",
                         "Hello world"),
            (Strings{" Hello", " world"}));
  EXPECT_EQ(
      pre_tokenize(R"({"type":"ByteLevel","add_prefix_space":true,"use_regex":false})", " x y"),
      (Strings{" x y"}));
  // Each piece from an earlier Split gets its own prefix space.
  EXPECT_EQ(pre_tokenize(R"({"type":"Sequence","pretokenizers":[)"
                         R"({"type":"Split","pattern":{"String":"|"},"behavior":"Removed"},)"
                         R"({"type":"ByteLevel","add_prefix_space":true,"use_regex":false}]})",
                         "a|b"),
            (Strings{" a", " b"}));
}

TEST(TokenizerPreTokenizerTest, MetaspaceReplacesPrependsAndSplits) {
  const char* always = R"({"type":"Metaspace","replacement":"▁","prepend_scheme":"always"})";
  EXPECT_EQ(pre_tokenize(always, "Hey friend!"), (Strings{"▁Hey", "▁friend!"}));
  EXPECT_EQ(pre_tokenize(always, "Hey   friend!"), (Strings{"▁Hey", "▁", "▁", "▁friend!"}));
  EXPECT_EQ(pre_tokenize(R"({"type":"Metaspace","replacement":"▁","prepend_scheme":"never"})",
                         "Hey friend"),
            (Strings{"Hey", "▁friend"}));
  EXPECT_EQ(pre_tokenize(R"({"type":"Metaspace","replacement":"▁","split":false})", "a b"),
            (Strings{"▁a▁b"}));
  // The older add_prefix_space=false means "never".
  EXPECT_EQ(
      pre_tokenize(R"({"type":"Metaspace","replacement":"▁","add_prefix_space":false})", "a b"),
      (Strings{"a", "▁b"}));
  // "first": only a piece that starts at the very start of the input gets the prefix.
  const char* first =
      R"({"type":"Sequence","pretokenizers":[)"
      R"({"type":"Split","pattern":{"String":"|"},"behavior":"Removed"},)"
      R"({"type":"Metaspace","replacement":"▁","prepend_scheme":"first","split":false}]})";
  EXPECT_EQ(pre_tokenize(first, "a|b c"), (Strings{"▁a", "b▁c"}));
  EXPECT_EQ(pre_tokenize(first, "|b"), (Strings{"b"}));
}

TEST(TokenizerPreTokenizerTest, RefusesWhatItDoesNotImplement) {
  for (const char* type : {"Whitespace", "WhitespaceSplit", "BertPreTokenizer", "Punctuation",
                           "UnicodeScripts", "CharDelimiterSplit"}) {
    const Error e = read_error("pre_tokenizer", std::string(R"({"type":")") + type + "\"}");
    EXPECT_EQ(e.code, ErrorCode::kUnsupported) << type;
    EXPECT_EQ(e.param, "pre_tokenizer.type") << type;
    EXPECT_NE(e.message.find(type), std::string::npos) << e.message;
  }
  const Error scheme = read_error(
      "pre_tokenizer", R"({"type":"Metaspace","replacement":"▁","prepend_scheme":"sometimes"})");
  EXPECT_EQ(scheme.param, "pre_tokenizer.prepend_scheme");
  const Error contradiction = read_error(
      "pre_tokenizer",
      R"({"type":"Metaspace","replacement":"▁","prepend_scheme":"always","add_prefix_space":false})");
  EXPECT_EQ(contradiction.code, ErrorCode::kInvalidValue);
  const Error nested = read_error(
      "pre_tokenizer", R"({"type":"Sequence","pretokenizers":[{"type":"Digits","extra":1}]})");
  EXPECT_EQ(nested.param, "pre_tokenizer.pretokenizers[0].extra");
}

// ---------------------------------------------------------------------------------------------
// Decoders

TEST(TokenizerDecoderTest, EachDecoderAsHuggingFace) {
  EXPECT_EQ(decode(R"({"type":"ByteLevel"})", {"Hello", "Ġworld", "Ċ"}), "Hello world\n");
  // A token with a character outside the byte alphabet is its own UTF-8.
  EXPECT_EQ(decode(R"({"type":"ByteLevel"})", {"<｜User｜>", "Ġx"}), "<｜User｜> x");
  // Metaspace drops every "▁" of the first token, unless the scheme is "never".
  EXPECT_EQ(decode(R"({"type":"Metaspace","replacement":"▁","prepend_scheme":"always"})",
                   {"▁▁Hey", "▁friend"}),
            "Hey friend");
  EXPECT_EQ(decode(R"({"type":"Metaspace","replacement":"▁","prepend_scheme":"never"})", {"▁Hey"}),
            " Hey");
  const char* llama2 =
      R"({"type":"Sequence","decoders":[{"type":"Replace","pattern":{"String":"▁"},"content":" "},)"
      R"({"type":"ByteFallback"},{"type":"Fuse"},{"type":"Strip","content":" ","start":1,"stop":0}]})";
  EXPECT_EQ(decode(llama2, {"▁Hello", "▁", "<0xE4>", "<0xBD>", "<0xA0>", "!"}), "Hello 你!");
  EXPECT_EQ(decode(llama2, {"▁▁x"}), " x");  // Strip takes one space
  // Bytes that are not UTF-8 stay bytes (Hugging Face would write U+FFFD for each).
  EXPECT_EQ(decode(R"({"type":"ByteFallback"})", {"<0xE4>", "a"}),
            "\xe4"
            "a");
  EXPECT_EQ(decode(R"({"type":"Strip","content":"x","start":2,"stop":1})", {"xxxaxx", "x"}), "xax");
  EXPECT_EQ(decode("null", {"a", "b"}), "a b");  // no decoder: Hugging Face joins with spaces
}

TEST(TokenizerDecoderTest, RefusesWhatItDoesNotImplement) {
  for (const char* type : {"WordPiece", "BPEDecoder", "CTC"}) {
    const Error e = read_error("decoder", std::string(R"({"type":")") + type + "\"}");
    EXPECT_EQ(e.code, ErrorCode::kUnsupported) << type;
    EXPECT_EQ(e.param, "decoder.type") << type;
  }
  const Error e = read_error("decoder", R"({"type":"Sequence","decoders":[{"type":"Fuse"},)"
                                        R"({"type":"Strip","content":" ","left":1}]})");
  EXPECT_EQ(e.param, "decoder.decoders[1].left");
}

// ---------------------------------------------------------------------------------------------
// The SentencePiece-style model and added tokens, through load_tokenizer_json.

// A Llama 2-style tokenizer.json: vocabulary <unk>, <s>, </s>, the 256 byte tokens, then
// `pieces` with merges building them from characters.
std::string sentencepiece_json(std::string_view model_options, std::string_view normalizer,
                               std::string_view added = "[]") {
  std::string vocab = R"("<unk>":0,"<s>":1,"</s>":2)";
  for (int b = 0; b < 256; ++b) {
    char t[32];
    std::snprintf(t, sizeof t, R"(,"<0x%02X>":%d)", static_cast<unsigned>(b), 3 + b);
    vocab += t;
  }
  const Strings pieces = {"▁", "a", "b", "c", "▁a", "ab", "▁ab", "é", "ca"};
  for (std::size_t i = 0; i < pieces.size(); ++i) {
    vocab += ",\"" + pieces[i] + "\":" + std::to_string(259 + i);
  }
  return std::string(R"({"added_tokens":)") + std::string(added) + R"(,"normalizer":)" +
         std::string(normalizer) +
         R"(,"pre_tokenizer":null,"decoder":{"type":"Sequence","decoders":[)"
         R"({"type":"Replace","pattern":{"String":"▁"},"content":" "},{"type":"ByteFallback"},)"
         R"({"type":"Fuse"},{"type":"Strip","content":" ","start":1,"stop":0}]},)"
         R"("model":{"type":"BPE","vocab":{)" +
         vocab + R"(},"merges":[["▁","a"],["a","b"],["▁a","b"]])" +
         (model_options.empty() ? "" : ",") + std::string(model_options) + "}}";
}

constexpr const char* kLlama2Normalizer =
    R"({"type":"Sequence","normalizers":[{"type":"Prepend","prepend":"▁"},)"
    R"({"type":"Replace","pattern":{"String":" "},"content":"▁"}]})";

std::vector<TokenId> encode(const Tokenizer& tok, std::string_view text, bool parse_special = true,
                            std::vector<std::size_t>* offsets = nullptr) {
  std::vector<TokenId> ids;
  tok.encode(text, ids, {.parse_special = parse_special}, offsets);
  return ids;
}

TEST(SentencePieceBpeTest, MergesCharactersAndFallsBackToBytes) {
  auto tok = load_tokenizer_json(sentencepiece_json(
      R"("unk_token":"<unk>","byte_fallback":true,"fuse_unk":true)", kLlama2Normalizer,
      R"([{"id":1,"content":"<s>","special":true,"normalized":false}])"));
  ASSERT_TRUE(tok.ok()) << tok.error().message;
  EXPECT_NE((*tok)->name().find("SentencePiece"), std::string_view::npos);
  // "ab c" -> "▁ab▁c": ▁ab (merged), ▁, c. "中" is not in the vocabulary: its 3 UTF-8 bytes.
  std::vector<std::size_t> offsets;
  EXPECT_EQ(encode(**tok, "ab c中", true, &offsets),
            (std::vector<TokenId>{265, 259, 262, 3 + 0xE4, 3 + 0xB8, 3 + 0xAD}));
  EXPECT_EQ(offsets, (std::vector<std::size_t>{0, 2, 3, 4, 5, 6}));
  EXPECT_EQ((*tok)->decode(encode(**tok, "ab c中")), "ab c中");
  EXPECT_EQ((*tok)->decode(encode(**tok, "  é")), "  é");
  // The legacy normalizer prepends "▁" to each stretch between added tokens.
  EXPECT_EQ(encode(**tok, "<s>ab"), (std::vector<TokenId>{1, 265}));
  EXPECT_EQ(encode(**tok, "<s>ab", /*parse_special=*/false).front(), 259u);  // "▁", then "<"
}

TEST(SentencePieceBpeTest, UnknownCharactersWithoutByteFallback) {
  auto fused = load_tokenizer_json(
      sentencepiece_json(R"("unk_token":"<unk>","fuse_unk":true)", kLlama2Normalizer));
  ASSERT_TRUE(fused.ok()) << fused.error().message;
  std::vector<std::size_t> offsets;
  EXPECT_EQ(encode(**fused, "a中文b", true, &offsets), (std::vector<TokenId>{263, 0, 261}));
  EXPECT_EQ(offsets, (std::vector<std::size_t>{0, 1, 7}));
  auto unfused = load_tokenizer_json(
      sentencepiece_json(R"("unk_token":"<unk>","fuse_unk":false)", kLlama2Normalizer));
  ASSERT_TRUE(unfused.ok());
  EXPECT_EQ(encode(**unfused, "a中文b"), (std::vector<TokenId>{263, 0, 0, 261}));
  // No unknown token at all: Hugging Face drops the character (before merging, so "a" and "b"
  // then merge).
  auto none = load_tokenizer_json(sentencepiece_json("", kLlama2Normalizer));
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(encode(**none, "a中b"), (std::vector<TokenId>{265}));
  // An unknown token that is not in the vocabulary is refused.
  auto missing = load_tokenizer_json(sentencepiece_json(R"("unk_token":"<nope>")", "null"));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().param, "model.unk_token");
}

TEST(SentencePieceBpeTest, IgnoreMergesTakesWholeWords) {
  // "ca" is in the vocabulary but no merge makes it.
  auto tok = load_tokenizer_json(sentencepiece_json(R"("ignore_merges":true)", "null"));
  ASSERT_TRUE(tok.ok()) << tok.error().message;
  EXPECT_EQ(encode(**tok, "ca"), (std::vector<TokenId>{267}));
  auto merging = load_tokenizer_json(sentencepiece_json(R"("ignore_merges":false)", "null"));
  ASSERT_TRUE(merging.ok());
  EXPECT_EQ(encode(**merging, "ca"), (std::vector<TokenId>{262, 260}));
}

TEST(AddedTokenFlagsTest, SingleWordNormalizedAndSkippedSpecials) {
  const std::string added =
      R"([{"id":1,"content":"<s>","special":true,"normalized":false},)"
      R"({"id":302,"content":"<xy>","special":true,"normalized":false},)"
      R"({"id":300,"content":"xy","single_word":true,"special":false,"normalized":false},)"
      R"({"id":301,"content":"zq","special":false,"normalized":true,"lstrip":true}])";
  auto tok =
      load_tokenizer_json(sentencepiece_json(R"("byte_fallback":true)", kLlama2Normalizer, added));
  ASSERT_TRUE(tok.ok()) << tok.error().message;
  const Tokenizer& t = **tok;
  // single_word: "xy" only where no word character touches it.
  EXPECT_EQ(encode(t, "xy"), (std::vector<TokenId>{300}));
  EXPECT_EQ(encode(t, "a-xy"), (std::vector<TokenId>{263, 3 + '-', 300}));
  EXPECT_EQ(encode(t, "axy"), (std::vector<TokenId>{263, 3 + 'x', 3 + 'y'}));
  // normalized=true: matched in normalized text by its normalized content ("▁zq", since the
  // normalizer prepends "▁"); "▁" is not whitespace, so lstrip takes nothing.
  EXPECT_EQ(encode(t, "zq"), (std::vector<TokenId>{301}));
  EXPECT_EQ(encode(t, "a zq"), (std::vector<TokenId>{263, 301}));
  // A special token skipped with parse_special off still ends the search there: "xy" inside
  // "<xy>" is not found.
  EXPECT_EQ(encode(t, "<xy>", true), (std::vector<TokenId>{302}));
  const auto plain = encode(t, "<xy>", false);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), 300u), 0) << plain.size();
  EXPECT_TRUE(t.is_special(302));
  EXPECT_FALSE(t.is_special(300));
  EXPECT_EQ(t.special_token("zq"), std::optional<TokenId>(301));
}

}  // namespace
}  // namespace prefixgate::canon::internal
