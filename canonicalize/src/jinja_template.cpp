// Template: compile once, render many times; errors become Error (status.h) plus ErrorDetail.
#include "jinja_ast.h"
#include "jinja_interp.h"

namespace prefixgate::canon::jinja {
namespace {

Error to_error(const ErrorDetail& d) {
  const std::string where =
      d.line > 0 ? " at line " + std::to_string(d.line) + ", column " + std::to_string(d.column)
                 : std::string();
  switch (d.kind) {
    case ErrorKind::kSyntax:
      return make_error(ErrorCode::kInvalidValue,
                        "chat template syntax error" + where + ": " + d.text);
    case ErrorKind::kUnsupported:
      return make_error(ErrorCode::kUnsupported,
                        "chat template not supported" + where + ": " + d.text);
    case ErrorKind::kRaised: return make_error(ErrorCode::kInvalidValue, d.text);
    case ErrorKind::kType:
    case ErrorKind::kUndefined:
      return make_error(ErrorCode::kInvalidValue, "chat template error" + where + ": " + d.text);
    case ErrorKind::kLimit:
      return make_error(ErrorCode::kTooLarge,
                        "chat template exceeded a limit" + where + ": " + d.text);
  }
  return make_error(ErrorCode::kInvalidValue, d.text);
}

}  // namespace

Result<Template> Template::compile(std::string_view source, ErrorDetail* detail) {
  auto program = std::make_shared<Program>();
  ErrorDetail error;
  if (!parse_program(source, *program, error)) {
    if (detail != nullptr) *detail = error;
    return to_error(error);
  }
  return Template(std::move(program));
}

Result<RenderOutput> Template::render(const Context& context, const RenderOptions& options,
                                      ErrorDetail* detail) const {
  Interpreter interpreter(*program_, context, options);
  RenderOutput out;
  ErrorDetail error;
  if (!interpreter.render(out, error)) {
    if (detail != nullptr) *detail = error;
    return to_error(error);
  }
  return out;
}

bool Template::uses_strftime_now() const {
  return program_->uses_strftime_now;
}

bool Template::iterates_content() const {
  return program_->iterates_content;
}

}  // namespace prefixgate::canon::jinja
