#include "server/openai_protocol.h"

#include <chrono>
#include <cmath>
#include <optional>
#include <random>

#include "prefixgate/canonicalize/block_hash.h"
#include "prefixgate/canonicalize/json.h"
#include "prefixgate/model_folder/prompt_model.h"

namespace prefixgate::engine::server {
namespace {

// A field that is absent or null reads as absent, as OpenAI treats it.
const json::Value* field(const json::Value& body, std::string_view key) {
  const json::Value* v = body.find(key);
  return v == nullptr || v->is_null() ? nullptr : v;
}

Error wrong_type(std::string_view key, std::string_view expected, const json::Value& v) {
  return make_error(
      ErrorCode::kWrongType,
      std::string(key) + " must be " + std::string(expected) + ", not " + json::type_name(v.type()),
      std::string(key));
}

// A number in [lo, hi], or nullopt when absent.
Result<std::optional<double>> number_field(const json::Value& body, std::string_view key, double lo,
                                           double hi) {
  const json::Value* v = field(body, key);
  if (v == nullptr) return std::optional<double>();
  if (!v->is_number()) return wrong_type(key, "a number", *v);
  const double x = v->as_number().value;
  if (!(x >= lo && x <= hi)) {
    return make_error(ErrorCode::kInvalidValue,
                      std::string(key) + " must be between " + json::format_number(lo) + " and " +
                          json::format_number(hi),
                      std::string(key));
  }
  return std::optional<double>(x);
}

Result<std::optional<std::int64_t>> integer_field(const json::Value& body, std::string_view key,
                                                  double lo, double hi) {
  auto n = number_field(body, key, lo, hi);
  if (!n) return n.error();
  if (!n->has_value()) return std::optional<std::int64_t>();
  if (std::floor(**n) != **n) return wrong_type(key, "an integer", *body.find(key));
  return std::optional<std::int64_t>(static_cast<std::int64_t>(**n));
}

Result<std::optional<bool>> bool_field(const json::Value& body, std::string_view key) {
  const json::Value* v = field(body, key);
  if (v == nullptr) return std::optional<bool>();
  if (!v->is_bool()) return wrong_type(key, "a boolean", *v);
  return std::optional<bool>(v->as_bool());
}

Result<std::vector<std::string>> stop_field(const json::Value& body) {
  const json::Value* v = field(body, "stop");
  if (v == nullptr) return std::vector<std::string>();
  if (v->is_string()) return std::vector<std::string>{v->as_string()};
  if (!v->is_array()) return wrong_type("stop", "a string or an array of strings", *v);
  std::vector<std::string> out;
  for (std::size_t i = 0; i < v->as_array().size(); ++i) {
    const json::Value& s = v->as_array()[i];
    if (!s.is_string()) {
      return make_error(ErrorCode::kWrongType, "stop must hold strings",
                        "stop[" + std::to_string(i) + "]");
    }
    out.push_back(s.as_string());
  }
  return out;
}

Status read_sampling(const json::Value& body, SamplingParams& s, bool& max_tokens_given) {
  if (auto n = integer_field(body, "n", -1e18, 1e18); !n) {
    return n.error();
  } else if (n->has_value() && **n != 1) {
    return make_error(ErrorCode::kUnsupported, "n must be 1: this engine returns one choice", "n");
  }
  auto temperature = number_field(body, "temperature", 0, 2);
  if (!temperature) return temperature.error();
  if (temperature->has_value()) s.temperature = **temperature;
  auto top_p = number_field(body, "top_p", 0, 1);
  if (!top_p) return top_p.error();
  if (top_p->has_value()) {
    if (**top_p == 0) return make_error(ErrorCode::kInvalidValue, "top_p must be > 0", "top_p");
    s.top_p = **top_p;
  }
  auto top_k = integer_field(body, "top_k", -1, 1e9);
  if (!top_k) return top_k.error();
  if (top_k->has_value()) s.top_k = **top_k < 0 ? 0 : static_cast<int>(**top_k);
  auto seed = integer_field(body, "seed", -9.2e18, 9.2e18);
  if (!seed) return seed.error();
  if (seed->has_value()) s.seed = static_cast<std::uint64_t>(**seed);
  max_tokens_given = false;
  for (std::string_view key : {"max_completion_tokens", "max_tokens"}) {
    auto m = integer_field(body, key, 1, 1e9);
    if (!m) return m.error();
    if (m->has_value() && !max_tokens_given) {
      s.max_tokens = static_cast<std::size_t>(**m);
      max_tokens_given = true;
    }
  }
  auto ignore_eos = bool_field(body, "ignore_eos");
  if (!ignore_eos) return ignore_eos.error();
  if (ignore_eos->has_value()) s.ignore_eos = **ignore_eos;
  auto stop = stop_field(body);
  if (!stop) return stop.error();
  s.stop = std::move(*stop);
  return {};
}

Result<bool> read_include_usage(const json::Value& body) {
  const json::Value* opts = field(body, "stream_options");
  if (opts == nullptr) return false;
  if (!opts->is_object()) return wrong_type("stream_options", "an object", *opts);
  const json::Value* v = field(*opts, "include_usage");
  if (v == nullptr) return false;
  if (!v->is_bool()) {
    return make_error(ErrorCode::kWrongType, "stream_options.include_usage must be a boolean",
                      "stream_options.include_usage");
  }
  return v->as_bool();
}

json::Value usage_json(const Usage& u) {
  return json::Object{{"prompt_tokens", static_cast<double>(u.prompt_tokens)},
                      {"completion_tokens", static_cast<double>(u.completion_tokens)},
                      {"total_tokens", static_cast<double>(u.prompt_tokens + u.completion_tokens)},
                      {"prompt_tokens_details",
                       json::Object{{"cached_tokens", static_cast<double>(u.cached_tokens)}}}};
}

json::Value meta_object(const ResponseMeta& meta, std::string_view object) {
  return json::Object{{"id", meta.id},
                      {"object", object},
                      {"created", static_cast<double>(meta.created)},
                      {"model", meta.model}};
}

json::Value finish_json(std::string_view finish_reason) {
  return finish_reason.empty() ? json::Value() : json::Value(finish_reason);
}

}  // namespace

namespace {

Result<GenerationPlan> plan_parsed(const canon::ParsedRequest& request, const ServedModel& model,
                                   const canon::ChatConversion* conversion) {
  const canon::ParsedRequest* req = &request;
  const canon::Endpoint endpoint = request.endpoint;
  if (!req->model.empty() && req->model != model.name) {
    return make_error(
        ErrorCode::kNotFound,
        "The model `" + req->model + "` does not exist; this engine serves `" + model.name + "`",
        "model");
  }
  GenerationPlan plan;
  plan.endpoint = endpoint;
  plan.stream = req->stream;
  plan.request.salt = req->cache_salt;
  bool max_tokens_given = false;
  if (Status s = read_sampling(req->body, plan.request.sampling, max_tokens_given); !s) {
    return s.error();
  }
  auto include_usage = read_include_usage(req->body);
  if (!include_usage) return include_usage.error();
  plan.include_usage = *include_usage && plan.stream;

  const char* prompt_param = endpoint == canon::Endpoint::kChatCompletions ? "messages" : "prompt";
  if (endpoint == canon::Endpoint::kCompletions && req->prompts.size() != 1) {
    return make_error(ErrorCode::kUnsupported, "prompt must be a single prompt, not a batch",
                      "prompt");
  }
  canon::ChatRenderOptions render;
  if (model.chat_format.uses_strftime_now()) render.now = local_time_now();
  auto rendered = model.chat_format.render(*req, render);
  if (!rendered) return rendered.error();  // the model's template refused the request
  canon::TokenizedPrompt tokenized = canon::tokenize_request(*req, *rendered, *model.tokenizer);
  if (conversion != nullptr) {
    const std::vector<std::size_t> bytes = canon::breakpoint_bytes(*conversion, *req, *rendered);
    if (!bytes.empty() && bytes.back() > 0 && !tokenized.tokens.empty()) {
      plan.breakpoint_tokens = tokenized.token_at_byte(bytes.back() - 1) + 1;
    }
  }
  plan.request.prompt = std::move(tokenized.tokens);
  std::vector<canon::TokenId>& prompt = plan.request.prompt;
  if (prompt.empty())
    return make_error(ErrorCode::kInvalidValue, "the prompt is empty", prompt_param);
  for (canon::TokenId t : prompt) {
    if (model.vocab_size > 0 && t >= model.vocab_size) {
      return make_error(ErrorCode::kInvalidValue,
                        "token id " + std::to_string(t) + " is outside the vocabulary (" +
                            std::to_string(model.vocab_size) + ")",
                        prompt_param);
    }
  }
  if (prompt.size() >= model.max_model_len) {
    return make_error(ErrorCode::kInvalidValue,
                      "This model's maximum context length is " +
                          std::to_string(model.max_model_len) + " tokens; the prompt has " +
                          std::to_string(prompt.size()),
                      prompt_param);
  }
  const std::size_t room = model.max_model_len - prompt.size();
  SamplingParams& s = plan.request.sampling;
  if (!max_tokens_given) {
    // OpenAI's defaults: 16 for completions, as long as the context allows for chat.
    s.max_tokens =
        endpoint == canon::Endpoint::kCompletions ? std::min<std::size_t>(16, room) : room;
  } else if (s.max_tokens > room) {
    return make_error(ErrorCode::kInvalidValue,
                      "This model's maximum context length is " +
                          std::to_string(model.max_model_len) + " tokens; you requested " +
                          std::to_string(prompt.size() + s.max_tokens) + " (" +
                          std::to_string(prompt.size()) + " in the prompt, " +
                          std::to_string(s.max_tokens) + " for the completion)",
                      "max_tokens");
  }
  return plan;
}

}  // namespace

Result<GenerationPlan> plan_generation(std::string_view body, canon::Endpoint endpoint,
                                       const ServedModel& model) {
  auto req = canon::parse_request(body, endpoint);
  if (!req) return req.error();
  return plan_parsed(*req, model, nullptr);
}

Result<GenerationPlan> plan_chat_generation(const canon::ParsedRequest& request,
                                            const ServedModel& model,
                                            const canon::ChatConversion* conversion) {
  return plan_parsed(request, model, conversion);
}

ResponseMeta make_response_meta(canon::Endpoint endpoint, std::string model) {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  ResponseMeta meta;
  meta.id = std::string(endpoint == canon::Endpoint::kChatCompletions ? "chatcmpl-" : "cmpl-") +
            canon::hash_hex(rng());
  meta.created = std::chrono::duration_cast<std::chrono::seconds>(
                     std::chrono::system_clock::now().time_since_epoch())
                     .count();
  meta.model = std::move(model);
  return meta;
}

std::string completion_body(canon::Endpoint endpoint, const ResponseMeta& meta,
                            std::string_view text, std::string_view finish_reason,
                            const Usage& usage, std::string_view stop_reason) {
  const bool chat = endpoint == canon::Endpoint::kChatCompletions;
  json::Value body = meta_object(meta, chat ? "chat.completion" : "text_completion");
  json::Object choice{{"index", 0}};
  if (chat) {
    choice.push_back({"message", json::Object{{"role", "assistant"}, {"content", text}}});
  } else {
    choice.push_back({"text", text});
  }
  choice.push_back({"logprobs", json::Value()});
  choice.push_back({"finish_reason", finish_json(finish_reason)});
  if (!stop_reason.empty()) choice.push_back({"stop_reason", stop_reason});
  body.set("choices", json::Array{json::Value(std::move(choice))});
  body.set("usage", usage_json(usage));
  return json::to_json(body);
}

std::string stream_chunk(canon::Endpoint endpoint, const ResponseMeta& meta, std::string_view text,
                         std::string_view finish_reason, bool first, bool usage_null,
                         std::string_view stop_reason) {
  const bool chat = endpoint == canon::Endpoint::kChatCompletions;
  json::Value body = meta_object(meta, chat ? "chat.completion.chunk" : "text_completion");
  json::Object choice{{"index", 0}};
  if (chat) {
    json::Object delta;
    if (first) delta.push_back({"role", "assistant"});
    if (!text.empty() || first) delta.push_back({"content", text});
    choice.push_back({"delta", std::move(delta)});
  } else {
    choice.push_back({"text", text});
  }
  choice.push_back({"logprobs", json::Value()});
  choice.push_back({"finish_reason", finish_json(finish_reason)});
  if (!stop_reason.empty()) choice.push_back({"stop_reason", stop_reason});
  body.set("choices", json::Array{json::Value(std::move(choice))});
  if (usage_null) body.set("usage", json::Value());
  return json::to_json(body);
}

std::string stream_usage_chunk(canon::Endpoint endpoint, const ResponseMeta& meta,
                               const Usage& usage) {
  const bool chat = endpoint == canon::Endpoint::kChatCompletions;
  json::Value body = meta_object(meta, chat ? "chat.completion.chunk" : "text_completion");
  body.set("choices", json::Array{});
  body.set("usage", usage_json(usage));
  return json::to_json(body);
}

const char* finish_reason_text(FinishReason reason) {
  switch (reason) {
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    case FinishReason::kAbort: return "abort";
    case FinishReason::kNone: break;
  }
  return "";
}

}  // namespace prefixgate::engine::server
