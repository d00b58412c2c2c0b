// LogitVector (engine/logit_storage.h): rows in a backend's pool go back to it when the vector dies,
// a move keeps the pool, a copy is the caller's own (heap), and without a pool it is the heap.
#include "engine/logit_storage.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <memory>
#include <utility>

#include "engine/step.h"

namespace tandem::engine {
namespace {

// Counts what it lends; memory from malloc.
class CountingPool final : public LogitMemoryPool {
 public:
  void* Take(size_t bytes) override {
    void* p = std::malloc(bytes);
    lent[p] = bytes;
    ++takes;
    return p;
  }
  void Give(void* p, size_t bytes) noexcept override {
    EXPECT_EQ(lent.count(p), 1u);
    EXPECT_EQ(lent[p], bytes);
    lent.erase(p);
    std::free(p);
  }
  std::map<void*, size_t> lent;
  int takes = 0;
};

TEST(LogitStorageTest, PoolBufferComesBackWhenTheLogitsDie) {
  auto pool = std::make_shared<CountingPool>();
  {
    Logits l;
    l.vocab = 4;
    l.data = LogitVector(LogitAllocator<float>(pool));
    l.data.resize(8);
    ASSERT_EQ(pool->lent.size(), 1u);
    EXPECT_EQ(pool->lent.begin()->first, static_cast<void*>(l.data.data()));
    EXPECT_EQ(pool->lent.begin()->second, 8 * sizeof(float));
    for (int i = 0; i < 8; ++i) l.data[i] = static_cast<float>(i);
    EXPECT_EQ(l.row(1)[2], 6.0f);
  }
  EXPECT_TRUE(pool->lent.empty());
  EXPECT_EQ(pool->takes, 1);
}

TEST(LogitStorageTest, MoveKeepsThePoolCopyGoesToTheHeap) {
  auto pool = std::make_shared<CountingPool>();
  LogitVector a{LogitAllocator<float>(pool)};
  a.resize(16);
  for (int i = 0; i < 16; ++i) a[i] = static_cast<float>(i) * 0.5f;
  const float* rows = a.data();

  LogitVector copy = a;
  EXPECT_EQ(copy.get_allocator().pool(), nullptr);
  EXPECT_EQ(pool->takes, 1);  // the copy did not borrow
  EXPECT_EQ(copy, a);

  Logits l;
  l.data = std::move(a);  // move assignment takes the pool along: no copy, no second buffer
  EXPECT_EQ(l.data.data(), rows);
  EXPECT_EQ(l.data.get_allocator().pool(), pool);
  EXPECT_EQ(pool->takes, 1);

  Logits moved = std::move(l);
  EXPECT_EQ(moved.data.data(), rows);
  EXPECT_EQ(pool->lent.size(), 1u);
  moved.data = LogitVector();  // the pool's buffer goes back; the vector is the heap's again
  EXPECT_TRUE(pool->lent.empty());
  moved.data.assign({1.0f, 2.0f});
  EXPECT_EQ(moved.data.get_allocator().pool(), nullptr);
  EXPECT_EQ(pool->takes, 1);
}

TEST(LogitStorageTest, HeapByDefault) {
  Logits l;
  l.vocab = 2;
  l.data.insert(l.data.end(), {1.0f, 2.0f, 3.0f, 4.0f});
  EXPECT_EQ(l.data.get_allocator().pool(), nullptr);
  EXPECT_EQ(l.row(1)[0], 3.0f);
  l.data.resize(6, 7.0f);  // explicit values are still written
  EXPECT_EQ(l.data[5], 7.0f);
}

}  // namespace
}  // namespace tandem::engine
