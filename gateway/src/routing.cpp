// make_policy, reason names, and the cache match every policy reports for auditing.
#include "prefixgate/gateway/routing.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>

#include "routing_common.h"

namespace prefixgate::gateway {

const char* route_reason_name(RouteReason reason) {
  switch (reason) {
    case RouteReason::kCacheHit: return "cache_hit";
    case RouteReason::kColdAffinity: return "cold_affinity";
    case RouteReason::kLoadSpill: return "load_spill";
    case RouteReason::kLeastCost: return "least_cost";
    case RouteReason::kRoundRobin: return "round_robin";
    case RouteReason::kRandom: return "random";
    case RouteReason::kLeastLoad: return "least_load";
    case RouteReason::kPowerOfTwo: return "power_of_two";
    case RouteReason::kSessionAffinity: return "session_affinity";
    case RouteReason::kNoHealthyReplica: return "no_healthy_replica";
  }
  return "unknown";
}

namespace routing {

void match_blocks(const RouteRequest& request, std::span<const ReplicaView> replicas,
                  const PrefixIndex& index, Clock::time_point now, std::vector<std::size_t>& blocks,
                  std::vector<std::size_t>* offloaded) {
  // longest_match writes every entry: no need to zero them first.
  blocks.resize(index.replica_count());
  if (offloaded != nullptr) {
    offloaded->resize(index.replica_count());
    index.longest_match(request.block_hashes, now, blocks, *offloaded);
    offloaded->resize(replicas.size(), 0);
  } else {
    index.longest_match(request.block_hashes, now, blocks);
  }
  blocks.resize(replicas.size(), 0);
}

}  // namespace routing

namespace {

Status validate(const CacheAwareConfig& c) {
  auto bad = [](const char* key, const char* why) {
    return make_error(ErrorCode::kInvalidValue,
                      std::string("routing.cache_aware.") + key + " " + why,
                      std::string("routing.cache_aware.") + key);
  };
  if (!(c.decode_weight >= 0)) return bad("decode_weight", "must be >= 0");
  if (!(c.overload_factor >= 1)) return bad("overload_factor", "must be >= 1");
  if (!(c.overload_floor_tokens >= 0)) return bad("overload_floor_tokens", "must be >= 0");
  if (c.affinity_blocks < 1) return bad("affinity_blocks", "must be >= 1");
  if (!(c.bounded_load_factor >= 1)) return bad("bounded_load_factor", "must be >= 1");
  if (!(c.eviction_weight >= 0) || std::isinf(c.eviction_weight)) {
    return bad("eviction_weight", "must be finite and >= 0");
  }
  if (!(c.duplicate_weight >= 0) || std::isinf(c.duplicate_weight)) {
    return bad("duplicate_weight", "must be finite and >= 0");
  }
  if (!(c.queue_duplicate_factor >= 0) || std::isinf(c.queue_duplicate_factor)) {
    return bad("queue_duplicate_factor", "must be finite and >= 0");
  }
  if (!(c.tail_quantile >= 0 && c.tail_quantile <= 1)) {
    return bad("tail_quantile", "must be between 0 and 1");
  }
  if (!(c.offload_hit_weight >= 0 && c.offload_hit_weight <= 1)) {
    return bad("offload_hit_weight", "must be between 0 and 1");
  }
  if (c.gateways < 1) return bad("gateways", "must be >= 1");
  if (!(c.copy_headroom >= 0) || std::isinf(c.copy_headroom)) {
    return bad("copy_headroom", "must be finite and >= 0");
  }
  if (!(c.share_copy_siblings >= 0) || std::isinf(c.share_copy_siblings)) {
    return bad("share_copy_siblings", "must be finite and >= 0");
  }
  if (!(c.gateway_spill_slack >= 0) || std::isinf(c.gateway_spill_slack)) {
    return bad("gateway_spill_slack", "must be finite and >= 0");
  }
  if (!(c.near_tie_prefills >= 0) || std::isinf(c.near_tie_prefills)) {
    return bad("near_tie_prefills", "must be finite and >= 0");
  }
  if (!(c.near_tie_max_saved >= 0 && c.near_tie_max_saved <= 1)) {
    return bad("near_tie_max_saved", "must be between 0 and 1");
  }
  if (!(c.gateway_spread_prefills >= 0) || std::isinf(c.gateway_spread_prefills)) {
    return bad("gateway_spread_prefills", "must be finite and >= 0");
  }
  return {};
}

Status validate(const SglangCacheAwareConfig& c) {
  auto bad = [](const char* key, const char* why) {
    return make_error(ErrorCode::kInvalidValue,
                      std::string("routing.sglang_cache_aware.") + key + " " + why,
                      std::string("routing.sglang_cache_aware.") + key);
  };
  if (!(c.cache_threshold >= 0 && c.cache_threshold <= 1)) {
    return bad("cache_threshold", "must be in [0, 1]");
  }
  if (!(c.balance_rel_threshold >= 1)) return bad("balance_rel_threshold", "must be >= 1");
  if (c.max_tree_blocks < 1) return bad("max_tree_blocks", "must be >= 1");
  return {};
}

Status validate(const DynamoKvConfig& c) {
  auto bad = [](const char* key, const char* why) {
    return make_error(ErrorCode::kInvalidValue, std::string("routing.dynamo_kv.") + key + " " + why,
                      std::string("routing.dynamo_kv.") + key);
  };
  if (!(c.overlap_score_weight >= 0)) return bad("overlap_score_weight", "must be >= 0");
  if (!(c.temperature >= 0) || std::isinf(c.temperature)) {
    return bad("temperature", "must be finite and >= 0");
  }
  return {};
}

// "key=value:key=value" after "cache_aware:": the cache_aware parameters a name can override
// (':' between them, so that a comma-separated list of policies can hold variants).
Status apply_options(std::string_view options, CacheAwareConfig& c) {
  while (!options.empty()) {
    const std::size_t colon = options.find(':');
    const std::string_view item = options.substr(0, colon);
    options = colon == std::string_view::npos ? std::string_view{} : options.substr(colon + 1);
    const std::size_t eq = item.find('=');
    const std::string key(item.substr(0, eq));
    const std::string value(eq == std::string_view::npos ? "" : item.substr(eq + 1));
    auto bad = [&] {
      return make_error(
          ErrorCode::kInvalidValue,
          "cache_aware option '" + std::string(item) +
              "': expected memory_aware=true|false, cost_in_seconds=true|false, "
              "cold_rendezvous=true|false, cohort_wait=true|false, next_end_wait=true|false, "
              "soonest_holder=true|false, prefill_drain=true|false, peer_turns=true|false, "
              "eviction_weight=N, duplicate_weight=N, "
              "queue_duplicate_factor=N, tail_quantile=N, overload_factor=N, "
              "decode_weight=N, copy_headroom=N, share_copy_siblings=N, gateways=N, "
              "gateway_spill_slack=N, gateway_spread_prefills=N, near_tie_prefills=N or "
              "near_tie_max_saved=N",
          "policy");
    };
    if (key == "gateways") {
      // A count: digits only (strtoull would take "-1" and wrap it).
      if (value.empty() || value.size() > 6 ||
          value.find_first_not_of("0123456789") != std::string::npos) {
        return bad();
      }
      c.gateways = std::stoul(value);
      continue;
    }
    if (key == "memory_aware" || key == "cost_in_seconds" || key == "cold_rendezvous" ||
        key == "cohort_wait" || key == "next_end_wait" || key == "soonest_holder" ||
        key == "prefill_drain" || key == "peer_turns") {
      if (value != "true" && value != "false") return bad();
      (key == "memory_aware"      ? c.memory_aware
       : key == "cost_in_seconds" ? c.cost_in_seconds
       : key == "cold_rendezvous" ? c.cold_rendezvous
       : key == "cohort_wait"     ? c.cohort_wait
       : key == "next_end_wait"   ? c.next_end_wait
       : key == "soonest_holder"  ? c.soonest_holder
       : key == "peer_turns"      ? c.peer_turns
                                  : c.prefill_drain) = value == "true";
      continue;
    }
    double* target = key == "eviction_weight"           ? &c.eviction_weight
                     : key == "duplicate_weight"        ? &c.duplicate_weight
                     : key == "queue_duplicate_factor"  ? &c.queue_duplicate_factor
                     : key == "tail_quantile"           ? &c.tail_quantile
                     : key == "overload_factor"         ? &c.overload_factor
                     : key == "decode_weight"           ? &c.decode_weight
                     : key == "gateway_spill_slack"     ? &c.gateway_spill_slack
                     : key == "gateway_spread_prefills" ? &c.gateway_spread_prefills
                     : key == "copy_headroom"           ? &c.copy_headroom
                     : key == "share_copy_siblings"     ? &c.share_copy_siblings
                     : key == "near_tie_prefills"       ? &c.near_tie_prefills
                     : key == "near_tie_max_saved"      ? &c.near_tie_max_saved
                                                        : nullptr;
    if (target == nullptr || value.empty()) return bad();
    char* end = nullptr;
    const double v = std::strtod(value.c_str(), &end);
    if (end != value.c_str() + value.size()) return bad();
    *target = v;
  }
  return {};
}

}  // namespace

Result<std::unique_ptr<RoutingPolicy>> make_policy(std::string_view name,
                                                   const PolicyConfig& config) {
  if (name.starts_with("cache_aware:")) {
    PolicyConfig c = config;
    if (Status s =
            apply_options(name.substr(std::string_view("cache_aware:").size()), c.cache_aware);
        !s) {
      return s.error();
    }
    return make_policy("cache_aware", c);
  }
  if (Status s = validate(config.cache_aware); !s) return s.error();
  if (Status s = validate(config.sglang); !s) return s.error();
  if (Status s = validate(config.dynamo); !s) return s.error();
  const double w = config.cache_aware.decode_weight;
  if (name == "round_robin") return routing::make_round_robin();
  if (name == "random") return routing::make_random(config.seed);
  if (name == "least_load") return routing::make_least_load(w);
  if (name == "power_of_two") return routing::make_power_of_two(config.seed, w);
  if (name == "consistent_hash") return routing::make_consistent_hash(w);
  if (name == "cache_aware") return routing::make_cache_aware(config.cache_aware, config.seed);
  if (name == "sglang_cache_aware") return routing::make_sglang_cache_aware(config.sglang);
  if (name == "dynamo_kv") return routing::make_dynamo_kv(config.dynamo, config.seed);
  return make_error(ErrorCode::kInvalidValue,
                    "unknown routing policy '" + std::string(name) +
                        "'; expected one of round_robin, random, least_load, "
                        "power_of_two, consistent_hash, cache_aware, sglang_cache_aware, "
                        "dynamo_kv",
                    "policy");
}

}  // namespace prefixgate::gateway
