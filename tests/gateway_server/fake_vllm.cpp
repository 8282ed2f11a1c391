// FakeVllm: the HTTP side is a serving::HttpServer on its own thread; each rank's PUB socket is
// used from the test's thread only, each ROUTER from the replay thread only; what they share,
// the replay buffers and sequence numbers, is under each rank's mutex.
#include "gateway_server/fake_vllm.h"

#include <zmq.h>

#include <deque>
#include <random>
#include <stdexcept>
#include <thread>

#include "prefixgate/canonicalize/json.h"
#include "prefixgate/kv_events/wire.h"
#include "prefixgate/serving/errors.h"
#include "prefixgate/serving/server.h"

namespace prefixgate::gateway::testing {
namespace {

// A socket bound to `endpoint`, or null with `error` saying why not.
void* bound_socket(void* ctx, int type, const std::string& endpoint, std::string& error) {
  void* s = zmq_socket(ctx, type);
  if (s == nullptr) {
    error = std::string("zmq_socket: ") + zmq_strerror(zmq_errno());
    return nullptr;
  }
  const int linger = 0;
  zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof linger);
  if (zmq_bind(s, endpoint.c_str()) != 0) {
    error = endpoint + ": " + zmq_strerror(zmq_errno());
    zmq_close(s);
    return nullptr;
  }
  return s;
}

void send_all(void* s, const std::vector<std::string>& frames) {
  for (std::size_t i = 0; i < frames.size(); ++i) {
    zmq_send(s, frames[i].data(), frames[i].size(), i + 1 < frames.size() ? ZMQ_SNDMORE : 0);
  }
}

}  // namespace

struct FakeVllm::Rank {
  void* pub = nullptr;
  void* router = nullptr;
  int pub_port = 0, router_port = 0;
  mutable std::mutex mu;
  std::int64_t next_seq = 0;                                // guarded by mu
  std::deque<std::pair<std::int64_t, std::string>> buffer;  // guarded by mu
  std::size_t drop = 0;                                     // test thread only
};

struct FakeVllm::Http : serving::Handler {
  explicit Http(FakeVllm& f) : fake(f) {}
  FakeVllm& fake;
  std::unique_ptr<serving::HttpServer> server;
  std::thread thread;

  std::string metrics() const {
    std::lock_guard lock(fake.load_mu_);
    const bool vllm = fake.options_.kind == "vllm";
    std::string out;
    const auto line = [&](const char* name, double v) {
      out += std::string("# TYPE ") + name + " gauge\n" + name + "{model_name=\"fake\"} " +
             std::to_string(v) + "\n";
    };
    line(vllm ? "vllm:num_requests_running" : "sglang:num_running_reqs", fake.running_);
    line(vllm ? "vllm:num_requests_waiting" : "sglang:num_queue_reqs", fake.waiting_);
    line(vllm ? "vllm:kv_cache_usage_perc" : "sglang:token_usage", fake.kv_usage_);
    return out;
  }

  std::string completion(const serving::Request& req, bool& stream) const {
    std::size_t prompt_tokens = 0;
    stream = false;
    if (auto body = json::parse(req.body()); body && body->is_object()) {
      if (const json::Value* s = body->find("stream"); s && s->is_bool()) stream = s->as_bool();
      if (const json::Value* p = body->find("prompt"); p && p->is_array()) {
        prompt_tokens = p->as_array().size();
      } else if (p && p->is_string()) {
        prompt_tokens = p->as_string().size();
      } else {
        prompt_tokens = req.body().size() / 4;
      }
    }
    const std::string usage = R"({"prompt_tokens":)" + std::to_string(prompt_tokens) +
                              R"(,"completion_tokens":1,"total_tokens":)" +
                              std::to_string(prompt_tokens + 1) +
                              R"(,"prompt_tokens_details":{"cached_tokens":0}})";
    const std::string choice = R"({"index":0,"text":"x","finish_reason":"length"})";
    if (!stream) {
      return R"({"id":"cmpl-fake","object":"text_completion","model":"fake","choices":[)" + choice +
             R"(],"usage":)" + usage + "}";
    }
    return R"(data: {"id":"cmpl-fake","object":"text_completion","model":"fake","choices":[)" +
           choice + "]}\n\n" +
           R"(data: {"id":"cmpl-fake","object":"text_completion","model":"fake","choices":[],"usage":)" +
           usage + "}\n\ndata: [DONE]\n\n";
  }

  serving::Awaitable<bool> handle(serving::Connection& c, serving::Request& req) override {
    const std::string_view path = serving::path_of(req.target());
    const bool keep = req.keep_alive();
    namespace http = serving::http;
    serving::Response res;
    if (path == "/health") {
      res = serving::make_response(req, http::status::ok, "application/json", "{}", keep);
    } else if (path == "/metrics") {
      res = serving::make_response(req, http::status::ok, "text/plain; version=0.0.4", metrics(),
                                   keep);
    } else if (path == "/v1/models") {
      res = serving::make_response(req, http::status::ok, "application/json",
                                   R"({"object":"list","data":[{"id":"fake","object":"model"}]})",
                                   keep);
    } else if (path == "/v1/completions" || path == "/v1/chat/completions") {
      ++fake.completions_;
      bool stream = false;
      std::string body = completion(req, stream);
      res = serving::make_response(req, http::status::ok,
                                   stream ? "text/event-stream" : "application/json",
                                   std::move(body), keep);
    } else {
      res = serving::error_response(req, http::status::not_found, "no route", "not_found", keep);
    }
    co_return co_await serving::write_response(c, std::move(res)) && keep;
  }
};

FakeVllm::FakeVllm(FakeVllmOptions options) : options_(std::move(options)) {
  zctx_ = zmq_ctx_new();
  // Rank k publishes on rank 0's ports plus k: find bases where every rank's ports are free.
  // The bases are drawn below the kernel's ephemeral range (32768 and up, where the tests running
  // beside this one get their servers' and their connections' ports), so a neighbour's socket
  // rarely holds rank 0's port plus k.
  std::mt19937 rng(std::random_device{}());
  std::uniform_int_distribution<int> base(20000, 32000);
  std::string error;
  for (int attempt = 0; attempt < 100 && ranks_.empty(); ++attempt) {
    std::vector<std::unique_ptr<Rank>> ranks;
    bool ok = true;
    const int pub_base = base(rng);
    const int router_base = base(rng);
    for (std::size_t k = 0; k < options_.ranks && ok; ++k) {
      auto r = std::make_unique<Rank>();
      const std::string pub_ep =
          "tcp://127.0.0.1:" + std::to_string(pub_base + static_cast<int>(k));
      r->pub = bound_socket(zctx_, ZMQ_PUB, pub_ep, error);
      ok = r->pub != nullptr;
      if (ok) r->pub_port = pub_base + static_cast<int>(k);
      if (ok && options_.replay) {
        const std::string router_ep =
            "tcp://127.0.0.1:" + std::to_string(router_base + static_cast<int>(k));
        r->router = bound_socket(zctx_, ZMQ_ROUTER, router_ep, error);
        ok = r->router != nullptr;
        if (ok) r->router_port = router_base + static_cast<int>(k);
      }
      ranks.push_back(std::move(r));
    }
    if (ok) {
      ranks_ = std::move(ranks);
    } else {
      for (auto& r : ranks) {
        if (r->pub != nullptr) zmq_close(r->pub);
        if (r->router != nullptr) zmq_close(r->router);
      }
    }
  }
  if (ranks_.empty()) {
    throw std::runtime_error("FakeVllm: no free ports for its ranks (last: " + error + ")");
  }
  if (options_.replay) replay_thread_ = std::make_unique<std::thread>([this] { serve_replays(); });

  http_ = std::make_unique<Http>(*this);
  serving::ServerOptions o;
  o.threads = 1;
  o.server_name = "fake-vllm";
  http_->server = std::make_unique<serving::HttpServer>(o, *http_);
  auto port = http_->server->start();
  if (!port) throw std::runtime_error("FakeVllm: " + port.error().message);
  http_port_ = *port;
  http_->thread = std::thread([this] { http_->server->run(); });
}

FakeVllm::~FakeVllm() {
  http_->server->request_shutdown();
  http_->thread.join();
  stop_ = true;
  if (replay_thread_) replay_thread_->join();
  for (auto& r : ranks_) {
    zmq_close(r->pub);
    if (r->router != nullptr) zmq_close(r->router);
  }
  zmq_ctx_term(zctx_);
}

std::string FakeVllm::kv_events_endpoint() const {
  return "tcp://127.0.0.1:" + std::to_string(ranks_[0]->pub_port);
}

std::string FakeVllm::replay_endpoint() const {
  return options_.replay ? "tcp://127.0.0.1:" + std::to_string(ranks_[0]->router_port) : "";
}

std::string FakeVllm::upstream_spec() const {
  std::string spec = url() + ";kind=" + options_.kind + ";kv_events=" + kv_events_endpoint();
  if (options_.replay) spec += ";kv_events_replay=" + replay_endpoint();
  if (options_.ranks > 1) spec += ";data_parallel_size=" + std::to_string(options_.ranks);
  return spec + ";load_interval_ms=50";
}

std::uint64_t FakeVllm::engine_hash(std::uint64_t parent, const std::uint32_t* tokens,
                                    std::size_t n) {
  std::uint64_t h = 0xcbf29ce484222325ULL ^ parent;
  for (std::size_t i = 0; i < n; ++i) {
    for (int b = 0; b < 4; ++b) {
      h ^= (tokens[i] >> (8 * b)) & 0xff;
      h *= 0x100000001b3ULL;
    }
  }
  return h;
}

std::vector<std::uint64_t> FakeVllm::block_hashes(const std::vector<std::uint32_t>& tokens) const {
  std::vector<std::uint64_t> out;
  std::uint64_t parent = 0;
  const std::size_t e = options_.block_size;
  for (std::size_t i = 0; i + e <= tokens.size(); i += e) {
    parent = engine_hash(parent, tokens.data() + i, e);
    out.push_back(parent);
  }
  return out;
}

void FakeVllm::store(const std::vector<std::uint32_t>& tokens, std::size_t first, std::size_t rank,
                     const std::string& medium, const std::string& salt) {
  const auto hashes = block_hashes(tokens);
  vllm_wire::Stored s;
  s.hashes.assign(hashes.begin() + static_cast<std::ptrdiff_t>(first), hashes.end());
  if (first > 0) s.parent = hashes[first - 1];
  const std::size_t e = options_.block_size;
  s.tokens.assign(tokens.begin() + static_cast<std::ptrdiff_t>(first * e),
                  tokens.begin() + static_cast<std::ptrdiff_t>(hashes.size() * e));
  s.block_size = e;
  s.medium = medium;
  s.salt = salt;
  publish({s}, rank);
}

void FakeVllm::remove(const std::vector<std::uint32_t>& tokens,
                      const std::vector<std::size_t>& blocks, std::size_t rank,
                      const std::string& medium) {
  const auto hashes = block_hashes(tokens);
  vllm_wire::Removed r;
  for (std::size_t b : blocks) r.hashes.push_back(hashes.at(b));
  r.medium = medium;
  publish({r}, rank);
}

void FakeVllm::clear(std::size_t rank) {
  publish({vllm_wire::Cleared{}}, rank);
}

void FakeVllm::publish(const std::vector<vllm_wire::Event>& events, std::size_t rank) {
  vllm_wire::Options o;
  o.form = options_.form;
  o.hashes = options_.hashes;
  o.sglang = options_.sglang_layout;
  o.rank = static_cast<std::int64_t>(rank);
  publish_payload(vllm_wire::encode(events, o), rank);
}

void FakeVllm::send_payload(const std::string& payload, std::size_t rank) {
  publish_payload(payload, rank);
}

void FakeVllm::publish_payload(std::string payload, std::size_t rank) {
  Rank& r = *ranks_.at(rank);
  std::int64_t seq;
  {
    std::lock_guard lock(r.mu);
    seq = r.next_seq++;
    r.buffer.emplace_back(seq, payload);
  }
  if (r.drop > 0) {
    --r.drop;
    return;
  }
  send_all(r.pub, {"", kv_events::encode_sequence(seq), payload});
}

void FakeVllm::send_frames(const std::vector<std::string>& frames, std::size_t rank) {
  send_all(ranks_.at(rank)->pub, frames);
}

void FakeVllm::drop_next(std::size_t n, std::size_t rank) {
  ranks_.at(rank)->drop += n;
}

void FakeVllm::forget_replay_buffer(std::size_t rank) {
  Rank& r = *ranks_.at(rank);
  std::lock_guard lock(r.mu);
  r.buffer.clear();
}

void FakeVllm::restart(std::size_t rank) {
  Rank& r = *ranks_.at(rank);
  std::lock_guard lock(r.mu);
  r.buffer.clear();
  r.next_seq = 0;
}

std::int64_t FakeVllm::next_sequence(std::size_t rank) const {
  Rank& r = *ranks_.at(rank);
  std::lock_guard lock(r.mu);
  return r.next_seq;
}

void FakeVllm::set_load(double running, double waiting, double kv_usage) {
  std::lock_guard lock(load_mu_);
  running_ = running;
  waiting_ = waiting;
  kv_usage_ = kv_usage;
}

// vLLM's _service_replay: [identity, "", start] in; [identity, "", seq, payload] for every
// buffered batch from `start`, then [identity, "", -1, ""].
void FakeVllm::serve_replays() {
  std::vector<zmq_pollitem_t> items;
  for (auto& r : ranks_) items.push_back({r->router, 0, ZMQ_POLLIN, 0});
  while (!stop_) {
    if (zmq_poll(items.data(), static_cast<int>(items.size()), 20) <= 0) continue;
    for (std::size_t k = 0; k < items.size(); ++k) {
      if ((items[k].revents & ZMQ_POLLIN) == 0) continue;
      Rank& r = *ranks_[k];
      std::vector<std::string> frames;
      for (int more = 1; more != 0;) {
        zmq_msg_t msg;
        zmq_msg_init(&msg);
        if (zmq_msg_recv(&msg, r.router, ZMQ_DONTWAIT) < 0) {
          zmq_msg_close(&msg);
          break;
        }
        frames.emplace_back(static_cast<const char*>(zmq_msg_data(&msg)), zmq_msg_size(&msg));
        more = zmq_msg_more(&msg);
        zmq_msg_close(&msg);
      }
      if (frames.size() != 3) continue;
      const auto start = kv_events::decode_sequence(frames[2]);
      if (!start) continue;
      std::vector<std::pair<std::int64_t, std::string>> batches;
      {
        std::lock_guard lock(r.mu);
        for (const auto& b : r.buffer) {
          if (b.first >= *start) batches.push_back(b);
        }
      }
      for (const auto& [seq, payload] : batches) {
        send_all(r.router, {frames[0], "", kv_events::encode_sequence(seq), payload});
      }
      send_all(r.router, {frames[0], "", kv_events::encode_sequence(kv_events::kEndOfReplay), ""});
    }
  }
}

}  // namespace prefixgate::gateway::testing
