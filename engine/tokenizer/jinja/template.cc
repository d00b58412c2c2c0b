#include "engine/tokenizer/jinja/template.h"

#include <utility>

#include "absl/status/status.h"
#include "common/status.h"
#include "engine/tokenizer/jinja/json.h"
#include "engine/tokenizer/jinja/lexer.h"
#include "engine/tokenizer/jinja/parser.h"

namespace tandem::jinja {

absl::StatusOr<Template> Template::Parse(std::string_view source, const TemplateOptions& options) {
  LexOptions lex;
  lex.trim_blocks = options.trim_blocks;
  lex.lstrip_blocks = options.lstrip_blocks;
  ASSIGN_OR_RETURN(std::vector<Token> tokens, Tokenize(source, lex));
  ASSIGN_OR_RETURN(std::vector<NodePtr> program, jinja::Parse(tokens));
  return Template(std::make_shared<const std::vector<NodePtr>>(std::move(program)), options);
}

absl::StatusOr<std::string> Template::Render(const nlohmann::ordered_json& context) const {
  if (!context.is_object()) return absl::InvalidArgumentError("template context must be a JSON object");
  ASSIGN_OR_RETURN(Value v, FromJson(context));
  return Render(v.object());
}

absl::StatusOr<std::string> Template::Render(const Object& context) const {
  Interpreter interpreter(options_.limits);
  return interpreter.Render(*program_, context);
}

}  // namespace tandem::jinja
