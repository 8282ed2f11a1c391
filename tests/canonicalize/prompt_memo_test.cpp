// PromptMemo gives exactly what encoding and hashing each prompt afresh gives (its tokens, its
// stretches, block_hashes() of the tokens) whatever prompts it has seen: conversations that grow
// by turns, prompts cut short or changed anywhere (right after an added token, or so that an
// added token straddles where the remembered text ends: "<|im_" then "start|>"), retries, other
// roots and block sizes, tokenizers in turns, more prompts than it has places; with the byte
// tokenizer, real tokenizer.json files, and added tokens that strip whitespace or match whole
// words only (the real files skip without tests/js/node_modules). And it encodes only what
// follows the shared part of a growing conversation.
#include "prefixgate/canonicalize/prompt_memo.h"

#include <gtest/gtest.h>

#include <random>
#include <span>
#include <string>

#include "prefixgate/canonicalize/block_hash.h"
#include "prefixgate/canonicalize/json.h"
#include "prefixgate/canonicalize/render.h"
#include "random_tokenizer_text.h"

namespace prefixgate::canon {
namespace prompt_memo_test {

struct Fresh {
  std::vector<TokenId> tokens;
  std::vector<EncodedStretch> stretches;
};

Fresh encode_afresh(const Tokenizer& tok, std::string_view text) {
  Fresh f;
  tok.encode(text, f.tokens, {.parse_special = true, .stretches = &f.stretches});
  return f;
}

bool same_stretches(const std::vector<EncodedStretch>& a, const std::vector<EncodedStretch>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a[i].byte_begin != b[i].byte_begin || a[i].byte_end != b[i].byte_end ||
        a[i].token_begin != b[i].token_begin || a[i].token_end != b[i].token_end ||
        a[i].added_token != b[i].added_token) {
      return false;
    }
  }
  return true;
}

// Analyzes `text` through the memo and checks it against a fresh encoding; returns the reuse.
// With TokenIds::kCount the ids may be left out, and their number must be right.
PromptMemo::Reuse check(PromptMemo& memo, const Tokenizer& tok, std::string_view text,
                        std::size_t block_size, std::uint64_t root, SegmentCache* cache = nullptr,
                        TokenIds ids = TokenIds::kKeep, std::span<const Segment> segments = {}) {
  TokenizedPrompt out;
  out.counted = 12345;  // what an earlier analysis left: it must not show through
  std::vector<std::uint64_t> hashes;
  const PromptMemo::Reuse reuse =
      memo.analyze(text, tok, cache, block_size, root, out, hashes, ids, segments);
  const Fresh fresh = encode_afresh(tok, text);
  EXPECT_EQ(out.size(), fresh.tokens.size()) << text;
  if (ids == TokenIds::kKeep || !out.tokens.empty()) {
    EXPECT_EQ(out.tokens, fresh.tokens) << text;
  }
  EXPECT_TRUE(same_stretches(out.stretches, fresh.stretches)) << text;
  EXPECT_TRUE(out.byte_offsets.empty());
  EXPECT_EQ(hashes, block_hashes(fresh.tokens, block_size, root)) << text;
  EXPECT_LE(reuse.tokens, fresh.tokens.size());
  return reuse;
}

// Texts that grow by turns, share only a start, are cut short, changed in the middle, have a
// piece put in anywhere, or are sent again, built from pieces that include the tokenizers'
// added tokens and halves of them; analyzed with tokenizers, roots and block sizes in turns.
std::size_t check_texts(const std::vector<const Tokenizer*>& toks,
                        const std::vector<std::string>& specials, std::uint32_t seed,
                        SegmentCache* cache = nullptr) {
  PromptMemo memo;
  std::mt19937 rng(seed);
  const std::array<std::uint64_t, 2> roots = {block_hash_root("m"), block_hash_root("m", "salt")};
  std::vector<std::string> pieces = test_text::kPieces;
  for (const std::string& sp : specials) {
    pieces.push_back(sp);
    pieces.push_back(sp.substr(0, sp.size() / 2));  // half an added token, and the other half
    pieces.push_back(sp.substr(sp.size() / 2));
  }
  const auto random_text = [&](std::size_t n) {
    std::string out;
    for (std::size_t i = 0; i < n; ++i) out += pieces[rng() % pieces.size()];
    return out;
  };
  std::vector<std::string> starts;
  for (int i = 0; i < 3; ++i) starts.push_back(random_text(30 + 10 * i));
  std::vector<std::string> texts;
  std::size_t reused_total = 0;
  for (int step = 0; step < 400; ++step) {
    std::string t;
    const std::string* earlier = texts.empty() ? nullptr : &texts[rng() % texts.size()];
    switch (rng() % 7) {
      case 0: t = starts[rng() % starts.size()]; break;
      case 1:  // cut short
        if (earlier != nullptr) {
          t = *earlier;
          t.resize(rng() % (t.size() + 1));
        }
        break;
      case 2:  // changed in the middle
        if (earlier != nullptr) {
          t = *earlier;
          if (!t.empty()) t[rng() % t.size()] = 'Z';
        }
        break;
      case 3:  // a piece put in anywhere
        if (earlier != nullptr) {
          t = *earlier;
          t.insert(rng() % (t.size() + 1), pieces[rng() % pieces.size()]);
        }
        break;
      case 4:  // sent again
        if (earlier != nullptr) t = *earlier;
        break;
      default:  // one turn longer
        if (earlier != nullptr) t = *earlier;
        t += random_text(rng() % 12);
        break;
    }
    const Tokenizer& tok = *toks[rng() % toks.size()];
    const std::size_t block_size = rng() % 4 == 0 ? 4 : 16;
    // Both ways of handing the tokens back, in turns on one memo.
    const TokenIds ids = rng() % 2 == 0 ? TokenIds::kKeep : TokenIds::kCount;
    reused_total += check(memo, tok, t, block_size, roots[rng() % 3 == 0], cache, ids).tokens;
    if (::testing::Test::HasFailure()) {
      ADD_FAILURE() << "step " << step;
      return reused_total;
    }
    texts.push_back(std::move(t));
    if (texts.size() > 30) texts.erase(texts.begin());
  }
  return reused_total;
}

std::unique_ptr<Tokenizer> load_family(const std::string& family) {
  const auto json_text = test_text::read_file(test_text::tokenizer_path(family));
  if (!json_text) return nullptr;
  auto tok = load_tokenizer_json(*json_text);
  EXPECT_TRUE(tok) << tok.error().message;
  return tok ? std::move(*tok) : nullptr;
}

TEST(PromptMemoTest, EqualsAFreshEncodingWithTheByteTokenizer) {
  const auto tok = make_byte_tokenizer();
  const std::vector<std::string> specials(byte_tokenizer_specials().begin(),
                                          byte_tokenizer_specials().end());
  EXPECT_GT(check_texts({tok.get()}, specials, 3), 0u) << "the memo never reused a token";
  SegmentCache cache;
  EXPECT_GT(check_texts({tok.get()}, specials, 4, &cache), 0u);
}

TEST(PromptMemoTest, EqualsAFreshEncodingWithRealTokenizersAndNeverAcrossThem) {
  const auto llama = load_family("llama3_1");
  const auto qwen = load_family("qwen3");
  if (!llama || !qwen) GTEST_SKIP() << "tokenizer.json missing: run scripts/install-js-deps.sh";
  const auto bytes = make_byte_tokenizer();
  const std::vector<std::string> specials = {"<|begin_of_text|>",
                                             "<|start_header_id|>",
                                             "<|end_header_id|>",
                                             "<|eot_id|>",
                                             "<|im_start|>",
                                             "<|im_end|>",
                                             "<think>"};
  EXPECT_GT(check_texts({llama.get()}, specials, 5), 0u);
  SegmentCache cache;
  EXPECT_GT(check_texts({qwen.get()}, specials, 6, &cache), 0u);
  // The same texts' tokens differ between tokenizers and must never be shared.
  EXPECT_GT(check_texts({llama.get(), qwen.get(), bytes.get()}, specials, 7, &cache), 0u);
}

// Llama 2's tokenizer.json (SentencePiece-style) with more added tokens: ones that take the
// whitespace before or after them, one that matches only as a whole word, ones where one is
// another's prefix, one that starts with whitespace (found inside the whitespace an rstrip token
// takes); and, with `metaspace_first`, the Metaspace pre-tokenizer that puts "▁" only
// before the text's first stretch, so that where a stretch starts matters.
std::unique_ptr<Tokenizer> llama2_with_stripping_tokens(bool metaspace_first) {
  const auto json_text = test_text::read_file(test_text::tokenizer_path("llama2"));
  if (!json_text) return nullptr;
  auto doc = json::parse(*json_text);
  EXPECT_TRUE(doc) << doc.error().message;
  if (!doc) return nullptr;
  json::Array& added = doc->find("added_tokens")->as_array();
  const std::vector<std::tuple<std::string, bool, bool, bool>> extra = {
      // content, lstrip, rstrip, single_word
      {"<L>", true, false, false},       {"<R>", false, true, false},
      {"<LR>", true, true, false},       {"xy", false, false, true},
      {"<|a|>", false, false, false},    {"<|a|>b", false, false, false},
      {"<|a|>bcd", false, false, false}, {"\n<W>", false, false, false}};
  int id = 40000;
  for (const auto& [content, lstrip, rstrip, single_word] : extra) {
    added.push_back(json::Object{{"id", id++},
                                 {"content", content},
                                 {"single_word", single_word},
                                 {"lstrip", lstrip},
                                 {"rstrip", rstrip},
                                 {"normalized", false},
                                 {"special", true}});
  }
  if (metaspace_first) {
    doc->set("normalizer", json::Null{});
    doc->set("pre_tokenizer", json::Object{{"type", "Metaspace"},
                                           {"replacement", "\xE2\x96\x81"},
                                           {"prepend_scheme", "first"},
                                           {"split", false}});
  }
  auto tok = load_tokenizer_json(json::to_json(*doc));
  EXPECT_TRUE(tok) << tok.error().message;
  return tok ? std::move(*tok) : nullptr;
}

TEST(PromptMemoTest, EqualsAFreshEncodingWithAddedTokensThatStripSpaceOrMatchWholeWords) {
  const auto legacy = llama2_with_stripping_tokens(false);
  const auto first = llama2_with_stripping_tokens(true);
  if (!legacy || !first) GTEST_SKIP() << "tokenizer.json missing: run scripts/install-js-deps.sh";
  // With a word character after "xy" or an ideographic space (the same first byte), and
  // "<|a|>bcd" after "<|a|>b": what decides a token lies several bytes past where it ends.
  const std::vector<std::string> specials = {
      "<L>",      "<R>",   " <LR> ", "xy",   " xy ",         "axy",          "<|a|>", "<|a|>b",
      "<|a|>bcd", "\n<W>", "<s>",    "</s>", "\xE3\x80\x80", "\xE3\x81\x82", "   "};
  EXPECT_GT(check_texts({legacy.get()}, specials, 8), 0u);
  EXPECT_GT(check_texts({first.get()}, specials, 9), 0u);
}

// Prompts that share a prompt's bytes up to a few past one of its added tokens and then differ
// where that decides the token: a longer added token ("<|a|>bcd", not "<|a|>b" and "c"), a word
// character after a single_word token (U+3042 shares its first byte with the ideographic space
// U+3000), or, after an rstrip token, a token that starts in the whitespace it took. Each is
// encoded as a fresh encoding would, not resumed after the undecided token.
TEST(PromptMemoTest, DecidesEachAddedTokenFromTheBytesPastIt) {
  const auto tok = llama2_with_stripping_tokens(false);
  if (!tok) GTEST_SKIP() << "tokenizer.json missing: run scripts/install-js-deps.sh";
  const std::uint64_t root = block_hash_root("m");
  const std::vector<std::pair<std::string, std::string>> pairs = {
      {"Hello there <|a|>bcX and more", "Hello there <|a|>bcd and more"},
      {"Hello there xy\xE3\x80\x80 and more", "Hello there xy\xE3\x81\x82 and more"}};
  for (const auto& [before, after] : pairs) {
    PromptMemo memo;
    check(memo, *tok, before, 4, root);
    check(memo, *tok, after, 4, root);
  }
  for (std::size_t shared = 0; shared < 24; ++shared) {
    PromptMemo memo;
    const std::string start = "Hello there <R>\n<W>" + std::string(shared, '1');
    check(memo, *tok, start + "X and more", 4, root);
    check(memo, *tok, start + "Y and more", 4, root);
  }
}

// A Llama 3 conversation as the built-in template renders it, one user turn and one reply
// longer each time.
std::string conversation(int turns) {
  std::string text = "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n" +
                     std::string(2000, 's') + "<|eot_id|>";
  for (int t = 0; t < turns; ++t) {
    text += "<|start_header_id|>user<|end_header_id|>\n\nquestion " + std::to_string(t) +
            std::string(300, 'q') + "<|eot_id|>";
    if (t + 1 < turns) {
      text += "<|start_header_id|>assistant<|end_header_id|>\n\nanswer " + std::to_string(t) +
              std::string(500, 'a') + "<|eot_id|>";
    }
  }
  return text + "<|start_header_id|>assistant<|end_header_id|>\n\n";
}

void check_growing_conversation(TokenIds ids) {
  const auto tok = make_byte_tokenizer();
  PromptMemo memo;
  const std::uint64_t root = block_hash_root("m");
  EXPECT_EQ(check(memo, *tok, conversation(1), 16, root, nullptr, ids).tokens, 0u);
  for (int turns = 2; turns <= 8; ++turns) {
    const std::string before = conversation(turns - 1);
    const std::string text = conversation(turns);
    const PromptMemo::Reuse reuse = check(memo, *tok, text, 16, root, nullptr, ids);
    // Everything up to the earlier prompt's last <|start_header_id|> is taken as it was: what
    // is encoded again is "assistant<|end_header_id|>\n\n" and the new turn.
    const std::size_t last_header = before.rfind("<|start_header_id|>");
    std::size_t header_end = 0;
    for (const EncodedStretch& s : encode_afresh(*tok, before).stretches) {
      if (s.byte_begin == last_header) header_end = s.token_end;
    }
    ASSERT_GT(header_end, 0u);
    EXPECT_EQ(reuse.tokens, header_end) << turns;
    EXPECT_GE(reuse.blocks, header_end / 16) << turns;
  }
  // Sent again: nothing is encoded or hashed.
  const std::string text = conversation(8);
  const Fresh fresh = encode_afresh(*tok, text);
  const PromptMemo::Reuse again = check(memo, *tok, text, 16, root, nullptr, ids);
  EXPECT_EQ(again.tokens, fresh.tokens.size());
  EXPECT_EQ(again.blocks, fresh.tokens.size() / 16);
  // Under another root (another cache_salt) the tokens are still shared, the hashes are not.
  const PromptMemo::Reuse salted =
      check(memo, *tok, text, 16, block_hash_root("m", "tenant"), nullptr, ids);
  EXPECT_EQ(salted.tokens, fresh.tokens.size());
  EXPECT_EQ(salted.blocks, 0u);
}

TEST(PromptMemoTest, AGrowingConversationEncodesOnlyWhatFollowsItsSharedPart) {
  for (const TokenIds ids : {TokenIds::kKeep, TokenIds::kCount}) {
    SCOPED_TRACE(ids == TokenIds::kKeep ? "ids kept" : "ids counted");
    check_growing_conversation(ids);
  }
}

void check_conversations_in_turns(TokenIds ids) {
  const auto tok = make_byte_tokenizer();
  PromptMemo memo;
  const std::uint64_t root = block_hash_root("m");
  const auto chat = [](std::size_t c, int turns) {
    return "<|im_start|>system\nconversation " + std::to_string(c) + "<|im_end|>" +
           conversation(turns);
  };
  for (std::size_t c = 0; c < PromptMemo::kEntries; ++c)
    check(memo, *tok, chat(c, 1), 16, root, nullptr, ids);
  // Each of kEntries conversations, a turn longer, finds its own earlier prompt.
  for (std::size_t c = 0; c < PromptMemo::kEntries; ++c) {
    EXPECT_GT(check(memo, *tok, chat(c, 2), 16, root, nullptr, ids).tokens, 2000u) << c;
  }
  // One more conversation takes the least recently used place: conversation 0's.
  check(memo, *tok, chat(PromptMemo::kEntries, 1), 16, root, nullptr, ids);
  EXPECT_GT(check(memo, *tok, chat(1, 3), 16, root, nullptr, ids).tokens, 2000u);
  EXPECT_LT(check(memo, *tok, chat(0, 3), 16, root, nullptr, ids).tokens, 100u);
}

TEST(PromptMemoTest, ConversationsInTurnsKeepTheirPlacesUpToItsSize) {
  for (const TokenIds ids : {TokenIds::kKeep, TokenIds::kCount}) {
    SCOPED_TRACE(ids == TokenIds::kKeep ? "ids kept" : "ids counted");
    check_conversations_in_turns(ids);
  }
}

void check_prompt_over_bound(TokenIds ids) {
  const auto tok = make_byte_tokenizer();
  PromptMemo memo;
  const std::uint64_t root = block_hash_root("m");
  // A byte a token: 1 MiB of text is 5 MiB with its tokens, over the 4 MiB a place holds.
  const std::string big = "<|im_start|>user\n" + std::string(std::size_t{1} << 20, 'b');
  EXPECT_EQ(check(memo, *tok, big, 16, root, nullptr, ids).tokens, 0u);
  EXPECT_EQ(check(memo, *tok, big, 16, root, nullptr, ids).tokens, 0u);
  const std::string small = big.substr(0, 100000);
  EXPECT_EQ(check(memo, *tok, small, 16, root, nullptr, ids).tokens, 0u);
  EXPECT_EQ(check(memo, *tok, small, 16, root, nullptr, ids).tokens,
            encode_afresh(*tok, small).tokens.size());
}

TEST(PromptMemoTest, APromptOverItsBoundIsNotKept) {
  for (const TokenIds ids : {TokenIds::kKeep, TokenIds::kCount}) {
    SCOPED_TRACE(ids == TokenIds::kKeep ? "ids kept" : "ids counted");
    check_prompt_over_bound(ids);
  }
}

// A conversation's messages as the gateway's parser hands them on (MessageMemo): a turn sent
// again is the same text, at the same address; a turn sent anew is another text, even with the
// same bytes. Rendered, its segments tell the memo which bytes were copied from where, and the
// memo must give what comparing the bytes gives, whatever changes: a turn replaced by another
// of the same length (the same place, other bytes), a turn's role changed to one of the same
// length (the same text after other markup), a turn's bytes copied anew, turns dropped or added.
void check_copied_spans(TokenIds ids, ChatTemplate tmpl, std::uint32_t seed) {
  const auto tok = make_byte_tokenizer();
  PromptMemo memo;
  std::mt19937 rng(seed);
  const std::uint64_t root = block_hash_root("m");
  const auto random_text = [&](std::size_t bytes) {
    std::string out;
    while (out.size() < bytes) out += static_cast<char>('a' + rng() % 3);
    return out;
  };
  struct Turn {
    Role role;
    SharedText text;
  };
  std::vector<Turn> turns;
  std::vector<std::pair<std::size_t, Turn>> replaced;  // turns before a change, and where
  std::size_t reused = 0;
  for (int step = 0; step < 300; ++step) {
    const std::size_t at = turns.empty() ? 0 : rng() % turns.size();
    switch (rng() % 8) {
      case 0:  // the same length, other bytes
        if (!turns.empty()) {
          replaced.emplace_back(at, turns[at]);
          turns[at].text = random_text(turns[at].text.size());
        }
        break;
      case 7:  // back to a text it had (a retry of an earlier version), where it was
        if (!replaced.empty()) {
          const auto& [where, turn] = replaced[rng() % replaced.size()];
          if (where < turns.size()) turns[where] = turn;
        }
        break;
      case 1:  // "user" <-> "tool": markup of the same length, other bytes
        if (!turns.empty()) {
          turns[at].role = turns[at].role == Role::kUser ? Role::kTool : Role::kUser;
        }
        break;
      case 2:  // the same bytes in another text
        if (!turns.empty()) turns[at].text = std::string(turns[at].text.view());
        break;
      case 3:  // turns dropped
        turns.resize(at);
        break;
      default:  // a turn added
        turns.push_back(
            {rng() % 2 == 0 ? Role::kUser : Role::kAssistant, random_text(1 + rng() % 40)});
        break;
    }
    ParsedRequest req;
    for (std::size_t i = 0; i < turns.size(); ++i) {
      Message m;
      m.role = turns[i].role;
      m.parts.push_back(ContentPart{.type = "text", .text = turns[i].text, .value = {}});
      m.content_is_string = true;
      m.index = i;
      req.messages.push_back(std::move(m));
    }
    const RenderedPrompt prompt = render_prompt(req, tmpl);
    reused += check(memo, *tok, prompt.text, 4, root, nullptr, ids, prompt.segments).tokens;
  }
  EXPECT_GT(reused, 0u);
}

TEST(PromptMemoTest, BytesCopiedFromTheSameTextAreTheSameAndOthersAreCompared) {
  for (const TokenIds ids : {TokenIds::kKeep, TokenIds::kCount}) {
    for (const ChatTemplate tmpl : {ChatTemplate::kChatml, ChatTemplate::kLlama3}) {
      for (std::uint32_t seed = 1; seed <= 4; ++seed) {
        SCOPED_TRACE(std::string(chat_template_name(tmpl)) + " seed " + std::to_string(seed) +
                     (ids == TokenIds::kKeep ? " ids kept" : " ids counted"));
        check_copied_spans(ids, tmpl, seed);
      }
    }
  }
}

}  // namespace prompt_memo_test
}  // namespace prefixgate::canon
