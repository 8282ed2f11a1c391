// One request on the engine, as the HTTP handlers follow it: its events (from RequestBridge)
// applied to its text (TextOutput: detokenized, cut at stop strings), its finish reason and its
// usage, with the server's latency metrics observed on the way. Shared by the OpenAI handlers
// (generation_handler.cpp) and the Messages and Responses handlers (agent_api_handler.cpp).
//
//   auto bridge = std::make_shared<RequestBridge>(executor);
//   Generation g(ctx, plan, bridge, ctx.engine->submit(plan.request, bridge->sink()));
//   while (!g.done()) { co_await g.advance(); send(g.output().take_delta(g.done())); }
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "server/http_common.h"
#include "server/request_bridge.h"
#include "server/text_output.h"

namespace prefixgate::engine::server {

using GenerationClock = std::chrono::steady_clock;

inline double seconds_since(GenerationClock::time_point t) {
  return std::chrono::duration<double>(GenerationClock::now() - t).count();
}

// Follows one request's events; the text, finish reason and usage build up here.
class Generation {
 public:
  Generation(ServerContext& ctx, const GenerationPlan& plan, std::shared_ptr<RequestBridge> bridge,
             std::uint64_t id)
      : ctx_(ctx),
        bridge_(std::move(bridge)),
        id_(id),
        output_(*ctx.model.tokenizer,
                TextOutputOptions{plan.request.sampling.stop, !plan.request.sampling.ignore_eos,
                                  ctx.model.eos_token}) {
    usage_.prompt_tokens = plan.request.prompt.size();
  }

  // Waits for more events and applies them. Returns once something changed.
  Awaitable<void> advance() {
    for (const GenerationEvent& e : co_await bridge_->next()) apply(e);
  }

  bool done() const { return !finish_reason_.empty(); }
  const std::string& finish_reason() const { return finish_reason_; }
  // Whether the engine has reported the prompt (its prompt and cached token counts are known).
  bool prompt_known() const { return saw_prompt_; }
  TextOutput& output() { return output_; }
  Usage usage() const {
    Usage u = usage_;
    u.completion_tokens = output_.token_count();
    return u;
  }

 private:
  void apply(const GenerationEvent& e) {
    if (done()) return;  // events after a stop string (the abort that follows it)
    if (!saw_prompt_ && e.prompt_tokens > 0) {
      usage_.prompt_tokens = e.prompt_tokens;
      usage_.cached_tokens = e.cached_tokens;
      saw_prompt_ = true;
    }
    if (!e.tokens.empty()) {
      if (e.first_token)
        ctx_.observed.ttft_seconds->observe(seconds_since(start_));
      else if (saw_token_)
        ctx_.observed.inter_token_seconds->observe(seconds_since(last_token_));
      saw_token_ = true;
      last_token_ = GenerationClock::now();
    }
    for (canon::TokenId t : e.tokens) output_.append(t);
    if (output_.stopped()) {
      finish_reason_ = "stop";
      ctx_.engine->abort(id_);  // the stop string ended it; free its pages now
    } else if (e.finished != FinishReason::kNone) {
      finish_reason_ = finish_reason_text(e.finished);
    }
    if (done()) ctx_.observed.e2e_seconds->observe(seconds_since(start_));
  }

  ServerContext& ctx_;
  std::shared_ptr<RequestBridge> bridge_;
  std::uint64_t id_;
  TextOutput output_;
  Usage usage_;
  std::string finish_reason_;
  GenerationClock::time_point start_ = GenerationClock::now();
  GenerationClock::time_point last_token_;
  bool saw_prompt_ = false;
  bool saw_token_ = false;
};

inline Awaitable<void> run_to_end(Generation& g) {
  while (!g.done()) co_await g.advance();
}

}  // namespace prefixgate::engine::server
