// The gateway reads an upstream's answer however it arrives: whole in one segment (parsed where
// it landed, without a read that finds nothing), or in pieces split anywhere (inside the status
// line, between header fields, after the header, inside a body, across chunks) with pauses
// between them. Each answer is relayed byte for byte and its keep-alive connection is reused. An
// answer without a length ends where the replica closes; one closed before its length is an error.
// A chat replica's stream of tool calls, cut across its events, reaches a Messages or Responses
// client as tool_use blocks and function_call items whose argument pieces add up to the calls',
// read as raw events and by the official Anthropic and OpenAI SDKs
// (tests/js/tool_stream_client.mjs). The same for a long-lived stream: a burst of engine events
// many read buffers long is applied to the last line. Interim (1xx) answers before an answer are
// passed over.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <filesystem>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "gateway_server/processes.h"
#include "prefixgate/canonicalize/json.h"
#include "prefixgate/canonicalize/sse.h"

namespace prefixgate::gateway::testing {
namespace {

// The answer to every completion, and where to cut it for each kind of request (the request's
// body names its case: "case-N").
const std::string kAnswer =
    R"({"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant",)"
    R"("content":"pieces"},"finish_reason":"stop"}],"usage":{"prompt_tokens":7,)"
    R"("completion_tokens":1,"total_tokens":8}})";

// A streamed answer of two tool calls as vLLM sends it (a role chunk, each call's id and name,
// its arguments a piece at a time, the finish, then a usage chunk), for a client streaming the
// Messages or Responses API from this chat-only replica.
const std::vector<std::string> kToolStreamChunks = {
    R"({"id":"chatcmpl-t","object":"chat.completion.chunk","created":1,"model":"m","choices":)"
    R"([{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,)"
    R"("finish_reason":null}]})",
    R"({"id":"chatcmpl-t","object":"chat.completion.chunk","created":1,"model":"m","choices":)"
    R"([{"index":0,"delta":{"tool_calls":[{"id":"chatcmpl-tool-a","type":"function","index":0,)"
    R"("function":{"name":"grep","arguments":""}}]},"logprobs":null,"finish_reason":null}]})",
    R"({"id":"chatcmpl-t","object":"chat.completion.chunk","created":1,"model":"m","choices":)"
    R"([{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"pattern\": "}}]},)"
    R"("logprobs":null,"finish_reason":null}]})",
    R"({"id":"chatcmpl-t","object":"chat.completion.chunk","created":1,"model":"m","choices":)"
    R"([{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"route\\n\", "}}]},)"
    R"("logprobs":null,"finish_reason":null}]})",
    R"({"id":"chatcmpl-t","object":"chat.completion.chunk","created":1,"model":"m","choices":)"
    R"([{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"path\": \"src\"}"}}]},)"
    R"("logprobs":null,"finish_reason":null}]})",
    R"({"id":"chatcmpl-t","object":"chat.completion.chunk","created":1,"model":"m","choices":)"
    R"([{"index":0,"delta":{"tool_calls":[{"id":"chatcmpl-tool-b","type":"function","index":1,)"
    R"("function":{"name":"ls","arguments":"{}"}}]},"logprobs":null,"finish_reason":null}]})",
    R"({"id":"chatcmpl-t","object":"chat.completion.chunk","created":1,"model":"m","choices":)"
    R"([{"index":0,"delta":{"content":""},"logprobs":null,"finish_reason":"tool_calls",)"
    R"("stop_reason":null}]})",
    R"({"id":"chatcmpl-t","object":"chat.completion.chunk","created":1,"model":"m","choices":[],)"
    R"("usage":{"prompt_tokens":7,"completion_tokens":12,"total_tokens":19}})"};
// The two calls' arguments, whole.
const std::string kGrepArguments = "{\"pattern\": \"route\\n\", \"path\": \"src\"}";

// `body` sent chunked after `head`, a chunk of at most `piece` bytes per piece, the last chunk
// alone.
std::vector<std::string> chunked_pieces(const std::string& head, const std::string& body,
                                        std::size_t piece) {
  std::vector<std::string> out = {head + "transfer-encoding: chunked\r\n\r\n"};
  for (std::size_t at = 0; at < body.size(); at += piece) {
    const std::string part = body.substr(at, piece);
    char size[16];
    std::snprintf(size, sizeof size, "%zx", part.size());
    out.push_back(std::string(size) + "\r\n" + part + "\r\n");
  }
  out.push_back("0\r\n\r\n");
  return out;
}

// kToolStreamChunks as server-sent events.
std::string tool_stream_events() {
  std::string events;
  for (const std::string& chunk : kToolStreamChunks) events += "data: " + chunk + "\n\n";
  return events + "data: [DONE]\n\n";
}

std::vector<std::string> answer_pieces(int which) {
  const std::string head = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n";
  const std::string plain =
      head + "content-length: " + std::to_string(kAnswer.size()) + "\r\n\r\n" + kAnswer;
  const std::size_t header_end = plain.find("\r\n\r\n") + 4;
  switch (which) {
    case 0: return {plain};                                // whole
    case 1: return {plain.substr(0, 7), plain.substr(7)};  // inside the status line
    case 2: return {plain.substr(0, head.size()), plain.substr(head.size())};  // between fields
    case 3: return {plain.substr(0, header_end), plain.substr(header_end)};    // after the header
    case 4: {  // inside the body, twice
      const std::size_t a = header_end + 10, b = header_end + 60;
      return {plain.substr(0, a), plain.substr(a, b - a), plain.substr(b)};
    }
    case 6:  // no length: the body ends where the replica closes the connection
      return {head + "\r\n" + kAnswer.substr(0, 40), kAnswer.substr(40)};
    case 7:  // a length the replica does not send in full before it closes
      return {plain.substr(0, header_end + 40)};
    case 9:  // interim answers first, two in one segment, then the answer
      return {"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nlink: </a.css>\r\n\r\n",
              "HTTP/1.1 102 Processing\r\n\r\n" + plain.substr(0, 20), plain.substr(20)};
    case 8:  // a stream of tool calls, in pieces that cut across its events
      return chunked_pieces("HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n",
                            tool_stream_events(), 61);
    default: return chunked_pieces(head, kAnswer, 50);  // chunked, one chunk per piece
  }
}

// A replica that answers /health at once and every completion in the pieces its case says, 30
// ms apart, on keep-alive connections (a thread each). Counts connections and requests.
class PiecemealUpstream {
 public:
  PiecemealUpstream() {
    fd_ = listen_on_loopback(port_);
    if (fd_ < 0) return;
    acceptor_ = std::thread([this] {
      for (;;) {
        const int c = accept(fd_, nullptr, nullptr);
        if (c < 0) return;  // the listening socket was shut down
        ++connections_;
        std::lock_guard lock(mu_);
        conns_.push_back(c);
        workers_.emplace_back([this, c] { serve(c); });
      }
    });
  }
  ~PiecemealUpstream() {
    shutdown(fd_, SHUT_RDWR);
    {
      std::lock_guard lock(mu_);
      for (int c : conns_) shutdown(c, SHUT_RDWR);
    }
    if (acceptor_.joinable()) acceptor_.join();
    for (std::thread& t : workers_) t.join();
    for (int c : conns_) close(c);
    close(fd_);
  }
  std::uint16_t port() const { return port_; }
  int connections() const { return connections_.load(); }
  int completions() const { return completions_.load(); }

 private:
  void serve(int fd) {
    std::string in;
    char buf[8192];
    for (;;) {
      const std::size_t head_end = in.find("\r\n\r\n");
      if (head_end == std::string::npos) {
        const ssize_t n = read(fd, buf, sizeof buf);
        if (n <= 0) return;
        in.append(buf, static_cast<std::size_t>(n));
        continue;
      }
      std::size_t length = 0;
      const std::size_t cl = in.find("content-length: ");
      const std::size_t cl_upper = in.find("Content-Length: ");
      const std::size_t at = cl != std::string::npos && cl < head_end ? cl : cl_upper;
      if (at != std::string::npos && at < head_end) length = std::stoul(in.substr(at + 16));
      if (in.size() < head_end + 4 + length) {
        const ssize_t n = read(fd, buf, sizeof buf);
        if (n <= 0) return;
        in.append(buf, static_cast<std::size_t>(n));
        continue;
      }
      const std::string request = in.substr(0, head_end + 4 + length);
      in.erase(0, request.size());
      if (request.starts_with("GET /health")) {
        const std::string ok =
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 15\r\n\r\n"
            "{\"status\":\"ok\"}";
        if (write(fd, ok.data(), ok.size()) < 0) return;
        continue;
      }
      ++completions_;
      const std::size_t mark = request.find("case-");
      const int which = mark == std::string::npos ? 0 : request[mark + 5] - '0';
      const std::vector<std::string> pieces = answer_pieces(which);
      for (std::size_t i = 0; i < pieces.size(); ++i) {
        if (i > 0) std::this_thread::sleep_for(std::chrono::milliseconds(30));
        if (write(fd, pieces[i].data(), pieces[i].size()) < 0) return;
      }
      if (which == 6 || which == 7) {
        shutdown(fd, SHUT_RDWR);  // the end of the answer, or where it was cut
        return;
      }
    }
  }

  int fd_ = -1;
  std::uint16_t port_ = 0;
  std::atomic<int> connections_{0};
  std::atomic<int> completions_{0};
  std::mutex mu_;
  std::vector<int> conns_;
  std::vector<std::thread> workers_;
  std::thread acceptor_;
};

// A PiecemealUpstream and a gateway in front of it (`kind: openai`), started and healthy.
struct PiecesFleet {
  PiecemealUpstream up;
  std::uint16_t port = 0;
  std::unique_ptr<Process> gw;
};

// Starts `f`'s gateway, named `name`; call under ASSERT_NO_FATAL_FAILURE.
void start_fleet(PiecesFleet& f, const std::string& name) {
  ASSERT_NE(f.up.port(), 0);
  const std::string config = write_config(
      name, "upstreams:\n  - url: " + upstream(f.up.port()) +
                "\n    kind: openai\ntimeouts: {first_byte_ms: 5000, health_interval_ms: 200}\n");
  f.gw = start_gateway(f.port, {"--config", config});
  ASSERT_NE(f.port, 0) << f.gw->output();
  ASSERT_TRUE(wait_healthy(f.port, 1));
}

// A completion whose answer comes the way case `which` of answer_pieces() says.
std::string case_body(int which) {
  return R"({"model":"m","messages":[{"role":"user","content":"case-)" + std::to_string(which) +
         R"("}],"max_tokens":1})";
}

TEST(UpstreamPiecesTest, AnswersInAnyPiecesAreRelayedWholeOnReusedConnections) {
  PiecesFleet fleet;
  ASSERT_NO_FATAL_FAILURE(start_fleet(fleet, "pieces"));
  const PiecemealUpstream& up = fleet.up;
  const std::uint16_t port = fleet.port;
  constexpr int kCases = 6;
  for (int round = 0; round < 2; ++round) {
    for (int which = 0; which < kCases; ++which) {
      const Reply r = post(port, "/v1/chat/completions", case_body(which));
      ASSERT_TRUE(r.ok) << "case " << which << ": no complete answer";
      EXPECT_EQ(r.status, 200) << "case " << which << ": " << r.body;
      EXPECT_EQ(r.body, kAnswer) << "case " << which;
    }
  }
  EXPECT_EQ(up.completions(), 2 * kCases);
  // One client at a time: each answer read to its end leaves its connection clean for the next
  // (the health checks may hold one more).
  EXPECT_LE(up.connections(), 3) << "answers in pieces left their connections unusable";
  const Reply metrics = get(port, "/metrics");
  EXPECT_EQ(metrics.body.find("prefixgate_upstream_failures_total{"), std::string::npos)
      << metrics.body;
}

TEST(UpstreamPiecesTest, AnAnswerEndedByClosingIsWholeAndOneCutShortIsAnError) {
  PiecesFleet fleet;
  ASSERT_NO_FATAL_FAILURE(start_fleet(fleet, "closing"));
  const std::uint16_t port = fleet.port;
  const Reply whole = post(port, "/v1/chat/completions", case_body(6));
  ASSERT_TRUE(whole.ok);
  EXPECT_EQ(whole.status, 200) << whole.body;
  EXPECT_EQ(whole.body, kAnswer);
  const Reply cut = post(port, "/v1/chat/completions", case_body(7));
  ASSERT_TRUE(cut.ok);
  EXPECT_EQ(cut.status, 502) << cut.body;
  EXPECT_NE(cut.body.find("upstream_unavailable"), std::string::npos) << cut.body;
  const Reply metrics = get(port, "/metrics");
  EXPECT_NE(metrics.body.find(R"(prefixgate_upstream_failures_total{replica=")"), std::string::npos)
      << metrics.body;
}

// 1xx answers before the answer (a replica behind a proxy that sends 103 Early Hints, or one
// that says 100 Continue unasked) are passed over: the client gets the answer, not the first
// status line, and the connection stays usable.
TEST(UpstreamPiecesTest, InterimAnswersBeforeTheAnswerArePassedOver) {
  PiecesFleet fleet;
  ASSERT_NO_FATAL_FAILURE(start_fleet(fleet, "interim"));
  for (int round = 0; round < 2; ++round) {
    const Reply r = post(fleet.port, "/v1/chat/completions", case_body(9));
    ASSERT_TRUE(r.ok);
    EXPECT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.body, kAnswer);
  }
  EXPECT_LE(fleet.up.connections(), 3);
}

// The data of each event of a streamed answer, parsed (null where it is no JSON).
std::vector<json::Value> stream_event_data(const std::string& body) {
  canon::SseReader reader;
  std::vector<canon::SseEvent> events;
  reader.feed(body, events);
  std::vector<json::Value> out;
  for (const canon::SseEvent& e : events) {
    auto doc = json::parse(e.data);
    out.push_back(doc ? std::move(*doc) : json::Value());
  }
  return out;
}

std::string text_at_path(const json::Value& v, std::initializer_list<const char*> path) {
  const json::Value* at = &v;
  for (const char* key : path) {
    at = at->is_object() ? at->find(key) : nullptr;
    if (at == nullptr) return "";
  }
  return at->is_string() ? at->as_string() : json::to_json(*at);
}

TEST(UpstreamPiecesTest, AStreamOfToolCallsInPiecesIsTranslatedForMessagesAndResponses) {
  PiecesFleet fleet;
  ASSERT_NO_FATAL_FAILURE(start_fleet(fleet, "tool-stream"));
  const std::uint16_t port = fleet.port;

  // Messages: a tool_use block per call, its input the call's argument pieces in order.
  const Reply messages = post(port, "/v1/messages",
                              R"({"model":"m","max_tokens":64,"stream":true,)"
                              R"("messages":[{"role":"user","content":"case-8"}]})",
                              {{"anthropic-version", "2023-06-01"}});
  ASSERT_TRUE(messages.ok);
  ASSERT_EQ(messages.status, 200) << messages.body;
  std::map<std::string, std::string> names, ids, inputs;  // by block index
  std::string stop_reason, output_tokens, last;
  for (const json::Value& e : stream_event_data(messages.body)) {
    last = text_at_path(e, {"type"});
    const std::string index = text_at_path(e, {"index"});
    if (last == "content_block_start" && text_at_path(e, {"content_block", "type"}) == "tool_use") {
      names[index] = text_at_path(e, {"content_block", "name"});
      ids[index] = text_at_path(e, {"content_block", "id"});
    }
    if (last == "content_block_delta" && text_at_path(e, {"delta", "type"}) == "input_json_delta") {
      inputs[index] += text_at_path(e, {"delta", "partial_json"});
    }
    if (last == "message_delta") {
      stop_reason = text_at_path(e, {"delta", "stop_reason"});
      output_tokens = text_at_path(e, {"usage", "output_tokens"});
    }
  }
  ASSERT_EQ(names.size(), 2u) << messages.body;
  const std::string grep = names.begin()->first, ls = std::next(names.begin())->first;
  EXPECT_EQ(names[grep], "grep");
  EXPECT_EQ(ids[grep], "chatcmpl-tool-a");
  EXPECT_EQ(inputs[grep], kGrepArguments) << messages.body;
  EXPECT_EQ(names[ls], "ls");
  EXPECT_EQ(ids[ls], "chatcmpl-tool-b");
  EXPECT_EQ(inputs[ls], "{}");
  EXPECT_EQ(stop_reason, "tool_use");
  EXPECT_EQ(output_tokens, "12");
  EXPECT_EQ(last, "message_stop");

  // Responses: a function_call item per call, its arguments' deltas adding up to the done event's.
  const Reply responses =
      post(port, "/v1/responses",
           R"({"model":"m","max_output_tokens":64,"stream":true,"input":"case-8"})");
  ASSERT_TRUE(responses.ok);
  ASSERT_EQ(responses.status, 200) << responses.body;
  std::map<std::string, std::string> deltas, done;  // by output index
  json::Value completed;
  for (json::Value& e : stream_event_data(responses.body)) {
    const std::string type = text_at_path(e, {"type"}), index = text_at_path(e, {"output_index"});
    if (type == "response.function_call_arguments.delta")
      deltas[index] += text_at_path(e, {"delta"});
    if (type == "response.function_call_arguments.done")
      done[index] = text_at_path(e, {"arguments"});
    if (type == "response.completed") completed = std::move(e);
  }
  ASSERT_EQ(done.size(), 2u) << responses.body;
  EXPECT_EQ(done.begin()->second, kGrepArguments);
  EXPECT_EQ(std::next(done.begin())->second, "{}");
  EXPECT_EQ(deltas, done);
  const json::Value* response = completed.is_object() ? completed.find("response") : nullptr;
  ASSERT_NE(response, nullptr) << responses.body;
  EXPECT_EQ(text_at_path(*response, {"usage", "output_tokens"}), "12");
  const json::Value* items = response->find("output");
  ASSERT_TRUE(items != nullptr && items->is_array() && items->as_array().size() == 2)
      << responses.body;
  EXPECT_EQ(text_at_path(items->as_array()[0], {"name"}), "grep");
  EXPECT_EQ(text_at_path(items->as_array()[0], {"arguments"}), kGrepArguments);
  EXPECT_EQ(text_at_path(items->as_array()[1], {"name"}), "ls");

  // The official SDKs put both calls together from the same streams, as an agent's loop does.
  std::string why;
  const std::filesystem::path js = node_clients({"@anthropic-ai/sdk", "openai"}, why);
  ASSERT_FALSE(js.empty()) << why;
  std::string output;
  const int rc = run_command("timeout 120 node " + (js / "tool_stream_client.mjs").string() +
                                 " http://127.0.0.1:" + std::to_string(port) + " case-8",
                             output);
  EXPECT_EQ(rc, 0) << output;
  for (const char* step : {"\"messages_tool_stream\":", "\"responses_tool_stream\":"}) {
    EXPECT_NE(output.find(step), std::string::npos) << step << " missing in " << output;
  }
  EXPECT_NE(output.find("\"failures\":[]"), std::string::npos) << output;
}

TEST(UpstreamPiecesTest, AnEventBurstManyReadBuffersLongIsAppliedToTheLastLine) {
  // A fresh 16 KB prompt makes the engine store about 1,000 blocks at once: runs of up to 256
  // blocks a line, 18 KB of /v1/kv_events in one chunk, longer than the gateway's 16 KiB read
  // buffer; each run takes as many sequence numbers as it has blocks.
  std::uint16_t engine_port = 0;
  auto engine = start_engine(engine_port, "inf", {"--max-model-len", "32768"});
  ASSERT_NE(engine_port, 0);
  std::uint16_t port = 0;
  auto gw = start_gateway(port, {"--upstream", upstream(engine_port)});
  ASSERT_NE(port, 0) << gw->output();
  ASSERT_TRUE(wait_healthy(port, 1));
  std::string text;
  for (int i = 0; text.size() < 16000; ++i) text += "sentence " + std::to_string(i) + " of many. ";
  const Reply r =
      post(port, "/v1/chat/completions",
           json::to_json(json::Object{
               {"model", "builtin:tiny"},
               {"messages", json::Array{json::Object{{"role", "user"}, {"content", text}}}},
               {"max_tokens", 1}}));
  ASSERT_EQ(r.status, 200) << r.body;
  const auto answer = json::parse(r.body);
  ASSERT_TRUE(answer.ok()) << r.body;
  const json::Value* usage = answer->find("usage");
  ASSERT_NE(usage, nullptr) << r.body;
  const json::Value* prompt = usage->find("prompt_tokens");
  ASSERT_TRUE(prompt != nullptr && prompt->is_number()) << r.body;
  const double prompt_tokens = prompt->as_number().value;
  const double stored_blocks = std::floor(prompt_tokens / 16);  // the prompt's full blocks
  ASSERT_GT(stored_blocks, 900);
  const std::string series =
      "prefixgate_kv_events_total{replica=\"" + upstream(engine_port) + "\",type=\"stored\"}";
  // The engine writes the burst as the prompt is prefilled, before it answers; the gateway
  // applies it within milliseconds. A reader that holds bytes back until more arrive leaves the
  // tail unapplied until the stream's next lines, seconds later: 3 s tells the two apart.
  double applied = -1;
  for (int i = 0; i < 60 && applied != stored_blocks; ++i) {
    applied = metric_value(get(port, "/metrics").body, series);
    if (applied != stored_blocks) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(applied, stored_blocks) << "stored lines the gateway applied of the engine's burst";
}

}  // namespace
}  // namespace prefixgate::gateway::testing
