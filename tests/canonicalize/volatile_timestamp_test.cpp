// find_volatile on timestamps and dates: every supported format, with its exact span, rule,
// severity and kind, and the validation that keeps near-misses out.
#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <vector>

#include "prefixgate/canonicalize/volatile.h"
#include "support/volatile_spans.h"

namespace prefixgate::canon {
namespace {

struct TimestampCase {
  std::string_view text;
  std::string_view span;  // the substring of `text` that must be the only finding
  Severity severity;
  std::string_view kind;
};

using test_support::describe;
using test_support::expect_no_volatile;

void expect_only(const TimestampCase& c, Rule rule) {
  SCOPED_TRACE(testing::Message() << "text: " << c.text);
  const std::vector<VolatileSpan> spans = find_volatile(c.text);
  ASSERT_EQ(spans.size(), 1u) << describe(c.text, spans);
  const std::size_t begin = c.text.find(c.span);
  ASSERT_NE(begin, std::string_view::npos) << "span is not in the text";
  EXPECT_EQ(spans[0].begin, begin) << describe(c.text, spans);
  EXPECT_EQ(spans[0].end, begin + c.span.size()) << describe(c.text, spans);
  EXPECT_STREQ(rule_id(spans[0].rule), rule_id(rule));
  EXPECT_STREQ(severity_name(spans[0].severity), severity_name(c.severity));
  EXPECT_EQ(spans[0].kind, c.kind);
}

constexpr Severity kError = Severity::kError;
constexpr Severity kWarning = Severity::kWarning;
constexpr Severity kInfo = Severity::kInfo;

TEST(VolatileTimestampTest, FindsIso8601AndRfc3339ExtendedForms) {
  const TimestampCase cases[] = {
      {"Now: 2026-08-20T14:33:07Z.", "2026-08-20T14:33:07Z", kError, "rfc3339"},
      {"at 2026-08-20 14:33:07.123+02:00 sharp", "2026-08-20 14:33:07.123+02:00", kError,
       "rfc3339"},
      {"(2026-08-20t14:33:07-07:00)", "2026-08-20t14:33:07-07:00", kError, "rfc3339"},
      {"\"2026-08-20T14:33\"", "2026-08-20T14:33", kError, "iso8601"},
      {"time=2026-08-20T14:33:07", "2026-08-20T14:33:07", kError, "iso8601"},
      {"2026-08-20T14:33:07+0200 ok", "2026-08-20T14:33:07+0200", kError, "iso8601"},
      {"2026-08-20T14:33:07,5Z", "2026-08-20T14:33:07,5Z", kError, "rfc3339"},
      {"logged 2026-08-20 14:33:07 UTC.", "2026-08-20 14:33:07 UTC", kError, "iso8601"},
      {"\\n2026-08-20T14:33:07Z\\n", "2026-08-20T14:33:07Z", kError, "rfc3339"},
  };
  for (const TimestampCase& c : cases) expect_only(c, Rule::kTimestamp);
}

TEST(VolatileTimestampTest, SeverityFollowsThePrecisionTheDigitsShow) {
  const TimestampCase cases[] = {
      {"Hour: 2026-08-20T14.", "2026-08-20T14", kWarning, "iso8601"},
      {"2026-08-20T14:00:00Z", "2026-08-20T14:00:00Z", kWarning, "rfc3339"},
      {"2026-08-20T14:00:00.000Z", "2026-08-20T14:00:00.000Z", kWarning, "rfc3339"},
      {"2026-08-20T14:00:00.001Z", "2026-08-20T14:00:00.001Z", kError, "rfc3339"},
      {"2026-08-20T00:00:00Z", "2026-08-20T00:00:00Z", kInfo, "rfc3339"},
      {"opens at 9 AM", "9 AM", kWarning, "time-of-day"},
      {"at 14:00 today", "14:00", kWarning, "time-of-day"},
  };
  for (const TimestampCase& c : cases) expect_only(c, Rule::kTimestamp);
}

TEST(VolatileTimestampTest, FindsIso8601Basic) {
  const TimestampCase cases[] = {
      {"build 20260820T143307Z done", "20260820T143307Z", kError, "iso8601-basic"},
      {"20260820T1433+0200", "20260820T1433+0200", kError, "iso8601-basic"},
      {"20260820T143307.25Z", "20260820T143307.25Z", kError, "iso8601-basic"},
      {"20260820T143307", "20260820T143307", kError, "iso8601-basic"},
  };
  for (const TimestampCase& c : cases) expect_only(c, Rule::kTimestamp);
}

TEST(VolatileTimestampTest, FindsRfc2822AndHttpDates) {
  const TimestampCase cases[] = {
      {"Date: Thu, 20 Aug 2026 14:33:07 +0000", "Thu, 20 Aug 2026 14:33:07 +0000", kError,
       "rfc2822"},
      {"20 Aug 2026 14:33 -0700", "20 Aug 2026 14:33 -0700", kError, "rfc2822"},
      {"Thu, 6 Aug 2026 09:05:00 EDT", "Thu, 6 Aug 2026 09:05:00 EDT", kError, "rfc2822"},
      {"Thu, 20 Aug 2026 14:33:07 +0000 (UTC)", "Thu, 20 Aug 2026 14:33:07 +0000 (UTC)", kError,
       "rfc2822"},
      {"Last-Modified: Thu, 20 Aug 2026 14:33:07 GMT", "Thu, 20 Aug 2026 14:33:07 GMT", kError,
       "http-date"},
      {"Thursday, 20-Aug-26 14:33:07 GMT", "Thursday, 20-Aug-26 14:33:07 GMT", kError, "http-date"},
      {"Thu Aug 20 14:33:07 2026", "Thu Aug 20 14:33:07 2026", kError, "http-date"},
      {"Thu Aug  6 14:33:07 2026", "Thu Aug  6 14:33:07 2026", kError, "http-date"},
  };
  for (const TimestampCase& c : cases) expect_only(c, Rule::kTimestamp);
}

TEST(VolatileTimestampTest, FindsLongFormDatesWithATime) {
  const TimestampCase cases[] = {
      {"Today is Thursday, August 20, 2026 at 2:33 PM.", "Thursday, August 20, 2026 at 2:33 PM",
       kError, "long-date"},
      {"August 20, 2026, 14:33", "August 20, 2026, 14:33", kError, "long-date"},
      {"20 August 2026 14:33:07", "20 August 2026 14:33:07", kError, "long-date"},
      {"August 20th, 2026 at 2:33 p.m.", "August 20th, 2026 at 2:33 p.m.", kError, "long-date"},
      {"the 20th of August 2026 at 9am", "20th of August 2026 at 9am", kWarning, "long-date"},
      {"Thu Aug 20 2026 14:33:07 GMT+0200 (Central European Summer Time)",
       "Thu Aug 20 2026 14:33:07 GMT+0200 (Central European Summer Time)", kError, "long-date"},
      {"$ date\nThu Aug 20 14:33:07 UTC 2026\n", "Thu Aug 20 14:33:07 UTC 2026", kError,
       "long-date"},
      {"Thursday, August 20, 2026 at 2:33\xE2\x80\xAFPM",
       "Thursday, August 20, 2026 at 2:33\xE2\x80\xAFPM", kError, "long-date"},
  };
  for (const TimestampCase& c : cases) expect_only(c, Rule::kTimestamp);
}

TEST(VolatileTimestampTest, FindsNumericDateTimes) {
  const TimestampCase cases[] = {
      {"on 20/08/2026 14:33 UTC", "20/08/2026 14:33 UTC", kError, "numeric-datetime"},
      {"08/20/2026 2:33 PM", "08/20/2026 2:33 PM", kError, "numeric-datetime"},
      {"20.08.2026 14:33:07", "20.08.2026 14:33:07", kError, "numeric-datetime"},
      {"2026/08/20 14:33", "2026/08/20 14:33", kError, "numeric-datetime"},
      {"2026-08-20 at 2:33 PM", "2026-08-20 at 2:33 PM", kError, "numeric-datetime"},
      // The strict ISO parse stops before "PM"; the longer reading wins.
      {"2026-08-20 11:30 PM", "2026-08-20 11:30 PM", kError, "numeric-datetime"},
  };
  for (const TimestampCase& c : cases) expect_only(c, Rule::kTimestamp);
}

TEST(VolatileTimestampTest, FindsTimesOfDayWithEvidence) {
  const TimestampCase cases[] = {
      {"It is 2:33 PM.", "2:33 PM", kError, "time-of-day"},
      {"meet 2:33pm", "2:33pm", kError, "time-of-day"},
      {"ends 11:59:59 P.M. sharp", "11:59:59 P.M.", kError, "time-of-day"},
      {"[14:33:07] request served", "14:33:07", kError, "time-of-day"},
      {"14:33:07.250 done", "14:33:07.250", kError, "time-of-day"},
      {"The meeting is at 14:33.", "14:33", kError, "time-of-day"},
      {"Current time: 09:15", "09:15", kError, "time-of-day"},
      {"since 7:45, nothing", "7:45", kError, "time-of-day"},
      {"deploy @ 14:33", "14:33", kError, "time-of-day"},
      {"cutoff 14:33 UTC", "14:33 UTC", kError, "time-of-day"},
      {"cutoff 14:33Z", "14:33Z", kError, "time-of-day"},
      {"cutoff 14:33 +02:00", "14:33 +02:00", kError, "time-of-day"},
      {"wake 12:45 AM", "12:45 AM", kError, "time-of-day"},
      {"wake 6:05\xC2\xA0"
       "am",
       "6:05\xC2\xA0"
       "am",
       kError, "time-of-day"},
  };
  for (const TimestampCase& c : cases) expect_only(c, Rule::kTimestamp);
}

TEST(VolatileTimestampTest, FindsBothEndsOfAClockRange) {
  for (std::string_view text :
       {"from 9:15 to 17:45", "open 9:15-17:45", "9:15 am - 5:45 pm", "between 9:15 and 17:45"}) {
    const std::vector<VolatileSpan> spans = find_volatile(text);
    ASSERT_EQ(spans.size(), 2u) << text << "\n" << describe(text, spans);
    EXPECT_EQ(spans[0].kind, "time-of-day");
    EXPECT_EQ(spans[1].kind, "time-of-day");
  }
}

TEST(VolatileTimestampTest, FindsEpochSecondsAndMillis) {
  const TimestampCase cases[] = {
      {"ts=1787236387", "1787236387", kError, "epoch-seconds"},
      {"\"created\": 1787236387,", "1787236387", kError, "epoch-seconds"},
      {"time.time() = 1787236387.123456", "1787236387.123456", kError, "epoch-seconds"},
      {"Date.now() -> 1787236387123", "1787236387123", kError, "epoch-millis"},
      {"ts 1787234400 on the hour", "1787234400", kWarning, "epoch-seconds"},
      {"ts 1787184000 at midnight", "1787184000", kInfo, "epoch-seconds"},
      {"ts 1787234400000", "1787234400000", kWarning, "epoch-millis"},
  };
  for (const TimestampCase& c : cases) expect_only(c, Rule::kTimestamp);
}

TEST(VolatileTimestampTest, FindsCalendarDatesAlone) {
  const TimestampCase cases[] = {
      {"Today is 2026-08-20.", "2026-08-20", kInfo, "date"},
      {"Today is Thursday, August 20, 2026.", "Thursday, August 20, 2026", kInfo, "date"},
      {"as of August 20, 2026", "August 20, 2026", kInfo, "date"},
      {"on 20 August 2026", "20 August 2026", kInfo, "date"},
      {"on 20/08/2026.", "20/08/2026", kInfo, "date"},
      {"on 08/20/2026", "08/20/2026", kInfo, "date"},
      {"on 20.08.2026", "20.08.2026", kInfo, "date"},
      {"on 2026/08/20", "2026/08/20", kInfo, "date"},
      {"by Aug 20, 2026", "Aug 20, 2026", kInfo, "date"},
      {"by Aug. 20th, 2026", "Aug. 20th, 2026", kInfo, "date"},
      {"Thu, 20 Aug 2026", "Thu, 20 Aug 2026", kInfo, "date"},
      {"THURSDAY 20 AUGUST 2026", "THURSDAY 20 AUGUST 2026", kInfo, "date"},
      {"leap day 29 February 2028", "29 February 2028", kInfo, "date"},
      {"dir /logs/2026-08-20/app.log", "2026-08-20", kInfo, "date"},
  };
  for (const TimestampCase& c : cases) expect_only(c, Rule::kDate);
}

TEST(VolatileTimestampTest, RejectsImpossibleDatesAndTimes) {
  for (std::string_view text : {
           "2026-02-29",
           "2026-13-01",
           "2026-08-32",
           "31/04/2026",
           "30 February 2026",
           "1800-01-01",
           "2300-01-01",
           "at 24:00",
           "at 12:60",
           "13:30 PM",
           "0:30 am",
           "2026-08-20T25:00:00Z",
           "99/99/2026",
       }) {
    expect_no_volatile(text);
  }
}

TEST(VolatileTimestampTest, IgnoresClockShapedNumbersWithoutEvidence) {
  for (std::string_view text : {
           "Use a 16:9 or 4:3 screen",
           "The ratio is 16:10",
           "See John 3:16 and Genesis 1:27",
           "score 3:1, then 1:2",
           "timecode 01:02:03:04",
           "lap time 1:30.5",
           "duration 1:23:45",
           "ipv6 fe80::1:23 and 2001:db8::1",
           "Chapter 12:30 of the book",
           "at 4:3 to 16:10",
       }) {
    expect_no_volatile(text);
  }
}

TEST(VolatileTimestampTest, IgnoresDatesInsideNames) {
  for (std::string_view text : {
           "model gpt-4o-2024-08-06 is pinned",
           "claude-3-5-sonnet-20241022",
           "v1.20.08.2026",
           "version 1.2.2026.5",
           "May 2026",
           "on May 5",
       }) {
    expect_no_volatile(text);
  }
}

}  // namespace
}  // namespace prefixgate::canon
