// An in-process server on a loopback port the OS picks, over the fake KV device (real pages,
// no math) and the byte tokenizer.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <thread>

#include "server/server.h"
#include "support/fake_kv_device.h"

namespace prefixgate::engine::server::testing {

// The fake device, with a fixed cost per step so a generation lasts long enough to interrupt.
class PacedDevice : public engine::testing::FakeKvDevice {
 public:
  explicit PacedDevice(std::chrono::microseconds step) : step_(step) {}
  StepOutput execute(std::span<const SequenceStep> batch) override {
    std::this_thread::sleep_for(step_);  // models device time, not a test synchronization
    return FakeKvDevice::execute(batch);
  }

 private:
  std::chrono::microseconds step_;
};

struct TestServerConfig {
  ServerOptions options;
  std::size_t num_pages = 256;
  std::size_t max_model_len = 100000;
  std::chrono::microseconds step{0};
};

class TestServer {
 public:
  explicit TestServer(TestServerConfig config = {}) {
    ServedModel model;
    model.name = "test-model";
    model.tokenizer = canon::make_byte_tokenizer();
    model.chat_format = canon::ChatTemplate::kLlama3;
    model.eos_token = 999;
    model.max_model_len = config.max_model_len;
    model.vocab_size = 1000;
    EngineConfig engine;
    engine.num_pages = config.num_pages;
    engine.page_tokens = 16;
    engine.model_id = "test-model";
    engine.scheduler.max_model_len = config.max_model_len;
    engine.scheduler.eos_token = 999;
    server_ = std::make_unique<Server>(config.options, std::move(model), std::move(engine),
                                       std::make_unique<PacedDevice>(config.step));
    auto port = server_->start();
    port_ = port ? *port : 0;
    thread_ = std::thread([this] { server_->run(); });
  }
  ~TestServer() { stop(); }

  void stop() {
    if (!thread_.joinable()) return;
    server_->request_shutdown();
    thread_.join();
  }

  std::uint16_t port() const { return port_; }
  Server& server() { return *server_; }
  EngineLoop& engine() { return server_->engine(); }

 private:
  std::unique_ptr<Server> server_;
  std::uint16_t port_ = 0;
  std::thread thread_;
};

// Polls `pred` until it holds or `timeout` passes (no fixed sleeps).
inline bool eventually(const std::function<bool()>& pred,
                       std::chrono::milliseconds timeout = std::chrono::milliseconds(5000)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::yield();
  }
  return pred();
}

}  // namespace prefixgate::engine::server::testing
