// The OpenAI wire format of the engine: a `/v1/completions` or `/v1/chat/completions` body
// turned into a GenerationRequest, and generated text turned into response bodies and SSE
// chunks. Pure functions, no I/O: the HTTP layer calls these.
//
//   auto plan = plan_generation(body, Endpoint::kCompletions, model_info);
//   if (!plan) return reply(serving::error_response(req, plan.error(), keep_alive));
//   engine.submit(plan->request, sink);
//   std::string body = completion_body(*plan, ids, text, "stop", usage);
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "prefixgate/base/status.h"
#include "prefixgate/canonicalize/chat_conversion.h"
#include "prefixgate/canonicalize/chat_format.h"
#include "prefixgate/canonicalize/request.h"
#include "prefixgate/canonicalize/tokenizer.h"
#include "prefixgate/engine/engine_loop.h"

namespace prefixgate::engine::server {

// What the server knows about the model it serves.
struct ServedModel {
  std::string name;  // the `model` clients send and responses carry
  std::shared_ptr<const canon::Tokenizer> tokenizer;
  canon::ChatFormat chat_format;  // built-in llama-3 unless the model brings its own template
  canon::TokenId eos_token = 0;
  std::size_t max_model_len = 8192;
  std::size_t vocab_size = 0;
};

struct GenerationPlan {
  canon::Endpoint endpoint = canon::Endpoint::kCompletions;
  GenerationRequest request;  // prompt tokens, sampling (stop strings included), salt
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  // Prompt tokens up to the client's last cache breakpoint (a Messages request's
  // cache_control), for cache_creation_input_tokens; 0 without one.
  std::size_t breakpoint_tokens = 0;
};

// Validates the body and builds the request. Errors name the field (`param`).
Result<GenerationPlan> plan_generation(std::string_view body, canon::Endpoint endpoint,
                                       const ServedModel& model);
// The same for a chat request already parsed (the Chat Completions equivalent of a Messages or
// Responses request, whose conversion places its breakpoints; nullptr: none).
Result<GenerationPlan> plan_chat_generation(const canon::ParsedRequest& request,
                                            const ServedModel& model,
                                            const canon::ChatConversion* conversion);

struct Usage {
  std::size_t prompt_tokens = 0;
  std::size_t completion_tokens = 0;
  std::size_t cached_tokens = 0;
};

// Identity of one response: every chunk of a stream carries the same.
struct ResponseMeta {
  std::string id;  // "cmpl-..." or "chatcmpl-..."
  std::int64_t created = 0;
  std::string model;
};
ResponseMeta make_response_meta(canon::Endpoint endpoint, std::string model);

// The non-streaming response body. `stop_reason`: the stop string that ended the text, written
// as the choice's "stop_reason" (as vLLM does) when not empty.
std::string completion_body(canon::Endpoint endpoint, const ResponseMeta& meta,
                            std::string_view text, std::string_view finish_reason,
                            const Usage& usage, std::string_view stop_reason = {});

// One streaming chunk's JSON. For chat, `first` adds the assistant role to the delta. An empty
// `finish_reason` is null. `usage_null` writes "usage":null (stream_options.include_usage).
std::string stream_chunk(canon::Endpoint endpoint, const ResponseMeta& meta, std::string_view text,
                         std::string_view finish_reason, bool first, bool usage_null,
                         std::string_view stop_reason = {});
// The closing usage chunk: empty choices and the usage.
std::string stream_usage_chunk(canon::Endpoint endpoint, const ResponseMeta& meta,
                               const Usage& usage);

// "stop", "length", or "abort" as OpenAI clients expect it.
const char* finish_reason_text(FinishReason reason);

}  // namespace prefixgate::engine::server
