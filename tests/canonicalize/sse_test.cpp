// canon::SseReader: events split as bytes arrive, whatever the chunking, and append_sse.
#include "prefixgate/canonicalize/sse.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

namespace prefixgate::canon {
namespace {

TEST(SseTest, EventsAreTheSameHoweverTheBytesAreSplit) {
  const std::string stream =
      "event: message_start\ndata: {\"a\":1}\n\n: a comment\n\ndata: one\r\ndata: two\r\n\r\n"
      "data: [DONE]\n\nevent: tail\ndata: incomplete";
  for (std::size_t step : {1u, 2u, 3u, 7u, 1000u}) {
    SseReader reader;
    std::vector<SseEvent> events;
    for (std::size_t i = 0; i < stream.size(); i += step) {
      reader.feed(std::string_view(stream).substr(i, step), events);
    }
    ASSERT_EQ(events.size(), 3u) << step;
    EXPECT_EQ(events[0].event, "message_start");
    EXPECT_EQ(events[0].data, "{\"a\":1}");
    EXPECT_EQ(events[1].event, "");
    EXPECT_EQ(events[1].data, "one\ntwo");
    EXPECT_EQ(events[2].data, "[DONE]");
    EXPECT_EQ(reader.pending(), "event: tail\ndata: incomplete") << step;
  }
}

// Random events, each with its own line end ("\n", "\r\n" or a lone "\r"), data lines that hold
// the other line ends' characters nowhere, split at random: read back as they were written.
TEST(SseTest, RandomStreamsWithEveryLineEndReadBackWhole) {
  std::mt19937 rng(7);
  const auto pick = [&](std::size_t n) {
    return std::uniform_int_distribution<std::size_t>(0, n - 1)(rng);
  };
  const std::vector<std::string> ends = {"\n", "\r\n", "\r"};
  for (int round = 0; round < 200; ++round) {
    std::string stream;
    std::vector<SseEvent> expected;
    const std::size_t events = 1 + pick(6);
    for (std::size_t e = 0; e < events; ++e) {
      const std::string& end = ends[pick(ends.size())];
      SseEvent event;
      if (pick(2) == 0) {
        event.event = "name" + std::to_string(pick(100));
        stream += "event: " + event.event + end;
      }
      if (pick(3) == 0) stream += ": a comment" + end;
      const std::size_t lines = 1 + pick(3);
      for (std::size_t l = 0; l < lines; ++l) {
        const std::string data =
            "{\"text\":\"" + std::string(pick(300), 'a' + static_cast<char>(pick(26))) + "\"}";
        if (l > 0) event.data += '\n';
        event.data += data;
        stream += "data: " + data + end;
      }
      stream += end;
      expected.push_back(event);
    }
    SseReader reader;
    std::vector<SseEvent> got;
    for (std::size_t at = 0; at < stream.size();) {
      const std::size_t step = 1 + pick(64);
      reader.feed(std::string_view(stream).substr(at, step), got);
      at += step;
    }
    // A lone "\r" that ends the stream may be half of a "\r\n": the last event waits for more.
    if (stream.back() == '\r') reader.feed("\n", got);
    ASSERT_EQ(got.size(), expected.size()) << round;
    for (std::size_t i = 0; i < got.size(); ++i) {
      EXPECT_EQ(got[i].event, expected[i].event) << round << " " << i;
      EXPECT_EQ(got[i].data, expected[i].data) << round << " " << i;
    }
    EXPECT_EQ(reader.pending(), "") << round;
  }
}

TEST(SseTest, AppendWritesTheEventLineOnlyWhenNamed) {
  std::string out;
  append_sse(out, "ping", "{}");
  append_sse(out, "", "[DONE]");
  EXPECT_EQ(out, "event: ping\ndata: {}\n\ndata: [DONE]\n\n");
}

}  // namespace
}  // namespace prefixgate::canon
