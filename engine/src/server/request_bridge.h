// Carries a request's GenerationEvents from the engine thread to the connection coroutine.
//
// The engine thread's sink appends to a locked queue and rings a one-slot concurrent channel;
// the coroutine drains the queue whenever it wakes. A ring that finds the slot full is dropped
// safely: a wake-up is already pending and the drain takes every queued event. So no event is
// lost or seen twice, and the sink never blocks. The bridge is shared: a sink still held by the
// engine after the client left keeps it alive, so nothing is used after free.
//
//   auto bridge = std::make_shared<RequestBridge>(executor);
//   auto id = engine.submit(request, bridge->sink());
//   for (;;) for (auto& e : co_await bridge->next()) ...
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/experimental/concurrent_channel.hpp>
#include <boost/system/error_code.hpp>
#include <memory>
#include <mutex>
#include <vector>

#include "prefixgate/engine/engine_loop.h"

namespace prefixgate::engine::server {

class RequestBridge : public std::enable_shared_from_this<RequestBridge> {
 public:
  explicit RequestBridge(const boost::asio::any_io_executor& executor);

  // The EventSink to submit with. Holds a reference to this bridge.
  EventSink sink();

  // Waits until at least one event arrived and returns all that did, in order.
  boost::asio::awaitable<std::vector<GenerationEvent>> next();

 private:
  void push(const GenerationEvent& event);

  std::mutex mu_;
  std::vector<GenerationEvent> queue_;
  boost::asio::experimental::concurrent_channel<void(boost::system::error_code)> ring_;
};

}  // namespace prefixgate::engine::server
