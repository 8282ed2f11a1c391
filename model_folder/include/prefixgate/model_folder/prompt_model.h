// A model's prompt side, loaded from disk: its tokenizer and how its chat requests render.
//
// Where a tokenizer is given (the gateway's `models:` entries, the engine's --tokenizer,
// prefixlint's --tokenizer), it may be:
//   byte                 the byte tokenizer (the embedded default), with a built-in template;
//   PATH/tokenizer.json  a Hugging Face tokenizer, with a built-in template;
//   PATH                 a Hugging Face model folder: tokenizer.json for the tokenizer, and the
//                        model's own chat template from chat_template.jinja or
//                        tokenizer_config.json's `chat_template` (a string, or named templates:
//                        `default`, and `tool_use` for requests with tools), with the special
//                        tokens (bos_token, eos_token, ...) tokenizer_config.json sets.
// A built-in template name (llama-3, chatml, plain), when given, wins over the folder's own.
//
//   auto model = load_prompt_model({.tokenizer = "/models/qwen3-8b"});
//   if (!model) return fail("models.qwen3.tokenizer: " + model.error().message);
//   canon::PromptModel prompt{model->chat_format, model->tokenizer.get(), 16, "qwen3"};
#pragma once

#include <memory>
#include <string>

#include "prefixgate/base/status.h"
#include "prefixgate/canonicalize/chat_format.h"
#include "prefixgate/canonicalize/tokenizer.h"

namespace prefixgate {

struct PromptModelSource {
  std::string tokenizer = "byte";  // "byte", a tokenizer.json file, or a model folder
  std::string chat_template;       // a built-in name; empty: the folder's own, else llama-3
};

struct LoadedPromptModel {
  std::shared_ptr<const canon::Tokenizer> tokenizer;
  canon::ChatFormat chat_format;
  // The text of the tokenizer_config.json's eos_token for a model's own template ("" when
  // none): the token that ends an assistant turn.
  std::string eos_token;
  std::string description;  // "byte + llama-3", "/models/qwen3-8b (model template)", ...
};

// Reads and loads. Errors name the file: kNotFound for a path that does not exist or a folder
// with no tokenizer.json, or with no chat template when none is named; the tokenizer's and
// the template's own errors (kUnsupported names what the tokenizer.json uses that we lack).
Result<LoadedPromptModel> load_prompt_model(const PromptModelSource& source);

// The local wall-clock time, for ChatRenderOptions::now. transformers fills strftime_now()
// from the engine's local time, so the gateway renders with its own (run both in one zone).
canon::jinja::CivilTime local_time_now();

}  // namespace prefixgate
