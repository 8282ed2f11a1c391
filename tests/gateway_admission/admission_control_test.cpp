// AdmissionControl's waiting, in-process with real threads and sockets: hundreds of requests on
// their own strands of a four-thread io_context race for three slots, a fifth of their clients
// close the connection at a random moment, and at the end every request got exactly one outcome,
// no more than three ever ran at once, and no slot or queue place was lost. ThreadSanitizer runs
// it (label concurrent).
#include "server/admission_control.h"

#include <gtest/gtest.h>

#include <atomic>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "prefixgate/canonicalize/json.h"

namespace prefixgate::gateway::server {
namespace {

namespace asio = serving::asio;
using tcp = serving::tcp;
constexpr auto kTuple = asio::as_tuple(asio::use_awaitable);

struct Counts {
  std::atomic<int> admitted{0}, refused{0}, gone{0}, running{0}, max_running{0};
};

// One request: admitted (holds its slot a moment), refused, or its client gone.
serving::Awaitable<void> one_request(AdmissionControl& control, std::shared_ptr<tcp::socket> server,
                                     std::string tenant, Counts& n) {
  AdmissionResult r = co_await control.admit(*server, tenant, 10);
  if (r.ticket) {
    const int now = ++n.running;
    int seen = n.max_running.load();
    while (now > seen && !n.max_running.compare_exchange_weak(seen, now)) {
    }
    asio::steady_timer hold(co_await asio::this_coro::executor, std::chrono::milliseconds(1));
    co_await hold.async_wait(kTuple);
    --n.running;
    ++n.admitted;
  } else if (r.refusal) {
    ++n.refused;
  } else {
    ++n.gone;
  }
}

double field(const json::Value& v, std::string_view key) {
  const json::Value* f = v.find(key);
  return f != nullptr && f->is_number() ? f->as_number().value : -1;
}

TEST(AdmissionControlTest, ManyRacingRequestsEachGetOneOutcomeAndNoSlotIsLost) {
  AdmissionConfig config;
  config.max_inflight = 3;
  config.max_queue = 200;  // nearly full at the start: some are dropped or refused
  config.queue_timeout = std::chrono::seconds(20);
  config.tenant_limits["default"] = TenantLimits{.max_concurrent = 70};
  AdmissionControl control(config);
  serving::Metrics metrics;
  control.register_metrics(metrics);

  asio::io_context ioc;
  tcp::acceptor acceptor(ioc, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  constexpr int kRequests = 300;
  Counts n;
  std::vector<std::unique_ptr<tcp::socket>> clients;
  std::mt19937 rng(11);
  for (int i = 0; i < kRequests; ++i) {
    auto client = std::make_unique<tcp::socket>(ioc);
    client->connect(acceptor.local_endpoint());
    auto server = std::make_shared<tcp::socket>(asio::make_strand(ioc));
    acceptor.accept(*server);
    const std::string tenant = "t" + std::to_string(rng() % 4);  // t0 sends as much as t1..t3
    asio::co_spawn(server->get_executor(), one_request(control, server, tenant, n), asio::detached);
    if (i % 5 == 0) {
      // Leaves at a random moment: queued, running or already answered.
      auto timer =
          std::make_shared<asio::steady_timer>(ioc, std::chrono::microseconds(rng() % 20000));
      tcp::socket* raw = client.get();
      timer->async_wait([timer, raw](const boost::system::error_code&) {
        boost::system::error_code ignored;
        raw->close(ignored);
      });
    }
    clients.push_back(std::move(client));
  }
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) threads.emplace_back([&] { ioc.run(); });
  for (std::thread& t : threads) t.join();

  EXPECT_EQ(n.admitted + n.refused + n.gone, kRequests);
  EXPECT_LE(n.max_running.load(), 3);
  EXPECT_GT(n.admitted.load(), 0);
  const auto stats = json::parse(control.stats_json());
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(field(*stats, "inflight"), 0);
  EXPECT_EQ(field(*stats, "queued"), 0);
  // Every slot came back: three more requests are all admitted at once.
  Counts after;
  for (int i = 0; i < 3; ++i) {
    auto client = std::make_unique<tcp::socket>(ioc);
    client->connect(acceptor.local_endpoint());
    auto server = std::make_shared<tcp::socket>(asio::make_strand(ioc));
    acceptor.accept(*server);
    asio::co_spawn(server->get_executor(), one_request(control, server, "late", after),
                   asio::detached);
    clients.push_back(std::move(client));
  }
  ioc.restart();
  ioc.run();
  EXPECT_EQ(after.admitted.load(), 3);
  EXPECT_NE(metrics.render().find("prefixgate_admission_admitted_total{tenant=\"late\"} 3"),
            std::string::npos);
}

}  // namespace
}  // namespace prefixgate::gateway::server
