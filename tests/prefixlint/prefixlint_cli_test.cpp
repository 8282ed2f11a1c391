// prefixlint as a user runs it: the built binary, real files, exit codes and output formats.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "prefixgate/canonicalize/json.h"

namespace prefixgate {
namespace {

namespace fs = std::filesystem;

struct RunResult {
  int exit_code = -1;
  std::string out;  // stdout
  std::string err;  // stderr
};

std::string read_all(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Runs prefixlint with `args` (already shell-quoted where needed) from the source directory.
RunResult prefixlint(const std::string& args, const std::string& stdin_text = "") {
  const fs::path dir =
      fs::temp_directory_path() / ("prefixlint-test-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const fs::path in = dir / "stdin", out = dir / "stdout", err = dir / "stderr";
  std::ofstream(in, std::ios::binary) << stdin_text;
  const std::string cmd = std::string("cd '") + PREFIXGATE_SOURCE_DIR + "' && '" + PREFIXLINT_BIN +
                          "' " + args + " <'" + in.string() + "' >'" + out.string() + "' 2>'" +
                          err.string() + "'";
  const int status = std::system(cmd.c_str());
  RunResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = read_all(out);
  r.err = read_all(err);
  fs::remove_all(dir);
  return r;
}

json::Value parse_json(const std::string& text) {
  auto v = json::parse(text);
  EXPECT_TRUE(v) << (v ? "" : v.error().message) << "\n" << text;
  return v ? *v : json::Value();
}

std::size_t as_size(const json::Value* v) {
  EXPECT_NE(v, nullptr);
  return v == nullptr ? 0 : static_cast<std::size_t>(v->as_number().value);
}

TEST(PrefixlintCliTest, CheckFindsTimestampsAndIdsAndExitsOne) {
  RunResult r = prefixlint("check examples/prompts/support-agent.json");
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("error: volatile-timestamp"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("error: volatile-id"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("stable prefix"), std::string::npos) << r.out;
}

TEST(PrefixlintCliTest, JsonFindingsPointAtTheirTextInTheFile) {
  const std::string file = "examples/prompts/support-agent.json";
  RunResult r = prefixlint("check --format json " + file);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  const json::Value doc = parse_json(r.out);
  const json::Value& f = doc.find("files")->as_array().at(0);
  EXPECT_EQ(f.find("file")->as_string(), file);
  EXPECT_GT(as_size(f.find("stable_prefix_tokens")), 0u);
  const json::Array& findings = f.find("findings")->as_array();
  ASSERT_FALSE(findings.empty());
  const std::string source = read_all(fs::path(PREFIXGATE_SOURCE_DIR) / file);
  for (const json::Value& finding : findings) {
    for (const char* key : {"rule", "severity", "line", "column", "byte_offset", "token_offset",
                            "excerpt", "message", "hint"}) {
      EXPECT_NE(finding.find(key), nullptr) << key;
    }
    const std::string& excerpt = finding.find("excerpt")->as_string();
    EXPECT_EQ(source.substr(as_size(finding.find("byte_offset")), excerpt.size()), excerpt);
    // line:column names the same place.
    std::size_t line = 1, offset = 0;
    while (line < as_size(finding.find("line"))) offset = source.find('\n', offset) + 1, ++line;
    EXPECT_EQ(source.substr(offset + as_size(finding.find("column")) - 1, excerpt.size()), excerpt);
  }
}

TEST(PrefixlintCliTest, SarifIsVersion210WithRulesAndResults) {
  RunResult r = prefixlint("check --format sarif examples/prompts/support-agent.json");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  const json::Value doc = parse_json(r.out);
  EXPECT_EQ(doc.find("version")->as_string(), "2.1.0");
  const json::Value& run = doc.find("runs")->as_array().at(0);
  EXPECT_EQ(run.find("tool")->find("driver")->find("name")->as_string(), "prefixlint");
  EXPECT_EQ(run.find("tool")->find("driver")->find("rules")->as_array().size(), 3u);
  const json::Array& results = run.find("results")->as_array();
  ASSERT_FALSE(results.empty());
  for (const json::Value& res : results) {
    const std::string& level = res.find("level")->as_string();
    EXPECT_TRUE(level == "error" || level == "warning" || level == "note") << level;
    const json::Value* region =
        res.find("locations")->as_array().at(0).find("physicalLocation")->find("region");
    EXPECT_GE(as_size(region->find("startLine")), 1u);
  }
}

TEST(PrefixlintCliTest, FailOnSetsTheThreshold) {
  // A date alone is info: clean by default, a failure with --fail-on info.
  EXPECT_EQ(prefixlint("check examples/prompts/daily-digest.json").exit_code, 0);
  EXPECT_EQ(prefixlint("check --fail-on info examples/prompts/daily-digest.json").exit_code, 1);
  // An hour-precision timestamp is a warning: fails by default, passes with --fail-on error.
  EXPECT_EQ(prefixlint("check examples/prompts/hourly-report.json").exit_code, 1);
  EXPECT_EQ(prefixlint("check --fail-on error examples/prompts/hourly-report.json").exit_code, 0);
}

TEST(PrefixlintCliTest, CleanPromptIsClean) {
  RunResult r = prefixlint("check examples/prompts/clean-assistant.json");
  EXPECT_EQ(r.exit_code, 0) << r.out;
}

TEST(PrefixlintCliTest, PlainTextAndStdinAreLinted) {
  RunResult text = prefixlint("check examples/prompts/system-prompt.txt");
  EXPECT_EQ(text.exit_code, 1) << text.out << text.err;
  RunResult in = prefixlint("check -", "Generated at 2026-08-20T14:33:07Z for you.");
  EXPECT_EQ(in.exit_code, 1) << in.out << in.err;
  EXPECT_NE(in.out.find("-:1:14: error: volatile-timestamp"), std::string::npos) << in.out;
}

TEST(PrefixlintCliTest, BadInputAndUsageExitTwoWithAMessage) {
  RunResult missing = prefixlint("check no/such/file.json");
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.err.find("no/such/file.json"), std::string::npos) << missing.err;

  const fs::path bad = fs::temp_directory_path() / "prefixlint-bad.json";
  std::ofstream(bad) << R"({"messages":[{"role":"user","content":)";
  RunResult invalid = prefixlint("check '" + bad.string() + "'");
  EXPECT_EQ(invalid.exit_code, 2);
  EXPECT_NE(invalid.err.find("prefixlint-bad.json"), std::string::npos) << invalid.err;
  fs::remove(bad);

  EXPECT_EQ(prefixlint("check --format xml examples/prompts/daily-digest.json").exit_code, 2);
  EXPECT_EQ(prefixlint("frobnicate").exit_code, 2);
  EXPECT_EQ(prefixlint("").exit_code, 2);
  EXPECT_EQ(prefixlint("check --template vicuna examples/prompts/daily-digest.json").exit_code, 2);
  EXPECT_EQ(prefixlint("check --tokenizer /nonexistent.json examples/prompts/daily-digest.json")
                .exit_code,
            2);
}

TEST(PrefixlintCliTest, DiffTellsTimestampAndToolChanges) {
  RunResult ts = prefixlint(
      "diff --format json examples/prompts/system-prompt-v1.json "
      "examples/prompts/system-prompt-v2.json");
  EXPECT_EQ(ts.exit_code, 1) << ts.err;
  const json::Value d = parse_json(ts.out);
  EXPECT_TRUE(d.find("diverged")->as_bool());
  EXPECT_EQ(d.find("cause")->as_string(), "timestamp");
  EXPECT_EQ(d.find("field")->as_string(), "messages[0].content");
  EXPECT_TRUE(d.find("canonicalization_keeps_prefix")->as_bool());
  EXPECT_GT(as_size(d.find("prefix_tokens_lost")), 0u);

  RunResult tools = prefixlint(
      "diff examples/prompts/agent-tools-v1.json "
      "examples/prompts/agent-tools-v2.json");
  EXPECT_EQ(tools.exit_code, 1) << tools.err;
  EXPECT_TRUE(tools.out.find("cause: tool-order") != std::string::npos ||
              tools.out.find("cause: key-order") != std::string::npos)
      << tools.out;
  EXPECT_NE(tools.out.find("canonicalization keeps the prefix"), std::string::npos) << tools.out;

  RunResult same = prefixlint(
      "diff examples/prompts/agent-tools-v1.json "
      "examples/prompts/agent-tools-v1.json");
  EXPECT_EQ(same.exit_code, 0);
  EXPECT_NE(same.out.find("no divergence"), std::string::npos);
}

TEST(PrefixlintCliTest, LogReportsCeilingsCausesAndTenants) {
  RunResult r = prefixlint("log --format json examples/logs/small.jsonl");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  const json::Value doc = parse_json(r.out);
  const json::Value* total = doc.find("total");
  const double as_sent = total->find("hit_rate")->as_number().value;
  const double canonical = total->find("canonical_hit_rate")->as_number().value;
  EXPECT_GT(as_sent, 0.0);
  EXPECT_GT(canonical, as_sent);
  EXPECT_LE(canonical, 1.0);
  std::set<std::string> causes;
  for (const json::Value& c : doc.find("causes")->as_array()) {
    causes.insert(c.find("cause")->as_string());
  }
  for (const char* expected : {"timestamp", "id", "edit"}) {
    EXPECT_TRUE(causes.count(expected)) << expected << " missing from " << r.out;
  }
  EXPECT_TRUE(causes.count("key-order") || causes.count("tool-order")) << r.out;
  EXPECT_GE(doc.find("tenants")->as_object().size(), 2u);

  RunResult text = prefixlint("log examples/logs/traffic.jsonl");
  EXPECT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("canonicalized:"), std::string::npos);
  EXPECT_NE(text.out.find("per tenant:"), std::string::npos);
}

// Occurrences of `needle` in `haystack`.
std::size_t occurrences(const std::string& haystack, const std::string& needle) {
  std::size_t n = 0;
  for (std::size_t at = haystack.find(needle); at != std::string::npos;
       at = haystack.find(needle, at + needle.size())) {
    ++n;
  }
  return n;
}

std::string percent_of(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f%%", 100.0 * x);
  return buf;
}

TEST(PrefixlintCliTest, LogHtmlIsASelfContainedPageWithTheSameCeilings) {
  for (const char* file : {"examples/logs/small.jsonl", "examples/logs/traffic.jsonl"}) {
    SCOPED_TRACE(file);
    RunResult json = prefixlint(std::string("log --format json ") + file);
    RunResult html = prefixlint(std::string("log --format html ") + file);
    ASSERT_EQ(html.exit_code, 0) << html.err;
    const std::string& h = html.out;
    EXPECT_EQ(h.rfind("<!doctype html>", 0), 0u);
    EXPECT_NE(h.find("</html>"), std::string::npos);
    // Well-formed enough for any browser: every element we open is closed.
    for (const char* tag : {"html", "head", "body", "main", "section", "table", "svg", "style",
                            "tr", "td", "title"}) {
      EXPECT_EQ(occurrences(h, std::string("<") + tag + ">") +
                    occurrences(h, std::string("<") + tag + " "),
                occurrences(h, std::string("</") + tag + ">"))
          << tag;
    }
    // Self-contained: nothing for a browser to fetch.
    for (const char* external : {"<script", "<link", "src=", "url(", "@import"}) {
      EXPECT_EQ(h.find(external), std::string::npos) << external;
    }
    // The ceilings, rounded as the text format rounds them, equal the JSON report's.
    const json::Value doc = parse_json(json.out);
    const json::Value* total = doc.find("total");
    ASSERT_NE(total, nullptr);
    const std::string as_sent = percent_of(total->find("hit_rate")->as_number().value);
    const std::string canonical = percent_of(total->find("canonical_hit_rate")->as_number().value);
    EXPECT_NE(h.find("id=\"ceiling-as-sent\">" + as_sent + "<"), std::string::npos) << as_sent;
    EXPECT_NE(h.find("id=\"ceiling-canonical\">" + canonical + "<"), std::string::npos)
        << canonical;
    // Every cause of the JSON report is among the top offenders.
    for (const json::Value& c : doc.find("causes")->as_array()) {
      EXPECT_NE(h.find("<td><b>" + c.find("cause")->as_string() + "</b></td>"), std::string::npos)
          << c.find("cause")->as_string();
    }
  }
  // Report text from the log is escaped, never markup.
  const fs::path log =
      fs::temp_directory_path() / ("prefixlint-html-" + std::to_string(::getpid()) + ".jsonl");
  std::ofstream(log) << R"({"tenant":"<script>alert(1)</script>","request":{"prompt":"hi <b>"}})"
                     << "\n";
  RunResult injected = prefixlint("log --format html '" + log.string() + "'");
  fs::remove(log);
  EXPECT_EQ(injected.exit_code, 0) << injected.err;
  EXPECT_EQ(injected.out.find("<script>"), std::string::npos);
  EXPECT_NE(injected.out.find("&lt;script&gt;"), std::string::npos);
}

TEST(PrefixlintCliTest, CanonReproducesTheRfcVectors) {
  const fs::path jcs = fs::path(PREFIXGATE_DATA_DIR) / "jcs";
  for (const char* name : {"arrays.json", "structures.json", "values.json", "weird.json"}) {
    RunResult r = prefixlint("canon '" + (jcs / "input" / name).string() + "'");
    EXPECT_EQ(r.exit_code, 0) << r.err;
    std::string expected = read_all(jcs / "output" / name);
    while (!expected.empty() && expected.back() == '\n') expected.pop_back();
    EXPECT_EQ(r.out, expected + "\n") << name;
  }
  RunResult in = prefixlint("canon", R"({"b":1e2,"a":[true,null]})");
  EXPECT_EQ(in.out, "{\"a\":[true,null],\"b\":100}\n");
  RunResult bad = prefixlint("canon", R"({"a":1,"a":2})");
  EXPECT_EQ(bad.exit_code, 2);
}

TEST(PrefixlintCliTest, TokensPrintsIdsAndBlockHashes) {
  RunResult r =
      prefixlint("tokens --tokenizer byte --template llama-3 examples/prompts/daily-digest.json");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  const json::Value doc = parse_json(r.out);
  const std::size_t tokens = doc.find("tokens")->as_array().size();
  EXPECT_GT(tokens, 16u);
  EXPECT_EQ(as_size(doc.find("block_size")), 16u);
  EXPECT_EQ(doc.find("block_hashes")->as_array().size(), tokens / 16);
  EXPECT_EQ(doc.find("block_hashes")->as_array()[0].as_string().size(), 16u);
  // Block size and model id change the hashes, not the tokens.
  RunResult r32 = prefixlint("tokens --block-size 32 examples/prompts/daily-digest.json");
  EXPECT_EQ(parse_json(r32.out).find("block_hashes")->as_array().size(), tokens / 32);
  // The rendered prompt the tokens are of: the byte tokenizer has one token per byte.
  const std::string text = doc.find("text")->as_string();
  EXPECT_TRUE(text.starts_with("<|begin_of_text|><|start_header_id|>system")) << text;
}

TEST(PrefixlintCliTest, TokensOfAModelFolderUseItsTokenizerAndTemplate) {
  RunResult r = prefixlint("tokens --tokenizer tests/data/models/tiny-chatml -",
                           R"({"messages":[{"role":"user","content":"the cat"}]})");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json::Value doc = parse_json(r.out);
  EXPECT_EQ(doc.find("text")->as_string(),
            "<|im_start|>user\nthe cat<|im_end|>\n<|im_start|>assistant\n");
  // <|im_start|> is one special token (266); "the" and " cat" merge ("Ġt"+"he" is one token).
  const json::Array& ids = doc.find("tokens")->as_array();
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(as_size(&ids[0]), 266u);
  EXPECT_LT(ids.size(), doc.find("text")->as_string().size() - 20);

  RunResult builtin = prefixlint(
      "tokens --tokenizer tests/data/models/tiny-chatml --template "
      "llama-3 -",
      R"({"messages":[{"role":"user","content":"the cat"}]})");
  ASSERT_EQ(builtin.exit_code, 0) << builtin.err;
  EXPECT_TRUE(parse_json(builtin.out).find("text")->as_string().starts_with("<|begin_of_text|>"));
}

TEST(PrefixlintCliTest, CheckReportsATemplateThatWritesTodaysDate) {
  const std::string request =
      R"({"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"hi"}]})";
  RunResult dated =
      prefixlint("check --format json --tokenizer tests/data/models/tiny-dated -", request);
  EXPECT_EQ(dated.exit_code, 1) << dated.err;
  const json::Value doc = parse_json(dated.out);
  const json::Value& finding =
      doc.find("files")->as_array().at(0).find("findings")->as_array().at(0);
  EXPECT_EQ(finding.find("rule")->as_string(), "volatile-date");
  EXPECT_EQ(finding.find("severity")->as_string(), "error");
  EXPECT_EQ(finding.find("field")->as_string(), "chat_template");
  // The template writes "Today is 01 Dec 2026.": the finding is the date, at its first token.
  EXPECT_EQ(finding.find("excerpt")->as_string().size(), std::string("01 Dec 2026").size());

  RunResult plain = prefixlint("check --tokenizer tests/data/models/tiny-chatml -", request);
  EXPECT_EQ(plain.exit_code, 0) << plain.out << plain.err;
}

TEST(PrefixlintCliTest, ModelFolderErrorsExitTwoNamingTheProblem) {
  RunResult missing = prefixlint("tokens --tokenizer tests/data/models/nope -", "{}");
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.err.find("tests/data/models/nope"), std::string::npos) << missing.err;
  RunResult bad_template = prefixlint("tokens --tokenizer byte --template vicuna -", "{}");
  EXPECT_EQ(bad_template.exit_code, 2);
  EXPECT_NE(bad_template.err.find("--template"), std::string::npos) << bad_template.err;
}

// An Anthropic Messages request: linted as its chat equivalent, its cache_control breakpoints
// making a date before them an error, its findings named by its own fields.
TEST(PrefixlintCliTest, CheckReadsAMessagesRequestWithItsBreakpoints) {
  RunResult r = prefixlint("check --format json examples/prompts/claude-agent.json");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  const json::Value report = parse_json(r.out);
  const json::Value& findings = *report.find("files")->as_array()[0].find("findings");
  ASSERT_EQ(findings.as_array().size(), 2u) << r.out;
  const json::Value& date = findings.as_array()[0];
  EXPECT_EQ(date.find("rule")->as_string(), "volatile-date");
  EXPECT_EQ(date.find("severity")->as_string(), "error");  // info without the breakpoint
  EXPECT_EQ(date.find("field")->as_string(), "system[1].text");
  EXPECT_EQ(date.find("line")->as_number().value, 11);
  const json::Value& tail = findings.as_array()[1];
  EXPECT_EQ(tail.find("severity")->as_string(), "info");  // after the last breakpoint
  EXPECT_EQ(tail.find("field")->as_string(), "messages[2].content[1].text");
  // --api names the shape the file holds; the wrong one is refused.
  EXPECT_EQ(prefixlint("check --api messages examples/prompts/claude-agent.json").out,
            prefixlint("check examples/prompts/claude-agent.json").out);
  EXPECT_EQ(prefixlint("check --api responses examples/prompts/claude-agent.json").exit_code, 2);
}

TEST(PrefixlintCliTest, CheckReadsAResponsesRequestNamingItsFields) {
  RunResult r = prefixlint("check --format json examples/prompts/responses-agent.json");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  const json::Value report = parse_json(r.out);
  const json::Value& findings = *report.find("files")->as_array()[0].find("findings");
  ASSERT_EQ(findings.as_array().size(), 1u) << r.out;
  EXPECT_EQ(findings.as_array()[0].find("severity")->as_string(), "warning");
  EXPECT_EQ(findings.as_array()[0].find("field")->as_string(), "instructions");
  EXPECT_EQ(prefixlint("check --api chat examples/prompts/responses-agent.json").exit_code, 2);
}

// A log may mix the shapes: a Messages request repeated is a prefix hit like any other.
TEST(PrefixlintCliTest, LogAndDiffAcceptEveryShape) {
  const fs::path log =
      fs::temp_directory_path() / ("prefixlint-shapes-" + std::to_string(::getpid()) + ".jsonl");
  const std::string messages = json::to_json(parse_json(
      read_all(fs::path(PREFIXGATE_SOURCE_DIR) / "examples" / "prompts" / "claude-agent.json")));
  const std::string responses = json::to_json(parse_json(
      read_all(fs::path(PREFIXGATE_SOURCE_DIR) / "examples" / "prompts" / "responses-agent.json")));
  std::ofstream(log) << messages << "\n" << messages << "\n" << responses << "\n";
  RunResult r = prefixlint("log --format json '" + log.string() + "'");
  fs::remove(log);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json::Value total = *parse_json(r.out).find("total");
  EXPECT_EQ(as_size(total.find("requests")), 3u);
  EXPECT_GT(as_size(total.find("hit_tokens")), 1000u);  // the repeated Messages request
  RunResult same =
      prefixlint("diff examples/prompts/claude-agent.json examples/prompts/claude-agent.json");
  EXPECT_EQ(same.exit_code, 0) << same.err;
  EXPECT_NE(same.out.find("no divergence"), std::string::npos) << same.out;
}

}  // namespace
}  // namespace prefixgate
