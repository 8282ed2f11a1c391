// parse_engine_event_line: each kind of prefixgate-engine's kv_events line, decoded field by
// field, and what is skipped.
#include "server/engine_events.h"

#include <gtest/gtest.h>

namespace prefixgate::gateway::server {
namespace {

using Kind = EngineEventLine::Kind;

TEST(EngineEventLineTest, ALoadLineCarriesCountsAndTheEnginesAnnouncedSpeed) {
  const EngineEventLine e = parse_engine_event_line(
      R"({"type":"load","running":3,"waiting":2,"kv_pages_used":40,"kv_pages_total":100,)"
      R"("tokens_queued_for_prefill":512,"preemptions_total":1,)"
      R"("prefill_seconds_per_token":2.5e-5,"decode_seconds_per_sequence":1e-4})");
  ASSERT_EQ(e.kind, Kind::kLoad);
  EXPECT_EQ(e.load.running, 3u);
  EXPECT_EQ(e.load.waiting, 2u);
  EXPECT_EQ(e.load.kv_pages_used, 40u);
  EXPECT_EQ(e.load.kv_pages_total, 100u);
  EXPECT_EQ(e.load.tokens_queued_for_prefill, 512u);
  EXPECT_EQ(e.load.preemptions_total, 1u);
  EXPECT_DOUBLE_EQ(e.load.prefill_seconds_per_token, 2.5e-5);
  EXPECT_DOUBLE_EQ(e.load.decode_seconds_per_sequence, 1e-4);
  EXPECT_EQ(e.load.batch_slots, 0u);  // not announced
  EXPECT_EQ(e.load.admission_wait_seconds, 0);
  // A full batch announces its places, the wait for one, the interval between two and the time
  // until its first running sequence ends.
  const EngineEventLine full = parse_engine_event_line(
      R"({"type":"load","running":64,"waiting":9,"batch_slots":64,)"
      R"("admission_wait_seconds":0.75,"admission_interval_seconds":0.03,"next_end_seconds":0.5})");
  EXPECT_EQ(full.load.batch_slots, 64u);
  EXPECT_DOUBLE_EQ(full.load.admission_wait_seconds, 0.75);
  EXPECT_DOUBLE_EQ(full.load.admission_interval_seconds, 0.03);
  EXPECT_DOUBLE_EQ(full.load.next_end_seconds, 0.5);
  EXPECT_EQ(e.load.next_end_seconds, 0);  // not announced
}

TEST(EngineEventLineTest, ASpeedThatIsNotAPositiveFiniteNumberIsNotAnnounced) {
  const EngineEventLine e = parse_engine_event_line(
      R"({"type":"load","prefill_seconds_per_token":-1,"decode_seconds_per_sequence":"fast"})");
  ASSERT_EQ(e.kind, Kind::kLoad);
  EXPECT_EQ(e.load.prefill_seconds_per_token, 0);
  EXPECT_EQ(e.load.decode_seconds_per_sequence, 0);
  // Counts past what size_t holds clamp instead of converting out of range.
  const EngineEventLine big = parse_engine_event_line(R"({"type":"load","running":1e300})");
  EXPECT_EQ(big.load.running, static_cast<std::size_t>(-1));
}

TEST(EngineEventLineTest, StoredAndSnapshotLinesCarryTheirHashesAndSequence) {
  const EngineEventLine stored =
      parse_engine_event_line(R"({"type":"stored","seq":7,"hash":"9f3a"})");
  ASSERT_EQ(stored.kind, Kind::kStored);
  EXPECT_EQ(stored.seq, 7u);
  EXPECT_EQ(stored.hashes, std::vector<std::uint64_t>{0x9f3a});
  const EngineEventLine snap = parse_engine_event_line(
      R"({"type":"snapshot","seq":9,"blocks":[{"hash":"1"},{"hash":"zz"},{"hash":"ff"}]})");
  ASSERT_EQ(snap.kind, Kind::kSnapshot);
  EXPECT_EQ(snap.hashes, (std::vector<std::uint64_t>{0x1, 0xff}));  // the malformed one dropped
}

TEST(EngineEventLineTest, LinesThatAreNotOursAreSkipped) {
  for (const char* line : {"", "not json", "[1,2]", R"({"seq":1})", R"({"type":7})"}) {
    EXPECT_EQ(parse_engine_event_line(line).kind, Kind::kSkip) << line;
  }
}

}  // namespace
}  // namespace prefixgate::gateway::server
