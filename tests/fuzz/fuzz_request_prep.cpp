// The gateway's request preparation on arbitrary bodies: parse, canonicalize (every rule in
// rewrite mode), salt, render, tokenize and hash, as the proxy runs it before routing. The first
// byte picks the API (chat, completions, messages, responses) and whether the tenant is isolated;
// the rest is the body. Models: the default (byte tokenizer, built-in template) and "chatml", a
// Hugging Face folder with a Jinja template (tests/data/models/tiny-chatml), which a body picks
// with "model": "chatml". A prepared request's upstream body is JSON that parses to the prepared
// body, and it hashes one block per full block of its prompt tokens; prepared a second time
// (through the tool-list memos), it comes out the same.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>

#include "prefixgate/canonicalize/json.h"
#include "server/request_prep.h"

namespace {

using namespace prefixgate;
using namespace prefixgate::gateway;
using namespace prefixgate::gateway::server;

[[noreturn]] void fail(const char* what, std::string_view detail = {}) {
  std::fprintf(stderr, "fuzz_request_prep: %s %.*s\n", what, static_cast<int>(detail.size()),
               detail.data());
  std::abort();
}

struct Setup {
  std::unique_ptr<CanonicalizeStage> stage;
  std::unique_ptr<ModelRegistry> models;
  serving::CounterFamily template_errors{"template_errors", "help", {"model", "action"}};
  PrepOptions options;
};

Setup* make_setup() {
  auto* s = new Setup;
  CanonicalizationConfig canon;
  canon.tool_json = canon.tool_order = canon.response_format = canon.timestamp = canon.whitespace =
      RuleMode::kRewrite;
  s->stage = std::make_unique<CanonicalizeStage>(canon);
  ModelConfig chatml;
  chatml.name = "chatml";
  chatml.tokenizer = std::string(PREFIXGATE_TESTS_DIR) + "/data/models/tiny-chatml";
  chatml.block_size = 4;
  chatml.template_errors = TemplateErrorAction::kRouteOnText;
  auto models = ModelRegistry::load({ModelConfig{}, chatml});
  if (!models) fail("models:", models.error().message);
  s->models = std::move(*models);
  s->options.stage = s->stage.get();
  s->options.models = s->models.get();
  s->options.lint = true;
  s->options.limits.max_body_bytes = 1 << 20;
  s->options.template_errors = &s->template_errors;
  return s;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static Setup* const setup = make_setup();  // lives as long as the process
  if (size == 0) return 0;
  const auto api = static_cast<canon::Api>(data[0] % 4);
  const Tenant tenant{.name = (data[0] & 4) ? "team-a" : "", .isolate = (data[0] & 8) != 0};
  const std::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);

  auto prep = prepare_request(body, api, tenant, setup->options);
  if (!prep) {
    if (prep.error().message.empty()) fail("an error without a message");
    return 0;
  }
  const auto upstream = json::parse(prep->upstream_body().flattened());
  if (!upstream) fail("the upstream body is not JSON", prep->upstream_body().flattened());
  // Members nothing rewrote are forwarded as the client's bytes, the rest written again: the
  // result must still be the body the rules produced.
  if (json::to_json(*upstream) != json::to_json(prep->parsed.body)) {
    fail("the upstream body is not the prepared body", prep->upstream_body().flattened());
  }
  if (!prep->agent.native_body.flattened().empty() &&
      !json::parse(prep->agent.native_body.flattened())) {
    fail("the native body is not JSON", prep->agent.native_body.flattened());
  }
  if (prep->block_size == 0 || prep->block_hashes.size() > prep->prompt_tokens / prep->block_size) {
    fail("more block hashes than full blocks");
  }
  for (const PromptFinding& f : prep->findings) {
    if (f.rule.empty()) fail("a finding without a rule");
  }
  // Sent again (an agent's next turn with the same tools), the request comes from the thread's
  // memos: it must prepare exactly as the first time.
  auto again = prepare_request(body, api, tenant, setup->options);
  if (!again) fail("a request prepared once fails the second time", again.error().message);
  if (again->upstream_body().flattened() != prep->upstream_body().flattened() ||
      again->agent.native_body.flattened() != prep->agent.native_body.flattened() ||
      again->block_hashes != prep->block_hashes) {
    fail("a request prepared again differs", prep->agent.native_body.flattened());
  }
  return 0;
}
