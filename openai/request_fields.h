// What the OpenAI request parsers (openai_protocol.cc, chat_request.cc) share: readers of one JSON
// field each, whose failures are ApiErrors with `param` naming the field (with its path, e.g.
// "messages[2].tool_call_id") so a client learns exactly what to fix, and the body's common part.
// A field that is absent or null leaves the output alone.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "nlohmann/json.hpp"
#include "openai/openai_protocol.h"

namespace tandem::openai {

// Request bodies keep their key order: tools and tool-call arguments reach the chat template as
// the client wrote them (the template's tojson prints them in that order).
using RequestJson = nlohmann::ordered_json;

// "'<param>' must be <expected>, got <JSON type>".
ApiError WrongType(const std::string& param, const char* expected, const RequestJson& got);

// A number in [lo, hi] into `*out`.
std::optional<ApiError> ReadNumber(const RequestJson& body, const char* name, double lo, double hi, float* out);
// An integer in [lo, hi] (16.0 counts as 16; 16.5 does not) into `*out`.
std::optional<ApiError> ReadInt(const RequestJson& body, const char* name, int64_t lo, int64_t hi,
                                std::optional<int64_t>* out);
std::optional<ApiError> ReadBool(const RequestJson& body, const char* name, bool* out);
// A string into `*out`; `param` is the name reported (the field's path).
std::optional<ApiError> ReadString(const RequestJson& object, const char* name, const std::string& param,
                                   std::optional<std::string>* out);
// Token ids as a JSON array of integers in [0, 2^31); the vocabulary's bound is checked later.
std::optional<ApiError> ReadIds(const RequestJson& arr, const std::string& param, std::vector<int32_t>* out);

// The body as a JSON object into `*j`: unknown fields refused, the fields both endpoints share
// read into `*common`.
std::optional<ApiError> ParseBody(std::string_view body, bool chat, RequestJson* j, CommonRequest* common);

}  // namespace tandem::openai
