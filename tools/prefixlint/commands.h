// prefixlint's subcommands. Each registers itself on the app; when chosen, its callback sets
// `run` to the action, which returns the process exit code (0 clean, 1 findings, 2 bad usage or
// unreadable input).
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

#include "prefixgate/base/status.h"

namespace prefixgate::lint {

void add_check_command(CLI::App& app, std::function<int()>& run);
void add_diff_command(CLI::App& app, std::function<int()>& run);
void add_log_command(CLI::App& app, std::function<int()>& run);
void add_canon_command(CLI::App& app, std::function<int()>& run);
void add_tokens_command(CLI::App& app, std::function<int()>& run);

// Prints "prefixlint: <message>" to stderr and returns 2.
int fail(const Error& error);

}  // namespace prefixgate::lint
