// The admin routes: which paths they are, on which listener, who may see them (AdminGate), the
// login page that gives a browser a session cookie, and /metrics, /stats and /dashboard
// themselves. /prefixgate/explain is admitted here and answered by the API routes, since it
// needs a tenant like any API request.
#include <spdlog/spdlog.h>

#include "server/context.h"

namespace prefixgate::gateway::server {
namespace {

enum class AdminRoute { kNone, kMetrics, kStats, kDashboard, kRoot, kLogin, kLogout, kExplain };

AdminRoute admin_route_of(std::string_view path) {
  if (path == "/metrics") return AdminRoute::kMetrics;
  if (path == "/stats") return AdminRoute::kStats;
  if (path == "/dashboard") return AdminRoute::kDashboard;
  if (path == "/") return AdminRoute::kRoot;
  if (path == "/admin/login") return AdminRoute::kLogin;
  if (path == "/admin/logout") return AdminRoute::kLogout;
  if (path == "/prefixgate/explain" || path.starts_with("/prefixgate/explain/")) {
    return AdminRoute::kExplain;
  }
  return AdminRoute::kNone;
}

bool is_page(AdminRoute r) {
  return r == AdminRoute::kDashboard || r == AdminRoute::kRoot || r == AdminRoute::kLogin;
}

constexpr std::string_view kAdminRoutes = "/metrics, /stats, /dashboard and /prefixgate/explain";

std::string html_escape(std::string_view s) {
  std::string out;
  for (const char ch : s) {
    switch (ch) {
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '"': out += "&quot;"; break;
      default: out += ch;
    }
  }
  return out;
}

// A page of our own: nothing loaded from anywhere, the form posts here only, never framed.
Response page(const Request& req, http::status status, std::string body, bool keep_alive) {
  Response res =
      make_response(req, status, "text/html; charset=utf-8", std::move(body), keep_alive);
  res.set(http::field::cache_control, "no-store");
  res.set("content-security-policy",
          "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; "
          "frame-ancestors 'none'; base-uri 'none'");
  res.set("x-frame-options", "DENY");
  res.set("x-content-type-options", "nosniff");
  return res;
}

std::string page_html(std::string_view title, std::string_view inner) {
  return std::string(R"(<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>)") +
         std::string(title) + R"(</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
  body { font: 15px system-ui, sans-serif; background: #0f1419; color: #e6e6e6; display: grid;
         place-items: center; min-height: 90vh; margin: 0; }
  main { background: #1a2129; padding: 2rem 2.5rem; border-radius: 8px; max-width: 28rem; }
  h1 { font-size: 1.2rem; margin-top: 0; }
  input { font: inherit; width: 100%; box-sizing: border-box; padding: .5rem; margin: .5rem 0 1rem; }
  button { font: inherit; padding: .5rem 1.2rem; }
  .error { color: #ff8080; }
  code { background: #0f1419; padding: 0 .25rem; }
</style></head><body><main>
<h1>prefixgate admin</h1>
)" + std::string(inner) +
         "\n</main></body></html>\n";
}

std::string login_html(std::string_view message) {
  std::string inner;
  if (!message.empty())
    inner += "<p class=\"error\" id=\"message\">" + html_escape(message) + "</p>\n";
  inner += R"(<form method="post" action="/admin/login">
<label for="key">Admin key</label>
<input id="key" name="key" type="password" autocomplete="current-password" required autofocus>
<button type="submit">Sign in</button>
</form>
<p>The dashboard, /stats, /metrics and explain need the gateway's admin key
(<code>PREFIXGATE_ADMIN_KEY</code> or <code>admin_key:</code>).</p>)";
  return page_html("Sign in: prefixgate", inner);
}

std::string no_key_message(const GatewayContext& ctx) {
  const AdminConfig& a = ctx.config.admin;
  const std::string where = a.host.empty() ? ctx.config.host : a.host;
  return std::string("the admin routes (") + std::string(kAdminRoutes) +
         ") show tenants, prompts and routing, and the gateway serves them on " + where +
         ", which is not a loopback address, without an admin key: set PREFIXGATE_ADMIN_KEY or " +
         "admin_key: in the configuration (then send Authorization: Bearer KEY, or sign in at " +
         "/admin/login), or serve them on loopback with admin_listen: 127.0.0.1:PORT";
}

Response refusal(const GatewayContext& ctx, const Request& req, AdminRoute route,
                 AdminVerdict verdict, bool keep_alive) {
  if (verdict == AdminVerdict::kNoKeyOffLoopback) {
    if (is_page(route)) {
      return page(req, http::status::forbidden,
                  page_html("Forbidden: prefixgate",
                            "<p class=\"error\">" + html_escape(no_key_message(ctx)) + "</p>"),
                  keep_alive);
    }
    return error_response(req, http::status::forbidden, no_key_message(ctx), "admin_key_not_set",
                          keep_alive);
  }
  const bool wrong = verdict == AdminVerdict::kWrong;
  Response res =
      is_page(route)
          ? page(req, http::status::unauthorized,
                 login_html(wrong ? "Your session has ended: sign in again." : ""), keep_alive)
          : error_response(req, http::status::unauthorized,
                           wrong ? "invalid admin key or session (sign in again at /admin/login)"
                                 : "this route needs the admin key: send Authorization: Bearer "
                                   "ADMIN_KEY, or sign in at /admin/login",
                           wrong ? "invalid_admin_key" : "admin_key_required", keep_alive);
  res.set(http::field::www_authenticate, "Bearer realm=\"prefixgate-admin\"");
  if (route == AdminRoute::kDashboard || route == AdminRoute::kRoot) {
    res.set(http::field::link, "</admin/login>; rel=\"login\"");
  }
  return res;
}

Response see_other(const Request& req, std::string_view location, bool keep_alive) {
  Response res = make_response(req, http::status::see_other, "text/plain; charset=utf-8",
                               "see " + std::string(location) + "\n", keep_alive);
  res.set(http::field::location, location);
  res.set(http::field::cache_control, "no-store");
  return res;
}

Response method_not_allowed(const Request& req, std::string_view path, const char* allowed,
                            bool keep_alive) {
  Response res =
      error_response(req, http::status::method_not_allowed,
                     std::string("method ") + std::string(req.method_string()) +
                         " is not allowed on " + std::string(path) + " (use " + allowed + ")",
                     "method_not_allowed", keep_alive);
  res.set(http::field::allow, allowed);
  return res;
}

// GET shows the form; POST checks the key and starts a session.
Response login(GatewayContext& ctx, const Request& req, bool keep_alive) {
  AdminGate& gate = *ctx.admin;
  if (req.method() != http::verb::get && req.method() != http::verb::post) {
    return method_not_allowed(req, "/admin/login", "GET, POST", keep_alive);
  }
  if (gate.open()) return see_other(req, "/dashboard", keep_alive);  // nothing to sign in to
  if (!gate.has_key()) {
    return refusal(ctx, req, AdminRoute::kLogin, AdminVerdict::kNoKeyOffLoopback, keep_alive);
  }
  if (req.method() == http::verb::get) {
    return page(req, http::status::ok, login_html(""), keep_alive);
  }
  const std::optional<std::string> key = form_value(req.body(), "key");
  if (!key || !gate.key_matches(*key)) {
    spdlog::warn("admin login refused: wrong key");
    Response res =
        page(req, http::status::unauthorized, login_html("That is not the admin key."), keep_alive);
    res.set(http::field::www_authenticate, "Bearer realm=\"prefixgate-admin\"");
    return res;
  }
  Response res = see_other(req, "/dashboard", keep_alive);
  res.set(http::field::set_cookie, gate.login(AdminGate::Clock::now()));
  return res;
}

}  // namespace

bool concerns_admin(const Connection& c, std::string_view path) {
  const bool split = !c.ctx.config.admin.host.empty();
  return admin_route_of(path) != AdminRoute::kNone ||
         (split && c.io.listener == 1 && path != "/health");
}

Awaitable<std::optional<bool>> route_admin(Connection& c, const Request& req, RequestInfo& info,
                                           std::string_view path) {
  GatewayContext& ctx = c.ctx;
  // With admin_listen the admin routes live on the server's second listener only.
  const bool split = !ctx.config.admin.host.empty();
  const bool admin_here = !split || c.io.listener == 1;
  const AdminRoute route = admin_route_of(path);
  if (route == AdminRoute::kNone) {
    if (!split || c.io.listener != 1 || path == "/health") co_return std::nullopt;
    co_return co_await write_response(
        c, info,
        error_response(req, http::status::not_found,
                       "no route for " + std::string(path) + " on the admin listener (it serves " +
                           std::string(kAdminRoutes) + "; the API is on the listen address)",
                       "not_found", info.keep_alive));
  }
  if (!admin_here) {  // the same answer as any unknown path: nothing to learn here
    co_return co_await write_response(
        c, info,
        error_response(req, http::status::not_found, "no route for " + std::string(path),
                       "not_found", info.keep_alive));
  }
  if (route == AdminRoute::kLogin) {
    co_return co_await write_response(c, info, login(ctx, req, info.keep_alive));
  }
  if (route == AdminRoute::kLogout) {
    if (req.method() != http::verb::post) {
      co_return co_await write_response(c, info,
                                        method_not_allowed(req, path, "POST", info.keep_alive));
    }
    Response res = see_other(req, "/admin/login", info.keep_alive);
    res.set(http::field::set_cookie, ctx.admin->logout(req[http::field::cookie]));
    co_return co_await write_response(c, info, std::move(res));
  }
  const AdminCheck check = ctx.admin->check(req[http::field::authorization],
                                            req[http::field::cookie], AdminGate::Clock::now());
  if (check.verdict != AdminVerdict::kAllowed) {
    co_return co_await write_response(c, info,
                                      refusal(ctx, req, route, check.verdict, info.keep_alive));
  }
  if (route == AdminRoute::kExplain) {
    info.admin_bearer = check.by_bearer;
    co_return std::nullopt;
  }
  if (req.method() != http::verb::get) {
    co_return co_await write_response(c, info,
                                      method_not_allowed(req, path, "GET", info.keep_alive));
  }
  if (route == AdminRoute::kMetrics) {
    co_return co_await write_response(
        c, info,
        make_response(req, http::status::ok, "text/plain; version=0.0.4", ctx.metrics.render(),
                      info.keep_alive));
  }
  co_return co_await write_response(c, info, dashboard_response(ctx, req, path, info.keep_alive));
}

}  // namespace prefixgate::gateway::server
