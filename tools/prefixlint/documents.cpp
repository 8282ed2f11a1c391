#include "documents.h"

#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>

#include "prefixgate/canonicalize/anthropic.h"
#include "prefixgate/canonicalize/responses_api.h"

namespace prefixgate::lint {
namespace {

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

Error in_file(const std::string& file, std::size_t line, const Error& e) {
  std::string where = file + ":" + std::to_string(line) + ": ";
  if (!e.param.empty()) where += e.param + ": ";
  return make_error(e.code, where + e.message, e.param);
}

// A Messages or Responses body as its chat equivalent.
Status convert_into(json::Value value, canon::Api api, Document& doc) {
  canon::ChatConversion conversion;
  if (api == canon::Api::kMessages) {
    auto m = canon::parse_messages_request_value(std::move(value));
    if (!m) return m.error();
    conversion = std::move(m->chat);
  } else {
    auto r = canon::parse_responses_request_value(std::move(value));
    if (!r) return r.error();
    conversion = std::move(r->chat);
  }
  auto request = canon::parse_request_value(conversion.body, canon::Endpoint::kChatCompletions);
  if (!request) return request.error();
  doc.request = std::move(*request);
  doc.conversion = std::move(conversion);
  return {};
}

// A log line may be a bare request or an envelope around one.
Result<Document> document_from_json(json::Value value, Document doc,
                                    std::optional<canon::Api> forced) {
  if (value.is_object() && canon::guess_api(value) == std::nullopt) {
    json::Value* inner = value.find("request");
    if (inner == nullptr) inner = value.find("body");
    if (inner != nullptr) {
      if (const json::Value* t = value.find("tenant"); t != nullptr && t->is_string()) {
        doc.tenant = t->as_string();
      }
      if (const json::Value* ts = value.find("timestamp"); ts != nullptr && ts->is_string()) {
        doc.timestamp = ts->as_string();
      }
      json::Value body = std::move(*inner);
      value = std::move(body);
    }
  }
  const std::optional<canon::Api> api = forced ? forced : canon::guess_api(value);
  if (!api) {
    return make_error(ErrorCode::kMissingField,
                      "not a request: expected \"messages\" (chat or Anthropic Messages), "
                      "\"input\" (OpenAI Responses) or \"prompt\" (completion)",
                      "messages");
  }
  doc.api = *api;
  if (*api == canon::Api::kMessages || *api == canon::Api::kResponses) {
    if (Status s = convert_into(std::move(value), *api, doc); !s) return s.error();
  } else {
    auto request = canon::parse_request_value(
        std::move(value), *api == canon::Api::kCompletions ? canon::Endpoint::kCompletions
                                                           : canon::Endpoint::kChatCompletions);
    if (!request) return request.error();
    doc.request = std::move(*request);
  }
  if (doc.tenant.empty()) {
    if (const json::Value* t = doc.request.body.find("tenant"); t != nullptr && t->is_string()) {
      doc.tenant = t->as_string();
    } else {
      doc.tenant = doc.request.cache_salt;
    }
  }
  return doc;
}

}  // namespace

canon::ParsedRequest plain_text_request(std::string text) {
  canon::ParsedRequest r;
  r.endpoint = canon::Endpoint::kCompletions;
  r.prompts.push_back(canon::Prompt{.text = text, .token_ids = {}, .is_tokens = false});
  json::Object body;
  body.push_back(json::Member{"prompt", json::Value(std::move(text))});
  r.body = json::Value(std::move(body));
  return r;
}

Result<std::string> read_file(const std::string& path) {
  if (path == "-") {
    return std::string(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error(ErrorCode::kNotFound, path + ": cannot open file");
  std::ostringstream buf;
  buf << in.rdbuf();
  if (in.bad()) return make_error(ErrorCode::kNotFound, path + ": read error");
  return buf.str();
}

Error refused_by_template(const std::string& file, const Document& doc, const Error& error) {
  return make_error(error.code,
                    file + ":" + std::to_string(doc.line) +
                        ": the model's chat template refuses this request: " + error.message);
}

std::string document_field(const Document& doc, const std::string& chat_field) {
  return doc.conversion ? canon::source_field(*doc.conversion, chat_field) : chat_field;
}

canon::LintOptions lint_options(const Document& doc, const canon::RenderedPrompt& prompt) {
  canon::LintOptions options;
  if (doc.conversion) {
    options.breakpoints = canon::breakpoint_bytes(*doc.conversion, doc.request, prompt);
  }
  return options;
}

Result<std::vector<Document>> read_documents(const std::string& path,
                                             std::optional<canon::Api> api) {
  auto contents = read_file(path);
  if (!contents) return contents.error();
  const std::string& text = *contents;
  std::vector<Document> docs;

  if (ends_with(path, ".jsonl") || ends_with(path, ".ndjson")) {
    std::size_t line_no = 0;
    for (std::size_t pos = 0; pos < text.size();) {
      std::size_t end = text.find('\n', pos);
      if (end == std::string::npos) end = text.size();
      ++line_no;
      std::string_view line(text.data() + pos, end - pos);
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      const bool blank = line.find_first_not_of(" \t") == std::string_view::npos;
      if (!blank) {
        auto value = json::parse(line);
        if (!value) return in_file(path, line_no, value.error());
        Document doc{.file = path, .line = line_no, .file_offset = pos, .raw = std::string(line)};
        auto parsed = document_from_json(std::move(*value), std::move(doc), api);
        if (!parsed) return in_file(path, line_no, parsed.error());
        docs.push_back(std::move(*parsed));
      }
      pos = end + 1;
    }
    return docs;
  }

  // A .json file must be a request; other files are requests when they parse as one, and
  // prompt text otherwise.
  const bool must_be_json = ends_with(path, ".json");
  auto value = json::parse(text);
  if (value && value->is_object()) {
    Document doc{.file = path, .raw = text};
    auto parsed = document_from_json(std::move(*value), std::move(doc), api);
    if (parsed) {
      docs.push_back(std::move(*parsed));
      return docs;
    }
    if (must_be_json) return in_file(path, 1, parsed.error());
  } else if (must_be_json) {
    return in_file(path, 1,
                   value ? make_error(ErrorCode::kWrongType, "expected a JSON object (a request)")
                         : value.error());
  }
  Document doc{.file = path, .raw = text, .request = plain_text_request(text), .plain_text = true};
  docs.push_back(std::move(doc));
  return docs;
}

}  // namespace prefixgate::lint
