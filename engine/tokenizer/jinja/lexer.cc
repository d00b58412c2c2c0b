#include "engine/tokenizer/jinja/lexer.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "engine/tokenizer/jinja/js_string.h"

namespace tandem::jinja {
namespace {

// Template text with the original line of every byte, so that dropping newlines while
// preprocessing does not shift the line numbers of errors.
struct Source {
  std::string text;
  std::vector<int> line;

  void Push(char c, int l) {
    text.push_back(c);
    line.push_back(l);
  }
  void Append(const Source& s, size_t from, size_t to) {
    text.append(s.text, from, to - from);
    line.insert(line.end(), s.line.begin() + static_cast<long>(from), s.line.begin() + static_cast<long>(to));
  }
};

bool IsLineTerminatorBefore(const std::string& s, size_t pos) {
  if (pos == 0) return true;
  const char c = s[pos - 1];
  if (c == '\n' || c == '\r') return true;
  // U+2028 / U+2029 end a line for JavaScript's multiline ^ too.
  return pos >= 3 && s.compare(pos - 3, 2, "\xE2\x80") == 0 &&
         (static_cast<unsigned char>(s[pos - 1]) == 0xA8 || static_cast<unsigned char>(s[pos - 1]) == 0xA9);
}

// template.replace(/^[ \t]*({[#%-])/gm, "$1")
Source LstripBlocks(const Source& in) {
  Source out;
  const std::string& s = in.text;
  for (size_t i = 0; i < s.size();) {
    if (IsLineTerminatorBefore(s, i)) {
      size_t j = i;
      while (j < s.size() && (s[j] == ' ' || s[j] == '\t')) ++j;
      if (j + 1 < s.size() && s[j] == '{' && (s[j + 1] == '#' || s[j + 1] == '%' || s[j + 1] == '-')) {
        i = j;  // drop the blanks
      }
    }
    out.Push(s[i], in.line[i]);
    ++i;
  }
  return out;
}

// template.replace(/([#%-]})\n/g, "$1")
Source TrimBlocks(const Source& in) {
  Source out;
  const std::string& s = in.text;
  for (size_t i = 0; i < s.size(); ++i) {
    if (i + 2 < s.size() && (s[i] == '#' || s[i] == '%' || s[i] == '-') && s[i + 1] == '}' && s[i + 2] == '\n') {
      out.Push(s[i], in.line[i]);
      out.Push(s[i + 1], in.line[i + 1]);
      i += 2;
      continue;
    }
    out.Push(s[i], in.line[i]);
  }
  return out;
}

size_t SkipJsSpace(const std::string& s, size_t pos) {
  while (size_t n = JsSpaceAt(s, pos)) pos += n;
  return pos;
}

// Removes transformers' {% generation %} / {% endgeneration %} tags, honouring their `-`:
// /{%(-?)\s*(?:end)?generation\s*(-?)%}(\s*)/gs
Source RemoveGenerationTags(const Source& in) {
  const std::string& s = in.text;
  Source out;
  size_t last = 0;
  size_t search = 0;
  while (true) {
    const size_t start = s.find("{%", search);
    if (start == std::string::npos) break;
    size_t p = start + 2;
    const bool lstrip = p < s.size() && s[p] == '-';
    if (lstrip) ++p;
    p = SkipJsSpace(s, p);
    if (s.compare(p, 3, "end") == 0 && s.compare(p + 3, 10, "generation") == 0) p += 3;
    if (s.compare(p, 10, "generation") != 0) {
      search = start + 1;
      continue;
    }
    p = SkipJsSpace(s, p + 10);
    const bool rstrip = p < s.size() && s[p] == '-';
    if (rstrip) ++p;
    if (s.compare(p, 2, "%}") != 0) {
      search = start + 1;
      continue;
    }
    p += 2;
    const size_t after_end = SkipJsSpace(s, p);
    size_t end_index = start;
    if (lstrip) {
      while (end_index > last) {
        size_t n = 0;
        for (size_t len = 1; len <= 3 && len <= end_index - last; ++len) {
          if (JsSpaceAt(s, end_index - len) == len) {
            n = len;
            break;
          }
        }
        if (n == 0) break;
        end_index -= n;
      }
    }
    out.Append(in, last, end_index);
    if (!rstrip) out.Append(in, p, after_end);
    last = after_end;
    search = after_end;
  }
  out.Append(in, last, s.size());
  return out;
}

bool IsWordByte(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}
bool IsDigit(char c) { return c >= '0' && c <= '9'; }

struct Rule {
  const char* seq;
  TokenType type;
};

// The reference's table, in its order (two-character operators before their prefixes).
constexpr Rule kRules[] = {
    {"{%", TokenType::kOpenStatement}, {"%}", TokenType::kCloseStatement}, {"{{", TokenType::kOpenExpression},
    {"}}", TokenType::kCloseExpression}, {"(", TokenType::kOpenParen}, {")", TokenType::kCloseParen},
    {"{", TokenType::kOpenBrace}, {"}", TokenType::kCloseBrace}, {"[", TokenType::kOpenBracket},
    {"]", TokenType::kCloseBracket}, {",", TokenType::kComma}, {".", TokenType::kDot}, {":", TokenType::kColon},
    {"|", TokenType::kPipe}, {"<=", TokenType::kComparison}, {">=", TokenType::kComparison},
    {"==", TokenType::kComparison}, {"!=", TokenType::kComparison}, {"<", TokenType::kComparison},
    {">", TokenType::kComparison}, {"+", TokenType::kAdditive}, {"-", TokenType::kAdditive},
    {"~", TokenType::kAdditive}, {"**", TokenType::kPower}, {"*", TokenType::kMultiplicative},
    {"//", TokenType::kMultiplicative}, {"/", TokenType::kMultiplicative}, {"%", TokenType::kMultiplicative},
    {"=", TokenType::kEquals},
};

class Lexer {
 public:
  explicit Lexer(Source src) : src_(std::move(src)), s_(src_.text) {}

  absl::StatusOr<std::vector<Token>> Run() {
    while (pos_ < s_.size()) {
      const bool have_last = !tokens_.empty();
      const TokenType last = have_last ? tokens_.back().type : TokenType::kText;
      if (!have_last || last == TokenType::kCloseStatement || last == TokenType::kCloseExpression ||
          last == TokenType::kComment) {
        size_t end = pos_;
        while (true) {
          end = s_.find('{', end);
          if (end == std::string::npos) {
            end = s_.size();
            break;
          }
          const char next = end + 1 < s_.size() ? s_[end + 1] : '\0';
          if (next == '%' || next == '{' || next == '#') break;
          ++end;
        }
        if (end > pos_) {
          Push(TokenType::kText, s_.substr(pos_, end - pos_), pos_);
          pos_ = end;
          continue;
        }
      }
      if (s_[pos_] == '{') {
        const char next = At(pos_ + 1);
        if (next == '#') {
          RETURN_IF_ERROR(Comment());
          continue;
        }
        if (At(pos_ + 2) == '-' && (next == '%' || next == '{')) {
          StripTrailingWhitespace();
          Push(next == '%' ? TokenType::kOpenStatement : TokenType::kOpenExpression, next == '%' ? "{%" : "{{", pos_);
          if (next == '{') curly_depth_ = 0;
          pos_ += 3;
          continue;
        }
      }
      RETURN_IF_ERROR(SkipWhitespaceInTag());
      const char c = s_[pos_];
      if (c == '-' && At(pos_ + 2) == '}' && (At(pos_ + 1) == '%' || At(pos_ + 1) == '}')) {
        const bool stmt = At(pos_ + 1) == '%';
        Push(stmt ? TokenType::kCloseStatement : TokenType::kCloseExpression, stmt ? "%}" : "}}", pos_);
        pos_ = SkipJsSpace(s_, pos_ + 3);
        continue;
      }
      if (c == '-' || c == '+') {
        if (!have_last || last == TokenType::kText) return Error(absl::StrCat("unexpected character '", std::string(1, c), "'"));
        const bool binary = last == TokenType::kIdentifier || last == TokenType::kNumber || last == TokenType::kString ||
                            last == TokenType::kCloseParen || last == TokenType::kCloseBracket;
        if (!binary) {
          const size_t start = pos_++;
          auto num = ConsumeDigits();
          if (!num.ok()) return num.status();
          std::string n = *num;
          if (!n.empty() && At(pos_) == '.' && IsDigit(At(pos_ + 1))) {
            ++pos_;
            auto frac = ConsumeDigits();
            if (!frac.ok()) return frac.status();
            n += "." + *frac;
          }
          Push(n.empty() ? TokenType::kUnary : TokenType::kNumber, std::string(1, c) + n, start);
          continue;
        }
      }
      bool matched = false;
      for (const Rule& r : kRules) {
        const std::string_view seq(r.seq);
        if (seq == "}}" && curly_depth_ > 0) continue;
        if (s_.compare(pos_, seq.size(), seq) == 0) {
          Push(r.type, std::string(seq), pos_);
          if (r.type == TokenType::kOpenExpression) curly_depth_ = 0;
          if (r.type == TokenType::kOpenBrace) ++curly_depth_;
          if (r.type == TokenType::kCloseBrace) --curly_depth_;
          pos_ += seq.size();
          matched = true;
          break;
        }
      }
      if (matched) continue;
      if (c == '\'' || c == '"') {
        RETURN_IF_ERROR(StringLiteral(c));
        continue;
      }
      if (IsDigit(c)) {
        const size_t start = pos_;
        auto num = ConsumeDigits();
        if (!num.ok()) return num.status();
        std::string n = *num;
        if (last != TokenType::kDot && At(pos_) == '.' && IsDigit(At(pos_ + 1))) {
          ++pos_;
          auto frac = ConsumeDigits();
          if (!frac.ok()) return frac.status();
          n += "." + *frac;
        }
        Push(TokenType::kNumber, n, start);
        continue;
      }
      if (IsWordByte(c)) {
        const size_t start = pos_;
        while (pos_ < s_.size() && IsWordByte(s_[pos_])) ++pos_;
        if (pos_ >= s_.size()) return Error("unexpected end of template inside a tag");
        Push(TokenType::kIdentifier, s_.substr(start, pos_ - start), start);
        continue;
      }
      return Error(absl::StrCat("unexpected character '", std::string(1, c), "'"));
    }
    return std::move(tokens_);
  }

 private:

  char At(size_t p) const { return p < s_.size() ? s_[p] : '\0'; }
  int LineAt(size_t p) const {
    if (src_.line.empty()) return 1;
    return src_.line[p < src_.line.size() ? p : src_.line.size() - 1];
  }
  void Push(TokenType t, std::string v, size_t at) { tokens_.push_back(Token{t, std::move(v), LineAt(at)}); }
  absl::Status Error(std::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat("template line ", LineAt(pos_), ": ", std::string(what)));
  }

  // Whitespace inside a tag; like the reference, running into the end of the text is an error.
  absl::Status SkipWhitespaceInTag() {
    while (size_t n = JsSpaceAt(s_, pos_)) {
      pos_ += n;
      if (pos_ >= s_.size()) return Error("unexpected end of template inside a tag");
    }
    return absl::OkStatus();
  }

  absl::StatusOr<std::string> ConsumeDigits() {
    const size_t start = pos_;
    while (pos_ < s_.size() && IsDigit(s_[pos_])) {
      if (++pos_ >= s_.size()) return Error("unexpected end of template inside a number");
    }
    return s_.substr(start, pos_ - start);
  }

  void StripTrailingWhitespace() {
    if (!tokens_.empty() && tokens_.back().type == TokenType::kText) {
      tokens_.back().value = JsTrimEnd(tokens_.back().value);
      if (tokens_.back().value.empty()) tokens_.pop_back();
    }
  }

  absl::Status Comment() {
    const size_t start = pos_;
    pos_ += 2;
    const bool strip_before = At(pos_) == '-';
    if (strip_before) ++pos_;
    const size_t end = s_.find("#}", pos_);
    if (end == std::string::npos) return Error("comment {# ... is never closed with #}");
    std::string text = s_.substr(pos_, end - pos_);
    const bool strip_after = !text.empty() && text.back() == '-';
    if (strip_after) text.pop_back();
    if (strip_before) StripTrailingWhitespace();
    Push(TokenType::kComment, std::move(text), start);
    pos_ = end + 2;
    if (strip_after) pos_ = SkipJsSpace(s_, pos_);
    return absl::OkStatus();
  }

  absl::Status StringLiteral(char quote) {
    const size_t start = pos_++;
    std::string out;
    while (true) {
      if (pos_ >= s_.size()) return Error("string literal is never closed");
      const char c = s_[pos_];
      if (c == quote) break;
      ++pos_;
      if (c != '\\') {
        out.push_back(c);
        continue;
      }
      if (pos_ >= s_.size()) return Error("string literal is never closed");
      const char e = s_[pos_++];
      if (e == 'x' || e == 'u') {
        const size_t n = e == 'x' ? 2 : 4;
        if (pos_ + n > s_.size()) return Error("bad hexadecimal escape in a string literal");
        char32_t code = 0;
        for (size_t i = 0; i < n; ++i) {
          const char h = s_[pos_ + i];
          const int d = IsDigit(h) ? h - '0' : (h >= 'a' && h <= 'f') ? h - 'a' + 10 : (h >= 'A' && h <= 'F') ? h - 'A' + 10 : -1;
          if (d < 0) return Error("bad hexadecimal escape in a string literal");
          code = code * 16 + static_cast<char32_t>(d);
        }
        AppendUtf8(out, code);
        pos_ += n;
        continue;
      }
      switch (e) {
        case 'n': out.push_back('\n'); break;
        case 't': out.push_back('\t'); break;
        case 'r': out.push_back('\r'); break;
        case 'b': out.push_back('\b'); break;
        case 'f': out.push_back('\f'); break;
        case 'v': out.push_back('\v'); break;
        case '\'': out.push_back('\''); break;
        case '"': out.push_back('"'); break;
        case '\\': out.push_back('\\'); break;
        default: return Error(absl::StrCat("unknown escape \\", std::string(1, e), " in a string literal"));
      }
    }
    ++pos_;  // closing quote
    Push(TokenType::kString, std::move(out), start);
    return absl::OkStatus();
  }

  Source src_;
  const std::string& s_;
  size_t pos_ = 0;
  int curly_depth_ = 0;
  std::vector<Token> tokens_;
};

}  // namespace

const char* TokenTypeName(TokenType t) {
  switch (t) {
    case TokenType::kText: return "text";
    case TokenType::kNumber: return "number";
    case TokenType::kString: return "string";
    case TokenType::kIdentifier: return "name";
    case TokenType::kEquals: return "'='";
    case TokenType::kOpenParen: return "'('";
    case TokenType::kCloseParen: return "')'";
    case TokenType::kOpenStatement: return "'{%'";
    case TokenType::kCloseStatement: return "'%}'";
    case TokenType::kOpenExpression: return "'{{'";
    case TokenType::kCloseExpression: return "'}}'";
    case TokenType::kOpenBracket: return "'['";
    case TokenType::kCloseBracket: return "']'";
    case TokenType::kOpenBrace: return "'{'";
    case TokenType::kCloseBrace: return "'}'";
    case TokenType::kComma: return "','";
    case TokenType::kDot: return "'.'";
    case TokenType::kColon: return "':'";
    case TokenType::kPipe: return "'|'";
    case TokenType::kAdditive: return "operator";
    case TokenType::kMultiplicative: return "operator";
    case TokenType::kPower: return "'**'";
    case TokenType::kComparison: return "comparison";
    case TokenType::kUnary: return "sign";
    case TokenType::kComment: return "comment";
  }
  return "?";
}

absl::StatusOr<std::vector<Token>> Tokenize(std::string_view source, const LexOptions& options) {
  Source src;
  src.text.reserve(source.size());
  int line = 1;
  for (char c : source) {
    src.Push(c, line);
    if (c == '\n') ++line;
  }
  if (!src.text.empty() && src.text.back() == '\n') {
    src.text.pop_back();
    src.line.pop_back();
  }
  if (options.lstrip_blocks) src = LstripBlocks(src);
  if (options.trim_blocks) src = TrimBlocks(src);
  src = RemoveGenerationTags(src);
  return Lexer(std::move(src)).Run();
}

}  // namespace tandem::jinja
