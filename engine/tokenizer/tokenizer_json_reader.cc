#include "engine/tokenizer/tokenizer_json_reader.h"

#include "absl/status/status.h"

namespace tandem::tokenizer {
namespace {

using json = nlohmann::json;

// Builds a tree for everything except the two big containers, which it streams into `parts`.
class Reader final : public nlohmann::json_sax<json> {
 public:
  explicit Reader(TokenizerJsonParts* parts) : parts_(parts) {}
  const std::string& error() const { return error_; }

  bool null() override { return Value(json(nullptr)); }
  bool boolean(bool v) override { return Value(json(v)); }
  bool number_integer(number_integer_t v) override {
    if (mode_ == Mode::kVocab) return VocabId(v);
    return Value(json(v));
  }
  bool number_unsigned(number_unsigned_t v) override {
    if (mode_ == Mode::kVocab) {
      if (v > static_cast<number_unsigned_t>(INT32_MAX)) return VocabId(-1);
      return VocabId(static_cast<int64_t>(v));
    }
    return Value(json(v));
  }
  bool number_float(number_float_t v, const string_t&) override { return Value(json(v)); }
  bool string(string_t& v) override {
    if (mode_ == Mode::kMerges && depth_ == kMergesDepth) return MergeString(v);
    if (mode_ == Mode::kMerges && depth_ == kMergesDepth + 1) {
      pair_.push_back(std::move(v));
      return true;
    }
    return Value(json(std::move(v)));
  }
  bool binary(binary_t&) override { return Fail("binary values are not JSON"); }

  bool start_object(std::size_t) override {
    if (mode_ != Mode::kTree) return Fail(Where() + ": expected " + Expected());
    ++depth_;
    if (depth_ == 3 && Path("vocab")) {
      mode_ = Mode::kVocab;
      parts_->has_vocab = true;
      return true;
    }
    return Open(json::object());
  }
  bool end_object() override {
    --depth_;
    if (mode_ == Mode::kVocab) {
      mode_ = Mode::kTree;
      return true;
    }
    stack_.pop_back();
    return true;
  }
  bool start_array(std::size_t) override {
    ++depth_;
    if (mode_ == Mode::kVocab) return Fail(Where() + ": expected an integer id");
    if (mode_ == Mode::kMerges) {
      if (depth_ != kMergesDepth + 1) return Fail(MergeWhere() + ": must be \"a b\" or [\"a\", \"b\"]");
      pair_.clear();
      return true;
    }
    if (depth_ == kMergesDepth && Path("merges")) {
      mode_ = Mode::kMerges;
      parts_->has_merges = true;
      return true;
    }
    return Open(json::array());
  }
  bool end_array() override {
    --depth_;
    if (mode_ == Mode::kMerges) {
      if (depth_ == kMergesDepth - 1) {
        mode_ = Mode::kTree;
        return true;
      }
      if (pair_.size() != 2) return Fail(MergeWhere() + ": must be \"a b\" or [\"a\", \"b\"]");
      parts_->merges.emplace_back(std::move(pair_[0]), std::move(pair_[1]));
      return true;
    }
    stack_.pop_back();
    return true;
  }
  bool key(string_t& k) override {
    if (mode_ == Mode::kVocab) {
      vocab_key_ = std::move(k);
      return true;
    }
    if (depth_ < static_cast<int>(keys_.size())) keys_[depth_] = k;
    key_ = std::move(k);
    return true;
  }
  bool parse_error(std::size_t position, const std::string&,
                   const nlohmann::detail::exception& ex) override {
    if (error_.empty()) error_ = "syntax error near byte " + std::to_string(position) + ": " + ex.what();
    return false;
  }

 private:
  enum class Mode { kTree, kVocab, kMerges };
  static constexpr int kMergesDepth = 3;  // root object = 1, model = 2, merges array = 3

  // True when the container just opened at depth 3 is model.<name>.
  bool Path(const char* name) const {
    return stack_.size() == 2 && stack_[0]->is_object() && stack_[1]->is_object() &&
           keys_[1] == "model" && key_ == name;
  }

  std::string Where() const {
    return mode_ == Mode::kVocab ? "model.vocab[\"" + vocab_key_ + "\"]" : MergeWhere();
  }
  std::string MergeWhere() const { return "model.merges[" + std::to_string(parts_->merges.size()) + "]"; }
  std::string Expected() const {
    return mode_ == Mode::kVocab ? "an integer id" : "\"a b\" or [\"a\", \"b\"]";
  }

  bool Fail(std::string message) {
    if (error_.empty()) error_ = std::move(message);
    return false;
  }
  bool VocabId(int64_t id) {
    if (id < 0 || id > INT32_MAX) return Fail(Where() + ": id out of range");
    parts_->vocab.emplace_back(std::move(vocab_key_), id);
    return true;
  }
  bool MergeString(const std::string& s) {
    // The older spelling "left right": exactly one space (byte-level tokens have none).
    const size_t space = s.find(' ');
    if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos) {
      return Fail(MergeWhere() + ": \"" + s + "\" is not two tokens separated by one space");
    }
    parts_->merges.emplace_back(s.substr(0, space), s.substr(space + 1));
    return true;
  }
  bool Value(json v) {
    if (mode_ != Mode::kTree) return Fail(Where() + ": expected " + Expected());
    Insert(std::move(v));
    return true;
  }
  bool Open(json container) {
    json* slot = Insert(std::move(container));
    stack_.push_back(slot);
    return true;
  }
  json* Insert(json v) {
    if (stack_.empty()) {
      parts_->rest = std::move(v);
      return &parts_->rest;
    }
    json& top = *stack_.back();
    if (top.is_object()) {
      json& slot = top[key_];
      slot = std::move(v);
      return &slot;
    }
    top.push_back(std::move(v));
    return &top.back();
  }

  TokenizerJsonParts* parts_;
  std::vector<json*> stack_;  // open containers of the tree
  std::vector<std::string> keys_ = std::vector<std::string>(4);  // last key seen per depth
  std::string key_, vocab_key_, error_;
  std::vector<std::string> pair_;
  Mode mode_ = Mode::kTree;
  int depth_ = 0;
};

}  // namespace

absl::StatusOr<TokenizerJsonParts> ReadTokenizerJson(std::string_view text) {
  TokenizerJsonParts parts;
  Reader reader(&parts);
  bool ok = false;
  try {
    ok = json::sax_parse(text.data(), text.data() + text.size(), &reader);
  } catch (const json::exception& e) {
    return absl::InvalidArgumentError(std::string("tokenizer.json: ") + e.what());
  }
  if (!ok) {
    return absl::InvalidArgumentError(
        "tokenizer.json: " + (reader.error().empty() ? std::string("malformed JSON") : reader.error()));
  }
  return parts;
}

}  // namespace tandem::tokenizer
