// Who may see the admin routes (/metrics, /stats, /dashboard, /prefixgate/explain): they show
// tenants, prompt excerpts and routing, so they are the gateway's most sensitive answers.
//
//   AdminGate gate(config.admin.key, served_host);  // admin_listen's host, else listen's
//   AdminCheck c = gate.check(req[authorization], req[cookie], now);
//   if (c.verdict != AdminVerdict::kAllowed) ...401 or 403...
//   if (gate.key_matches(form_key)) res.set(set_cookie, gate.login(now));
//
// The rules:
//   - With a key: `Authorization: Bearer KEY`, or the session cookie a login set, else 401.
//     Keys and session tokens are compared in constant time.
//   - Without a key: open when the address the admin routes are served on is loopback
//     (127.0.0.0/8, ::1), 403 otherwise. The rule keys on the listen address, not on the
//     client's: behind a reverse proxy on the same host every client looks local.
// Sessions: a login gets a random 256-bit token (not derived from the key, so a stolen cookie
// reveals nothing about it), kept in memory for kSessionTtl; at most kMaxSessions, the oldest
// dropped first; a logout forgets it; a restart forgets them all.
#pragma once

#include <chrono>
#include <cstddef>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace prefixgate::gateway::server {

enum class AdminVerdict {
  kAllowed,
  kMissing,          // no credential: 401
  kWrong,            // a bearer token that is not the key, or an unknown session: 401
  kNoKeyOffLoopback  // no key configured and the routes are not on loopback: 403
};

struct AdminCheck {
  AdminVerdict verdict = AdminVerdict::kMissing;
  // The Authorization header held the admin key: it says nothing about a tenant.
  bool by_bearer = false;
};

inline constexpr std::string_view kAdminCookie = "prefixgate_admin";

class AdminGate {
 public:
  using Clock = std::chrono::system_clock;
  static constexpr std::chrono::hours kSessionTtl{12};
  static constexpr std::size_t kMaxSessions = 256;

  AdminGate(std::string key, bool loopback) : key_(std::move(key)), loopback_(loopback) {}

  bool has_key() const { return !key_.empty(); }
  // No key and served on loopback: anyone who can connect may see the admin routes.
  bool open() const { return key_.empty() && loopback_; }

  AdminCheck check(std::string_view authorization, std::string_view cookie_header,
                   Clock::time_point now) const;
  // The login form's key against the admin key, in constant time. False without a key.
  bool key_matches(std::string_view presented) const;
  // Starts a session; returns the Set-Cookie value (HttpOnly, SameSite=Strict, Path=/).
  std::string login(Clock::time_point now);
  // Forgets the cookie header's session, if any; returns the Set-Cookie value that clears it.
  std::string logout(std::string_view cookie_header);

 private:
  struct Session {
    std::string token;  // 64 hex digits
    Clock::time_point expires;
  };
  bool session_valid(std::string_view token, Clock::time_point now) const;

  std::string key_;
  bool loopback_;
  mutable std::mutex mu_;
  std::vector<Session> sessions_;  // oldest first
};

// The value of cookie `name` in a Cookie header ("a=1; name=v"), nullopt when absent.
std::optional<std::string_view> cookie_value(std::string_view cookie_header, std::string_view name);
// The value of `name` in an application/x-www-form-urlencoded body, percent- and '+'-decoded;
// nullopt when absent or badly encoded.
std::optional<std::string> form_value(std::string_view body, std::string_view name);
// Compares two secrets in time that depends only on their lengths, not on where they first
// differ, so that response timing does not reveal a secret's prefix.
bool same_secret(std::string_view presented, std::string_view configured);

}  // namespace prefixgate::gateway::server
