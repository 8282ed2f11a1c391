// The labelled counters a proxied request adds to: each add() finds its series in the calling
// thread's cache of recent ones, and a miss takes the family's lock and copies the label values.
// A request touches about a dozen series (the replica's URL among the labels); a gateway's
// requests together touch more. This adds to 8 replicas x 2, 4 or 8 routes' series in turn: at
// 64 series, some share a cache slot whatever the ports hash to.
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "prefixgate/serving/metrics.h"

namespace {

using prefixgate::serving::CounterFamily;
using prefixgate::serving::Metrics;

void BM_MetricsSeriesOfARequest(benchmark::State& state) {
  Metrics m;
  CounterFamily& requests = m.counter("bench_requests_total", "Requests.", {"replica", "route"});
  std::vector<std::string> replicas;
  for (int r = 0; r < 8; ++r) replicas.push_back("http://127.0.0.1:" + std::to_string(40000 + r));
  std::vector<std::string> routes;
  for (int r = 0; r < state.range(0); ++r) routes.push_back("route_" + std::to_string(r));
  for (auto _ : state) {
    for (const std::string& replica : replicas) {
      for (const std::string& route : routes) requests.add({replica, route});
    }
  }
  state.SetItemsProcessed(state.iterations() * 8 * state.range(0));
}
BENCHMARK(BM_MetricsSeriesOfARequest)->Arg(2)->Arg(4)->Arg(8);

}  // namespace
