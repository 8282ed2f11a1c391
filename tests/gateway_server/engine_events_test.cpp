// parse_engine_event_line: each kind of prefixgate-engine's kv_events line, decoded field by
// field, and what is skipped.
#include "server/engine_events.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "server/engine_event_scan.h"

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
  EXPECT_EQ(stored.hash, 0x9f3au);
  // A malformed hash: the line keeps its place in the sequence, with no block.
  const EngineEventLine bad = parse_engine_event_line(R"({"type":"removed","seq":8,"hash":"xyz"})");
  EXPECT_EQ(bad.kind, Kind::kRemoved);
  EXPECT_EQ(bad.seq, 8u);
  EXPECT_FALSE(bad.hash.has_value());
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

void expect_same_as_dom(std::string_view line) {
  const EngineEventLine e = parse_engine_event_line(line);
  const EngineEventLine dom = parse_engine_event_line_dom(line);
  EXPECT_EQ(e.kind, dom.kind) << line;
  EXPECT_EQ(e.type, dom.type) << line;
  EXPECT_EQ(e.seq, dom.seq) << line;
  EXPECT_EQ(e.hash, dom.hash) << line;
  EXPECT_EQ(e.hashes, dom.hashes) << line;
  EXPECT_EQ(e.blocks, dom.blocks) << line;
}

TEST(EngineEventLineTest, ARunOfBlocksOnOneLineTakesASequenceNumberPerBlock) {
  // As prefixgate-engine writes a run (?batch=1): scanned, and decoded as the DOM parser does.
  const char* stored =
      R"({"type":"stored","seq":20,"hashes":["00000000000000a1","00000000000000a2",)"
      R"("00000000000000a3"],"parent":"00000000000000a0","salt":""})";
  const char* removed =
      R"({"type":"removed","seq":23,"hashes":["00000000000000b1","00000000000000b2"],"salt":"t"})";
  for (const char* line : {stored, removed}) {
    EXPECT_TRUE(scan_flat_event_line(line).has_value()) << line;
    expect_same_as_dom(line);
  }
  const EngineEventLine run = parse_engine_event_line(stored);
  ASSERT_EQ(run.kind, Kind::kStored);
  EXPECT_EQ(run.seq, 20u);
  EXPECT_EQ(run.blocks, 3u);
  EXPECT_FALSE(run.hash.has_value());
  EXPECT_EQ(run.hashes, (std::vector<std::uint64_t>{0xa1, 0xa2, 0xa3}));
  EXPECT_EQ(parse_engine_event_line(removed).blocks, 2u);
  // Other layouts go to the DOM parser, which reads them alike: a malformed hash keeps its
  // place (blocks counts it), an empty run stands for no block.
  const char* others[] = {
      R"({"type":"stored","seq":5,"hashes":["1","zz","ff"]})",
      R"({"type":"removed","seq":5,"hashes":[],"salt":""})",
      R"({"type":"stored", "seq":5,"hashes":["00000000000000a1"],"salt":""})",
      R"({"type":"stored","seq":5,"hashes":"00000000000000a1","salt":""})",  // not an array
  };
  for (const char* line : others) expect_same_as_dom(line);
  const EngineEventLine mixed = parse_engine_event_line(others[0]);
  EXPECT_EQ(mixed.blocks, 3u);
  EXPECT_EQ(mixed.hashes, (std::vector<std::uint64_t>{0x1, 0xff}));
  EXPECT_EQ(parse_engine_event_line(others[1]).blocks, 0u);
  const EngineEventLine flat = parse_engine_event_line(others[3]);
  EXPECT_EQ(flat.blocks, 1u);  // a one-block line without a hash
  EXPECT_TRUE(flat.hashes.empty());
}

TEST(EngineEventLineTest, TheEnginesDeltaLinesAreScannedWithoutTheDomParser) {
  // As prefixgate-engine writes them (its event_line), and with the whitespace JSON allows.
  const char* lines[] = {
      R"({"type":"stored","seq":12,"hash":"00ab12cd34ef5678","parent":"1","salt":""})",
      R"({"type":"removed","seq":13,"hash":"FFFFFFFFFFFFFFFF","salt":"prefixgate-tenant:a/b"})",
      R"({"type":"cleared","seq":14})",
      " { \"type\" : \"stored\" ,\t\"seq\":9999999999999999999, \"hash\":\"7\" } \r",
  };
  for (const char* line : lines) {
    EXPECT_TRUE(scan_flat_event_line(line).has_value()) << line;
    expect_same_as_dom(line);
  }
  const EngineEventLine e = *scan_flat_event_line(lines[1]);
  EXPECT_EQ(e.kind, Kind::kRemoved);
  EXPECT_EQ(e.seq, 13u);
  EXPECT_EQ(e.hash, 0xffffffffffffffffULL);
}

TEST(EngineEventLineTest, WhatTheScanCannotDecodeExactlyGoesToTheDomParser) {
  const char* lines[] = {
      R"({"type":"load","running":3})",                              // load lines: the DOM's
      R"({"type":"snapshot","seq":1,"blocks":[{"hash":"1"}]})",      // nested values
      R"({"type":"stored","seq":1.0,"hash":"1"})",                   // not an integer
      R"({"type":"stored","seq":-1,"hash":"1"})",                    // signed
      R"({"type":"stored","seq":01,"hash":"1"})",                    // not JSON
      R"({"type":"stored","seq":18446744073709551615,"hash":"1"})",  // 20 digits
      R"({"type":"st\u006fred","seq":1,"hash":"1"})",                // an escape
      "{\"type\":\"stored\",\"seq\":1,\"salt\":\"\xc3\xa9\"}",       // non-ASCII
      R"({"type":"stored","type":"removed","seq":1})",               // a duplicate
      R"({"type":"stored","seq":1,"ok":true})",                      // a literal
      R"({"type":"stored","seq":1} x)",                              // trailing bytes
      R"({"type":"stored","seq":1,})",                               // not JSON
  };
  for (const char* line : lines) {
    EXPECT_FALSE(scan_flat_event_line(line).has_value()) << line;
    expect_same_as_dom(line);
  }
}

TEST(EngineEventLineTest, EveryByteInEveryPlaceOfAHashDecodesAsTheDomParserDecodesIt) {
  // A 16-digit hash is checked and converted sixteen bytes at once: each byte value at each
  // place, in a one-block line and in a run, must be refused or read as from_chars reads it.
  const std::string good = "09afAF12cd34EF56";
  std::size_t refused = 0;
  for (std::size_t place = 0; place < good.size(); ++place) {
    for (int byte = 1; byte < 256; ++byte) {
      std::string hash = good;
      hash[place] = static_cast<char>(byte);
      if (byte == '"' || byte == '\\') continue;  // these end or escape the string instead
      const std::string one = R"({"type":"removed","seq":3,"hash":")" + hash + R"(","salt":""})";
      const std::string run =
          R"({"type":"removed","seq":3,"hashes":["0123456789abcdef",")" + hash + R"("],"salt":""})";
      expect_same_as_dom(one);
      expect_same_as_dom(run);
      const EngineEventLine e = parse_engine_event_line(one);
      refused += !e.hash.has_value();
    }
  }
  // 22 of the 255 bytes are hex digits; the rest are refused at every place.
  EXPECT_EQ(refused, 16u * (255 - 22 - 2));
  const EngineEventLine e =
      parse_engine_event_line(R"({"type":"removed","seq":3,"hashes":)"
                              R"(["09afAF12cd34EF56","ffffffffffffffff"],"salt":""})");
  EXPECT_EQ(e.hashes, (std::vector<std::uint64_t>{0x09afaf12cd34ef56ULL, ~0ULL}));
}

TEST(EngineEventLineTest, RandomLinesDecodeAsTheDomParserDecodesThem) {
  // Lines in the engine's shape (type, seq, hash, salt, in any order, some missing), each member's
  // key or value now and then replaced by one the scan must leave to the DOM parser, so that
  // both paths, and the boundary between them, are crossed many times.
  const std::vector<std::string> types = {R"("stored")", R"("removed")", R"("cleared")",
                                          R"("load")",   R"("other")",   "7"};
  const std::vector<std::string> seqs = {
      "0", "7", "123457", "9999999999999999999", "01", "18446744073709551615", R"("7")"};
  const std::vector<std::string> salts = {R"("")", R"("prefixgate-tenant:a/b")", R"("a"b")",
                                          "\"prefixgate\x01tenant\"", "\"tenant-\xc3\xa9\""};
  const std::vector<std::string> hashes = {R"("00ab12cd34ef5678")",
                                           R"("ffffffffffffffff")",
                                           R"("00ab12cd34ef567g")",
                                           R"("00AB12CD34EF5678")",
                                           R"("00ab12cd34ef567")",
                                           R"("00ab12cd34ef56789")",
                                           R"("9f3a")",
                                           R"("9F3a")",
                                           R"("00ab12cd34ef5678")",
                                           R"("00000000000000001f")",
                                           R"("1g")",
                                           R"("zz")",
                                           R"("0x1f")",
                                           R"("-1")",
                                           R"("1 ")",
                                           R"("")",
                                           "12"};
  const std::vector<std::string> odd_keys = {R"("")", R"("ty\pe")", R"("s\u0065q")", R"("hash")",
                                             R"("type")"};
  const std::vector<std::string> odd_values = {
      "0012", "1.5", "-3", "1e2", "18446744073709551615", "true", "null", "[]", R"({"a":1})",
      R"("\n")", "\"\xe2\x82\xac\"", "\"a\x01\"",
      // Long enough for the scan's eight-byte steps to meet the byte it must refuse.
      "\"0123456789\x1f"
      "0123456789\"",
      "\"0123456789\\n0123456789\"",
      "\"0123456789\xc3\xa9"
      "0123456789\"",
      "\"01234567\x7f"
      "0123456789\""};
  const std::vector<std::string> gaps = {"", " ", "\t", "\r\n", "x"};
  std::mt19937 rng(20261203);
  const auto pick = [&](const std::vector<std::string>& v) { return v[rng() % v.size()]; };
  std::size_t scanned = 0;
  for (int i = 0; i < 20000; ++i) {
    std::vector<std::pair<std::string, std::string>> members = {{R"("type")", pick(types)},
                                                                {R"("seq")", pick(seqs)},
                                                                {R"("hash")", pick(hashes)},
                                                                {R"("salt")", pick(salts)}};
    if (rng() % 2 == 0) {
      // As the engine writes them, a parent between the hash and the salt in stored lines.
      if (members[0].second == R"("stored")")
        members.insert(members.begin() + 3, {R"("parent")", pick(hashes)});
    } else {
      std::shuffle(members.begin(), members.end(), rng);
      members.resize(rng() % 5);
    }
    for (auto& [key, value] : members) {
      if (rng() % 16 == 0) key = pick(odd_keys);
      if (rng() % 16 == 0) value = pick(odd_values);
    }
    std::string line = rng() % 16 == 0 ? pick(gaps) : "";
    line += '{';
    for (std::size_t m = 0; m < members.size(); ++m) {
      if (m > 0) line += rng() % 64 == 0 ? "" : ",";
      line += members[m].first + (rng() % 8 == 0 ? pick(gaps) : "") + ":" + members[m].second;
    }
    line += rng() % 64 == 0 ? "" : "}";
    if (rng() % 16 == 0) line += pick(gaps);
    scanned += scan_flat_event_line(line).has_value();
    expect_same_as_dom(line);
  }
  // Both paths taken, each many times.
  EXPECT_GT(scanned, 5000u);
  EXPECT_LT(scanned, 15000u);
}

}  // namespace
}  // namespace prefixgate::gateway::server
