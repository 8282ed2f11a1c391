// lint_prompt looks up the volatile-content scans that the thread's PromptMemo keeps with a
// prompt's text (scanned_ranges.h): the findings must be exactly those of a fresh scan, turn after
// turn, when earlier turns change (same length or not), and for a prompt the memo no longer holds
// last; and the earlier turns of a growing conversation must be looked up, not scanned again.
#include "scanned_ranges.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <thread>
#include <vector>

#include "prefixgate/canonicalize/lint.h"
#include "prefixgate/canonicalize/request.h"

namespace prefixgate::canon {
namespace {

struct ScannedRangesFixture {
  std::unique_ptr<Tokenizer> tokenizer = make_byte_tokenizer();
  PromptModel model = [this] {
    PromptModel m{ChatTemplate::kLlama3, tokenizer.get(), 16, "builtin:tiny"};
    m.remember_block_hashes = true;  // through the thread's PromptMemo, as the gateway analyzes
    return m;
  }();

  // The conversation's prompt, analyzed as the gateway does (offsets on demand, ids counted).
  AnalyzedPrompt analyze(const std::vector<std::string>& contents) {
    std::string body = R"({"model":"m","messages":[)";
    for (std::size_t i = 0; i < contents.size(); ++i) {
      const char* role = i == 0 ? "system" : (i % 2 == 1 ? "user" : "assistant");
      if (i > 0) body += ',';
      body += std::string(R"({"role":")") + role + R"(","content":")" + contents[i] + R"("})";
    }
    body += "]}";
    auto req = parse_request(body, Endpoint::kChatCompletions);
    EXPECT_TRUE(req) << req.error().message;
    AnalyzedPrompt out;
    if (req) {
      EXPECT_TRUE(
          analyze_prompt_into(*req, model, out, {}, ByteOffsets::kOnDemand, TokenIds::kCount));
    }
    return out;
  }
};

// lint_prompt of `prompt` against the same prompt's lint without the kept scans.
void expect_same_as_fresh(const AnalyzedPrompt& prompt, const LintOptions& options,
                          const std::string& where) {
  const PromptLint kept = lint_prompt(prompt, options);
  AnalyzedPrompt fresh_prompt = prompt;
  fresh_prompt.memo_generation = 0;
  ASSERT_EQ(internal::scanned_ranges_of(fresh_prompt), nullptr);
  const PromptLint fresh = lint_prompt(fresh_prompt, options);
  ASSERT_EQ(kept.findings.size(), fresh.findings.size()) << where;
  for (std::size_t i = 0; i < kept.findings.size(); ++i) {
    const Finding& a = kept.findings[i];
    const Finding& b = fresh.findings[i];
    EXPECT_EQ(a.rule, b.rule) << where << " finding " << i;
    EXPECT_EQ(a.severity, b.severity) << where << " finding " << i;
    EXPECT_EQ(a.kind, b.kind) << where << " finding " << i;
    EXPECT_EQ(a.prompt_begin, b.prompt_begin) << where << " finding " << i;
    EXPECT_EQ(a.prompt_end, b.prompt_end) << where << " finding " << i;
    EXPECT_EQ(a.token_offset, b.token_offset) << where << " finding " << i;
    EXPECT_EQ(a.field, b.field) << where << " finding " << i;
    EXPECT_EQ(a.excerpt, b.excerpt) << where << " finding " << i;
    EXPECT_EQ(a.in_volatile_tail, b.in_volatile_tail) << where << " finding " << i;
    EXPECT_EQ(a.message, b.message) << where << " finding " << i;
    EXPECT_EQ(a.hint, b.hint) << where << " finding " << i;
  }
  EXPECT_EQ(kept.stable_prefix_tokens, fresh.stable_prefix_tokens) << where;
}

TEST(ScannedRangesTest, TheNextTurnScansOnlyItsNewMessages) {
  ScannedRangesFixture fx;
  std::vector<std::string> contents = {"You help. Build 2026-12-01T08:00:00Z.",
                                       "First question, asked 2026-12-05 10:00."};
  AnalyzedPrompt prompt = fx.analyze(contents);
  expect_same_as_fresh(prompt, {}, "turn 1");
  for (int turn = 2; turn <= 6; ++turn) {
    contents.push_back("An answer that quotes trace 0f8fad5b-d9cb-469f-a165-70867728950e.");
    contents.push_back("Question " + std::to_string(turn) + ", sent at 2026-12-05 1" +
                       std::to_string(turn) + ":00.");
    prompt = fx.analyze(contents);
    const internal::ScannedRangeCounts before = internal::scanned_range_counts();
    const PromptLint lint = lint_prompt(prompt, {});
    const internal::ScannedRangeCounts& after = internal::scanned_range_counts();
    // Only the two new messages are scanned; every earlier one is the previous turn's range.
    EXPECT_EQ(after.scanned - before.scanned, 2u) << "turn " << turn;
    EXPECT_EQ(after.looked_up - before.looked_up, contents.size() - 2) << "turn " << turn;
    EXPECT_GE(lint.findings.size(), contents.size()) << "each message holds a date or an id";
    expect_same_as_fresh(prompt, {}, "turn " + std::to_string(turn));
  }
}

TEST(ScannedRangesTest, FindingsEqualAFreshScanWhenTurnsGrowChangeOrRestart) {
  ScannedRangesFixture fx;
  std::mt19937 rng(7);
  // Pieces of equal length, with and without something volatile in them: a piece swapped for
  // another leaves every segment where it was, so a range kept from before the change would
  // still be found by its offsets if it were not dropped.
  const std::vector<std::string> pieces = {"on 2026-12-03 ", "on the third! ", "id 01HZY3K5QW ",
                                           "id 0123456789 ", "at 10:45:00Z. ", "at ten to 11. ",
                                           "plain words.. ", "more plain... "};
  const auto content = [&] {
    std::string out;
    const std::size_t n = 1 + rng() % 6;
    for (std::size_t i = 0; i < n; ++i) out += pieces[rng() % pieces.size()];
    return out;
  };
  std::vector<std::vector<std::string>> seen;
  std::vector<std::string> contents = {content(), content()};
  std::size_t looked_up = 0;
  for (int step = 0; step < 300; ++step) {
    switch (rng() % 6) {
      case 0:  // an earlier message changed, its length kept
        if (contents.size() > 1) {
          std::string& c = contents[rng() % (contents.size() - 1)];
          const std::size_t at = (rng() % (c.size() / 14)) * 14;
          c.replace(at, 14, pieces[rng() % pieces.size()]);
        }
        break;
      case 1:  // an earlier message changed, its length not
        if (contents.size() > 1) contents[rng() % (contents.size() - 1)] += "x";
        break;
      case 2:  // another conversation, or an earlier one again
        contents = seen.empty() || rng() % 2 == 0 ? std::vector<std::string>{content(), content()}
                                                  : seen[rng() % seen.size()];
        break;
      case 3:  // the last turn sent again, changed
        contents.back() = content();
        break;
      default:  // one turn longer
        contents.push_back(content());
        contents.push_back(content());
        break;
    }
    seen.push_back(contents);
    if (seen.size() > 12) seen.erase(seen.begin());
    const AnalyzedPrompt prompt = fx.analyze(contents);
    const std::size_t before = internal::scanned_range_counts().looked_up;
    // With and without the volatile tail, in turns: the gateway leaves it out.
    const LintOptions options{.explain = step % 3 == 0, .volatile_tail = step % 2 == 0};
    expect_same_as_fresh(prompt, options, "step " + std::to_string(step));
    looked_up += internal::scanned_range_counts().looked_up - before;
    if (::testing::Test::HasFailure()) return;
  }
  EXPECT_GT(looked_up, 300u) << "earlier turns were looked up";
}

TEST(ScannedRangesTest, ARangeWithMoreSpansThanAreKeptIsScannedEachTime) {
  ScannedRangesFixture fx;
  std::string dates;
  for (std::size_t i = 0; i < PromptMemo::kMaxScannedSpans + 4; ++i) {
    dates += "on 2026-11-" + std::to_string(10 + i) + ", ";
  }
  std::vector<std::string> contents = {dates, "first question"};
  expect_same_as_fresh(fx.analyze(contents), {}, "first");
  contents.push_back("an answer");
  contents.push_back("second question");
  const AnalyzedPrompt prompt = fx.analyze(contents);
  const internal::ScannedRangeCounts before = internal::scanned_range_counts();
  const PromptLint lint = lint_prompt(prompt, {});
  const internal::ScannedRangeCounts& after = internal::scanned_range_counts();
  EXPECT_GT(lint.findings.size(), PromptMemo::kMaxScannedSpans);
  // The system prompt's range was not kept: scanned again, with the two new messages.
  EXPECT_EQ(after.scanned - before.scanned, 3u);
  EXPECT_EQ(after.looked_up - before.looked_up, 1u);
  expect_same_as_fresh(prompt, {}, "second");
}

TEST(ScannedRangesTest, APromptTheMemoNoLongerHoldsLastIsScanned) {
  ScannedRangesFixture fx;
  const AnalyzedPrompt first = fx.analyze({"System at 2026-12-01T00:00:00Z.", "hello"});
  const AnalyzedPrompt second = fx.analyze({"Another system prompt, 2026-12-02.", "hi"});
  EXPECT_EQ(internal::scanned_ranges_of(first), nullptr) << "the memo's last is the second";
  EXPECT_NE(internal::scanned_ranges_of(second), nullptr);
  expect_same_as_fresh(first, {}, "first");
  expect_same_as_fresh(second, {}, "second");
  // A prompt whose text changed after its analysis is not the memo's text any more.
  AnalyzedPrompt changed = second;
  changed.rendered.text += " more";
  EXPECT_EQ(internal::scanned_ranges_of(changed), nullptr);
  // Nor is one analyzed on another thread, whose memo numbers its analyses apart from this one's.
  AnalyzedPrompt elsewhere;
  std::thread([&] { elsewhere = fx.analyze({"System at 2026-12-01T00:00:00Z.", "hello"}); }).join();
  ASSERT_NE(elsewhere.memo_generation, 0u);
  EXPECT_NE(elsewhere.memo_generation, second.memo_generation);
  EXPECT_EQ(internal::scanned_ranges_of(elsewhere), nullptr);
  expect_same_as_fresh(elsewhere, {}, "analyzed on another thread");
}

}  // namespace
}  // namespace prefixgate::canon
