// A Hugging Face chat template (tokenizer_config.json "chat_template" or chat_template.jinja),
// parsed once and rendered per request by our own Jinja interpreter. It renders byte for byte
// what @huggingface/jinja (transformers.js) renders, which is checked on the real templates of
// Qwen3, Llama 3.1, Gemma 3 and DeepSeek-V3 (tests/engine/tokenizer/jinja/reference_test.cc).
// A template using a construct we do not implement fails in Parse, naming it and its line.
//
//   ASSIGN_OR_RETURN(auto tmpl, jinja::Template::Parse(source));
//   ASSIGN_OR_RETURN(std::string prompt, tmpl.Render({{"messages", msgs}, {"add_generation_prompt", true}}));
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "engine/tokenizer/jinja/ast.h"
#include "engine/tokenizer/jinja/interpreter.h"
#include "engine/tokenizer/jinja/value.h"

namespace tandem::jinja {

struct TemplateOptions {
  // What transformers sets for chat templates.
  bool trim_blocks = true;
  bool lstrip_blocks = true;
  RenderLimits limits;
};

class Template {
 public:
  static absl::StatusOr<Template> Parse(std::string_view source, const TemplateOptions& options = {});

  // `context` must be a JSON object: its members become the template's variables (messages,
  // tools, add_generation_prompt, enable_thinking, bos_token, ...).
  absl::StatusOr<std::string> Render(const nlohmann::ordered_json& context) const;
  absl::StatusOr<std::string> Render(const Object& context) const;

 private:
  Template(std::shared_ptr<const std::vector<NodePtr>> program, const TemplateOptions& options)
      : program_(std::move(program)), options_(options) {}

  std::shared_ptr<const std::vector<NodePtr>> program_;
  TemplateOptions options_;
};

}  // namespace tandem::jinja
