// canon::SseReader: events split as bytes arrive, whatever the chunking, and append_sse.
#include "prefixgate/canonicalize/sse.h"

#include <gtest/gtest.h>

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

TEST(SseTest, AppendWritesTheEventLineOnlyWhenNamed) {
  std::string out;
  append_sse(out, "ping", "{}");
  append_sse(out, "", "[DONE]");
  EXPECT_EQ(out, "event: ping\ndata: {}\n\ndata: [DONE]\n\n");
}

}  // namespace
}  // namespace prefixgate::canon
