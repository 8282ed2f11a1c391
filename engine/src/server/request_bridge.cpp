#include "server/request_bridge.h"

#include <boost/asio/use_awaitable.hpp>

namespace prefixgate::engine::server {

RequestBridge::RequestBridge(const boost::asio::any_io_executor& executor) : ring_(executor, 1) {}

EventSink RequestBridge::sink() {
  return [self = shared_from_this()](const GenerationEvent& event) { self->push(event); };
}

void RequestBridge::push(const GenerationEvent& event) {
  {
    std::lock_guard lock(mu_);
    queue_.push_back(event);
  }
  // Fails only when a ring is already pending, which will wake the reader anyway.
  (void)ring_.try_send(boost::system::error_code{});
}

boost::asio::awaitable<std::vector<GenerationEvent>> RequestBridge::next() {
  for (;;) {
    {
      std::lock_guard lock(mu_);
      if (!queue_.empty()) {
        std::vector<GenerationEvent> out;
        out.swap(queue_);
        co_return out;
      }
    }
    co_await ring_.async_receive(boost::asio::use_awaitable);
  }
}

}  // namespace prefixgate::engine::server
