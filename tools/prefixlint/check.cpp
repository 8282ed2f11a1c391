#include "check.h"

#include <algorithm>
#include <iostream>
#include <map>

#include "commands.h"
#include "prefixgate/canonicalize/json.h"

namespace prefixgate::lint {
namespace {

using canon::Severity;

// Line and code-point column of `offset` in `text`, both 1-based.
std::pair<std::size_t, std::size_t> line_column(const std::string& text, std::size_t offset) {
  std::size_t line = 1, column = 1;
  for (std::size_t i = 0; i < offset && i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c == '\n') {
      ++line;
      column = 1;
    } else if ((c & 0xC0) != 0x80) {
      ++column;
    }
  }
  return {line, column};
}

// Where a finding's text sits in the document's raw bytes. Plain text maps one to one; in a
// JSON document the match is searched for as it is spelled in JSON, taking the n-th occurrence
// for the n-th finding with the same text. Falls back to the document's start.
std::size_t locate(const Document& doc, const canon::Finding& f,
                   std::map<std::string, std::size_t>& seen) {
  if (doc.plain_text) return f.prompt_begin;
  std::string quoted;
  json::append_quoted(f.excerpt, quoted);
  const std::string needle = quoted.substr(1, quoted.size() - 2);
  std::size_t& skip = seen[needle];
  std::size_t pos = 0;
  for (std::size_t i = 0;; ++i) {
    pos = doc.raw.find(needle, pos);
    if (pos == std::string::npos) return 0;
    if (i == skip) break;
    pos += needle.size();
  }
  ++skip;
  return pos;
}

const char* sarif_level(Severity s) {
  switch (s) {
    case Severity::kError: return "error";
    case Severity::kWarning: return "warning";
    case Severity::kInfo: return "note";
  }
  return "note";
}

json::Value number(std::size_t n) {
  return json::Value(static_cast<double>(n));
}

}  // namespace

Result<FileReport> check_documents(const std::string& file, const std::vector<Document>& docs,
                                   const canon::PromptModel& model,
                                   const canon::ChatRenderOptions& render) {
  FileReport report;
  report.file = file;
  report.requests = docs.size();
  bool first = true;
  for (const Document& doc : docs) {
    auto analyzed = canon::analyze_prompt(doc.request, model, render);
    if (!analyzed) return refused_by_template(file, doc, analyzed.error());
    const canon::AnalyzedPrompt& prompt = *analyzed;
    canon::PromptLint lint =
        canon::lint_request(doc.request, model, prompt, lint_options(doc, prompt.rendered));
    if (first || lint.stable_prefix_tokens < report.stable_prefix_tokens) {
      report.stable_prefix_tokens = lint.stable_prefix_tokens;
      report.prompt_tokens = prompt.tokens.tokens.size();
      first = false;
    }
    std::map<std::string, std::size_t> seen;
    for (canon::Finding& f : lint.findings) {
      FileFinding ff;
      const std::size_t in_doc = locate(doc, f, seen);
      ff.byte_offset = doc.file_offset + in_doc;
      ff.byte_length = doc.plain_text ? f.prompt_end - f.prompt_begin : f.excerpt.size();
      const auto [line, column] = line_column(doc.raw, in_doc);
      ff.line = doc.line + line - 1;
      ff.column = column;
      ff.request_line = doc.line;
      f.field = document_field(doc, f.field);
      ff.finding = std::move(f);
      report.findings.push_back(std::move(ff));
    }
  }
  return report;
}

std::string render_text(const std::vector<FileReport>& reports) {
  std::string out;
  std::size_t counts[3] = {0, 0, 0};
  for (const FileReport& r : reports) {
    for (const FileFinding& ff : r.findings) {
      const canon::Finding& f = ff.finding;
      ++counts[static_cast<int>(f.severity)];
      out += r.file + ":" + std::to_string(ff.line) + ":" + std::to_string(ff.column) + ": " +
             canon::severity_name(f.severity) + ": " + canon::rule_id(f.rule) + ": " + f.message +
             "\n";
      out += "    " + f.excerpt + "    [" + f.field + ", token " + std::to_string(f.token_offset) +
             "]\n";
      out += "    hint: " + f.hint + "\n";
    }
    out += r.file + ": stable prefix " + std::to_string(r.stable_prefix_tokens) + " of " +
           std::to_string(r.prompt_tokens) + " tokens";
    if (r.requests > 1) out += " (smallest of " + std::to_string(r.requests) + " requests)";
    out += "\n";
  }
  const std::size_t total = counts[0] + counts[1] + counts[2];
  out += std::to_string(total) + (total == 1 ? " finding" : " findings") + " (" +
         std::to_string(counts[2]) + " error, " + std::to_string(counts[1]) + " warning, " +
         std::to_string(counts[0]) + " info) in " + std::to_string(reports.size()) +
         (reports.size() == 1 ? " file\n" : " files\n");
  return out;
}

std::string render_json(const std::vector<FileReport>& reports) {
  json::Array files;
  for (const FileReport& r : reports) {
    json::Array findings;
    for (const FileFinding& ff : r.findings) {
      const canon::Finding& f = ff.finding;
      json::Object o;
      o.push_back({"rule", canon::rule_id(f.rule)});
      o.push_back({"severity", canon::severity_name(f.severity)});
      o.push_back({"line", number(ff.line)});
      o.push_back({"column", number(ff.column)});
      o.push_back({"byte_offset", number(ff.byte_offset)});
      o.push_back({"token_offset", number(f.token_offset)});
      o.push_back({"excerpt", f.excerpt});
      o.push_back({"message", f.message});
      o.push_back({"hint", f.hint});
      o.push_back({"kind", f.kind});
      o.push_back({"field", f.field});
      o.push_back({"request_line", number(ff.request_line)});
      findings.push_back(json::Value(std::move(o)));
    }
    json::Object file;
    file.push_back({"file", r.file});
    file.push_back({"findings", json::Value(std::move(findings))});
    file.push_back({"stable_prefix_tokens", number(r.stable_prefix_tokens)});
    file.push_back({"prompt_tokens", number(r.prompt_tokens)});
    file.push_back({"requests", number(r.requests)});
    files.push_back(json::Value(std::move(file)));
  }
  json::Object root;
  root.push_back({"files", json::Value(std::move(files))});
  return json::to_json(json::Value(std::move(root))) + "\n";
}

std::string render_sarif(const std::vector<FileReport>& reports) {
  struct RuleInfo {
    canon::Rule rule;
    const char* description;
    Severity level;
  };
  static const RuleInfo kRules[] = {
      {canon::Rule::kTimestamp, "A timestamp inside the cacheable prompt prefix", Severity::kError},
      {canon::Rule::kDate, "A calendar date inside the cacheable prompt prefix", Severity::kInfo},
      {canon::Rule::kId, "A per-request identifier inside the cacheable prompt prefix",
       Severity::kError},
  };
  json::Array rules;
  for (const RuleInfo& ri : kRules) {
    json::Object rule;
    rule.push_back({"id", canon::rule_id(ri.rule)});
    rule.push_back({"shortDescription", json::Object{{"text", ri.description}}});
    rule.push_back({"help", json::Object{{"text", canon::finding_hint(ri.rule)}}});
    rule.push_back({"defaultConfiguration", json::Object{{"level", sarif_level(ri.level)}}});
    rules.push_back(json::Value(std::move(rule)));
  }
  json::Array results;
  for (const FileReport& r : reports) {
    for (const FileFinding& ff : r.findings) {
      const canon::Finding& f = ff.finding;
      json::Object region;
      region.push_back({"startLine", number(ff.line)});
      region.push_back({"startColumn", number(ff.column)});
      region.push_back({"byteOffset", number(ff.byte_offset)});
      region.push_back({"byteLength", number(ff.byte_length)});
      region.push_back({"snippet", json::Object{{"text", f.excerpt}}});
      json::Object physical;
      physical.push_back({"artifactLocation", json::Object{{"uri", r.file}}});
      physical.push_back({"region", json::Value(std::move(region))});
      json::Object result;
      result.push_back({"ruleId", canon::rule_id(f.rule)});
      result.push_back({"ruleIndex", number(static_cast<std::size_t>(f.rule))});
      result.push_back({"level", sarif_level(f.severity)});
      result.push_back({"message", json::Object{{"text", f.message + ": " + f.excerpt}}});
      result.push_back(
          {"locations", json::Array{json::Object{{"physicalLocation", json::Value(physical)}}}});
      result.push_back({"properties", json::Object{{"field", f.field},
                                                   {"tokenOffset", number(f.token_offset)},
                                                   {"kind", f.kind}}});
      results.push_back(json::Value(std::move(result)));
    }
  }
  json::Object driver;
  driver.push_back({"name", "prefixlint"});
  driver.push_back({"version", PREFIXGATE_VERSION});
  driver.push_back({"informationUri", "https://github.com/prefixgate/prefixgate"});
  driver.push_back({"rules", json::Value(std::move(rules))});
  json::Object run;
  run.push_back({"tool", json::Object{{"driver", json::Value(std::move(driver))}}});
  run.push_back({"columnKind", "unicodeCodePoints"});
  run.push_back({"results", json::Value(std::move(results))});
  json::Object root;
  root.push_back({"$schema", "https://json.schemastore.org/sarif-2.1.0.json"});
  root.push_back({"version", "2.1.0"});
  root.push_back({"runs", json::Array{json::Value(std::move(run))}});
  return json::to_json(json::Value(std::move(root))) + "\n";
}

void add_check_command(CLI::App& app, std::function<int()>& run) {
  struct Options {
    ModelFlags model;
    std::string format = "text";
    std::string fail_on = "warning";
    std::vector<std::string> files;
  };
  auto opts = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "check", "report volatile content (timestamps, dates, ids) inside the cacheable prefix");
  cmd->add_option("--format", opts->format, "text, json or sarif")
      ->capture_default_str()
      ->check(CLI::IsMember({"text", "json", "sarif"}));
  cmd->add_option("--fail-on", opts->fail_on,
                  "exit 1 when a finding is at least this severe: info, warning or error")
      ->capture_default_str()
      ->check(CLI::IsMember({"info", "warning", "error"}));
  cmd->add_option("files", opts->files,
                  "requests (.json), request logs (.jsonl) or prompt text; - for stdin")
      ->required();
  add_model_flags(*cmd, opts->model, /*with_policy=*/false);
  cmd->callback([opts, &run] {
    run = [opts]() -> int {
      auto loaded = load_model(opts->model);
      if (!loaded) return fail(loaded.error());
      std::vector<FileReport> reports;
      for (const std::string& file : opts->files) {
        auto docs = read_documents(file, forced_api(opts->model));
        if (!docs) return fail(docs.error());
        auto report = check_documents(file, *docs, loaded->model, loaded->render);
        if (!report) return fail(report.error());
        reports.push_back(std::move(*report));
      }
      if (opts->format == "json") {
        std::cout << render_json(reports);
      } else if (opts->format == "sarif") {
        std::cout << render_sarif(reports);
      } else {
        std::cout << render_text(reports);
      }
      const Severity threshold = opts->fail_on == "error"     ? Severity::kError
                                 : opts->fail_on == "warning" ? Severity::kWarning
                                                              : Severity::kInfo;
      for (const FileReport& r : reports) {
        for (const FileFinding& ff : r.findings) {
          if (ff.finding.severity >= threshold) return 1;
        }
      }
      return 0;
    };
  });
}

}  // namespace prefixgate::lint
