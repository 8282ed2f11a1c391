// The cpu device against the plain reference (reference_llama.h), and against itself across the
// ways the scheduler splits work: cached prefixes, batches, chunks, scattered pages.
//
// Tolerance: the device computes in fp32 with sgemm, the reference in double. Logits must agree
// to max |device - reference| <= 1e-4 * max(1, max |reference|) over every compared row, and
// greedy tokens must be equal. Runs of the device against itself use the same bound.
#include "prefixgate/engine/cpu_device.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <numeric>
#include <random>

#include "device_harness.h"
#include "model_internal.h"
#include "prefixgate/engine/model.h"
#include "reference_llama.h"

namespace prefixgate::engine {
namespace {

using canon::TokenId;
using testing::Diff;
using testing::Sequence;
using testing::Work;

constexpr double kRelativeTolerance = 1e-4;

std::vector<TokenId> prompt_tokens(std::size_t n, std::uint32_t seed, std::size_t vocab) {
  std::mt19937 rng(seed);
  std::vector<TokenId> t(n);
  for (TokenId& id : t) id = static_cast<TokenId>(rng() % vocab);
  return t;
}

::testing::AssertionResult logits_near(std::span<const float> got, std::span<const float> want) {
  const Diff d = testing::diff(got, want);
  const double bound = kRelativeTolerance * std::max(1.0, d.max_abs_want);
  if (d.max_abs_diff <= bound) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "max abs diff " << d.max_abs_diff << " > " << bound;
}

::testing::AssertionResult logits_near(std::span<const float> got, std::span<const double> want) {
  const Diff d = testing::diff(got, want);
  const double bound = kRelativeTolerance * std::max(1.0, d.max_abs_want);
  if (d.max_abs_diff <= bound) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "max abs diff " << d.max_abs_diff << " > " << bound
                                       << " (reference max |logit| " << d.max_abs_want << ")";
}

Model builtin(std::string_view name) {
  auto model = load_model(name);
  EXPECT_TRUE(model.ok()) << model.error().message;
  return std::move(*model);
}

// A device with its own page pool.
struct Rig {
  Rig(const Model& model, std::size_t num_pages, std::size_t tokens_per_page)
      : device(make_cpu_device(model)), pool(num_pages), page_tokens(tokens_per_page) {
    device->init_kv_cache(num_pages, tokens_per_page);
  }
  StepOutput step(std::vector<Work> work) {
    return testing::run_step(*device, pool, page_tokens, std::move(work));
  }
  std::unique_ptr<Device> device;
  PagePool pool;
  std::size_t page_tokens;
};

// Prefills `prompt` in one step, then decodes `decode_steps` greedy tokens; at every sampled
// step, checks the logits and the token against a full reference recompute.
void expect_matches_reference(const Model& model, const std::vector<TokenId>& prompt,
                              std::size_t decode_steps, std::size_t page_tokens) {
  Rig rig(model, 256, page_tokens);
  Sequence seq{.tokens = prompt};
  std::size_t count = prompt.size();
  for (std::size_t step = 0; step <= decode_steps; ++step) {
    const std::vector<TokenId> context = seq.tokens;
    const StepOutput out = rig.step({{&seq, count, true}});
    const std::vector<double> ref = testing::reference_logits(model, context);
    const std::size_t vocab = model.spec.vocab_size;
    const auto last = std::span(ref).subspan((context.size() - 1) * vocab, vocab);
    ASSERT_TRUE(logits_near(out.logits, last)) << "step " << step;
    ASSERT_EQ(out.tokens[0], testing::reference_argmax(last)) << "step " << step;
    count = 1;
  }
}

TEST(CpuDeviceTest, TinyMatchesReferenceThroughPrefillAndDecode) {
  const Model model = builtin("builtin:tiny");
  expect_matches_reference(model, prompt_tokens(37, 1, model.spec.vocab_size), 12, 8);
}

TEST(CpuDeviceTest, PromptLongerThanOneAttentionTileMatchesReference) {
  // 300 queries span three 128-row attention tasks; page_tokens 16 does not divide 300.
  const Model model = builtin("builtin:tiny");
  expect_matches_reference(model, prompt_tokens(300, 2, model.spec.vocab_size), 2, 16);
}

TEST(CpuDeviceTest, SmallMatchesReference) {
  const Model model = builtin("builtin:small");
  expect_matches_reference(model, prompt_tokens(24, 3, model.spec.vocab_size), 3, 16);
}

// A shape unlike the built-ins: untied LM head, head_dim * num_heads != hidden, 4 query heads
// per KV head, odd sizes.
ModelSpec odd_spec() {
  ModelSpec spec = *builtin_spec("builtin:tiny");
  spec.id = "odd";
  spec.num_layers = 3;
  spec.hidden_size = 40;
  spec.num_heads = 4;
  spec.num_kv_heads = 1;
  spec.head_dim = 6;
  spec.intermediate_size = 72;
  spec.tie_word_embeddings = false;
  spec.rope_theta = 500000.0;
  spec.rms_norm_eps = 1e-6;
  return spec;
}

TEST(CpuDeviceTest, OddShapeMatchesReference) {
  const Model model = internal::make_generated_model(odd_spec(), 7);
  expect_matches_reference(model, prompt_tokens(29, 4, model.spec.vocab_size), 6, 4);
}

TEST(CpuDeviceTest, ModelLoadedFromSafetensorsFolderMatchesReference) {
  const Model original = internal::make_generated_model(odd_spec(), 11);
  const auto root = std::filesystem::path(::testing::TempDir()) / "cpu_device_hf";
  for (std::string_view dtype : {"F32", "BF16", "F16"}) {
    const std::string folder = (root / dtype).string();
    ASSERT_TRUE(write_hf_folder(original, folder, dtype).ok());
    auto loaded = load_model(folder);
    ASSERT_TRUE(loaded.ok()) << loaded.error().message;
    if (dtype == "F32") {
      EXPECT_EQ(loaded->weights->layers[2].w_down, original.weights->layers[2].w_down);
      EXPECT_EQ(loaded->weights->lm_head, original.weights->lm_head);
    }
    // The reference runs on the loaded (rounded) weights: the forward pass is what is checked.
    expect_matches_reference(*loaded, prompt_tokens(21, 5, loaded->spec.vocab_size), 4, 8);
  }
  std::filesystem::remove_all(root);
}

TEST(CpuDeviceTest, CachedPrefixGivesTheSameOutputAsFullPrefill) {
  const Model model = builtin("builtin:tiny");
  constexpr std::size_t kPage = 8;
  const std::vector<TokenId> shared = prompt_tokens(40, 6, model.spec.vocab_size);  // 5 pages
  std::vector<TokenId> second = shared;
  for (TokenId t : prompt_tokens(13, 7, model.spec.vocab_size)) second.push_back(t);

  // Without a hit: the second prompt prefilled from scratch on its own device.
  Rig cold(model, 64, kPage);
  Sequence alone{.tokens = second};
  std::vector<StepOutput> cold_out{cold.step({{&alone, second.size(), true}})};
  for (int i = 0; i < 8; ++i) cold_out.push_back(cold.step({{&alone, 1, true}}));

  // With a hit: a first sequence fills pages for `shared` (and more); the second reuses its
  // first 5 pages and computes only its last 13 tokens.
  Rig warm(model, 64, kPage);
  Sequence first{.tokens = shared};
  first.tokens.push_back(1);  // a different token after the shared prefix
  warm.step({{&first, first.tokens.size(), true}});
  Sequence hit{.tokens = second};
  hit.pages.assign(first.pages.begin(), first.pages.begin() + 5);
  for (PageId p : hit.pages) warm.pool.retain(p);
  hit.computed = shared.size();
  std::vector<StepOutput> warm_out{warm.step({{&hit, second.size() - shared.size(), true}})};
  for (int i = 0; i < 8; ++i) warm_out.push_back(warm.step({{&hit, 1, true}}));

  EXPECT_EQ(hit.tokens, alone.tokens);
  for (std::size_t i = 0; i < cold_out.size(); ++i) {
    EXPECT_TRUE(logits_near(warm_out[i].logits, cold_out[i].logits)) << "step " << i;
  }
}

TEST(CpuDeviceTest, BatchedSequencesMatchSequencesRunAlone) {
  const Model model = builtin("builtin:tiny");
  constexpr std::size_t kPage = 4;
  const std::vector<std::size_t> lengths = {1, 9, 23, 16};

  // Alone: each sequence on a fresh device, prefill then 5 decode steps.
  std::vector<std::vector<TokenId>> expected;
  std::vector<std::vector<std::vector<float>>> expected_logits(lengths.size());
  for (std::size_t s = 0; s < lengths.size(); ++s) {
    Rig rig(model, 64, kPage);
    Sequence seq{.tokens = prompt_tokens(lengths[s], 10 + static_cast<std::uint32_t>(s),
                                         model.spec.vocab_size)};
    expected_logits[s].push_back(rig.step({{&seq, seq.tokens.size(), true}}).logits);
    for (int i = 0; i < 5; ++i) expected_logits[s].push_back(rig.step({{&seq, 1, true}}).logits);
    expected.push_back(seq.tokens);
  }

  // Together, continuous-batching style: sequences 0 and 1 prefill in the first step, 2 and 3
  // join in the second while 0 and 1 decode, then everyone decodes together.
  Rig rig(model, 256, kPage);
  std::vector<Sequence> seqs;
  for (std::size_t s = 0; s < lengths.size(); ++s) {
    seqs.push_back(Sequence{.tokens = prompt_tokens(lengths[s], 10 + static_cast<std::uint32_t>(s),
                                                    model.spec.vocab_size)});
  }
  std::vector<std::vector<std::vector<float>>> got_logits(lengths.size());
  const auto record = [&](const StepOutput& out, const std::vector<std::size_t>& which) {
    const std::size_t vocab = model.spec.vocab_size;
    for (std::size_t i = 0; i < which.size(); ++i) {
      got_logits[which[i]].emplace_back(
          out.logits.begin() + static_cast<std::ptrdiff_t>(i * vocab),
          out.logits.begin() + static_cast<std::ptrdiff_t>((i + 1) * vocab));
    }
  };
  record(
      rig.step({{&seqs[0], seqs[0].tokens.size(), true}, {&seqs[1], seqs[1].tokens.size(), true}}),
      {0, 1});
  record(rig.step({{&seqs[2], seqs[2].tokens.size(), true},
                   {&seqs[0], 1, true},
                   {&seqs[3], seqs[3].tokens.size(), true},
                   {&seqs[1], 1, true}}),
         {2, 0, 3, 1});
  while (seqs[2].generated < 6) {
    std::vector<Work> work;
    std::vector<std::size_t> which;
    for (std::size_t s = 0; s < seqs.size(); ++s) {
      if (seqs[s].generated < 6) {
        work.push_back({&seqs[s], 1, true});
        which.push_back(s);
      }
    }
    record(rig.step(work), which);
  }
  for (std::size_t s = 0; s < seqs.size(); ++s) {
    EXPECT_EQ(seqs[s].tokens, expected[s]) << "sequence " << s;
    ASSERT_EQ(got_logits[s].size(), expected_logits[s].size());
    for (std::size_t i = 0; i < got_logits[s].size(); ++i) {
      EXPECT_TRUE(logits_near(got_logits[s][i], expected_logits[s][i]))
          << "sequence " << s << " step " << i;
    }
  }
}

TEST(CpuDeviceTest, ChunkedPrefillMatchesReferenceAtEveryChunkEnd) {
  const Model model = builtin("builtin:tiny");
  const std::vector<TokenId> prompt = prompt_tokens(50, 20, model.spec.vocab_size);
  const std::vector<double> ref = testing::reference_logits(model, prompt);
  const std::size_t vocab = model.spec.vocab_size;

  // Chunks of 7 with pages of 8: chunks start and end inside pages.
  Rig rig(model, 64, 8);
  Sequence seq{.tokens = prompt};
  std::vector<TokenId> chunked_tokens;
  while (seq.computed < prompt.size()) {
    const std::size_t count = std::min<std::size_t>(7, prompt.size() - seq.computed);
    const std::size_t end = seq.computed + count;
    const bool last = end == prompt.size();
    // Sample after every chunk to see its logits; drop the token unless it is the last chunk.
    const StepOutput out = rig.step({{&seq, count, true}});
    ASSERT_TRUE(logits_near(out.logits, std::span(ref).subspan((end - 1) * vocab, vocab)))
        << "chunk ending at " << end;
    if (!last) {
      seq.tokens.resize(prompt.size());
      seq.generated = 0;
    }
  }
  for (int i = 0; i < 6; ++i) rig.step({{&seq, 1, true}});
  chunked_tokens = seq.tokens;

  Rig whole(model, 64, 8);
  Sequence once{.tokens = prompt};
  whole.step({{&once, prompt.size(), true}});
  for (int i = 0; i < 6; ++i) whole.step({{&once, 1, true}});
  EXPECT_EQ(chunked_tokens, once.tokens);
}

TEST(CpuDeviceTest, ScatteredPagesMatchContiguousPages) {
  const Model model = builtin("builtin:tiny");
  constexpr std::size_t kPage = 4;
  const std::vector<TokenId> prompt = prompt_tokens(30, 30, model.spec.vocab_size);

  Rig contiguous(model, 64, kPage);
  Sequence a{.tokens = prompt};
  std::vector<std::vector<float>> want{contiguous.step({{&a, prompt.size(), true}}).logits};
  for (int i = 0; i < 6; ++i) want.push_back(contiguous.step({{&a, 1, true}}).logits);

  // Pages handed out in a shuffled order from a larger pool, with gaps between them.
  const SamplingParams& params = testing::greedy();
  auto device = make_cpu_device(model);
  device->init_kv_cache(64, kPage);
  std::vector<PageId> pages(64);
  std::iota(pages.begin(), pages.end(), PageId{0});
  std::shuffle(pages.begin(), pages.end(), std::mt19937(5));
  pages.resize(10);  // covers 40 positions: the prompt and the decoded tokens
  Sequence b{.tokens = prompt};
  for (std::size_t i = 0; i < want.size(); ++i) {
    const std::size_t count = i == 0 ? prompt.size() : 1;
    const SequenceStep step{.tokens = std::span(b.tokens).subspan(b.computed, count),
                            .start_position = b.computed,
                            .pages = pages,
                            .sample = true,
                            .sampling = &params,
                            .sample_step = i};
    const StepOutput out = device->execute(std::span(&step, 1));
    b.computed += count;
    b.tokens.push_back(out.tokens[0]);
    EXPECT_TRUE(logits_near(out.logits, want[i])) << "step " << i;
  }
  EXPECT_EQ(b.tokens, a.tokens);
}

TEST(CpuDeviceTest, ThreadCountDoesNotChangeTheResult) {
  // builtin:small with 3 workers takes every parallel path: a 230-row prefill splits GEMMs by
  // rows and attention over workers; a 2-row decode splits GEMMs by output features.
  const Model model = builtin("builtin:small");
  std::vector<std::vector<std::vector<float>>> logits(2);
  std::vector<std::vector<TokenId>> tokens(2);
  for (int threads : {1, 3}) {
    auto device = make_cpu_device(model, threads);
    device->init_kv_cache(64, 16);
    PagePool pool(64);
    Sequence a{.tokens = prompt_tokens(200, 60, model.spec.vocab_size)};
    Sequence b{.tokens = prompt_tokens(30, 61, model.spec.vocab_size)};
    const std::size_t run = threads == 1 ? 0 : 1;
    logits[run].push_back(
        testing::run_step(*device, pool, 16, {{&a, 200, true}, {&b, 30, true}}).logits);
    for (int i = 0; i < 4; ++i) {
      logits[run].push_back(
          testing::run_step(*device, pool, 16, {{&a, 1, true}, {&b, 1, true}}).logits);
    }
    tokens[run] = a.tokens;
    tokens[run].insert(tokens[run].end(), b.tokens.begin(), b.tokens.end());
  }
  EXPECT_EQ(tokens[0], tokens[1]);
  for (std::size_t i = 0; i < logits[0].size(); ++i) {
    EXPECT_TRUE(logits_near(logits[1][i], logits[0][i])) << "step " << i;
  }
}

TEST(CpuDeviceTest, StepsThatDoNotSampleReturnNoLogits) {
  const Model model = builtin("builtin:tiny");
  Rig rig(model, 16, 8);
  Sequence seq{.tokens = prompt_tokens(12, 40, model.spec.vocab_size)};
  Sequence other{.tokens = prompt_tokens(5, 41, model.spec.vocab_size)};
  const StepOutput out = rig.step({{&seq, 12, false}, {&other, 5, true}});
  ASSERT_EQ(out.tokens.size(), 2u);
  EXPECT_EQ(out.tokens[0], 0u);
  EXPECT_EQ(out.logits.size(), model.spec.vocab_size);  // only `other` sampled
}

TEST(CpuDeviceTest, SampledTokenIsTheSamplersChoiceFromTheReturnedLogits) {
  const Model model = builtin("builtin:tiny");
  const SamplingParams params{.temperature = 1.5, .top_p = 0.9, .top_k = 50, .seed = 99};
  Rig rig(model, 16, 8);
  Sequence seq{.tokens = prompt_tokens(10, 50, model.spec.vocab_size)};
  for (int i = 0; i < 5; ++i) {
    const StepOutput out = testing::run_step(*rig.device, rig.pool, rig.page_tokens,
                                             {{&seq, i == 0 ? 10u : 1u, true}}, params);
    EXPECT_EQ(out.tokens[0], sample_token(out.logits, params, seq.generated - 1));
  }
}

TEST(CpuDeviceTest, PageBytesFollowTheSpec) {
  const Model model = builtin("builtin:small");
  auto device = make_cpu_device(model);
  EXPECT_EQ(device->name(), "cpu");
  // 4 layers * (K + V) * 4 kv heads * 32 dims * 4 bytes * 16 tokens
  EXPECT_EQ(device->kv_page_bytes(16), 4u * 2 * 4 * 32 * 4 * 16);
}

}  // namespace
}  // namespace prefixgate::engine
