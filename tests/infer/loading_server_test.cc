// The API port while a model loads (infer/loading_server.h): every route answers 503 "loading"
// with the progress, a second server on the same port fails naming the address (no SO_REUSEPORT
// on our HTTP listener), and Stop() frees the port for the real server at once.
#include "infer/loading_server.h"

#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

namespace tandem::infer {
namespace {

TEST(LoadingServerTest, AnswersLoadingWithTheProgressOnEveryRoute) {
  int asked = 0;
  auto s = LoadingServer::Start("127.0.0.1", 0, [&asked] { return "40% (" + std::to_string(++asked) + ")"; });
  ASSERT_TRUE(s.ok()) << s.status();
  httplib::Client c("127.0.0.1", (*s)->port());
  auto health = c.Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 503);
  auto j = nlohmann::json::parse(health->body);
  EXPECT_EQ(j["status"], "loading");
  EXPECT_EQ(j["progress"], "40% (1)");
  EXPECT_EQ(j["error"]["code"], "loading");
  EXPECT_EQ(health->get_header_value("Retry-After"), "5");
  auto chat = c.Post("/v1/chat/completions", R"({"messages": []})", "application/json");
  ASSERT_TRUE(chat);
  EXPECT_EQ(chat->status, 503);
  EXPECT_NE(chat->body.find("is loading"), std::string::npos) << chat->body;
  auto other = c.Get("/nowhere");
  ASSERT_TRUE(other);
  EXPECT_EQ(other->status, 404);
  EXPECT_EQ(nlohmann::json::parse(other->body)["status"], "loading");
}

TEST(LoadingServerTest, ATakenPortFailsNamingItAndStopFreesIt) {
  auto first = LoadingServer::Start("127.0.0.1", 0, nullptr);
  ASSERT_TRUE(first.ok()) << first.status();
  const int port = (*first)->port();
  auto second = LoadingServer::Start("127.0.0.1", port, nullptr);
  ASSERT_FALSE(second.ok()) << "two listeners on one port";
  EXPECT_NE(second.status().message().find("127.0.0.1:" + std::to_string(port)), absl::string_view::npos)
      << second.status();
  std::cout << second.status() << "\n";
  (*first)->Stop();
  auto again = LoadingServer::Start("127.0.0.1", port, nullptr);
  EXPECT_TRUE(again.ok()) << "the port is free after Stop: " << again.status();
}

}  // namespace
}  // namespace tandem::infer
