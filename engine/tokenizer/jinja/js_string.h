// String operations with JavaScript's semantics on UTF-8 text. The reference interpreter
// (@huggingface/jinja) works on JavaScript strings, so trimming uses JavaScript's whitespace set
// (which includes U+00A0, U+2028, U+FEFF ...), `length` counts UTF-16 code units, and parseInt/
// parseFloat accept a number prefix. Text is UTF-8 here; bytes that are not valid UTF-8 are kept
// as they are where possible.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tandem::jinja {

// The code points of `s`; an invalid byte becomes U+FFFD.
std::vector<char32_t> DecodeUtf8(std::string_view s);
std::string EncodeUtf8(const std::vector<char32_t>& cps);
void AppendUtf8(std::string& out, char32_t cp);

// JavaScript's \s: WhiteSpace and LineTerminator.
bool IsJsSpace(char32_t cp);
// Length in bytes of the JavaScript whitespace character at s[pos], 0 if there is none.
size_t JsSpaceAt(std::string_view s, size_t pos);

std::string JsTrim(std::string_view s);
std::string JsTrimStart(std::string_view s);
std::string JsTrimEnd(std::string_view s);
// String.prototype.length: UTF-16 code units.
size_t JsLength(std::string_view s);
std::string JsToUpper(std::string_view s);
std::string JsToLower(std::string_view s);
// s.replace(/\b\w/g, c => c.toUpperCase()): the first ASCII word character of each word upper.
std::string JsTitle(std::string_view s);
// First character upper, the rest unchanged (what @huggingface/jinja's capitalize does).
std::string JsCapitalize(std::string_view s);
// Number(s) for the loose equality "1" == 1: NaN when s is not a number.
double JsStringToNumber(std::string_view s);
// parseInt(s, 10) and parseFloat(s): nullopt where JavaScript gives NaN.
std::optional<double> JsParseInt(std::string_view s);
std::optional<double> JsParseFloat(std::string_view s);
// JSON.stringify of a string; with ensure_ascii every UTF-16 unit >= 0x7f becomes \uXXXX.
void AppendJsonString(std::string& out, std::string_view s, bool ensure_ascii);

}  // namespace tandem::jinja
