#include "load_generator.h"

#include <unistd.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <cmath>
#include <cstdio>
#include <deque>
#include <functional>
#include <memory>

#include "progress.h"

namespace prefixgate::bench {

namespace asio = boost::asio;

namespace {

struct RunState {
  const Workload& workload;
  std::span<const HttpTarget> targets;
  const LoadOptions& options;
  Rng spray;  // which target each request goes to
  BenchClock::time_point zero;
  std::size_t limit = 0;   // requests to issue at most
  std::size_t issued = 0;  // requests sent so far
  std::size_t finished = 0;
  std::size_t failed = 0;
  std::size_t next_session = 0;            // closed loop
  std::size_t active = 0;                  // session coroutines (closed-loop workers) not yet ended
  bool stopped = false;                    // no new requests (duration reached)
  std::deque<RequestRecord> records = {};  // stable addresses while coroutines fill them
};

bool may_issue(RunState& st) {
  if (st.stopped || st.issued >= st.limit) return false;
  if (st.options.duration_s > 0 &&
      std::chrono::duration<double>(BenchClock::now() - st.zero).count() >= st.options.duration_s) {
    st.stopped = true;
    return false;
  }
  return true;
}

asio::awaitable<void> sleep_for_s(double seconds) {
  if (seconds <= 0) co_return;
  asio::steady_timer timer(co_await asio::this_coro::executor);
  timer.expires_after(
      std::chrono::duration_cast<BenchClock::duration>(std::chrono::duration<double>(seconds)));
  co_await timer.async_wait(asio::use_awaitable);
}

asio::awaitable<void> run_session(RunState& st, const Session& session, double start_s) {
  const double now = std::chrono::duration<double>(BenchClock::now() - st.zero).count();
  co_await sleep_for_s(start_s - now);
  const auto timeout =
      std::chrono::milliseconds(static_cast<std::int64_t>(st.options.timeout_s * 1000));
  for (const Turn& turn : session.turns) {
    co_await sleep_for_s(turn.think_time_s);
    if (!may_issue(st)) co_return;
    RequestRecord& rec = st.records.emplace_back();
    rec.order = st.issued++;
    rec.warmup = rec.order < st.options.warmup;
    const HttpTarget& target =
        st.targets.size() == 1 ? st.targets.front() : st.targets[st.spray.below(st.targets.size())];
    co_await send_streaming(target, turn, st.zero, timeout, rec);
    ++st.finished;
    if (!rec.error.empty()) {
      ++st.failed;
      // The conversation cannot go on meaningfully without its answer.
      if (session.turns.size() > 1) co_return;
    }
  }
}

asio::awaitable<void> closed_worker(RunState& st) {
  while (st.next_session < st.workload.sessions.size() && may_issue(st)) {
    const Session& s = st.workload.sessions[st.next_session++];
    co_await run_session(st, s, 0);
  }
  --st.active;
}

asio::awaitable<void> open_session(RunState& st, const Session& session, double start_s) {
  co_await run_session(st, session, start_s);
  --st.active;
}

}  // namespace

std::vector<RequestRecord> run_load(const Workload& workload, const HttpTarget& target,
                                    const LoadOptions& options) {
  return run_load(workload, std::span(&target, 1), options);
}

std::vector<RequestRecord> run_load(const Workload& workload, std::span<const HttpTarget> targets,
                                    const LoadOptions& options) {
  asio::io_context ioc(1);
  RunState st{.workload = workload,
              .targets = targets,
              .options = options,
              .spray = Rng(options.seed ^ 0x5bd1e995ULL),
              .zero = BenchClock::now()};
  st.limit = workload.requests();
  if (options.max_requests > 0) st.limit = std::min(st.limit, options.max_requests);

  if (options.mode == LoadMode::kClosed) {
    const std::size_t workers = std::max<std::size_t>(1, options.concurrency);
    for (std::size_t i = 0; i < workers; ++i) {
      ++st.active;
      asio::co_spawn(ioc, closed_worker(st), asio::detached);
    }
  } else {
    Rng rng(options.seed);
    double t = 0;
    const bool all_at_once = !(options.rate > 0) || std::isinf(options.rate);
    for (const Session& s : workload.sessions) {
      double start = 0;
      if (options.mode == LoadMode::kTrace) {
        start = std::max(0.0, s.arrival_s);
      } else if (!all_at_once) {
        start = t;
        t += rng.exponential(1.0 / options.rate);
      }
      if (options.duration_s > 0 && start >= options.duration_s) break;
      ++st.active;
      asio::co_spawn(ioc, open_session(st, s, start), asio::detached);
    }
  }

  Progress progress(options.label, st.limit, options.progress);
  asio::steady_timer tick(ioc);
  bool ended = false;
  std::function<void()> arm = [&] {
    tick.expires_after(std::chrono::milliseconds(250));
    tick.async_wait([&](boost::system::error_code ec) {
      // `ended`, not only the error: a wait that had already expired when it was cancelled
      // completes without one, and re-arming then would keep run() below busy forever.
      if (ec || ended) return;
      progress.update(st.finished, st.failed,
                      std::chrono::duration<double>(BenchClock::now() - st.zero).count());
      arm();
    });
  };
  arm();
  // The progress timer never runs out of work: run until every session has ended.
  while (st.active > 0 && ioc.run_one() > 0) {
  }
  ended = true;
  tick.cancel();
  ioc.run();
  progress.finish(st.finished, st.failed,
                  std::chrono::duration<double>(BenchClock::now() - st.zero).count());
  return {std::make_move_iterator(st.records.begin()), std::make_move_iterator(st.records.end())};
}

}  // namespace prefixgate::bench
