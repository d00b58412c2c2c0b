// The OpenAI server over the scripted FakeEngine and the Qwen3 test tokenizer, on port 0, with
// an HTTP client: the fixture of openai_server_test and openai_server_outputs_test.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "engine/tokenizer/tokenizer.h"
#include "httplib.h"
#include "nlohmann/json.hpp"
#include "openai/openai_server.h"
#include "openai/serve_metrics.h"
#include "tests/common/test_util.h"
#include "tests/openai/fake_llm_engine.h"

namespace tandem::openai::testing {

using Json = nlohmann::json;

inline std::string TestdataDir() { return ::tandem::testing::TestdataDir(); }

inline std::vector<FakeEngine::Token> Script() {
  // Multi-byte text on purpose: the SSE path must carry UTF-8 unchanged.
  return {{11, "Hello"}, {12, ","}, {13, " wörld"}, {14, "!"}, {15, " How"}, {16, " are"}, {17, " you"}, {18, "?"}};
}

// The data: payloads of an SSE body, in order.
inline std::vector<std::string> SsePayloads(const std::string& body) {
  std::vector<std::string> out;
  size_t pos = 0;
  while ((pos = body.find("data: ", pos)) != std::string::npos) {
    size_t end = body.find("\n\n", pos);
    out.push_back(body.substr(pos + 6, end - pos - 6));
    pos = end;
  }
  return out;
}

class HttpServerTest : public ::testing::Test {
 protected:
  void Start(OpenAIServerOptions o = {}, std::chrono::milliseconds step = std::chrono::milliseconds(2),
             std::vector<FakeEngine::Token> script = Script()) {
    engine_ = std::make_unique<FakeEngine>(std::move(script), step);
    auto tok = tokenizer::Tokenizer::LoadFromDir(TestdataDir() + "/qwen3-tokenizer");
    ASSERT_TRUE(tok.ok()) << tok.status();
    tokenizer_ = std::move(*tok);
    metrics_ = std::make_unique<ServeMetrics>("tiny");
    o.host = "127.0.0.1";
    o.port = 0;
    o.served_model_name = "tiny";
    if (o.vocab_size == 0) o.vocab_size = 4096;
    if (o.max_model_len == OpenAIServerOptions{}.max_model_len) o.max_model_len = 256;
    o.max_in_flight = 16;
    server_ = std::make_unique<OpenAIServer>(engine_.get(), tokenizer_.get(), metrics_.get(), o);
    ASSERT_TRUE(server_->Start().ok());
    client_ = std::make_unique<httplib::Client>("127.0.0.1", server_->port());
    client_->set_read_timeout(10, 0);
  }
  void TearDown() override {
    if (engine_) engine_->Shutdown();
    if (server_) server_->Stop();
  }
  httplib::Result Post(const std::string& path, const std::string& body, const httplib::Headers& h = {}) {
    return client_->Post(path.c_str(), h, body, "application/json");
  }
  static Json ErrorOf(const httplib::Result& r) {
    Json j = Json::parse(r->body);
    EXPECT_TRUE(j.contains("error")) << r->body;
    EXPECT_EQ(j["error"].size(), 4u) << r->body;  // message, type, param, code
    return j["error"];
  }

  std::unique_ptr<FakeEngine> engine_;
  std::unique_ptr<tokenizer::Tokenizer> tokenizer_;
  std::unique_ptr<ServeMetrics> metrics_;
  std::unique_ptr<OpenAIServer> server_;
  std::unique_ptr<httplib::Client> client_;
};

}  // namespace tandem::openai::testing
