// `prefixlint diff OLD NEW`: where two versions of a prompt stop sharing a prefix, and why.
#include <iostream>

#include "commands.h"
#include "documents.h"
#include "model_flags.h"
#include "prefixgate/canonicalize/divergence.h"

namespace prefixgate::lint {
namespace {

json::Value number(std::size_t n) {
  return json::Value(static_cast<double>(n));
}

// Shows control characters so an excerpt stays on one line.
std::string printable(const std::string& s) {
  std::string quoted;
  json::append_quoted(s, quoted);
  return quoted;
}

std::string diff_text(const canon::Divergence& d) {
  std::string out;
  if (!d.diverged) {
    out += "no divergence: ";
    out += d.common_prefix_tokens == d.new_stable_prefix_tokens ? "the prompts share their prefix"
                                                                : "one prompt extends the other";
    out += " (" + std::to_string(d.common_prefix_tokens) + " common tokens)\n";
    return out;
  }
  out += "diverged at byte " + std::to_string(d.byte_offset) + ", token " +
         std::to_string(d.token_index) + " (block " + std::to_string(d.block_index) + "), in " +
         d.field + "\n";
  out += "cause: " + std::string(canon::cause_name(d.cause)) + "\n";
  out += "  old: " + printable(d.old_excerpt) + "\n";
  out += "  new: " + printable(d.new_excerpt) + "\n";
  out += "common prefix: " + std::to_string(d.common_prefix_tokens) +
         " tokens; new stable prefix: " + std::to_string(d.new_stable_prefix_tokens) +
         " tokens; prefix tokens lost: " + std::to_string(d.prefix_tokens_lost) + "\n";
  out += "canonicalized: common prefix " + std::to_string(d.canonical_common_prefix_tokens) +
         " tokens; " +
         (d.canonicalization_keeps_prefix ? "canonicalization keeps the prefix"
                                          : "canonicalization does not keep the prefix") +
         "\n";
  return out;
}

std::string diff_json(const canon::Divergence& d) {
  json::Object o;
  o.push_back({"diverged", d.diverged});
  if (d.diverged) {
    o.push_back({"byte_offset", number(d.byte_offset)});
    o.push_back({"token_index", number(d.token_index)});
    o.push_back({"block_index", number(d.block_index)});
    o.push_back({"field", d.field});
    o.push_back({"cause", canon::cause_name(d.cause)});
    o.push_back({"old_excerpt", d.old_excerpt});
    o.push_back({"new_excerpt", d.new_excerpt});
  }
  o.push_back({"common_prefix_tokens", number(d.common_prefix_tokens)});
  o.push_back({"new_stable_prefix_tokens", number(d.new_stable_prefix_tokens)});
  o.push_back({"prefix_tokens_lost", number(d.prefix_tokens_lost)});
  o.push_back({"canonical_common_prefix_tokens", number(d.canonical_common_prefix_tokens)});
  o.push_back({"canonicalization_keeps_prefix", d.canonicalization_keeps_prefix});
  return json::to_json(json::Value(std::move(o))) + "\n";
}

Result<Document> read_one(const std::string& path, std::optional<canon::Api> api) {
  auto docs = read_documents(path, api);
  if (!docs) return docs.error();
  if (docs->size() != 1) {
    return make_error(ErrorCode::kInvalidValue,
                      path + ": expected one request, found " + std::to_string(docs->size()));
  }
  return std::move(docs->front());
}

}  // namespace

void add_diff_command(CLI::App& app, std::function<int()>& run) {
  struct Options {
    ModelFlags model;
    std::string format = "text";
    std::string old_file, new_file;
  };
  auto opts = std::make_shared<Options>();
  CLI::App* cmd =
      app.add_subcommand("diff", "where and why two versions of a prompt stop sharing a prefix");
  cmd->add_option("--format", opts->format, "text or json")
      ->capture_default_str()
      ->check(CLI::IsMember({"text", "json"}));
  cmd->add_option("old", opts->old_file, "the earlier request or prompt file")->required();
  cmd->add_option("new", opts->new_file, "the later request or prompt file")->required();
  add_model_flags(*cmd, opts->model, /*with_policy=*/true);
  cmd->callback([opts, &run] {
    run = [opts]() -> int {
      auto loaded = load_model(opts->model);
      if (!loaded) return fail(loaded.error());
      auto old_doc = read_one(opts->old_file, forced_api(opts->model));
      if (!old_doc) return fail(old_doc.error());
      auto new_doc = read_one(opts->new_file, forced_api(opts->model));
      if (!new_doc) return fail(new_doc.error());
      auto compared = canon::compare_prompts(old_doc->request, new_doc->request, loaded->model,
                                             loaded->policy, loaded->render);
      if (!compared) {
        return fail(
            make_error(compared.error().code,
                       "the model's chat template refuses a request: " + compared.error().message));
      }
      canon::Divergence& d = *compared;
      if (d.diverged) d.field = document_field(*new_doc, d.field);
      std::cout << (opts->format == "json" ? diff_json(d) : diff_text(d));
      // 1 when the change costs cached prefix, so CI can gate on it.
      return d.diverged && d.prefix_tokens_lost > 0 ? 1 : 0;
    };
  });
}

}  // namespace prefixgate::lint
