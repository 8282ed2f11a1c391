// find_volatile on identifiers: structured ids (UUID, ULID, traceparent, JWT, provider ids) and
// the randomness heuristics for hex and base64 nonces, with the names they must leave alone.
#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <vector>

#include "prefixgate/canonicalize/volatile.h"
#include "support/volatile_spans.h"

namespace prefixgate::canon {
namespace {

struct IdCase {
  std::string_view text;
  std::string_view span;  // the substring of `text` that must be the only finding
  std::string_view kind;
};

using test_support::describe;
using test_support::expect_no_volatile;

void expect_only_id(const IdCase& c) {
  SCOPED_TRACE(testing::Message() << "text: " << c.text);
  const std::vector<VolatileSpan> spans = find_volatile(c.text);
  ASSERT_EQ(spans.size(), 1u) << describe(c.text, spans);
  const std::size_t begin = c.text.find(c.span);
  ASSERT_NE(begin, std::string_view::npos) << "span is not in the text";
  EXPECT_EQ(spans[0].begin, begin) << describe(c.text, spans);
  EXPECT_EQ(spans[0].end, begin + c.span.size()) << describe(c.text, spans);
  EXPECT_STREQ(rule_id(spans[0].rule), "volatile-id");
  EXPECT_STREQ(severity_name(spans[0].severity), "error");
  EXPECT_EQ(spans[0].kind, c.kind);
}

TEST(VolatileIdTest, FindsUuidsOfAnyVersionAndCase) {
  const IdCase cases[] = {
      {"id 550e8400-e29b-41d4-a716-446655440000 x", "550e8400-e29b-41d4-a716-446655440000", "uuid"},
      {"{0190F3A2-7B1C-7D4E-9F00-1A2B3C4D5E6F}", "0190F3A2-7B1C-7D4E-9F00-1A2B3C4D5E6F", "uuid"},
      {"urn:uuid:abcdefab-cdef-4abc-8def-abcdefabcdef.", "abcdefab-cdef-4abc-8def-abcdefabcdef",
       "uuid"},
  };
  for (const IdCase& c : cases) expect_only_id(c);
  expect_no_volatile("550e8400-e29b-41d4-a716-44665544000");    // 11 digits in the last group
  expect_no_volatile("550e8400-e29b-41d4-a716-446655440000g");  // glued to a word
}

TEST(VolatileIdTest, FindsUlids) {
  const IdCase cases[] = {
      {"ulid=01ARZ3NDEKTSV4RRFFQ69G5FAV;", "01ARZ3NDEKTSV4RRFFQ69G5FAV", "ulid"},
      {"01j5xk3m7qz8v9w2n4p6r8t0ab", "01j5xk3m7qz8v9w2n4p6r8t0ab", "ulid"},
  };
  for (const IdCase& c : cases) expect_only_id(c);
  expect_no_volatile("81ARZ3NDEKTSV4RRFFQ69G5FAV");  // first character above 7: past 2^48 ms
  expect_no_volatile("01ARZ3NDEKTSV4RRFFQ69G5FAL");  // L is not Crockford base32
  expect_no_volatile("01ARZ3NDEKTSV4RRffq69g5fav");  // mixed case
}

TEST(VolatileIdTest, FindsTraceparentHeaders) {
  expect_only_id({"traceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
                  "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "traceparent"});
}

TEST(VolatileIdTest, FindsJwts) {
  const IdCase cases[] = {
      {"Authorization: Bearer "
       "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_"
       "XgL0n3I9PlFUP0THsR8U",
       "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_"
       "XgL0n3I9PlFUP0THsR8U",
       "jwt"},
      // alg "none": an empty signature, the trailing dot included.
      {"t=eyJhbGciOiJub25lIn0.eyJzdWIiOiIxIn0. ok", "eyJhbGciOiJub25lIn0.eyJzdWIiOiIxIn0.", "jwt"},
  };
  for (const IdCase& c : cases) expect_only_id(c);
}

TEST(VolatileIdTest, FindsProviderIds) {
  const IdCase cases[] = {
      {"id chatcmpl-9pWJmX0uL1YrW3kqDq8NcXr2Ab1C", "chatcmpl-9pWJmX0uL1YrW3kqDq8NcXr2Ab1C",
       "provider-id"},
      {"msg_01XFDUDYJgAACzvnptvVoYEL", "msg_01XFDUDYJgAACzvnptvVoYEL", "provider-id"},
      {"\"toolu_01A09q90qw90lq917835lq9\"", "toolu_01A09q90qw90lq917835lq9", "provider-id"},
      {"call_abc123def456", "call_abc123def456", "provider-id"},
      {"req_011CRu4wWYpDhUQsN3Eqh9hC", "req_011CRu4wWYpDhUQsN3Eqh9hC", "provider-id"},
      {"run_8xKq2mZ7vT4wLs9B", "run_8xKq2mZ7vT4wLs9B", "provider-id"},
      {"thread_abc123XYZ789", "thread_abc123XYZ789", "provider-id"},
      {"resp_67cb71b351908190a308f3859487620d", "resp_67cb71b351908190a308f3859487620d",
       "provider-id"},
  };
  for (const IdCase& c : cases) expect_only_id(c);
}

TEST(VolatileIdTest, LeavesNamesWithProviderPrefixesAlone) {
  for (std::string_view text : {"call_getWeather2", "run_tests", "req_validation", "msg_hello",
                                "file-loader", "my_run_abc123def456", "step_1", "trace_id"}) {
    expect_no_volatile(text);
  }
}

TEST(VolatileIdTest, FindsLongHexNonces) {
  const IdCase cases[] = {
      {"nonce 3f2a9b7c1d4e5f60718293a4b5c6d7e8", "3f2a9b7c1d4e5f60718293a4b5c6d7e8", "hex-nonce"},
      {"commit 9FCEB02D0AE598E95DC970B74767F19372D61AF8 merged",
       "9FCEB02D0AE598E95DC970B74767F19372D61AF8", "hex-nonce"},
      {"addr 0x3f2a9b7c1d4e5f60718293a4b5c6d7e8", "0x3f2a9b7c1d4e5f60718293a4b5c6d7e8",
       "hex-nonce"},
      {"x-request-id: 4bf92f3577b34da6.", "4bf92f3577b34da6", "hex-nonce"},
  };
  for (const IdCase& c : cases) expect_only_id(c);
}

TEST(VolatileIdTest, LeavesShortHashesNumbersAndWordsAlone) {
  for (std::string_view text : {
           "Commit a1b2c3d fixed it",  // a 7-character git short hash
           "pointer 0x7ffd5a3c2e10",   // 12 hex digits
           "deadbeefcafebabe",         // letters only
           "1234567890123456789",      // a plain decimal number
       }) {
    expect_no_volatile(text);
  }
}

TEST(VolatileIdTest, FindsBase64Nonces) {
  const IdCase cases[] = {
      {"secret dGhpcyBpcyBhIHNlY3JldCBub25jZQ== done",
       "dGhpcyBpcyBhIHNlY3JldCBub25jZQ==", "base64-nonce"},
      {"key Zx8pQ2mN7vK4rT9wLs3B end", "Zx8pQ2mN7vK4rT9wLs3B", "base64-nonce"},
      {"state=aB3dE5fG7hJ9kL1mN3pQ-x_Y7z&x=1", "aB3dE5fG7hJ9kL1mN3pQ-x_Y7z", "base64-nonce"},
      {"sig /9j4AAQSkZJRgABAQ2x+Kq9=", "/9j4AAQSkZJRgABAQ2x+Kq9=", "base64-nonce"},
      // The URL path before the nonce is left out of the span.
      {"see docs.google.com/document/d/1yrYZJ2twrbpUuScbo3rmN_v-Jfv6d2tO74nCT6PcpxI now",
       "1yrYZJ2twrbpUuScbo3rmN_v-Jfv6d2tO74nCT6PcpxI", "base64-nonce"},
  };
  for (const IdCase& c : cases) expect_only_id(c);
}

TEST(VolatileIdTest, LeavesIdentifiersPathsAndUrlsAlone) {
  for (std::string_view text : {
           "internationalization",
           "ThisIsCamelCaseIdentifierName",
           "XMLHttpRequest2Handler and getElementById",
           "AbstractSingletonProxyFactoryBean2",
           "src/components/UserProfile2Card.tsx",
           "/Users/Alice2/Documents/ProjectNotes/Draft3",
           "https://example.com/docs/api/v2/users?page=2&sort=name",
           "https://github.com/owner/repo/blob/main/src/File2Reader.cpp#L10",
           "my_component_v2_Config_Loader",
           "report-2026-08-20-FINALv2Draft-Version3",
           "--enable-Feature2-Flag-Name",
           "SetVariantPosVector3D TF2_OnWaitingForPlayersEnd SQL2DBinaryWaveToTextWave",
           "NID_pbe_WithSHA1And128BitRC4 and LN_pbeWithMD5AndCast5_CBC",
           "static const uint64_t k = 0xb5026f5aa96619e9ULL;",
       }) {
    expect_no_volatile(text);
  }
}

}  // namespace
}  // namespace prefixgate::canon
