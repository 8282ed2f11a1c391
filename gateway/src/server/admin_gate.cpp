// The admin routes' credentials: the key, login sessions and the loopback rule (admin_gate.h).
#include "server/admin_gate.h"

#include <sys/random.h>

#include <algorithm>
#include <random>

#include "prefixgate/base/hex_digit.h"
#include "prefixgate/serving/http.h"

namespace prefixgate::gateway::server {
namespace {

// 32 bytes from the kernel's CSPRNG as 64 hex digits.
std::string random_token() {
  unsigned char bytes[32];
  std::size_t got = 0;
  while (got < sizeof bytes) {
    const ssize_t n = getrandom(bytes + got, sizeof bytes - got, 0);
    if (n <= 0) break;
    got += static_cast<std::size_t>(n);
  }
  if (got < sizeof bytes) {  // getrandom unavailable (old kernel): the device behind it
    std::random_device rd;
    for (unsigned char& b : bytes) b = static_cast<unsigned char>(rd());
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (const unsigned char b : bytes) {
    out += kHex[b >> 4];
    out += kHex[b & 15];
  }
  return out;
}

}  // namespace

bool same_secret(std::string_view presented, std::string_view configured) {
  // volatile: the compiler may not turn the loop back into an early-exit comparison.
  volatile unsigned char diff = presented.size() == configured.size() ? 0 : 1;
  const std::size_t n = std::min(presented.size(), configured.size());
  for (std::size_t i = 0; i < n; ++i) {
    diff = diff | static_cast<unsigned char>(presented[i] ^ configured[i]);
  }
  return diff == 0;
}

std::optional<std::string_view> cookie_value(std::string_view header, std::string_view name) {
  while (!header.empty()) {
    const std::size_t semi = header.find(';');
    const std::string_view pair = serving::trim_ows(header.substr(0, semi));
    header = semi == std::string_view::npos ? std::string_view() : header.substr(semi + 1);
    const std::size_t eq = pair.find('=');
    if (eq != std::string_view::npos && serving::trim_ows(pair.substr(0, eq)) == name) {
      std::string_view v = serving::trim_ows(pair.substr(eq + 1));
      if (v.size() >= 2 && v.front() == '"' && v.back() == '"') v = v.substr(1, v.size() - 2);
      return v;
    }
  }
  return std::nullopt;
}

std::optional<std::string> form_value(std::string_view body, std::string_view name) {
  while (!body.empty()) {
    const std::size_t amp = body.find('&');
    const std::string_view pair = body.substr(0, amp);
    body = amp == std::string_view::npos ? std::string_view() : body.substr(amp + 1);
    const std::size_t eq = pair.find('=');
    if (pair.substr(0, eq) != name) continue;
    if (eq == std::string_view::npos) return std::string();
    std::string out;
    const std::string_view v = pair.substr(eq + 1);
    for (std::size_t i = 0; i < v.size(); ++i) {
      if (v[i] == '+') {
        out += ' ';
      } else if (v[i] == '%') {
        if (i + 2 >= v.size()) return std::nullopt;
        const int hi = hex_digit(v[i + 1]);
        const int lo = hex_digit(v[i + 2]);
        if (hi < 0 || lo < 0) return std::nullopt;
        out += static_cast<char>(hi * 16 + lo);
        i += 2;
      } else {
        out += v[i];
      }
    }
    return out;
  }
  return std::nullopt;
}

bool AdminGate::key_matches(std::string_view presented) const {
  return !key_.empty() && same_secret(presented, key_);
}

bool AdminGate::session_valid(std::string_view token, Clock::time_point now) const {
  std::lock_guard lock(mu_);
  // Every session is compared, whichever matches: the time does not say which one did.
  bool found = false;
  for (const Session& s : sessions_) {
    const bool match = same_secret(token, s.token);
    found = found || (match && s.expires > now);
  }
  return found;
}

AdminCheck AdminGate::check(std::string_view authorization, std::string_view cookie_header,
                            Clock::time_point now) const {
  if (key_.empty()) {
    return {.verdict = loopback_ ? AdminVerdict::kAllowed : AdminVerdict::kNoKeyOffLoopback};
  }
  const bool bearer = authorization.starts_with("Bearer ");
  if (bearer && same_secret(serving::trim_ows(authorization.substr(7)), key_)) {
    return {.verdict = AdminVerdict::kAllowed, .by_bearer = true};
  }
  const std::optional<std::string_view> token = cookie_value(cookie_header, kAdminCookie);
  if (token && !token->empty() && session_valid(*token, now)) {
    return {.verdict = AdminVerdict::kAllowed};
  }
  // A bearer token that is not the admin key may be a tenant's API key sent along with a
  // session cookie (explain): wrong only when no session vouches for the request.
  return {.verdict = bearer || token ? AdminVerdict::kWrong : AdminVerdict::kMissing};
}

std::string AdminGate::login(Clock::time_point now) {
  Session s{random_token(), now + kSessionTtl};
  const std::string cookie = std::string(kAdminCookie) + "=" + s.token +
                             "; Path=/; HttpOnly; SameSite=Strict; Max-Age=" +
                             std::to_string(std::chrono::seconds(kSessionTtl).count());
  std::lock_guard lock(mu_);
  std::erase_if(sessions_, [&](const Session& old) { return old.expires <= now; });
  if (sessions_.size() >= kMaxSessions) sessions_.erase(sessions_.begin());
  sessions_.push_back(std::move(s));
  return cookie;
}

std::string AdminGate::logout(std::string_view cookie_header) {
  if (const auto token = cookie_value(cookie_header, kAdminCookie)) {
    std::lock_guard lock(mu_);
    std::erase_if(sessions_, [&](const Session& s) { return same_secret(*token, s.token); });
  }
  return std::string(kAdminCookie) + "=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0";
}

}  // namespace prefixgate::gateway::server
