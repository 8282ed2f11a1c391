// The prefixgate-engine binary as a user runs it: flags, the "listening on" line, serving with
// the built-in tiny model on the cpu device, and a SIGTERM that drains an in-flight stream.
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <regex>

#include "test_client.h"

namespace prefixgate::engine::server::testing {
namespace {

struct Process {
  pid_t pid = -1;
  int out = -1;  // the child's stdout and stderr
};

Process spawn(std::vector<std::string> args) {
  args.insert(args.begin(), PREFIXGATE_ENGINE_BIN);
  int fds[2];
  if (pipe(fds) != 0) return {};
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], 1);
    dup2(fds[1], 2);
    close(fds[0]);
    close(fds[1]);
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  close(fds[1]);
  return {pid, fds[0]};
}

// Reads the child's output until `re` matches or `timeout` passes.
bool read_until(const Process& p, const std::regex& re, std::string& out, std::smatch& m,
                std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (std::regex_search(out, m, re)) return true;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd pfd{p.out, POLLIN, 0};
    if (poll(&pfd, 1, static_cast<int>(left.count())) <= 0) return false;
    char buf[4096];
    const ssize_t n = read(p.out, buf, sizeof buf);
    if (n <= 0) return false;
    out.append(buf, static_cast<std::size_t>(n));
  }
}

std::string read_rest(const Process& p) {
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = read(p.out, buf, sizeof buf)) > 0;)
    out.append(buf, static_cast<std::size_t>(n));
  return out;
}

int wait_exit(const Process& p) {
  int status = 0;
  waitpid(p.pid, &status, 0);
  close(p.out);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

TEST(EngineCliTest, HelpDocumentsEveryFlag) {
  Process p = spawn({"--help"});
  const std::string out = read_rest(p);
  EXPECT_EQ(wait_exit(p), 0);
  for (const char* flag : {"--model",
                           "--device",
                           "--sim-profile",
                           "--sim-speedup",
                           "--kv-cache-tokens",
                           "--max-num-batched-tokens",
                           "--max-num-seqs",
                           "--max-model-len",
                           "--block-size",
                           "--threads",
                           "--served-model-name",
                           "--log-level",
                           "--host",
                           "--port",
                           "--kv-cache-dtype",
                           "--gpu-memory-utilization",
                           "--cuda-device",
                           "--no-cuda-graphs",
                           "--tokenizer",
                           "--chat-template",
                           "--max-connections"}) {
    EXPECT_NE(out.find(flag), std::string::npos) << flag;
  }
}

TEST(EngineCliTest, InvalidFlagsExitWithTwo) {
  for (std::vector<std::string> args : {std::vector<std::string>{"--no-such-flag"},
                                        {"--device", "tpu"},
                                        {"--port", "notaport"},
                                        {"--kv-cache-dtype", "fp4"},
                                        {"--gpu-memory-utilization", "1.5"},
                                        {"--chat-template", "vicuna"},
                                        {"--max-connections", "0"}}) {
    Process p = spawn(args);
    const std::string out = read_rest(p);
    EXPECT_EQ(wait_exit(p), 2) << args[0];
    EXPECT_FALSE(out.empty());
  }
}

// On a machine without a GPU (CI), --device cuda fails at start-up with exit 1 and the reason:
// no GPU or driver, or a build without the CUDA toolkit. Where a GPU is, the gpu tests cover it.
TEST(EngineCliTest, CudaDeviceWithoutGpuExitsWithOneAndSaysWhy) {
  if (access("/dev/nvidia0", F_OK) == 0) GTEST_SKIP() << "this machine has a GPU";
  Process p = spawn({"--model", "builtin:tiny", "--device", "cuda", "--port", "0"});
  const std::string out = read_rest(p);
  EXPECT_EQ(wait_exit(p), 1) << out;
  EXPECT_NE(out.find("--device cuda: "), std::string::npos) << out;
  EXPECT_EQ(out.find("listening on"), std::string::npos) << out;
}

// A tokenizer that cannot be loaded, or that does not fit the model's vocabulary, stops the
// engine at start-up with exit 1 and the reason.
TEST(EngineCliTest, ABadTokenizerExitsWithOneAndSaysWhy) {
  const std::string tiny = std::string(PREFIXGATE_SOURCE_DIR) + "/tests/data/models/tiny-chatml";
  for (std::vector<std::string> args :
       {std::vector<std::string>{"--tokenizer", "/nonexistent/folder"},
        // builtin:tiny's 263-id embedding table cannot serve the folder's 269 ids on the cpu
        // device (the sim device has no table: its vocabulary becomes the tokenizer's).
        {"--device", "cpu", "--tokenizer", tiny}}) {
    args.insert(args.end(), {"--model", "builtin:tiny", "--port", "0"});
    Process p = spawn(args);
    const std::string out = read_rest(p);
    EXPECT_EQ(wait_exit(p), 1) << out;
    EXPECT_NE(out.find("--tokenizer "), std::string::npos) << out;
    EXPECT_EQ(out.find("listening on"), std::string::npos) << out;
  }
}

TEST(EngineCliTest, ServesTinyModelAndDrainsOnSigterm) {
  Process p = spawn({"--model", "builtin:tiny", "--device", "cpu", "--port", "0",
                     "--served-model-name", "tiny", "--log-level", "warn"});
  std::string out;
  std::smatch m;
  ASSERT_TRUE(read_until(p, std::regex(R"(listening on http://127\.0\.0\.1:(\d+))"), out, m,
                         std::chrono::seconds(60)))
      << out;
  const auto port = static_cast<std::uint16_t>(std::stoi(m[1]));
  EXPECT_EQ(get(port, "/health").status, 200);

  const HttpReply chat = post(port, "/v1/chat/completions",
                              R"({"model":"tiny","messages":[{"role":"user","content":"Hi"}],)"
                              R"("max_tokens":4,"temperature":0})");
  EXPECT_EQ(chat.status, 200) << chat.body;

  Client c(port, std::chrono::seconds(60));
  ASSERT_TRUE(c.send(http::verb::post, "/v1/completions",
                     R"({"prompt":"drain","max_tokens":64,"ignore_eos":true,"stream":true})"));
  ASSERT_TRUE(c.read_header());
  ASSERT_TRUE(c.read_until([](const std::string& b) { return b.find("data: ") != b.npos; }));
  kill(p.pid, SIGTERM);
  const HttpReply r = c.read_all();
  EXPECT_EQ(r.status, 200);
  const SseEvents sse = parse_sse(c.body());
  EXPECT_TRUE(sse.done) << c.body().substr(0, 300);
  EXPECT_EQ(wait_exit(p), 0);
}

}  // namespace
}  // namespace prefixgate::engine::server::testing
