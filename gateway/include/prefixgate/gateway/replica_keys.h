// Where a replica holds each of our block keys, over all its engines: vLLM and SGLang run one
// engine (one KV cache, one event stream) per data-parallel rank behind one HTTP endpoint, so a
// key is held by the replica while any rank holds it, in its device cache when any rank's is.
//
// Plain data structure, no threads or I/O.
//
//   gateway::ReplicaKeys keys(/*ranks=*/2);
//   keys.apply(/*rank=*/1, rank_changes, replica_changes);   // replica_changes -> PrefixIndex
#pragma once

#include <boost/unordered/unordered_flat_map.hpp>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "prefixgate/gateway/engine_block_keys.h"

namespace prefixgate::gateway {

class ReplicaKeys {
 public:
  static constexpr std::size_t kMaxRanks = 64;
  explicit ReplicaKeys(std::size_t ranks);

  // Applies one rank's changes; appends the replica's own changes to `out`.
  void apply(std::size_t rank, std::span<const KeyChange> changes, std::vector<KeyChange>& out);
  // Every key the replica holds and where: what re-teaches an index that forgot the replica.
  std::vector<KeyChange> held() const;
  std::size_t size() const { return keys_.size(); }

 private:
  struct Holders {
    std::uint64_t primary = 0;  // ranks holding it in the device cache (bit per rank)
    std::uint64_t offload = 0;  // ranks holding it only on a lower tier
  };
  static KeyState state_of(const Holders& h);

  std::size_t ranks_;
  boost::unordered_flat_map<std::uint64_t, Holders> keys_;
};

}  // namespace prefixgate::gateway
