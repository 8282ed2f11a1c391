// round_timestamps: each format rounded down in place, the edge cases of granularity, and the
// properties the gateway relies on (idempotence, dates and ids untouched); and
// count_timestamps_to_round, which observe mode uses, agreeing with it.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "prefixgate/canonicalize/volatile.h"

namespace prefixgate::canon {
namespace {

using std::chrono::days;
using std::chrono::hours;
using std::chrono::minutes;
using std::chrono::seconds;

struct Case {
  std::string_view before;
  std::string_view after;
};

void expect_rounds(seconds granularity, const std::vector<Case>& cases) {
  for (const Case& c : cases) {
    const TimestampRounding r = round_timestamps(c.before, granularity);
    EXPECT_EQ(r.text, c.after) << "before: " << c.before << ", granularity " << granularity.count()
                               << " s";
    EXPECT_EQ(r.rewritten, c.before == c.after ? 0u : 1u) << "before: " << c.before;
    EXPECT_EQ(count_timestamps_to_round(c.before, granularity), r.rewritten)
        << "before: " << c.before;
  }
}

TEST(TimestampRoundingTest, RoundsIsoTimestampsToTheHourKeepingOffsetAndPrecision) {
  expect_rounds(hours(1), {
                              {"2026-08-20T14:33:07+02:00", "2026-08-20T14:00:00+02:00"},
                              {"2026-08-20T14:33:07Z", "2026-08-20T14:00:00Z"},
                              {"2026-08-20 14:33:07.123456Z", "2026-08-20 14:00:00.000000Z"},
                              {"2026-08-20T14:33:07,5-07:00", "2026-08-20T14:00:00,0-07:00"},
                              {"2026-08-20T14:33", "2026-08-20T14:00"},
                              {"at 2026-08-20 14:33:07 UTC.", "at 2026-08-20 14:00:00 UTC."},
                              {"20260820T143307Z", "20260820T140000Z"},
                              {"20260820T143307.25+0200", "20260820T140000.00+0200"},
                          });
}

TEST(TimestampRoundingTest, RoundsRfc2822AndHttpDatesWithinTheDay) {
  expect_rounds(hours(1),
                {
                    {"Thu, 20 Aug 2026 14:33:07 +0000", "Thu, 20 Aug 2026 14:00:00 +0000"},
                    {"Thu, 20 Aug 2026 14:33:07 GMT", "Thu, 20 Aug 2026 14:00:00 GMT"},
                    {"Thursday, 20-Aug-26 14:33:07 GMT", "Thursday, 20-Aug-26 14:00:00 GMT"},
                    {"Thu Aug  6 14:33:07 2026", "Thu Aug  6 14:00:00 2026"},
                });
  // A day's granularity still keeps the date, hence the weekday, as it was.
  expect_rounds(days(1), {{"Thu, 20 Aug 2026 23:59:59 +0000", "Thu, 20 Aug 2026 00:00:00 +0000"}});
}

TEST(TimestampRoundingTest, KeepsTwelveHourClocksAndTheirSpelling) {
  expect_rounds(hours(1), {
                              {"at 2:33 PM", "at 2:00 PM"},
                              {"at 12:45 AM", "at 12:00 AM"},
                              {"at 12:45 pm", "at 12:00 pm"},
                              {"at 02:33pm", "at 02:00pm"},
                              {"ends 11:59:59 p.m.", "ends 11:00:00 p.m."},
                              {"Thursday, August 20, 2026 at 2:33 PM",
                               "Thursday, August 20, 2026 at 2:00 PM"},
                              {"08/20/2026 2:33 PM", "08/20/2026 2:00 PM"},
                              {"at 3 PM", "at 3 PM"},
                          });
  // Down to midnight the half of the day flips, in the marker's own case and dots.
  expect_rounds(days(1), {
                             {"at 2:33 PM", "at 12:00 AM"},
                             {"at 11:59 p.m.", "at 12:00 a.m."},
                             {"at 3 pm", "at 12 am"},
                         });
}

TEST(TimestampRoundingTest, RoundsEpochSecondsAndMillisFromMidnightUtc) {
  // 1787236387 is 2026-08-20T14:33:07Z.
  expect_rounds(hours(1), {
                              {"ts=1787236387", "ts=1787234400"},
                              {"ts=1787236387123", "ts=1787234400000"},
                              {"ts=1787236387.123456", "ts=1787234400.000000"},
                          });
  expect_rounds(minutes(15), {{"ts=1787236387", "ts=1787236200"}});
  expect_rounds(days(1), {{"ts=1787236387123", "ts=1787184000000"}});
}

TEST(TimestampRoundingTest, RoundsToFifteenMinutes) {
  expect_rounds(minutes(15), {
                                 {"at 14:33:07", "at 14:30:00"},
                                 {"2026-08-20T14:44:59.9Z", "2026-08-20T14:30:00.0Z"},
                                 {"2026-08-20T14:45Z", "2026-08-20T14:45Z"},
                                 {"at 9:14 am", "at 9:00 am"},
                             });
}

TEST(TimestampRoundingTest, RoundsToADayAsMidnight) {
  expect_rounds(days(1), {
                             {"2026-08-20T14:33:07+02:00", "2026-08-20T00:00:00+02:00"},
                             {"20/08/2026 14:33", "20/08/2026 00:00"},
                             {"at 9:33", "at 0:00"},
                         });
  // More than a day behaves as a day.
  expect_rounds(hours(48), {{"2026-08-20T14:33:07Z", "2026-08-20T00:00:00Z"}});
}

TEST(TimestampRoundingTest, GranularityThatDoesNotDivideADayRestartsAtMidnight) {
  expect_rounds(hours(7), {
                              {"2026-08-20T22:10:00Z", "2026-08-20T21:00:00Z"},
                              {"2026-08-20T06:59:59Z", "2026-08-20T00:00:00Z"},
                          });
}

TEST(TimestampRoundingTest, RoundsOnlyToWhatTheFormatCanShow) {
  // Under 45 minutes, "2 PM" cannot become 1:30 PM; it goes to a 3-hour step (lcm(45m, 1h)).
  expect_rounds(minutes(45), {{"at 2 PM", "at 12 PM"}, {"at 14:50", "at 14:15"}});
}

TEST(TimestampRoundingTest, OneSecondGranularityOnlyZeroesFractions) {
  expect_rounds(seconds(1), {
                                {"2026-08-20T14:33:07.123Z", "2026-08-20T14:33:07.000Z"},
                                {"2026-08-20T14:33:07Z", "2026-08-20T14:33:07Z"},
                                {"2026-12-31T23:59:60Z", "2026-12-31T23:59:59Z"},  // leap second
                            });
}

TEST(TimestampRoundingTest, LeavesTextWithoutTimestampsDatesAndIdsUnchanged) {
  for (std::string_view text : {
           "",
           "You are a helpful assistant. Python 3.11, ratio 16:9, $19.99, HTTP 503.",
           "Today is Thursday, August 20, 2026 (2026-08-20).",
           "id 550e8400-e29b-41d4-a716-446655440000 and msg_01XFDUDYJgAACzvnptvVoYEL",
           "2026-08-20T14:00:00Z is already on the hour",
       }) {
    const TimestampRounding r = round_timestamps(text, hours(1));
    EXPECT_EQ(r.text, text);
    EXPECT_EQ(r.rewritten, 0u);
  }
}

TEST(TimestampRoundingTest, NonPositiveGranularityRewritesNothing) {
  for (seconds g : {seconds(0), seconds(-60)}) {
    const TimestampRounding r = round_timestamps("at 14:33:07", g);
    EXPECT_EQ(r.text, "at 14:33:07");
    EXPECT_EQ(r.rewritten, 0u);
  }
}

TEST(TimestampRoundingTest, RoundsEveryTimestampInAPromptAndCountsThem) {
  const std::string prompt =
      "Current date: Thursday, August 20, 2026. Current time: 14:33 UTC.\n"
      "Session 550e8400-e29b-41d4-a716-446655440000 started 2026-08-20T14:31:02.517Z,\n"
      "last seen Thu, 20 Aug 2026 14:32:59 GMT (1787236379), next check at 3:00 PM.\n";
  const TimestampRounding r = round_timestamps(prompt, hours(1));
  EXPECT_EQ(r.text,
            "Current date: Thursday, August 20, 2026. Current time: 14:00 UTC.\n"
            "Session 550e8400-e29b-41d4-a716-446655440000 started 2026-08-20T14:00:00.000Z,\n"
            "last seen Thu, 20 Aug 2026 14:00:00 GMT (1787234400), next check at 3:00 PM.\n");
  EXPECT_EQ(r.rewritten, 4u);
  EXPECT_EQ(count_timestamps_to_round(prompt, hours(1)), 4u);
  EXPECT_EQ(count_timestamps_to_round(r.text, hours(1)), 0u);
  EXPECT_EQ(count_timestamps_to_round(prompt, seconds(0)), 0u);
  // Rounded to the hour, what is left costs at most an hourly cache miss.
  for (const VolatileSpan& s : find_volatile(r.text)) {
    if (s.rule == Rule::kTimestamp) {
      EXPECT_NE(s.severity, Severity::kError) << s.kind;
    }
  }
}

// Every minute of the day, written in 24- and 12-hour forms, with and without seconds, against
// the time rounded down by hand: the times already on a step are told apart from the others
// without being written (timestamp_rounding.cpp's clock_kept), so both kinds are swept.
TEST(TimestampRoundingTest, EveryMinuteOfTheDayRoundsToItsStepInEachForm) {
  const auto two = [](int v) { return (v < 10 ? "0" : "") + std::to_string(v); };
  const auto twelve = [&](int minute_of_day, bool upper) {
    const int h = minute_of_day / 60;
    const std::string meridiem = h < 12 ? (upper ? "AM" : "am") : (upper ? "PM" : "pm");
    return std::to_string(h % 12 == 0 ? 12 : h % 12) + ":" + two(minute_of_day % 60) + " " +
           meridiem;
  };
  for (const int step_minutes : {15, 60}) {
    const seconds granularity = minutes(step_minutes);
    for (int m = 0; m < 24 * 60; ++m) {
      const int down = m / step_minutes * step_minutes;
      const std::string hhmm = two(m / 60) + ":" + two(m % 60);
      const std::string hhmm_down = two(down / 60) + ":" + two(down % 60);
      struct Written {
        std::string before, after;
      };
      const std::vector<Written> cases = {
          {"open at " + hhmm + " today", "open at " + hhmm_down + " today"},
          {"open at " + hhmm + ":00 today", "open at " + hhmm_down + ":00 today"},
          {"open at " + hhmm + ":30 today", "open at " + hhmm_down + ":00 today"},
          {"open at " + hhmm + ":00.000 today", "open at " + hhmm_down + ":00.000 today"},
          {"open at " + hhmm + ":00.250 today", "open at " + hhmm_down + ":00.000 today"},
          {"open at " + twelve(m, true) + " today", "open at " + twelve(down, true) + " today"},
          {"open at " + twelve(m, false) + " today", "open at " + twelve(down, false) + " today"},
      };
      for (const Written& c : cases) {
        const TimestampRounding r = round_timestamps(c.before, granularity);
        ASSERT_EQ(r.text, c.after) << "granularity " << step_minutes << " min";
        ASSERT_EQ(r.rewritten, c.before == c.after ? 0u : 1u) << c.before;
        ASSERT_EQ(count_timestamps_to_round(c.before, granularity), r.rewritten) << c.before;
      }
    }
  }
  // A leap second is on no step: rounded within its minute's day, never kept as written.
  expect_rounds(hours(1), {{"at 23:59:60 UTC", "at 23:00:00 UTC"}});
}

TEST(TimestampRoundingTest, RoundingTwiceEqualsRoundingOnce) {
  const std::string text =
      "2026-08-20T14:33:07.123+02:00 | 20260820T143307Z | Thu, 20 Aug 2026 23:59:60 +0000 | "
      "Thursday, August 20, 2026 at 11:47 p.m. | 08/20/2026 12:05 AM | at 9 pm | "
      "1787236387 | 1787236387123 | 1787236387.5 | at 14:33 | 20/08/2026 06:07:08";
  const seconds granularities[] = {seconds(1), seconds(45), minutes(7), minutes(15), minutes(45),
                                   hours(1),   hours(5),    hours(7),   days(1)};
  for (seconds g : granularities) {
    const TimestampRounding once = round_timestamps(text, g);
    const TimestampRounding twice = round_timestamps(once.text, g);
    EXPECT_EQ(twice.text, once.text) << "granularity " << g.count() << " s";
    EXPECT_EQ(twice.rewritten, 0u) << "granularity " << g.count() << " s";
    // Rounding finds the same timestamps before and after.
    EXPECT_EQ(find_volatile(once.text).size(), find_volatile(text).size());
  }
}

}  // namespace
}  // namespace prefixgate::canon
