// agentd/assignment.h: the persisted assignment (atomic save, load, clear, a corrupt file).
#include "agentd/assignment.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "tests/common/test_util.h"

namespace tandem::agentd {
namespace {

using tandem::testing::TempDir;

TEST(AssignmentTest, SaveLoadClear) {
  TempDir tmp;
  auto none = LoadAssignment(tmp.path());
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  v1::PersistedAssignment a;
  a.set_model_path("/models/q");
  a.set_rank(1);
  a.set_world_size(2);
  a.set_generation(42);
  a.set_store_endpoint("10.0.0.1:50051");
  (*a.mutable_comm_env()->mutable_env())["NCCL_IB_HCA"] = "rocep1s0f0";
  ASSERT_TRUE(SaveAssignment(tmp.path(), a).ok());
  EXPECT_FALSE(std::filesystem::exists(AssignmentPath(tmp.path()) + ".tmp"));
  auto back = LoadAssignment(tmp.path());
  ASSERT_TRUE(back.ok() && back->has_value());
  EXPECT_TRUE((*back)->present());
  EXPECT_EQ((*back)->generation(), 42u);
  EXPECT_EQ((*back)->rank(), 1u);
  EXPECT_EQ((*back)->comm_env().env().at("NCCL_IB_HCA"), "rocep1s0f0");
  ASSERT_TRUE(ClearAssignment(tmp.path()).ok());
  EXPECT_FALSE(LoadAssignment(tmp.path())->has_value());
  std::ofstream(AssignmentPath(tmp.path())) << "{not json";
  EXPECT_FALSE(LoadAssignment(tmp.path()).ok());
}

}  // namespace
}  // namespace tandem::agentd
