// examples/observability/ stays true to the code: the Grafana dashboard parses, and every
// metric its queries name is exported by a running gateway or engine; the Prometheus
// configuration parses and scrapes the ports scripts/run.sh uses.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "gateway_server/dashboard_traffic.h"
#include "gateway_server/processes.h"
#include "prefixgate/canonicalize/json.h"

namespace prefixgate::gateway::testing {
namespace {

namespace fs = std::filesystem;

const fs::path kDir = fs::path(PREFIXGATE_SOURCE_DIR) / "examples" / "observability";

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Every "expr" string anywhere in the document.
void collect_exprs(const json::Value& v, std::vector<std::string>& out) {
  if (v.is_object()) {
    for (const auto& [key, member] : v.as_object()) {
      if (key == "expr" && member.is_string()) out.push_back(member.as_string());
      collect_exprs(member, out);
    }
  } else if (v.is_array()) {
    for (const json::Value& e : v.as_array()) collect_exprs(e, out);
  }
}

// The metric family a series name belongs to: a histogram's _bucket/_sum/_count series are
// exposed under "# TYPE family histogram".
std::set<std::string> exported_families(const std::string& metrics_text) {
  std::set<std::string> out;
  std::istringstream in(metrics_text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("# TYPE ", 0) == 0) out.insert(line.substr(7, line.find(' ', 7) - 7));
  }
  return out;
}

bool exported(const std::set<std::string>& families, const std::string& series) {
  if (families.count(series)) return true;
  for (const char* suffix : {"_bucket", "_sum", "_count"}) {
    const std::string s(suffix);
    if (series.size() > s.size() && series.ends_with(s) &&
        families.count(series.substr(0, series.size() - s.size()))) {
      return true;
    }
  }
  return false;
}

TEST(ObservabilityTest, GrafanaDashboardQueriesOnlyExportedMetrics) {
  const std::string text = read_text(kDir / "grafana" / "prefixgate-dashboard.json");
  auto doc = json::parse(text);
  ASSERT_TRUE(doc && doc->is_object()) << (doc ? "" : doc.error().message);
  ASSERT_NE(doc->find("panels"), nullptr);
  std::vector<std::string> exprs;
  collect_exprs(*doc, exprs);
  ASSERT_GE(exprs.size(), 20u);

  std::uint16_t pe = 0, port = 0;
  auto engine = start_engine(pe);
  ASSERT_NE(pe, 0);
  auto gw = start_gateway(port, {"--config", write_dashboard_config(), "--upstream", upstream(pe)});
  ASSERT_NE(port, 0) << gw->output();
  ASSERT_TRUE(wait_healthy(port, 1));
  // Traffic, so that labelled families have series (not only their # TYPE line).
  ASSERT_EQ(send_dashboard_traffic(port, 1), 3);
  std::set<std::string> families = exported_families(get(port, "/metrics").body);
  const std::set<std::string> engine_families = exported_families(get(pe, "/metrics").body);
  families.insert(engine_families.begin(), engine_families.end());
  ASSERT_GT(families.size(), 30u);

  static const std::regex metric(R"(\bprefixgate_[a-z0-9_]+)");
  std::set<std::string> used;
  for (const std::string& e : exprs) {
    for (std::sregex_iterator it(e.begin(), e.end(), metric), end; it != end; ++it) {
      used.insert(it->str());
    }
  }
  EXPECT_GE(used.size(), 15u);
  for (const std::string& name : used) {
    EXPECT_TRUE(exported(families, name)) << name
                                          << " is in the Grafana dashboard but no "
                                             "gateway or engine exports it";
  }
  // The dashboard shows the hit rate (actual and predicted), TTFT by cache, routing decisions,
  // KV usage and preemptions.
  for (const char* needed :
       {"prefixgate_cached_tokens_total", "prefixgate_predicted_cached_tokens_total",
        "prefixgate_time_to_first_token_by_cache_seconds_bucket",
        "prefixgate_routing_decisions_total", "prefixgate_upstream_kv_usage_ratio",
        "prefixgate_engine_num_preemptions_total"}) {
    EXPECT_TRUE(used.count(needed)) << needed;
  }
}

TEST(ObservabilityTest, PrometheusConfigScrapesTheGatewayAndTheEngines) {
  const YAML::Node config = YAML::LoadFile((kDir / "prometheus.yml").string());
  std::set<std::string> targets;
  for (const YAML::Node& job : config["scrape_configs"]) {
    EXPECT_TRUE(job["job_name"].IsScalar());
    for (const YAML::Node& sc : job["static_configs"]) {
      for (const YAML::Node& t : sc["targets"]) targets.insert(t.as<std::string>());
    }
  }
  // The ports scripts/run.sh starts.
  for (const char* t : {"127.0.0.1:8080", "127.0.0.1:9001", "127.0.0.1:9002", "127.0.0.1:9003"}) {
    EXPECT_TRUE(targets.count(t)) << t;
  }
  for (const char* provisioning : {"grafana/provisioning/datasources/prometheus.yml",
                                   "grafana/provisioning/dashboards/prefixgate.yml"}) {
    EXPECT_NO_THROW(YAML::LoadFile((kDir / provisioning).string())) << provisioning;
  }
}

}  // namespace
}  // namespace prefixgate::gateway::testing
