// `prefixlint canon` (RFC 8785 form of a JSON document) and `prefixlint tokens` (the token ids
// and block hashes of a request, as an engine and the gateway compute them).
#include <iostream>

#include "commands.h"
#include "documents.h"
#include "model_flags.h"
#include "prefixgate/canonicalize/json.h"

namespace prefixgate::lint {

int fail(const Error& error) {
  std::cerr << "prefixlint: " << error.message << "\n";
  return 2;
}

void add_canon_command(CLI::App& app, std::function<int()>& run) {
  auto file = std::make_shared<std::string>("-");
  CLI::App* cmd =
      app.add_subcommand("canon", "print the RFC 8785 canonical form of a JSON document");
  cmd->add_option("file", *file, "JSON file; - or nothing for stdin");
  cmd->callback([file, &run] {
    run = [file]() -> int {
      auto text = read_file(*file);
      if (!text) return fail(text.error());
      auto doc = json::parse(*text);
      if (!doc) {
        Error e = doc.error();
        e.message = *file + ": " + e.message;
        return fail(e);
      }
      auto canonical = json::to_canonical_json(*doc);
      if (!canonical) return fail(canonical.error());
      std::cout << *canonical << "\n";
      return 0;
    };
  });
}

void add_tokens_command(CLI::App& app, std::function<int()>& run) {
  struct Options {
    ModelFlags model;
    std::string file;
  };
  auto opts = std::make_shared<Options>();
  CLI::App* cmd =
      app.add_subcommand("tokens",
                         "print a request's rendered prompt, token ids and prefix-block hashes as "
                         "JSON");
  cmd->add_option("file", opts->file, "a request (.json) or prompt text; - for stdin")->required();
  add_model_flags(*cmd, opts->model, /*with_policy=*/false);
  cmd->callback([opts, &run] {
    run = [opts]() -> int {
      auto loaded = load_model(opts->model);
      if (!loaded) return fail(loaded.error());
      auto docs = read_documents(opts->file, forced_api(opts->model));
      if (!docs) return fail(docs.error());
      json::Array out;
      for (const Document& doc : *docs) {
        auto analyzed = canon::analyze_prompt(doc.request, loaded->model, loaded->render);
        if (!analyzed) return fail(refused_by_template(opts->file, doc, analyzed.error()));
        const canon::AnalyzedPrompt& p = *analyzed;
        std::string line = R"({"text":)";
        json::append_quoted(p.rendered.text, line);
        line += R"(,"tokens":[)";
        for (std::size_t i = 0; i < p.tokens.tokens.size(); ++i) {
          if (i > 0) line += ',';
          line += std::to_string(p.tokens.tokens[i]);
        }
        line += R"(],"block_size":)" + std::to_string(p.block_size) + R"(,"block_hashes":[)";
        for (std::size_t i = 0; i < p.block_hashes.size(); ++i) {
          if (i > 0) line += ',';
          line += '"' + canon::hash_hex(p.block_hashes[i]) + '"';
        }
        line += R"(],"stable_prefix_tokens":)" + std::to_string(p.stable_prefix_tokens()) + "}";
        std::cout << line << "\n";
      }
      return 0;
    };
  });
}

}  // namespace prefixgate::lint
