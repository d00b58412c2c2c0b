// Renders a parsed template: walks the syntax tree with scopes as @huggingface/jinja has them (a
// for loop and a macro call get their own scope, `if` does not; `set` writes the innermost one,
// so state that must leave a loop goes through a namespace). Bounded: nesting depth, number of
// evaluation steps, output size and list lengths all have limits, and going past one is an error,
// never a crash or a hang.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "engine/tokenizer/jinja/ast.h"
#include "engine/tokenizer/jinja/value.h"

namespace tandem::jinja {

struct RenderLimits {
  size_t max_output_bytes = 16u << 20;  // the rendered text, and any string made on the way
                                        // (at most kMaxStringBytes)
  int64_t max_steps = 5'000'000;         // nodes evaluated
  size_t max_items = 1u << 20;           // length of a list made by range() or +
  int max_depth = 400;                   // nested evaluations (macro recursion)
};

class Interpreter {
 public:
  explicit Interpreter(const RenderLimits& limits);
  ~Interpreter();

  // Renders `program` with the context's entries as variables (besides the globals).
  absl::StatusOr<std::string> Render(const std::vector<NodePtr>& program, const Object& context);

 private:
  struct Scope {
    Scope* parent = nullptr;
    absl::flat_hash_map<std::string, Value> vars;
  };
  enum class Control { kNone, kBreak, kContinue };

  Scope* NewScope(Scope* parent);
  Value Lookup(const Scope* scope, const std::string& name) const;
  absl::Status Step(const Node& node);

  absl::Status RenderBlock(const std::vector<NodePtr>& body, Scope* scope, std::string* out);
  absl::Status RenderStatement(const Node& node, Scope* scope, std::string* out);
  absl::Status RenderFor(const Node& node, Scope* scope, std::string* out);
  absl::Status ExecSet(const Node& node, Scope* scope);
  absl::Status Bind(const Node& target, const Value& value, Scope* scope);
  Value MakeMacro(const Node& node, Scope* scope);
  absl::Status BindParameters(const Node& node, const std::vector<NodePtr>& params, const CallArgs& args, Scope* scope);
  absl::StatusOr<Value> CallBlock(const Node& node, Scope* scope);
  absl::Status Append(std::string* out, std::string_view s) const;

  absl::StatusOr<Value> Eval(const Node& node, Scope* scope);
  absl::StatusOr<Value> EvalBinary(const Node& node, Scope* scope);
  absl::StatusOr<Value> EvalMember(const Node& node, Scope* scope);
  absl::StatusOr<CallArgs> EvalArgs(const std::vector<NodePtr>& args, Scope* scope);
  absl::StatusOr<Value> CheckedString(std::string s) const;

  RenderLimits limits_;
  std::deque<Scope> scopes_;
  std::vector<std::shared_ptr<Object>> namespaces_;
  Control control_ = Control::kNone;
  Value pending_caller_;  // the `caller` a {% call %} block hands to the macro it calls
  int depth_ = 0;
  int64_t steps_ = 0;
};

}  // namespace tandem::jinja
