#include "prefixgate/gateway/peer_sends.h"

#include <xxhash.h>

#include <algorithm>
#include <cstring>

#include "prefixgate/gateway/replica_load.h"

namespace prefixgate::gateway {
namespace {

constexpr std::size_t kHeaderBytes = 4 + 1 + 8;
constexpr std::size_t kRecordHeadBytes = 1 + 8;
constexpr std::size_t kRoutedFixedBytes = 8 + 4 + 4 + 4 + 4;
// Peer flights' tickets for the policy (dynamo_kv keeps its sends by ticket): the high bit set,
// so they never meet the tickets the policy hands out to this gateway's own decisions.
constexpr std::uint64_t kPeerTicketBit = std::uint64_t{1} << 63;

template <class T>
void put(std::string& out, T value) {
  char bytes[sizeof(T)];
  for (std::size_t i = 0; i < sizeof(T); ++i) {
    bytes[i] = static_cast<char>(static_cast<std::uint64_t>(value) >> (8 * i));
  }
  out.append(bytes, sizeof(T));
}

// Reads little-endian fields from a datagram, failing (not reading past the end) once short.
class Reader {
 public:
  explicit Reader(std::string_view bytes) : bytes_(bytes) {}
  template <class T>
  bool get(T& value) {
    if (bytes_.size() - at_ < sizeof(T)) return false;
    std::uint64_t v = 0;
    for (std::size_t i = 0; i < sizeof(T); ++i) {
      v |= static_cast<std::uint64_t>(static_cast<unsigned char>(bytes_[at_ + i])) << (8 * i);
    }
    at_ += sizeof(T);
    value = static_cast<T>(v);
    return true;
  }
  bool done() const { return at_ == bytes_.size(); }
  std::size_t left() const { return bytes_.size() - at_; }

 private:
  std::string_view bytes_;
  std::size_t at_ = 0;
};

Error malformed(const std::string& why) {
  return Error{ErrorCode::kInvalidValue, "peer datagram: " + why, {}};
}

}  // namespace

std::uint64_t replica_key(std::string_view url) {
  return XXH3_64bits(url.data(), url.size());
}

Result<PeerDatagram> parse_peer_datagram(std::string_view bytes) {
  if (bytes.size() < kHeaderBytes || bytes.substr(0, kPeerMagic.size()) != kPeerMagic) {
    return malformed("not a prefixgate peer datagram (no PGPS header)");
  }
  Reader in(bytes.substr(kPeerMagic.size()));
  std::uint8_t version = 0;
  PeerDatagram out;
  in.get(version);
  in.get(out.origin);
  if (version != kPeerVersion) {
    return malformed("version " + std::to_string(version) + ", this gateway reads " +
                     std::to_string(kPeerVersion));
  }
  while (!in.done()) {
    PeerRecord& r = out.records.emplace_back();
    std::uint8_t kind = 0;
    if (!in.get(kind) || !in.get(r.flight)) return malformed("a record cut short");
    switch (static_cast<PeerRecordKind>(kind)) {
      case PeerRecordKind::kPrefilled:
      case PeerRecordKind::kFinished: r.kind = static_cast<PeerRecordKind>(kind); continue;
      case PeerRecordKind::kRouted: break;
      default: return malformed("unknown record kind " + std::to_string(kind));
    }
    r.kind = PeerRecordKind::kRouted;
    std::uint32_t blocks = 0;
    if (!in.get(r.replica) || !in.get(r.prompt_tokens) || !in.get(r.cached_tokens) ||
        !in.get(r.block_size) || !in.get(blocks)) {
      return malformed("a routed record cut short");
    }
    if (blocks > kMaxPeerBlocks) {
      return malformed(std::to_string(blocks) + " blocks in a record, at most " +
                       std::to_string(kMaxPeerBlocks));
    }
    if (in.left() / 8 < blocks) return malformed("a routed record's blocks cut short");
    r.hashes.resize(blocks);
    for (std::uint64_t& h : r.hashes) in.get(h);
  }
  return out;
}

void PeerSendWriter::reserve(std::size_t bytes) {
  if (!current_.empty() && current_.size() + bytes > kPeerMaxDatagram) {
    done_.push_back(std::move(current_));
    current_.clear();
    records_ = 0;
  }
  if (current_.empty()) {
    current_.reserve(std::min(kPeerMaxDatagram, std::max<std::size_t>(1400, bytes + kHeaderBytes)));
    current_.append(kPeerMagic);
    put<std::uint8_t>(current_, kPeerVersion);
    put<std::uint64_t>(current_, origin_);
  }
}

void PeerSendWriter::routed(std::uint64_t flight, std::uint64_t replica,
                            const RouteRequest& request, const RouteDecision& decision) {
  const std::size_t blocks = std::min(request.block_hashes.size(), kMaxPeerBlocks);
  reserve(kRecordHeadBytes + kRoutedFixedBytes + 8 * blocks);
  put<std::uint8_t>(current_, static_cast<std::uint8_t>(PeerRecordKind::kRouted));
  put<std::uint64_t>(current_, flight);
  put<std::uint64_t>(current_, replica);
  constexpr std::size_t kMax32 = 0xffffffffu;
  put<std::uint32_t>(current_, static_cast<std::uint32_t>(std::min(request.prompt_tokens, kMax32)));
  put<std::uint32_t>(
      current_, static_cast<std::uint32_t>(std::min(decision.predicted_cached_tokens, kMax32)));
  put<std::uint32_t>(current_, static_cast<std::uint32_t>(std::min(request.block_size, kMax32)));
  put<std::uint32_t>(current_, static_cast<std::uint32_t>(blocks));
  for (std::size_t i = 0; i < blocks; ++i) put<std::uint64_t>(current_, request.block_hashes[i]);
  ++records_;
}

void PeerSendWriter::simple(PeerRecordKind kind, std::uint64_t flight) {
  reserve(kRecordHeadBytes);
  put<std::uint8_t>(current_, static_cast<std::uint8_t>(kind));
  put<std::uint64_t>(current_, flight);
  ++records_;
}

std::vector<std::string> PeerSendWriter::take() {
  if (records_ > 0) {
    done_.push_back(std::move(current_));
    current_.clear();
    records_ = 0;
  }
  return std::exchange(done_, {});
}

std::string PeerSendWriter::heartbeat() const {
  std::string out(kPeerMagic);
  put<std::uint8_t>(out, kPeerVersion);
  put<std::uint64_t>(out, origin_);
  return out;
}

std::size_t PeerLedger::FlightKeyHash::operator()(const FlightKey& k) const noexcept {
  return static_cast<std::size_t>(k.origin * 0x9e3779b97f4a7c15ULL ^ k.flight);
}

PeerLedger::PeerLedger(std::uint64_t self, PeerLedgerConfig config)
    : self_(self), config_(config) {}

void PeerLedger::set_replica_key(std::uint64_t key, ReplicaId id) {
  replicas_[key] = id;
}

Status PeerLedger::apply(std::string_view datagram, PrefixIndex& index, RoutingPolicy& policy,
                         const ViewOf& view_of, Clock::time_point now) {
  auto parsed = parse_peer_datagram(datagram);
  if (!parsed) {
    note_malformed();
    return parsed.error();
  }
  apply(std::move(*parsed), index, policy, view_of, now);
  return {};
}

void PeerLedger::apply(PeerDatagram datagram, PrefixIndex& index, RoutingPolicy& policy,
                       const ViewOf& view_of, Clock::time_point now) {
  if (datagram.origin == self_) return;
  ++counters_.datagrams;
  peers_[datagram.origin] = now;
  for (PeerRecord& r : datagram.records) {
    ++counters_.records;
    const FlightKey key{datagram.origin, r.flight};
    if (r.kind == PeerRecordKind::kRouted) {
      const auto replica = replicas_.find(r.replica);
      ReplicaView* view = replica == replicas_.end() ? nullptr : view_of(replica->second);
      if (view == nullptr) {
        ++counters_.unknown_replica;
        continue;
      }
      if (flights_.size() >= config_.max_flights || flights_.contains(key)) {
        ++counters_.dropped;
        continue;
      }
      Flight& f = flights_[key];
      f.replica = replica->second;
      f.decision.replica = replica->second;
      f.decision.reason = RouteReason::kLeastCost;
      f.decision.predicted_cached_tokens = r.cached_tokens;
      f.decision.ticket = kPeerTicketBit | ++next_ticket_;
      f.routed_at = now;
      RouteRequest request;
      request.block_hashes = r.hashes;
      request.prompt_tokens = r.prompt_tokens;
      request.block_size = std::max<std::uint32_t>(1, r.block_size);
      f.uncached = uncached_prompt_tokens(request, f.decision);
      f.decision.predicted_from = record_routed(index, policy, *view, request, f.decision, now);
      // Kept to settle its predictions at the first token, within the bound; past it they
      // expire after the index's max_prefill_wait instead.
      if (stored_blocks_ + r.hashes.size() <= config_.max_stored_blocks) {
        stored_blocks_ += r.hashes.size();
        f.hashes = std::move(r.hashes);
      }
      continue;
    }
    const auto it = flights_.find(key);
    ReplicaView* view = it == flights_.end() ? nullptr : view_of(it->second.replica);
    if (view == nullptr) {
      ++counters_.dropped;
      continue;
    }
    Flight& f = it->second;
    if (r.kind == PeerRecordKind::kPrefilled) {
      if (f.prefilled) continue;
      RouteRequest request;
      request.block_hashes = f.hashes;
      record_prefilled(index, *view, request, f.uncached, now, f.decision.predicted_from);
      f.prefilled = true;
      stored_blocks_ -= f.hashes.size();
      f.hashes = {};  // settled
    } else {
      end(f, index, policy, *view, now);
      flights_.erase(it);
    }
  }
}

void PeerLedger::end(Flight& f, PrefixIndex& index, RoutingPolicy& policy, ReplicaView& view,
                     Clock::time_point now) {
  RouteRequest request;
  request.block_hashes = f.hashes;
  record_finished(index, policy, view, request, f.decision, f.prefilled,
                  f.prefilled ? 0 : f.uncached, now);
  stored_blocks_ -= f.hashes.size();
  f.hashes = {};
}

void PeerLedger::expire(PrefixIndex& index, RoutingPolicy& policy, const ViewOf& view_of,
                        Clock::time_point now) {
  std::vector<std::uint64_t> gone;
  boost::unordered::erase_if(peers_, [&](const auto& peer) {
    if (now - peer.second < config_.peer_timeout) return false;
    gone.push_back(peer.first);
    return true;
  });
  boost::unordered::erase_if(flights_, [&](auto& entry) {
    Flight& f = entry.second;
    const bool peer_gone = std::find(gone.begin(), gone.end(), entry.first.origin) != gone.end();
    if (!peer_gone && now - f.routed_at < config_.max_flight_age) return false;
    if (ReplicaView* view = view_of(f.replica)) end(f, index, policy, *view, now);
    ++counters_.expired;
    return true;
  });
}

}  // namespace prefixgate::gateway
