// The controller state file: every field round-trips, a missing file is an empty state, a
// corrupt one is a DataLoss error naming the file (never silently a fresh budget).
#include "controller/controller_state.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>

namespace tandem::controller {
namespace {

class ControllerStateFile : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = ::testing::TempDir() + "/ctlstate-" + std::to_string(getpid()); }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  void Overwrite(const char* text) {
    FILE* f = std::fopen(ControllerStatePath(dir_, "c").c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs(text, f);
    std::fclose(f);
  }
  std::string dir_;
};

TEST_F(ControllerStateFile, RoundTrip) {
  ControllerState st;
  st.last_generation = 9;
  st.golden_generation = 9;
  st.golden_ids = {1, 2, 3};
  st.last_probe = ProbeRecord{true, 9, 123, 0.5, "fine"};
  ServeRecord serve;
  serve.restarts = {{1'700'000'000'000, false, "failed in join: n2: deadline exceeded"},
                    {1'700'000'060'000, true, "serving generation 9"}};
  serve.consecutive_failures = 2;
  serve.next_restart_unix_ms = 1'700'000'064'000;
  serve.preflight_failures = 3;
  serve.next_preflight_unix_ms = 1'700'000'070'000;
  serve.last_preflight_error = "agent-reachable on n2 (found: connection refused)";
  serve.operator_needed = true;
  serve.waiting = "budget_exhausted";
  serve.waiting_detail = "restart budget of 3 per 600 s exhausted";
  serve.waiting_since_unix_ms = 1'700'000'061'000;
  st.serve = serve;
  ASSERT_TRUE(SaveControllerState(dir_, "c", st).ok());
  auto back = LoadControllerState(dir_, "c");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->golden_ids, st.golden_ids);
  EXPECT_EQ(back->last_generation, 9u);
  ASSERT_TRUE(back->last_probe.has_value());
  EXPECT_EQ(back->last_probe->detail, "fine");
  ASSERT_TRUE(back->serve.has_value());
  EXPECT_EQ(*back->serve, serve);
  // No temporary file is left beside it (written atomically: temp, fsync, rename).
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir_)) files += e.is_regular_file();
  EXPECT_EQ(files, 1);
}

TEST_F(ControllerStateFile, MissingFileAndOlderFilesAreEmpty) {
  auto missing = LoadControllerState(dir_, "other");
  ASSERT_TRUE(missing.ok());
  EXPECT_EQ(missing->last_generation, 0u);
  EXPECT_FALSE(missing->serve.has_value());
  // A file from before serve kept its budget there: no "serve" key, no budget spent.
  std::filesystem::create_directories(dir_);
  Overwrite(R"({"last_generation": 4, "golden_generation": 0, "golden_ids": []})");
  auto old = LoadControllerState(dir_, "c");
  ASSERT_TRUE(old.ok()) << old.status();
  EXPECT_EQ(old->last_generation, 4u);
  EXPECT_FALSE(old->serve.has_value());
}

TEST_F(ControllerStateFile, CorruptFileIsAnErrorNamingIt) {
  std::filesystem::create_directories(dir_);
  // Integers past their type or as floats (which nlohmann would cast into the integer: undefined
  // behaviour) are corruption too.
  for (const char* text : {"{not json", R"({"serve": {"restarts": [{"at_unix_ms": "yesterday"}]}})",
                           R"({"serve": {"operator_needed": "maybe"}})", R"({"last_generation": 1e30})",
                           R"({"last_generation": -1})", R"({"golden_ids": [1.5]})", R"({"golden_ids": [4294967296]})",
                           R"({"golden_ids": 7})", R"({"last_probe": {"at_unix_ms": 1e300}})",
                           R"({"serve": {"consecutive_failures": 3000000000}})", R"({"serve": {"restarts": [3]}})"}) {
    Overwrite(text);
    auto st = LoadControllerState(dir_, "c");
    ASSERT_FALSE(st.ok()) << text;
    EXPECT_EQ(st.status().code(), absl::StatusCode::kDataLoss) << text;
    EXPECT_NE(st.status().message().find(ControllerStatePath(dir_, "c")), std::string::npos) << st.status();
  }
}

}  // namespace
}  // namespace tandem::controller
