// agentd/rendezvous_store.h: the head's store (waits, bounds, old generations dropped) and the
// CancellableStore that calls a rendezvous off. No test waits on the clock to order events: the
// cancel test drives a fake store slice by slice.
#include "agentd/rendezvous_store.h"

#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <string>
#include <vector>

namespace tandem::agentd {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

TEST(RendezvousStoreTest, GetReturnsTheKeyAndTimesOutAtItsDeadline) {
  RendezvousStore store;
  // The reader may start before or after the write: either way it gets the value.
  auto reader = std::async(std::launch::async, [&] { return store.Get("gen1/0", 5000ms); });
  ASSERT_TRUE(store.Set("gen1/0", "addr-of-rank-0").ok());
  auto v = reader.get();
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(*v, "addr-of-rank-0");
  // A missing key: DeadlineExceeded, and never before the deadline (a lower bound cannot flake).
  const auto t0 = Clock::now();
  auto missing = store.Get("gen1/1", 100ms);
  EXPECT_TRUE(absl::IsDeadlineExceeded(missing.status()));
  EXPECT_GE(Clock::now() - t0, 100ms);
}

TEST(RendezvousStoreTest, BoundedAndDropsOldGenerations) {
  RendezvousStore store(/*max_keys=*/4, /*max_bytes=*/64);
  ASSERT_TRUE(store.Set("gen1/a", "x").ok());
  ASSERT_TRUE(store.Set("gen2/a", "x").ok());
  ASSERT_TRUE(store.Set("gen10/a", "x").ok());
  ASSERT_TRUE(store.Set("group/generation", "10").ok());
  EXPECT_TRUE(absl::IsResourceExhausted(store.Set("gen10/b", "x")));  // 5th key
  EXPECT_TRUE(store.Set("gen10/a", "y").ok());                         // replacing is fine
  EXPECT_TRUE(absl::IsResourceExhausted(store.Set("gen10/a", std::string(100, 'z'))));
  store.DropGenerationsBefore(10);
  EXPECT_EQ(store.size(), 2u);
  EXPECT_FALSE(store.TryGet("gen2/a").has_value());
  EXPECT_EQ(*store.TryGet("gen10/a"), "y");
  EXPECT_EQ(*store.TryGet("group/generation"), "10");
}

TEST(RendezvousStoreTest, DropPrefixFreesOnlyThatPrefixAndItsBytes) {
  RendezvousStore store(/*max_keys=*/3, /*max_bytes=*/1040);
  ASSERT_TRUE(store.Set("fabric/7/0", "x").ok());
  ASSERT_TRUE(store.Set("fabric/7/1", "x").ok());
  ASSERT_TRUE(store.Set("fabric/70/0", "x").ok());
  EXPECT_TRUE(absl::IsResourceExhausted(store.Set("gen1/a", "x")));
  store.DropPrefix("fabric/7/");
  EXPECT_EQ(store.size(), 1u);
  EXPECT_EQ(*store.TryGet("fabric/70/0"), "x");  // another check's keys stay
  EXPECT_TRUE(store.Set("gen1/a", "x").ok());
  EXPECT_TRUE(store.Set("gen1/b", std::string(1000, 'y')).ok());  // the dropped bytes were given back
}

// A store whose every Get is one empty slice (DeadlineExceeded at once), recording the timeouts
// it was asked for; `on_get` runs before each answer.
class SliceStore final : public engine::Store {
 public:
  absl::Status Set(const std::string&, const std::string&) override { return absl::OkStatus(); }
  absl::StatusOr<std::string> Get(const std::string& key, std::chrono::milliseconds timeout) override {
    timeouts.push_back(timeout);
    if (on_get) on_get();
    return absl::DeadlineExceededError("no " + key + " within the slice");
  }
  std::string Describe() const override { return "the slice store"; }
  std::vector<std::chrono::milliseconds> timeouts;
  std::function<void()> on_get;
};

TEST(RendezvousStoreTest, CancelEndsAWaitAtTheNextSlice) {
  SliceStore base;
  CancellableStore c(base, 50ms);
  base.on_get = [&] {
    if (base.timeouts.size() == 3) c.Cancel();  // called off during the third slice
  };
  auto v = c.Get("never", 30000ms);
  EXPECT_TRUE(absl::IsCancelled(v.status())) << v.status();
  ASSERT_EQ(base.timeouts.size(), 3u) << "the cancel is seen before the next slice starts";
  for (auto t : base.timeouts) EXPECT_LE(t, 50ms) << "a long Get is cut into slices";
  // Later calls are refused at once, without reaching the base store.
  EXPECT_TRUE(absl::IsCancelled(c.Get("k", 1000ms).status()));
  EXPECT_TRUE(absl::IsCancelled(c.Set("k", "v")));
  EXPECT_EQ(base.timeouts.size(), 3u);
}

TEST(RendezvousStoreTest, CancellableGetPassesAValueThrough) {
  RendezvousStore store;
  ASSERT_TRUE(store.Set("gen1/0", "addr").ok());
  CancellableStore c(store, 50ms);
  auto v = c.Get("gen1/0", 1000ms);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(*v, "addr");
}

}  // namespace
}  // namespace tandem::agentd
