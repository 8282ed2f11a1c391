// Reading prefixlint's inputs: an OpenAI request (.json), a file of requests one per line
// (.jsonl, optionally wrapped as {"request": {...}, "tenant": ..., "timestamp": ...}), or plain
// prompt text (anything else, or a .json/.txt that is not a request).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "prefixgate/canonicalize/request.h"

namespace prefixgate::lint {

// One request to lint, and where its bytes sit in the file it came from.
struct Document {
  std::string file = {};
  std::size_t line = 1;         // 1-based line of the file where the document starts
  std::size_t file_offset = 0;  // byte offset of `raw` in the file
  std::string raw = {};         // the document's bytes as they appear in the file
  canon::ParsedRequest request = {};
  bool plain_text = false;     // a prompt text file, wrapped as a completion request
  std::string tenant = {};     // from a log envelope's "tenant", else the cache salt
  std::string timestamp = {};  // from a log envelope, if any
};

// Reads a whole file ("-" is standard input). Fails with a message naming the file.
Result<std::string> read_file(const std::string& path);

// Reads and parses a file into documents. A malformed request is an error naming the file and,
// for .jsonl, the line.
Result<std::vector<Document>> read_documents(const std::string& path);

// "FILE:LINE: the model's chat template refuses this request: ..." for a request that
// analyze_prompt() could not render.
Error refused_by_template(const std::string& file, const Document& doc, const Error& error);

// Wraps plain prompt text as a completion request, so text and requests share one pipeline.
canon::ParsedRequest plain_text_request(std::string text);

}  // namespace prefixgate::lint
