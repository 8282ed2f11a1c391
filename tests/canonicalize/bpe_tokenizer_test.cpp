// The byte-level BPE tokenizer on small tokenizer.json files written here, so that every id is
// known: the loader's checks, merge order, ignore_merges, added tokens, NFC, offsets, decode.
// (bpe_parity_test.cpp checks the real files of every family against a reference;
// tokenizer_pipeline_test.cpp the SentencePiece-style model and each pipeline piece.)
#include <gtest/gtest.h>
#include <utf8proc.h>

#include <cstdlib>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "../../canonicalize/src/nfc_normalizer.h"
#include "prefixgate/canonicalize/tokenizer.h"

namespace prefixgate::canon {
namespace {

constexpr const char* kLlama3Regex =
    R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";

// GPT-2's byte-to-unicode map, written out again here rather than taken from the code under test.
std::string byte_level(std::string_view raw) {
  std::string out;
  for (char ch : raw) {
    const auto b = static_cast<unsigned char>(ch);
    unsigned cp = b;
    if (!((b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE)) {
      unsigned n = 0;
      for (unsigned x = 0; x < b; ++x) {
        if (!((x >= '!' && x <= '~') || (x >= 0xA1 && x <= 0xAC) || x >= 0xAE)) ++n;
      }
      cp = 256 + n;
    }
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }
  return out;
}

std::string json_string(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

// A tokenizer.json whose vocabulary is the 256 bytes (id = byte value), then the result of each
// merge (ids 256, 257, ... in merge order), then `extra_tokens`.
struct TokenizerJson {
  std::vector<std::pair<std::string, std::string>> merges;  // raw bytes
  std::vector<std::string> extra_tokens;
  bool array_merges = true;
  bool ignore_merges = false;
  std::string normalizer = "null";
  std::string pre_tokenizer =
      std::string(R"({"type":"Sequence","pretokenizers":[)") +
      R"({"type":"Split","pattern":{"Regex":)" + json_string(kLlama3Regex) +
      R"(},"behavior":"Isolated","invert":false},)" +
      R"({"type":"ByteLevel","add_prefix_space":false,"trim_offsets":true,)" +
      R"("use_regex":false}]})";
  std::string model_type = "BPE";
  std::string added_tokens = "[]";
  std::string decoder = R"({"type":"ByteLevel"})";

  std::string build() const {
    std::vector<std::string> vocab;
    for (int b = 0; b < 256; ++b) vocab.push_back(std::string(1, static_cast<char>(b)));
    for (const auto& [l, r] : merges) vocab.push_back(l + r);
    for (const auto& t : extra_tokens) vocab.push_back(t);
    std::string json = R"({"version":"1.0","truncation":null,"padding":null,"added_tokens":)" +
                       added_tokens + R"(,"normalizer":)" + normalizer + R"(,"pre_tokenizer":)" +
                       pre_tokenizer + R"(,"post_processor":null,"decoder":)" + decoder +
                       R"(,"model":{"type":)" + json_string(model_type) +
                       R"(,"dropout":null,"unk_token":null,"ignore_merges":)" +
                       (ignore_merges ? "true" : "false") + R"(,"vocab":{)";
    for (std::size_t id = 0; id < vocab.size(); ++id) {
      if (id > 0) json += ',';
      json += json_string(byte_level(vocab[id])) + ":" + std::to_string(id);
    }
    json += R"(},"merges":[)";
    for (std::size_t i = 0; i < merges.size(); ++i) {
      if (i > 0) json += ',';
      const std::string l = byte_level(merges[i].first);
      const std::string r = byte_level(merges[i].second);
      json += array_merges ? "[" + json_string(l) + "," + json_string(r) + "]"
                           : json_string(l + " " + r);
    }
    return json + "]}}";
  }
};

std::unique_ptr<Tokenizer> load(const TokenizerJson& spec) {
  auto tok = load_tokenizer_json(spec.build());
  EXPECT_TRUE(tok.ok()) << tok.error().message;
  return tok ? std::move(*tok) : nullptr;
}

std::vector<TokenId> encode(const Tokenizer& tok, std::string_view text, bool parse_special = true,
                            std::vector<std::size_t>* offsets = nullptr) {
  std::vector<TokenId> ids;
  tok.encode(text, ids, {.parse_special = parse_special}, offsets);
  return ids;
}

Error load_error(const TokenizerJson& spec) {
  auto tok = load_tokenizer_json(spec.build());
  EXPECT_FALSE(tok.ok());
  return tok ? Error{} : tok.error();
}

// ---------------------------------------------------------------------------------------------
// Loader

TEST(BpeTokenizerLoadTest, RejectsTextThatIsNotJson) {
  for (std::string_view text : {"", "{", "not json", "{\"model\": }", "[1,2] x"}) {
    auto tok = load_tokenizer_json(text);
    ASSERT_FALSE(tok.ok()) << text;
    EXPECT_EQ(tok.error().code, ErrorCode::kInvalidJson) << text;
  }
}

TEST(BpeTokenizerLoadTest, RejectsDocumentsOfTheWrongShape) {
  auto array = load_tokenizer_json("[]");
  ASSERT_FALSE(array.ok());
  EXPECT_EQ(array.error().code, ErrorCode::kWrongType);
  auto no_model = load_tokenizer_json(R"({"pre_tokenizer": null})");
  ASSERT_FALSE(no_model.ok());
  EXPECT_EQ(no_model.error().code, ErrorCode::kMissingField);
  EXPECT_EQ(no_model.error().param, "model");
}

TEST(BpeTokenizerLoadTest, RejectsOtherModelTypes) {
  TokenizerJson spec;
  spec.model_type = "WordPiece";
  const Error e = load_error(spec);
  EXPECT_EQ(e.code, ErrorCode::kUnsupported);
  EXPECT_EQ(e.param, "model.type");
  EXPECT_NE(e.message.find("WordPiece"), std::string::npos) << e.message;
}

TEST(BpeTokenizerLoadTest, RejectsASplitRegexWeCannotMatch) {
  TokenizerJson spec;
  const std::string known = json_string(kLlama3Regex);
  spec.pre_tokenizer.replace(spec.pre_tokenizer.find(known), known.size(), R"("(?<=a)b")");
  const Error e = load_error(spec);
  EXPECT_EQ(e.code, ErrorCode::kUnsupported);
  EXPECT_EQ(e.param, "pre_tokenizer.pretokenizers[0].pattern.Regex");
  EXPECT_NE(e.message.find("lookbehind"), std::string::npos) << e.message;
}

TEST(BpeTokenizerLoadTest, RejectsSettingsThatWouldChangeTheIds) {
  struct Case {
    const char* what;
    std::string TokenizerJson::*field;
    std::string value;
    const char* param;
  };
  const std::vector<Case> cases = {
      {"NFKC", &TokenizerJson::normalizer, R"({"type":"NFKC"})", "normalizer.type"},
      {"BertNormalizer in a sequence", &TokenizerJson::normalizer,
       R"({"type":"Sequence","normalizers":[{"type":"NFC"},{"type":"BertNormalizer"}]})",
       "normalizer.normalizers[1].type"},
      {"whitespace", &TokenizerJson::pre_tokenizer, R"({"type":"Whitespace"})",
       "pre_tokenizer.type"},
      {"after ByteLevel", &TokenizerJson::pre_tokenizer,
       R"({"type":"Sequence","pretokenizers":[{"type":"ByteLevel"},{"type":"Digits"}]})",
       "pre_tokenizer.pretokenizers[1].type"},
      {"unknown Split option", &TokenizerJson::pre_tokenizer,
       R"({"type":"Split","pattern":{"String":" "},"behavior":"Isolated","flavour":1})",
       "pre_tokenizer.flavour"},
      {"unknown behavior", &TokenizerJson::pre_tokenizer,
       R"({"type":"Split","pattern":{"String":" "},"behavior":"Sideways"})",
       "pre_tokenizer.behavior"},
      {"WordPiece decoder", &TokenizerJson::decoder, R"({"type":"WordPiece"})", "decoder.type"},
      {"unknown added-token flag", &TokenizerJson::added_tokens,
       R"([{"id":300,"content":"<x>","special":true,"sticky":true}])", "added_tokens[0].sticky"},
  };
  for (const Case& c : cases) {
    TokenizerJson spec;
    spec.*c.field = c.value;
    const Error e = load_error(spec);
    EXPECT_EQ(e.code, ErrorCode::kUnsupported) << c.what << ": " << e.message;
    EXPECT_EQ(e.param, c.param) << c.what;
    EXPECT_NE(e.message.find(c.param), std::string::npos) << c.what << ": " << e.message;
  }
  for (const auto& [what, from, to, param] :
       std::vector<std::tuple<const char*, const char*, const char*, const char*>>{
           {"dropout", R"("dropout":null)", R"("dropout":0.1)", "model.dropout"},
           {"suffix", R"("dropout":null)", R"("end_of_word_suffix":"</w>")",
            "model.end_of_word_suffix"},
           {"unknown model option", R"("dropout":null)", R"("cache_capacity":3)",
            "model.cache_capacity"},
       }) {
    std::string json = TokenizerJson{}.build();
    json.replace(json.find(from), std::string_view(from).size(), to);
    auto tok = load_tokenizer_json(json);
    ASSERT_FALSE(tok.ok()) << what;
    EXPECT_EQ(tok.error().code, ErrorCode::kUnsupported) << what;
    EXPECT_EQ(tok.error().param, param) << what;
  }
  // byte_fallback changes nothing for byte-level text: every byte has its token.
  std::string json = TokenizerJson{}.build();
  json.replace(json.find(R"("dropout":null)"), 14, R"("byte_fallback":true)");
  EXPECT_TRUE(load_tokenizer_json(json).ok());
}

TEST(BpeTokenizerLoadTest, RejectsMergesOfUnknownTokens) {
  TokenizerJson spec;
  spec.merges = {{"a", "b"}};
  std::string json = spec.build();
  // Point the merge at a token the vocabulary lacks.
  json.replace(json.find(R"(["a","b"])"), 9, R"(["a","zz"])");
  auto tok = load_tokenizer_json(json);
  ASSERT_FALSE(tok.ok());
  EXPECT_EQ(tok.error().code, ErrorCode::kInvalidValue);
  EXPECT_EQ(tok.error().param, "model.merges[0]");
}

TEST(BpeTokenizerLoadTest, RejectsAVocabularyWithoutEveryByte) {
  std::string json = TokenizerJson{}.build();
  json.replace(json.find(R"("A":65)"), 6, R"("AA":65)");
  auto tok = load_tokenizer_json(json);
  ASSERT_FALSE(tok.ok());
  EXPECT_EQ(tok.error().code, ErrorCode::kInvalidValue);
  EXPECT_NE(tok.error().message.find("0x41"), std::string::npos) << tok.error().message;
}

TEST(BpeTokenizerLoadTest, RejectsDuplicateAndHugeIds) {
  std::string duplicate = TokenizerJson{}.build();
  duplicate.replace(duplicate.find(R"("A":65)"), 6, R"("A":66)");
  auto dup = load_tokenizer_json(duplicate);
  ASSERT_FALSE(dup.ok());
  EXPECT_EQ(dup.error().code, ErrorCode::kInvalidValue);

  std::string huge = TokenizerJson{}.build();
  huge.replace(huge.find(R"("A":65)"), 6, R"("A":4000000000)");
  auto big = load_tokenizer_json(huge);
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.error().code, ErrorCode::kInvalidValue);
}

// ---------------------------------------------------------------------------------------------
// BPE model

TEST(BpeTokenizerTest, MergesInRankOrder) {
  TokenizerJson spec;
  spec.merges = {{"h", "e"}, {"l", "l"}, {"he", "ll"}, {"hell", "o"}};  // ids 256..259
  const auto tok = load(spec);
  ASSERT_TRUE(tok);
  EXPECT_EQ(encode(*tok, "hello"), (std::vector<TokenId>{259}));
  EXPECT_EQ(encode(*tok, "hellx"), (std::vector<TokenId>{258, 'x'}));
  EXPECT_EQ(encode(*tok, "helo"), (std::vector<TokenId>{256, 'l', 'o'}));
  // " hello" is one pre-token; no merge joins its space to "hello".
  EXPECT_EQ(encode(*tok, "hello hello"), (std::vector<TokenId>{259, ' ', 259}));
}

TEST(BpeTokenizerTest, LowerRankWinsOverLeftmost) {
  TokenizerJson spec;
  spec.merges = {{"b", "c"}, {"a", "b"}};  // "bc" = 256, "ab" = 257
  const auto tok = load(spec);
  ASSERT_TRUE(tok);
  EXPECT_EQ(encode(*tok, "abc"), (std::vector<TokenId>{'a', 256}));
  EXPECT_EQ(encode(*tok, "abd"), (std::vector<TokenId>{257, 'd'}));
}

TEST(BpeTokenizerTest, EqualRanksMergeLeftmostFirst) {
  TokenizerJson spec;
  spec.merges = {{"l", "l"}};
  const auto tok = load(spec);
  ASSERT_TRUE(tok);
  EXPECT_EQ(encode(*tok, "lll"), (std::vector<TokenId>{256, 'l'}));
  EXPECT_EQ(encode(*tok, "llll"), (std::vector<TokenId>{256, 256}));
  // A long word takes the heap path far past any small-word shortcut.
  EXPECT_EQ(encode(*tok, std::string(1001, 'l')).size(), 501u);
}

TEST(BpeTokenizerTest, BothMergeFormatsGiveTheSameIds) {
  TokenizerJson arrays;
  arrays.merges = {{"t", "h"}, {"th", "e"}, {" ", "the"}};
  TokenizerJson strings = arrays;
  strings.array_merges = false;
  const auto a = load(arrays);
  const auto s = load(strings);
  ASSERT_TRUE(a && s);
  for (std::string_view text : {"the", "then the", "xthe", "t h e"}) {
    EXPECT_EQ(encode(*a, text), encode(*s, text)) << text;
  }
  EXPECT_EQ(encode(*a, "the the"), (std::vector<TokenId>{257, 258}));
}

TEST(BpeTokenizerTest, IgnoreMergesEmitsWordsOfTheVocabularyWhole) {
  TokenizerJson spec;
  spec.merges = {{"x", "y"}};   // 256
  spec.extra_tokens = {"xyz"};  // 257: no merge leads to it
  const auto merging = load(spec);
  spec.ignore_merges = true;
  const auto ignoring = load(spec);
  ASSERT_TRUE(merging && ignoring);
  EXPECT_EQ(encode(*merging, "xyz"), (std::vector<TokenId>{256, 'z'}));
  EXPECT_EQ(encode(*ignoring, "xyz"), (std::vector<TokenId>{257}));
  EXPECT_EQ(encode(*ignoring, "xyzw"), (std::vector<TokenId>{256, 'z', 'w'}));
}

// ---------------------------------------------------------------------------------------------
// Added tokens

TokenizerJson with_added_tokens() {
  TokenizerJson spec;
  spec.added_tokens =
      R"([{"id":1000,"content":"<|eot|>","single_word":false,"lstrip":false,"rstrip":false,)"
      R"("normalized":false,"special":true},)"
      R"({"id":1001,"content":"<think>","single_word":false,"lstrip":false,"rstrip":false,)"
      R"("normalized":false,"special":false},)"
      R"({"id":1002,"content":"<a>","single_word":false,"lstrip":false,"rstrip":false,)"
      R"("normalized":false,"special":true},)"
      R"({"id":1003,"content":"<a>b","single_word":false,"lstrip":false,"rstrip":false,)"
      R"("normalized":false,"special":true},)"
      R"({"id":1004,"content":"<L>","single_word":false,"lstrip":true,"rstrip":false,)"
      R"("normalized":false,"special":true},)"
      R"({"id":1005,"content":"<R>","single_word":false,"lstrip":false,"rstrip":true,)"
      R"("normalized":false,"special":true}])";
  return spec;
}

TEST(BpeTokenizerTest, MatchesAddedTokensLongestFirst) {
  const auto tok = load(with_added_tokens());
  ASSERT_TRUE(tok);
  EXPECT_EQ(encode(*tok, "x<|eot|>y"), (std::vector<TokenId>{'x', 1000, 'y'}));
  EXPECT_EQ(encode(*tok, "<a>bc"), (std::vector<TokenId>{1003, 'c'}));
  EXPECT_EQ(encode(*tok, "<a>c"), (std::vector<TokenId>{1002, 'c'}));
  EXPECT_EQ(encode(*tok, "<|eot|><|eot|>"), (std::vector<TokenId>{1000, 1000}));
  EXPECT_EQ(tok->special_token("<|eot|>"), 1000u);
  EXPECT_EQ(tok->special_token("<think>"), 1001u);
  EXPECT_EQ(tok->special_token("<|nope|>"), std::nullopt);
  EXPECT_EQ(tok->vocab_size(), 1006u);
}

TEST(BpeTokenizerTest, WithoutParseSpecialOnlyNonSpecialAddedTokensMatch) {
  const auto tok = load(with_added_tokens());
  ASSERT_TRUE(tok);
  const auto ids = encode(*tok, "<|eot|><think>", /*parse_special=*/false);
  std::vector<TokenId> expected = {'<', '|', 'e', 'o', 't', '|', '>', 1001};
  EXPECT_EQ(ids, expected);
}

TEST(BpeTokenizerTest, LstripAndRstripTakeTheAdjacentWhitespace) {
  const auto tok = load(with_added_tokens());
  ASSERT_TRUE(tok);
  std::vector<std::size_t> offsets;
  EXPECT_EQ(encode(*tok, "a \t<L> b", true, &offsets), (std::vector<TokenId>{'a', 1004, ' ', 'b'}));
  EXPECT_EQ(offsets, (std::vector<std::size_t>{0, 1, 6, 7}));
  EXPECT_EQ(encode(*tok, "a <R> \n b"), (std::vector<TokenId>{'a', ' ', 1005, 'b'}));
  // lstrip does not reach back into the previous added token.
  EXPECT_EQ(encode(*tok, "<R> <L>"), (std::vector<TokenId>{1005, 1004}));
}

// ---------------------------------------------------------------------------------------------
// Offsets, decode, NFC

TEST(BpeTokenizerTest, OffsetsPointAtEachTokensBytes) {
  TokenizerJson spec = with_added_tokens();
  spec.merges = {{"h", "e"}, {"l", "l"}, {"he", "ll"}, {"hell", "o"}, {" ", "hello"}};
  const auto tok = load(spec);
  ASSERT_TRUE(tok);
  std::vector<std::size_t> offsets;
  const auto ids = encode(*tok, "hello hello<|eot|>\xc3\xa9!", true, &offsets);
  EXPECT_EQ(ids, (std::vector<TokenId>{259, 260, 1000, 0xC3, 0xA9, '!'}));
  EXPECT_EQ(offsets, (std::vector<std::size_t>{0, 5, 11, 18, 19, 20}));
}

TEST(BpeTokenizerTest, DecodeInvertsEncodeForAnyBytes) {
  TokenizerJson spec = with_added_tokens();
  spec.merges = {{"a", "b"}, {"ab", "c"}, {" ", "a"}, {"\xe4", "\xb8"}};
  const auto tok = load(spec);
  ASSERT_TRUE(tok);
  const std::vector<std::string> fragments = {"a",    "b",    "c",    " ",        "  ",
                                              "\n",   "\t",   "1",    "'s",       "\xe4",
                                              "\xb8", "\xad", "\xff", "<|eot|>",  "<think>",
                                              "<a>",  "<L>",  "<R>",  "\xcc\x81", "\xe3\x80\x80"};
  std::mt19937 rng(3);
  for (int round = 0; round < 1000; ++round) {
    std::string text;
    const int pieces = static_cast<int>(rng() % 30);
    for (int i = 0; i < pieces; ++i) text += fragments[rng() % fragments.size()];
    std::vector<std::size_t> offsets;
    const auto ids = encode(*tok, text, rng() % 2 == 0, &offsets);
    ASSERT_EQ(offsets.size(), ids.size());
    std::string decoded;
    for (std::size_t i = 0; i < ids.size(); ++i) {
      const std::string piece = tok->decode(std::span(&ids[i], 1));
      // Whitespace taken by lstrip/rstrip is not given back; everything else is, in place.
      if (piece != "<L>" && piece != "<R>") {
        EXPECT_EQ(text.substr(offsets[i], piece.size()), piece) << "token " << i;
      }
      decoded += piece;
    }
    EXPECT_EQ(tok->decode(ids), decoded);
    if (text.find("<L>") == std::string::npos && text.find("<R>") == std::string::npos) {
      EXPECT_EQ(decoded, text);
    }
  }
}

TEST(BpeTokenizerTest, UnknownIdsDecodeToNothing) {
  const auto tok = load(with_added_tokens());
  ASSERT_TRUE(tok);
  const std::vector<TokenId> ids = {'o', 999, 'k', 5000000, 1000};
  EXPECT_EQ(tok->decode(ids), "ok<|eot|>");
}

TEST(BpeTokenizerTest, NfcNormalizesBeforeSplitting) {
  TokenizerJson spec;
  spec.normalizer = R"({"type":"NFC"})";
  spec.merges = {{"\xc3", "\xa9"}};  // "é" = 256
  const auto tok = load(spec);
  ASSERT_TRUE(tok);
  EXPECT_NE(tok->name().find("NFC"), std::string_view::npos) << tok->name();
  std::vector<std::size_t> offsets;
  // "xe\u0301 y": NFC rewrote "e\u0301" (input bytes 1..4) into "é", whose token starts
  // where that input starts.
  EXPECT_EQ(encode(*tok, "xe\xcc\x81 y", true, &offsets),
            (std::vector<TokenId>{'x', 256, ' ', 'y'}));
  EXPECT_EQ(offsets, (std::vector<std::size_t>{0, 1, 4, 5}));
  EXPECT_EQ(encode(*tok, "\xc3\xa9"), encode(*tok, "e\xcc\x81"));
  // U+212B ANGSTROM SIGN is U+00C5 in NFC.
  EXPECT_EQ(encode(*tok, "\xe2\x84\xab"), (std::vector<TokenId>{0xC3, 0x85}));
  // Without a normalizer nothing changes.
  const auto plain = load(TokenizerJson{});
  ASSERT_TRUE(plain);
  EXPECT_EQ(encode(*plain, "e\xcc\x81"), (std::vector<TokenId>{'e', 0xCC, 0x81}));
}

// The chunked NFC against utf8proc's NFC of the whole text, on text dense with the cases that
// interact across code points: combining marks out of order, compositions, Hangul jamo,
// singletons, starters that compose (U+0B47 U+0B3E).
TEST(BpeTokenizerTest, ChunkedNfcEqualsWholeTextNfc) {
  const std::vector<std::string> alphabet = {"a",
                                             "e",
                                             "A",
                                             " ",
                                             "\n",
                                             "\xcc\x81",
                                             "\xcc\x80",
                                             "\xcc\xa3",
                                             "\xcc\xa7",
                                             "\xcd\x85",
                                             "\xc3\xa9",
                                             "\xe1\xba\xb9",
                                             "\xe1\x84\x80",
                                             "\xe1\x85\xa1",
                                             "\xe1\x86\xa8",
                                             "\xea\xb0\x80",
                                             "\xe2\x84\xab",
                                             "\xcd\xbe",
                                             "\xe0\xad\x87",
                                             "\xe0\xac\xbe",
                                             "\xe0\xa4\x95",
                                             "\xe0\xa4\xbc",
                                             "\xef\xa4\x80",
                                             "\xe4\xb8\xad",
                                             "\xf0\x9f\x98\x80",
                                             "\xe3\x81\x8b",
                                             "\xe3\x82\x99",
                                             "\xff"};
  const internal::NfcNormalizer nfc;
  internal::NfcResult result;
  std::mt19937 rng(11);
  for (int round = 0; round < 3000; ++round) {
    std::string text;
    bool valid = true;
    const int length = static_cast<int>(rng() % 16);
    for (int i = 0; i < length; ++i) {
      const std::string& piece = alphabet[rng() % alphabet.size()];
      valid &= piece != "\xff";
      text += piece;
    }
    const bool changed = nfc.normalize(text, result);
    const std::string ours = changed ? result.text : text;
    if (!valid) {
      continue;  // utf8proc refuses malformed text; it is enough that we did not crash
    }
    utf8proc_uint8_t* whole = nullptr;
    const auto n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
                                static_cast<utf8proc_ssize_t>(text.size()), &whole,
                                static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
    ASSERT_GE(n, 0);
    const std::string expected(reinterpret_cast<const char*>(whole), static_cast<std::size_t>(n));
    std::free(whole);
    EXPECT_EQ(ours, expected);
    EXPECT_EQ(changed, expected != text);
    // The reported changes, with the text between them, rebuild the output from the input.
    std::string rebuilt;
    std::size_t copied = 0;
    for (const auto& c : result.changes) {
      rebuilt += text.substr(copied, c.input_begin - copied);
      rebuilt += result.text.substr(c.normalized_begin, c.normalized_end - c.normalized_begin);
      copied = c.input_end;
    }
    if (changed) {
      rebuilt += text.substr(copied);
      EXPECT_EQ(rebuilt, result.text);
    }
  }
}

// A long run of combining marks in reverse canonical order, as a client could send: the marks
// are sorted by combining class, and in n log n (utf8proc's own reordering is quadratic, and
// this run would take it over a minute).
TEST(BpeTokenizerTest, LongRunsOfCombiningMarksAreReorderedStably) {
  const std::string grave = "\xcc\x80";      // U+0300, class 230
  const std::string grave_low = "\xcc\x96";  // U+0316, class 220
  std::string text = "x";
  for (int i = 0; i < 100000; ++i) text += grave + grave_low;
  std::string expected = "x";
  for (int i = 0; i < 100000; ++i) expected += grave_low;
  for (int i = 0; i < 100000; ++i) expected += grave;
  const internal::NfcNormalizer nfc;
  internal::NfcResult result;
  ASSERT_TRUE(nfc.normalize(text, result));
  EXPECT_TRUE(result.text == expected);
}

TEST(BpeTokenizerTest, NamesItsPreTokenizerAndSize) {
  const auto tok = load(TokenizerJson{});
  ASSERT_TRUE(tok);
  EXPECT_NE(tok->name().find("Split(llama3"), std::string_view::npos) << tok->name();
  EXPECT_NE(tok->name().find("byte-level"), std::string_view::npos) << tok->name();
  EXPECT_EQ(tok->vocab_size(), 256u);
  TokenizerJson gpt2;
  gpt2.pre_tokenizer = R"({"type":"ByteLevel","add_prefix_space":false,"use_regex":true})";
  const auto g = load(gpt2);
  ASSERT_TRUE(g);
  EXPECT_NE(g->name().find("pre-tokenizer ByteLevel"), std::string_view::npos) << g->name();
}

}  // namespace
}  // namespace prefixgate::canon
