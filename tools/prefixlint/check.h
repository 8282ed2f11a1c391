// `prefixlint check`: volatile content inside the cacheable prefix of prompts and requests.
#pragma once

#include <string>
#include <vector>

#include "documents.h"
#include "model_flags.h"
#include "prefixgate/canonicalize/lint.h"

namespace prefixgate::lint {

// A finding located in its file.
struct FileFinding {
  canon::Finding finding;
  std::size_t line = 1;         // 1-based
  std::size_t column = 1;       // 1-based, in Unicode code points
  std::size_t byte_offset = 0;  // in the file
  std::size_t byte_length = 0;
  std::size_t request_line = 1;  // the line where its request starts (for .jsonl)
};

struct FileReport {
  std::string file;
  std::vector<FileFinding> findings;
  std::size_t requests = 0;
  // The smallest stable prefix over the file's requests, in tokens.
  std::size_t stable_prefix_tokens = 0;
  std::size_t prompt_tokens = 0;  // of the request with the smallest stable prefix
};

// Errors: a request the model's chat template refuses, naming its file and line.
Result<FileReport> check_documents(const std::string& file, const std::vector<Document>& docs,
                                   const canon::PromptModel& model,
                                   const canon::ChatRenderOptions& render = {});

enum class OutputFormat { kText, kJson, kSarif };

std::string render_text(const std::vector<FileReport>& reports);
std::string render_json(const std::vector<FileReport>& reports);
std::string render_sarif(const std::vector<FileReport>& reports);

}  // namespace prefixgate::lint
