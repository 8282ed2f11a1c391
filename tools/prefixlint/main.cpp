// prefixlint: lint prompts for prefix-breaking content, diff prompt versions, analyse request
// logs. Exit codes: 0 clean, 1 findings at or above --fail-on (or a diff that loses prefix),
// 2 bad usage or unreadable input.
#include <CLI/CLI.hpp>
#include <iostream>

#include "commands.h"

int main(int argc, char** argv) {
  CLI::App app{"prefixlint: find what breaks your prompts' prefix cache", "prefixlint"};
  app.set_version_flag("--version", PREFIXGATE_VERSION);
  app.require_subcommand(1);
  std::function<int()> run;
  prefixgate::lint::add_check_command(app, run);
  prefixgate::lint::add_diff_command(app, run);
  prefixgate::lint::add_log_command(app, run);
  prefixgate::lint::add_canon_command(app, run);
  prefixgate::lint::add_tokens_command(app, run);
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {
    return app.exit(e);  // --help, --version
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return 2;
  }
  try {
    return run ? run() : 2;
  } catch (const std::exception& e) {
    // Nothing a user sends should get here; if it does, say so rather than abort.
    std::cerr << "prefixlint: internal error: " << e.what() << "\n";
    return 2;
  }
}
