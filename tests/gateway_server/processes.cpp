// The gateway tests' HTTP client and helpers (processes.h), compiled once for every test file
// that uses them.
#include "gateway_server/processes.h"

#include <sys/wait.h>

#include <cctype>
#include <cstdio>

#include "prefixgate/canonicalize/json.h"

namespace prefixgate::gateway::testing {

Reply call(std::uint16_t port, http::verb verb, const std::string& target, const std::string& body,
           const std::map<std::string, std::string>& headers, std::chrono::seconds timeout) {
  return call_host("127.0.0.1", port, verb, target, body, headers, timeout);
}

Reply call_host(const std::string& host, std::uint16_t port, http::verb verb,
                const std::string& target, const std::string& body,
                const std::map<std::string, std::string>& headers, std::chrono::seconds timeout) {
  asio::io_context ioc;
  beast::tcp_stream stream(ioc);
  Reply reply;
  http::request<http::string_body> req{verb, target, 11};
  req.set(http::field::host, host);
  for (const auto& [k, v] : headers) req.set(k, v);
  if (verb == http::verb::post) {
    if (headers.find("content-type") == headers.end()) {
      req.set(http::field::content_type, "application/json");
    }
    req.body() = body;
    req.prepare_payload();
  }
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(64u << 20);
  stream.expires_after(timeout);
  stream.async_connect({asio::ip::make_address(host), port}, [&](beast::error_code ec) {
    if (ec) return;
    // A server may answer before it has read the whole request (413): read even if the
    // write failed.
    http::async_write(stream, req, [&](beast::error_code, std::size_t) {
      http::async_read(stream, buffer, parser,
                       [&](beast::error_code rec, std::size_t) { reply.ok = !rec; });
    });
  });
  ioc.run();
  if (parser.is_header_done()) {
    reply.status = static_cast<int>(parser.get().result_int());
    for (const auto& f : parser.get()) {
      std::string name(f.name_string());
      for (char& ch : name) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
      reply.headers[name] = std::string(f.value());
    }
    reply.body = parser.get().body();
  }
  return reply;
}

std::string system_user_chat(const std::string& system, const std::string& user,
                             const std::string& extra) {
  std::string out = json::to_json(
      json::Object{{"model", "builtin:tiny"},
                   {"messages", json::Array{json::Object{{"role", "system"}, {"content", system}},
                                            json::Object{{"role", "user"}, {"content", user}}}},
                   {"max_tokens", 2},
                   {"temperature", 0}});
  if (!extra.empty()) out.insert(out.size() - 1, "," + extra);
  return out;
}

double metric_value(const std::string& text, const std::string& series) {
  const std::string line = series + " ";
  for (std::size_t at = text.find(line); at != std::string::npos; at = text.find(line, at + 1)) {
    if (at == 0 || text[at - 1] == '\n') return std::stod(text.substr(at + line.size()));
  }
  return -1;
}

int run_command(const std::string& command, std::string& output) {
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (!pipe) return -1;
  char buf[4096];
  for (std::size_t n; (n = fread(buf, 1, sizeof buf, pipe)) > 0;) output.append(buf, n);
  const int status = pclose(pipe);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::filesystem::path node_clients(std::initializer_list<const char*> packages, std::string& why) {
  const std::filesystem::path js = std::filesystem::path(PREFIXGATE_SOURCE_DIR) / "tests" / "js";
  std::string version;
  if (run_command("node --version", version) != 0) {
    why = "node is not installed (needed for the SDK tests): " + version;
    return {};
  }
  for (const char* package : packages) {
    if (!std::filesystem::exists(js / "node_modules" / package / "package.json")) {
      why = "tests/js/node_modules/" + std::string(package) +
            " is missing: run scripts/install-js-deps.sh";
      return {};
    }
  }
  return js;
}

}  // namespace prefixgate::gateway::testing
