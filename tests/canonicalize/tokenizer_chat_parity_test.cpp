// The rendered-chat case end to end: the conversations of data/chat_requests.json rendered with
// the model's chat template by canon::render_prompt and by @huggingface/jinja
// (tests/js/render_reference.mjs), then tokenized with parse_special on and no extra BOS (the
// template writes it) by our tokenizer and by the reference tokenizer. The two prompts must be
// equal byte for byte and the two id sequences id for id, for Llama 3.1, Qwen3 and Gemma 3 (a
// SentencePiece-style family). Skips only when node or tests/js/node_modules is missing.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "prefixgate/canonicalize/chat_template.h"
#include "prefixgate/canonicalize/json.h"
#include "prefixgate/canonicalize/request.h"
#include "prefixgate/canonicalize/tokenizer.h"
#include "tokenizer_reference.h"

namespace prefixgate::canon {
namespace {

using namespace testing_reference;

const std::string kRequests =
    std::string(PREFIXGATE_SOURCE_DIR) + "/tests/canonicalize/data/chat_requests.json";

struct ChatCase {
  std::string name;
  std::string body;
};

std::vector<ChatCase> load_cases() {
  std::vector<ChatCase> cases;
  const auto text = read_file(kRequests);
  if (!text) return cases;
  auto doc = json::parse(*text);
  if (!doc || !doc->is_array()) return cases;
  for (const json::Value& entry : doc->as_array()) {
    for (bool agp : {true, false}) {
      json::Value body = *entry.find("body");
      body.set("model", "m");
      body.set("add_generation_prompt", agp);
      cases.push_back({entry.find("name")->as_string() + (agp ? "+gen" : ""), json::to_json(body)});
    }
  }
  return cases;
}

// The reference renderings: the prompt, or nothing where the template raised.
std::optional<std::vector<std::optional<std::string>>> render_reference(
    const std::string& config_path, bool openai_content, const std::vector<ChatCase>& cases,
    std::string& error) {
  json::Value spec = json::Object{};
  spec.set("config", config_path);
  spec.set("content_format", openai_content ? "openai" : "string");
  json::Array requests;
  for (const ChatCase& c : cases) requests.push_back(*json::parse(c.body));
  spec.set("requests", std::move(requests));
  const std::string spec_path = unique_temp_path("tokenizer_chat_cases");
  std::ofstream(spec_path, std::ios::binary) << json::to_json(spec);
  const std::string command = "node '" + kJsDir + "/render_reference.mjs' '" + spec_path + "'";
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) {
    error = "could not start " + command;
    return std::nullopt;
  }
  std::string output;
  char buffer[1 << 16];
  for (std::size_t n; (n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;) {
    output.append(buffer, n);
  }
  if (pclose(pipe) != 0) {
    error = command + " failed. " + kHowToInstall;
    return std::nullopt;
  }
  auto doc = json::parse(output);
  if (!doc || !doc->is_array() || doc->as_array().size() != cases.size()) {
    error = "unexpected output from the reference: " + output.substr(0, 300);
    return std::nullopt;
  }
  std::vector<std::optional<std::string>> out;
  for (const json::Value& r : doc->as_array()) {
    const json::Value* text = r.find("text");
    out.push_back(text != nullptr ? std::optional<std::string>(text->as_string()) : std::nullopt);
  }
  return out;
}

class TokenizerChatParityTest : public testing::TestWithParam<const char*> {};

TEST_P(TokenizerChatParityTest, RenderedPromptsTokenizeAsTheReference) {
  const std::string family = GetParam();
  if (auto why = reference_unavailable(family)) GTEST_SKIP() << *why;
  const std::string config_path = package_dir(family) + "/models/tokenizer_config.json";
  const auto config = read_file(config_path);
  const auto tokenizer_json = read_file(package_dir(family) + "/models/tokenizer.json");
  ASSERT_TRUE(config && tokenizer_json);
  auto templates = load_chat_templates(*config);
  ASSERT_TRUE(templates.ok()) << templates.error().message;
  auto tokenizer = load_tokenizer_json(*tokenizer_json);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.error().message;

  const std::vector<ChatCase> cases = load_cases();
  ASSERT_GE(cases.size(), 20u) << "cannot read " << kRequests;
  std::string error;
  const bool openai_content = templates->default_template->iterates_content();
  const auto rendered = render_reference(config_path, openai_content, cases, error);
  ASSERT_TRUE(rendered.has_value()) << error;

  std::vector<std::string> prompts;        // the reference's, for the reference tokenizer
  std::vector<std::vector<TokenId>> ours;  // our ids for our own rendering
  for (std::size_t i = 0; i < cases.size(); ++i) {
    if (!(*rendered)[i]) continue;  // the template raised (e.g. Gemma on a tool message)
    auto request = parse_request(cases[i].body, Endpoint::kChatCompletions);
    ASSERT_TRUE(request.ok()) << cases[i].name;
    ChatRenderOptions options;
    options.now = jinja::CivilTime{2024, 7, 26, 12, 0, 0};
    auto prompt = render_prompt(*request, *templates, options);
    ASSERT_TRUE(prompt.ok()) << family << " " << cases[i].name << ": " << prompt.error().message;
    EXPECT_EQ(prompt->text, *(*rendered)[i]) << family << " " << cases[i].name;
    std::vector<TokenId> ids;
    (*tokenizer)->encode(prompt->text, ids, {.parse_special = true});
    ours.push_back(std::move(ids));
    prompts.push_back(*(*rendered)[i]);
  }
  ASSERT_GE(prompts.size(), 8u) << family << " rendered too few conversations";

  const std::string corpus = write_corpus(prompts, "chat_prompts_" + family);
  const auto reference = run_reference(family, corpus, {}, error);
  ASSERT_TRUE(reference.has_value()) << error;
  ASSERT_EQ(reference->size(), prompts.size());
  for (std::size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ(id_difference(ours[i], (*reference)[i].ids), "")
        << family << " prompt \"" << printable(prompts[i]) << "\"";
    // The template wrote the BOS; the tokenizer adds none.
    EXPECT_FALSE(ours[i].empty());
  }
}

INSTANTIATE_TEST_SUITE_P(Families, TokenizerChatParityTest,
                         testing::Values("llama3_1", "llama3_2", "qwen3", "gemma3"),
                         [](const testing::TestParamInfo<const char*>& param_info) {
                           return std::string(param_info.param);
                         });

}  // namespace
}  // namespace prefixgate::canon
