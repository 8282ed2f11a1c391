// ZmqPublisher: the sockets live on one thread (libzmq sockets are not thread-safe). It waits
// up to kPollInterval for a replay request, answers it, then sends whatever publish() queued.
#include "prefixgate/kv_events/publisher.h"

#include <zmq.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "prefixgate/kv_events/wire.h"
#include "prefixgate/kv_events/zmq_frames.h"

namespace prefixgate::kv_events {
namespace {

constexpr long kPollIntervalMs = 5;
constexpr int kLingerMs = 200;  // on close: time to hand queued messages to the network
constexpr auto kFlushTimeout = std::chrono::seconds(1);

// ZeroMQ picks a free port for `*`; accept the more familiar 0 as well.
std::string bindable(std::string endpoint) {
  if (endpoint.starts_with("tcp://") && endpoint.ends_with(":0")) {
    endpoint.replace(endpoint.size() - 1, 1, "*");
  }
  return endpoint;
}

std::string last_endpoint(void* socket) {
  char buf[256];
  std::size_t size = sizeof buf;
  if (zmq_getsockopt(socket, ZMQ_LAST_ENDPOINT, buf, &size) != 0 || size == 0) return {};
  return std::string(buf, size - 1);  // includes the terminating NUL
}

bool send_frames(void* socket, const std::vector<std::string_view>& frames) {
  for (std::size_t i = 0; i < frames.size(); ++i) {
    const int flags = i + 1 < frames.size() ? ZMQ_SNDMORE : 0;
    if (zmq_send(socket, frames[i].data(), frames[i].size(), flags) < 0) return false;
  }
  return true;
}

}  // namespace

struct ZmqPublisher::Impl {
  PublisherOptions options;
  void* context = nullptr;
  void* pub = nullptr;
  void* router = nullptr;
  std::string endpoint, replay_endpoint;

  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::string> queue;  // guarded by mu
  bool stop = false;              // guarded by mu
  std::atomic<std::uint64_t> published{0};
  std::thread thread;

  // Owned by the thread.
  std::int64_t next_seq = 0;
  std::deque<std::pair<std::int64_t, std::string>> buffer;

  ~Impl() {
    if (pub != nullptr) zmq_close(pub);
    if (router != nullptr) zmq_close(router);
    if (context != nullptr) zmq_ctx_term(context);
  }

  // [identity, "", start] from a REQ client (or a DEALER that sends the empty delimiter).
  void serve_replay() {
    std::vector<std::string> frames = recv_frames(router);
    if (frames.size() != 3 || !frames[1].empty()) return;  // not a replay request: ignored
    const std::optional<std::int64_t> start = decode_sequence(frames[2]);
    if (!start) return;
    const std::string& identity = frames[0];
    for (const auto& [seq, payload] : buffer) {
      if (seq < *start) continue;
      const std::string seq_frame = encode_sequence(seq);
      if (!send_frames(router, {identity, {}, seq_frame, payload})) return;  // client gone
    }
    const std::string end = encode_sequence(kEndOfReplay);
    send_frames(router, {identity, {}, end, {}});
  }

  void send(std::string payload) {
    const std::int64_t seq = next_seq++;
    const std::string seq_frame = encode_sequence(seq);
    // PUB never blocks: a subscriber past its high-water mark loses the message, and sees the
    // gap in the sequence numbers.
    send_frames(pub, {options.topic, seq_frame, payload});
    published.fetch_add(1, std::memory_order_relaxed);
    if (options.buffer_batches > 0) {
      buffer.emplace_back(seq, std::move(payload));
      if (buffer.size() > options.buffer_batches) buffer.pop_front();
    }
  }

  void run() {
    std::optional<std::chrono::steady_clock::time_point> flush_deadline;
    for (;;) {
      if (router != nullptr) {
        zmq_pollitem_t item{router, 0, ZMQ_POLLIN, 0};
        if (zmq_poll(&item, 1, kPollIntervalMs) > 0 && (item.revents & ZMQ_POLLIN) != 0) {
          serve_replay();
        }
      }
      std::deque<std::string> ready;
      {
        std::unique_lock lock(mu);
        if (router == nullptr && queue.empty() && !stop) {
          cv.wait_for(lock, std::chrono::milliseconds(kPollIntervalMs));
        }
        ready.swap(queue);
        if (stop && !flush_deadline) {
          flush_deadline = std::chrono::steady_clock::now() + kFlushTimeout;
        }
      }
      for (std::string& payload : ready) send(std::move(payload));
      if (flush_deadline) {
        std::lock_guard lock(mu);
        if (queue.empty() || std::chrono::steady_clock::now() > *flush_deadline) return;
      }
    }
  }
};

ZmqPublisher::ZmqPublisher(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Result<std::unique_ptr<ZmqPublisher>> ZmqPublisher::start(PublisherOptions options) {
  auto impl = std::make_unique<Impl>();
  impl->options = std::move(options);
  impl->context = zmq_ctx_new();
  if (impl->context == nullptr) {
    return make_error(ErrorCode::kInternal, "kv events: cannot create a ZeroMQ context");
  }
  const auto open = [&](int type, const std::string& endpoint, const char* param,
                        void*& socket) -> Status {
    socket = zmq_socket(impl->context, type);
    if (socket == nullptr) {
      return make_error(ErrorCode::kInternal,
                        std::string("kv events: ") + zmq_strerror(zmq_errno()), param);
    }
    const int linger = kLingerMs;
    zmq_setsockopt(socket, ZMQ_LINGER, &linger, sizeof linger);
    if (type == ZMQ_PUB) {
      const int hwm = impl->options.send_hwm;
      zmq_setsockopt(socket, ZMQ_SNDHWM, &hwm, sizeof hwm);
    }
    if (zmq_bind(socket, bindable(endpoint).c_str()) != 0) {
      return make_error(
          ErrorCode::kInvalidValue,
          std::string(param) + ": cannot bind '" + endpoint + "': " + zmq_strerror(zmq_errno()),
          param);
    }
    return {};
  };
  if (Status s = open(ZMQ_PUB, impl->options.endpoint, "endpoint", impl->pub); !s) {
    return s.error();
  }
  impl->endpoint = last_endpoint(impl->pub);
  if (!impl->options.replay_endpoint.empty()) {
    if (Status s = open(ZMQ_ROUTER, impl->options.replay_endpoint, "replay_endpoint", impl->router);
        !s) {
      return s.error();
    }
    impl->replay_endpoint = last_endpoint(impl->router);
  }
  Impl* raw = impl.get();
  impl->thread = std::thread([raw] { raw->run(); });
  return std::unique_ptr<ZmqPublisher>(new ZmqPublisher(std::move(impl)));
}

ZmqPublisher::~ZmqPublisher() {
  {
    std::lock_guard lock(impl_->mu);
    impl_->stop = true;
  }
  impl_->cv.notify_all();
  impl_->thread.join();
}

void ZmqPublisher::publish(std::string payload) {
  {
    std::lock_guard lock(impl_->mu);
    impl_->queue.push_back(std::move(payload));
  }
  impl_->cv.notify_all();
}

const std::string& ZmqPublisher::endpoint() const {
  return impl_->endpoint;
}
const std::string& ZmqPublisher::replay_endpoint() const {
  return impl_->replay_endpoint;
}
std::uint64_t ZmqPublisher::published() const {
  return impl_->published.load(std::memory_order_relaxed);
}

}  // namespace prefixgate::kv_events
