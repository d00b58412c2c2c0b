// The step driver (engine/step_driver.cc): rank 0's commands reach every worker's model in order
// (the KV pool, steps whose plan rides inside the command or follows it, heartbeats that run
// nothing, stop), over Gloo with the ranks as threads; a group of one calls the model directly; a
// worker whose model fails leaves its loop with that error.
#include "engine/step_driver.h"

#include <memory>
#include <mutex>
#include <vector>

#include <gtest/gtest.h>

#include "common/status.h"
#include "engine/comm/rank_threads.h"
#include "tests/engine/fake_model.h"

namespace tandem::engine {
namespace {

using testing::FakeModel;

// A step of one sequence; `tokens` long enough makes its plan too large to ride inside the command.
StepBatch Step(int64_t seq_id, int32_t n_tokens) {
  StepBatch b;
  SeqChunk c;
  c.seq_id = seq_id;
  for (int32_t i = 0; i < n_tokens; ++i) c.tokens.push_back(i % 8);
  c.block_table = {0, 1, 2, 3};
  c.want_logits = true;
  b.seqs.push_back(c);
  return b;
}

TEST(StepDriver, WorkersRunWhatRankZeroSends) {
  constexpr int kWorld = 3;
  std::vector<std::unique_ptr<FakeModel>> models;
  for (int r = 0; r < kWorld; ++r) models.push_back(std::make_unique<FakeModel>(8, r, kWorld));
  std::vector<StepBatch> steps = {Step(1, 3), Step(2, 100)};  // inline, then a second broadcast
  steps[0].block_copies = {{0, 2}, {1, 3}};  // a fork's copies reach every rank with the step
  absl::Status st = RunRanksAsThreads(kWorld, [&](Comm& comm) -> absl::Status {
    FakeModel& model = *models[comm.rank()];
    if (comm.rank() != 0) return RunWorkerLoop(model, comm);
    StepDriver driver(&model, &comm);
    RETURN_IF_ERROR(driver.AllocateKvCache(4, 32, 0));
    EXPECT_EQ(driver.num_kv_blocks(), 4);
    EXPECT_EQ(driver.kv_block_size(), 32);
    for (const StepBatch& b : steps) {
      RETURN_IF_ERROR(driver.Heartbeat());
      ASSIGN_OR_RETURN(Logits l, driver.Forward(b));
      EXPECT_EQ(l.rows(), 1);
    }
    RETURN_IF_ERROR(driver.Stop());
    return driver.Stop();  // once only: a second Stop sends nothing
  });
  ASSERT_TRUE(st.ok()) << st;
  for (int r = 0; r < kWorld; ++r) {
    const FakeModel& m = *models[r];
    ASSERT_EQ(m.pools.size(), 1u) << "rank " << r;
    EXPECT_EQ(m.pools[0], (std::pair<int32_t, int32_t>{4, 32})) << "rank " << r;
    ASSERT_EQ(m.steps.size(), steps.size()) << "rank " << r;
    for (size_t i = 0; i < steps.size(); ++i) EXPECT_EQ(m.steps[i], steps[i].Serialize()) << "rank " << r;
  }
}

TEST(StepDriver, AGroupOfOneCallsTheModel) {
  FakeModel model;
  StepDriver driver(&model, nullptr);
  ASSERT_TRUE(driver.AllocateKvCache(4, 32, 0).ok());
  ASSERT_TRUE(driver.Heartbeat().ok());
  auto l = driver.Forward(Step(5, 2));
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_EQ(l->seq_ids, (std::vector<int64_t>{5}));
  EXPECT_EQ(&driver.model(), &model);
  EXPECT_EQ(model.steps.size(), 1u);
  // The model's own checks come back through the driver.
  auto bad = driver.Forward(Step(6, 200));  // 200 tokens, blocks for 128
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(driver.Stop().ok());
}

TEST(StepDriver, AWorkerWhoseModelFailsLeavesWithItsError) {
  std::vector<std::unique_ptr<FakeModel>> models;
  for (int r = 0; r < 2; ++r) models.push_back(std::make_unique<FakeModel>(8, r, 2));
  models[1]->FailAfter(0, absl::InternalError("fake forward failed"));
  std::mutex mu;
  absl::Status worker;
  absl::Status st = RunRanksAsThreads(2, [&](Comm& comm) -> absl::Status {
    FakeModel& model = *models[comm.rank()];
    if (comm.rank() != 0) {
      absl::Status s = RunWorkerLoop(model, comm);
      std::lock_guard<std::mutex> lock(mu);
      worker = s;
      return s;
    }
    StepDriver driver(&model, &comm);
    RETURN_IF_ERROR(driver.AllocateKvCache(4, 32, 0));
    RETURN_IF_ERROR(driver.Forward(Step(1, 3)).status());
    // The worker has left: Stop fails or finds the comm aborted; either way rank 0 returns.
    (void)driver.Stop();
    return absl::OkStatus();
  });
  EXPECT_FALSE(st.ok());
  EXPECT_EQ(worker.code(), absl::StatusCode::kInternal);
  EXPECT_EQ(worker.message(), "fake forward failed");
  EXPECT_EQ(models[1]->steps.size(), 1u);
}

}  // namespace
}  // namespace tandem::engine
