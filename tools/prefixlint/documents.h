// Reading prefixlint's inputs: a request (.json) of the chat or completions API, Anthropic's
// Messages API or OpenAI's Responses API (told apart by canon::guess_api, or named by --api),
// a file of requests one per line (.jsonl, optionally wrapped as {"request": {...}, "tenant":
// ..., "timestamp": ...}), or plain prompt text (anything else, or a .json/.txt that is not a
// request). Messages and Responses requests are linted as their Chat Completions equivalent,
// with their cache breakpoints, and findings name their own fields.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "prefixgate/canonicalize/chat_conversion.h"
#include "prefixgate/canonicalize/lint.h"
#include "prefixgate/canonicalize/request.h"

namespace prefixgate::lint {

// One request to lint, and where its bytes sit in the file it came from.
struct Document {
  std::string file = {};
  std::size_t line = 1;               // 1-based line of the file where the document starts
  std::size_t file_offset = 0;        // byte offset of `raw` in the file
  std::string raw = {};               // the document's bytes as they appear in the file
  canon::ParsedRequest request = {};  // a chat or completion request (the chat equivalent)
  canon::Api api = canon::Api::kChatCompletions;  // the shape the file holds
  // A Messages or Responses request: where its chat fields came from, its breakpoints.
  std::optional<canon::ChatConversion> conversion = {};
  bool plain_text = false;     // a prompt text file, wrapped as a completion request
  std::string tenant = {};     // from a log envelope's "tenant", else the cache salt
  std::string timestamp = {};  // from a log envelope, if any
};

// Reads a whole file ("-" is standard input). Fails with a message naming the file.
Result<std::string> read_file(const std::string& path);

// Reads and parses a file into documents. A malformed request is an error naming the file and,
// for .jsonl, the line. `api`: the shape every request has (nullopt: told from each body).
Result<std::vector<Document>> read_documents(const std::string& path,
                                             std::optional<canon::Api> api = std::nullopt);

// The field a finding or a divergence names, in the document's own request ("system[0].text"
// for a Messages request's "messages[0].content").
std::string document_field(const Document& doc, const std::string& chat_field);
// The lint options of a document: its cache breakpoints in `prompt`.
canon::LintOptions lint_options(const Document& doc, const canon::RenderedPrompt& prompt);

// "FILE:LINE: the model's chat template refuses this request: ..." for a request that
// analyze_prompt() could not render.
Error refused_by_template(const std::string& file, const Document& doc, const Error& error);

// Wraps plain prompt text as a completion request, so text and requests share one pipeline.
canon::ParsedRequest plain_text_request(std::string text);

}  // namespace prefixgate::lint
