// The /dashboard page, compiled into the binary from dashboard/dashboard.html by
// cmake/embed_asset.cmake (editing the .html is the source of truth; the build regenerates
// dashboard_asset.cpp from it).
#pragma once

#include <string_view>

namespace prefixgate::gateway::server {

std::string_view dashboard_html();

}  // namespace prefixgate::gateway::server
