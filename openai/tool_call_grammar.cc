#include "openai/tool_call_grammar.h"

#include <algorithm>
#include <set>
#include <utility>

#include "engine/grammar/json_schema.h"
#include "nlohmann/json.hpp"

namespace tandem::openai {
namespace {

using Json = nlohmann::ordered_json;
using grammar::Expr;
using grammar::GrammarBuilder;
using grammar::RuleId;

// An XML parameter typed "string" is raw text up to "\n</parameter>" (tool_calls.h keeps it as
// text). Without '<' the value cannot end early or open a tag; the bound keeps a model that never
// closes it (random weights) from running on: maxLength when the schema gives one.
constexpr int32_t kMaxXmlStringChars = 512;

bool IsStringSchema(const Json& schema) {
  auto type = schema.find("type");
  return type != schema.end() && type->is_string() && type->get<std::string>() == "string" &&
         !schema.contains("enum") && !schema.contains("const");
}

ApiError ParametersError(size_t tool, const std::string& why) {
  const std::string param = "tools[" + std::to_string(tool) + "].function.parameters";
  return InvalidRequest("tool_choice needs a grammar of the tool's parameters: " + param + why, param);
}

// Qwen3: the JSON object the template writes, its arguments valid against the schema.
std::optional<ApiError> JsonCall(GrammarBuilder& b, const ChatTool& tool, size_t index, Expr* out) {
  Expr args = b.Literal("{}");
  if (!tool.parameters.empty()) {
    absl::StatusOr<RuleId> rule = grammar::AddJsonSchema(Json::parse(tool.parameters), b, tool.name + "-args");
    if (!rule.ok()) return ParametersError(index, ": " + std::string(rule.status().message()));
    args = b.Ref(*rule);
  }
  *out = b.Seq({b.Literal("<tool_call>\n{\"name\": \"" + tool.name + "\", \"arguments\": "), args,
                b.Literal("}\n</tool_call>")});
  return std::nullopt;
}

// Qwen3.5 / Coder: one <parameter=...> block per property in the schema's order, the required
// ones always, the others optionally.
std::optional<ApiError> XmlCall(GrammarBuilder& b, const ChatTool& tool, size_t index, Expr* out) {
  std::vector<Expr> items = {b.Literal("<tool_call>\n<function=" + tool.name + ">\n")};
  if (!tool.parameters.empty()) {
    const Json schema = Json::parse(tool.parameters);
    auto props = schema.find("properties");
    // The format has one block per named parameter: only a plain object schema maps onto it.
    static const std::set<std::string> kObjectKeys = {"type", "properties", "required", "additionalProperties",
                                                      "title", "description", "$schema", "strict"};
    for (const auto& [key, value] : schema.items()) {
      if (!kObjectKeys.contains(key)) {
        return ParametersError(index, ": '" + key + "' at the top of the schema has no form in the XML call format");
      }
    }
    if (schema.value("type", Json("object")) != "object" || (props != schema.end() && !props->is_object())) {
      return ParametersError(index, ": the XML call format needs an object schema with properties");
    }
    std::vector<std::string> required;
    if (auto r = schema.find("required"); r != schema.end() && r->is_array()) {
      for (const Json& name : *r) {
        if (name.is_string()) required.push_back(name.get<std::string>());
      }
    }
    if (props != schema.end()) {
      for (const auto& [name, prop] : props->items()) {
        Expr value;
        if (prop.is_object() && IsStringSchema(prop)) {
          const int32_t max_chars = prop.contains("maxLength") && prop["maxLength"].is_number_unsigned()
                                        ? static_cast<int32_t>(std::min<uint64_t>(prop["maxLength"].get<uint64_t>(),
                                                                                  GrammarBuilder::kMaxRepeat))
                                        : kMaxXmlStringChars;
          value = b.Repeat(b.Chars({{U'<', U'<'}}, /*negated=*/true), 1, max_chars);
        } else {
          absl::StatusOr<RuleId> rule = grammar::AddJsonSchema(prop, b, tool.name + "-" + name);
          if (!rule.ok()) {
            // The compiler's JSON pointer is relative to the property's schema ("/: ..." at its top).
            std::string why(rule.status().message());
            if (why.rfind("/: ", 0) == 0) why.erase(0, 1);
            return ParametersError(index, "/properties/" + name + (why.rfind("/", 0) == 0 ? "" : ": ") + why);
          }
          value = b.Ref(*rule);
        }
        Expr block = b.Seq({b.Literal("<parameter=" + name + ">\n"), value, b.Literal("\n</parameter>\n")});
        const bool is_required = std::find(required.begin(), required.end(), name) != required.end();
        items.push_back(is_required ? block : b.Optional(block));
      }
    }
  }
  items.push_back(b.Literal("</function>\n</tool_call>"));
  *out = b.Seq(std::move(items));
  return std::nullopt;
}

}  // namespace

std::optional<ApiError> BuildToolCallGrammar(tokenizer::ToolCallSyntax syntax, const ChatRequest& request,
                                             grammar::Grammar* out) {
  GrammarBuilder b;
  std::vector<Expr> calls;
  for (size_t i = 0; i < request.tool_functions.size(); ++i) {
    const ChatTool& tool = request.tool_functions[i];
    if (request.tool_choice.mode == ToolChoice::Mode::kFunction && tool.name != request.tool_choice.function) continue;
    Expr call;
    if (auto e = syntax == tokenizer::ToolCallSyntax::kJson ? JsonCall(b, tool, i, &call) : XmlCall(b, tool, i, &call)) return e;
    calls.push_back(call);
  }
  const RuleId call = b.AddRule("tool-call");
  const RuleId root = b.AddRule("tool-calls");
  absl::Status st = b.Define(call, b.Alt(std::move(calls)));
  // Several calls are separated by a newline, as the templates write them.
  const bool many = request.tool_choice.mode == ToolChoice::Mode::kRequired && request.parallel_tool_calls;
  if (st.ok()) {
    st = b.Define(root, many ? b.Seq({b.Ref(call), b.Star(b.Seq({b.Literal("\n"), b.Ref(call)}))}) : b.Ref(call));
  }
  absl::StatusOr<grammar::Grammar> g = st.ok() ? b.Build(root) : absl::StatusOr<grammar::Grammar>(st);
  if (!g.ok()) return InvalidRequest("the tools' grammar: " + std::string(g.status().message()), "tools");
  *out = std::move(*g);
  return std::nullopt;
}

}  // namespace tandem::openai
