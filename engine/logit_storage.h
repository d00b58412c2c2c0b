// Where the rows of a Logits live. A batch of 32 decode rows over Qwen's 151,936-token vocabulary
// is 19.4 MB a step; the CUDA backend copies it from the device into page-locked memory, and copying
// it once more into an ordinary vector cost 2.1-2.5 ms a step on an H200 host (one thread, ~9 GB/s),
// 10% of the step. So Logits::data is a vector whose allocator may take its memory from a pool
// that a backend supplies (the CUDA backend: page-locked buffers the device copies into directly);
// when the Logits dies the buffer goes back to the pool for a later step. Without a pool (the
// default, and for every copy of a vector) it is the ordinary heap.
//
// Elements are default-initialised: resize() leaves floats unset, because every backend writes
// the rows it sizes (zeroing 19 MB first would cost what the pool saves).
#pragma once

#include <cstddef>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>
#include <vector>

namespace tandem::engine {

// Memory that a backend lends to Logits rows. Take throws std::bad_alloc (as any allocator must)
// when it cannot provide `bytes`; Give returns what Take handed out, with the same size. Both may be
// called from any thread.
class LogitMemoryPool {
 public:
  virtual ~LogitMemoryPool() = default;
  virtual void* Take(size_t bytes) = 0;
  virtual void Give(void* p, size_t bytes) noexcept = 0;
};

template <typename T>
class LogitAllocator {
 public:
  using value_type = T;
  // A vector that is moved or swapped keeps its pool; a copy goes to the heap (it is the caller's).
  using propagate_on_container_move_assignment = std::true_type;
  using propagate_on_container_swap = std::true_type;
  using propagate_on_container_copy_assignment = std::false_type;
  using is_always_equal = std::false_type;

  LogitAllocator() noexcept = default;
  explicit LogitAllocator(std::shared_ptr<LogitMemoryPool> pool) noexcept : pool_(std::move(pool)) {}
  template <typename U>
  LogitAllocator(const LogitAllocator<U>& other) noexcept : pool_(other.pool()) {}  // NOLINT: rebinding

  T* allocate(size_t n) {
    if (pool_ == nullptr) return std::allocator<T>().allocate(n);
    return static_cast<T*>(pool_->Take(n * sizeof(T)));
  }
  void deallocate(T* p, size_t n) noexcept {
    if (pool_ == nullptr) {
      std::allocator<T>().deallocate(p, n);
    } else {
      pool_->Give(p, n * sizeof(T));
    }
  }
  template <typename U, typename... Args>
  void construct(U* p, Args&&... args) {
    if constexpr (sizeof...(Args) == 0) {
      ::new (static_cast<void*>(p)) U;  // default-initialise: see the file comment
    } else {
      ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
    }
  }
  LogitAllocator select_on_container_copy_construction() const noexcept { return LogitAllocator(); }

  const std::shared_ptr<LogitMemoryPool>& pool() const noexcept { return pool_; }
  template <typename U>
  bool operator==(const LogitAllocator<U>& other) const noexcept {
    return pool_ == other.pool();
  }

 private:
  std::shared_ptr<LogitMemoryPool> pool_;
};

using LogitVector = std::vector<float, LogitAllocator<float>>;

}  // namespace tandem::engine
