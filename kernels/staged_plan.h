// How the staged one-token product (kernels/staged_matvec.cuh) cuts a matrix for a device: host
// arithmetic only, so that it is tested without a GPU (tests/kernels/staged_plan_test.cc).
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>

namespace tandem::kernels {

// What the plan needs of the device and of the step.
struct StagedDevice {
  int64_t smem_per_sm = 0;     // the split the step's kernels ask for (0: not the decode-attention split)
  int64_t max_smem_block = 0;  // cudaDevAttrMaxSharedMemoryPerBlockOptin
  int64_t reserved = 0;        // cudaDevAttrReservedSharedMemoryPerBlock (the driver's reserve a block)
  int64_t sm_count = 0;
};

// At most this many ring slots (the kernel's CpAsyncWaitPending range).
inline constexpr int kMaxStagedSlots = 8;

struct StagedPlan {
  int rw = 0, warps = 0;         // a slot holds rw * warps rows: warp w multiplies rw of them
  int slots = 0;                 // ring slots
  int64_t rows_per_block = 0;    // a block's run of rows (the last block's may be shorter)
  int64_t blocks = 0;
  int64_t groups = 0;            // slots' worth of rows in a full run
  int64_t smem = 0;              // dynamic shared memory a block
  bool whole() const { return slots >= groups; }  // the run staged before the wait
};

// Shared memory a block launched ahead (StagedReady) leaves free on its SM besides the reserves: the
// kernels it waits on run beside it and must find room there, or they would wait for it and it for
// them. The largest is the router's fused norm + product at one token (2048-wide rows: 12 KB of
// dynamic shared memory and its static part), then top-k's.
inline constexpr int64_t kAheadNeighbourSmem = 16 * 1024;

// The plan for `out` rows of `row_bytes` staged bytes each (a multiple of 16) and `cols` columns,
// with the norm inside the kernel (`norm`: x as float32 and the norm's bf16 weights in shared memory
// too), leaving `neighbour_smem` bytes of the split to other blocks (kAheadNeighbourSmem for a block
// launched ahead; 0 otherwise), or nullopt where it does not apply: no decode-attention split, or not 2 slots of the
// smallest shape. One block an SM owns out / sm_count rows. Shapes (rows a slot as rw x warps)
// from {2 x 4, 1 x 4, 1 x 2}: the first whose slots hold the whole run; else the first with 3
// slots (copies in flight while a slot is multiplied); else the first with 2. Four warps at most:
// the block (about 56 registers a thread) must fit beside the resident blocks of the kernel before
// it. The slots take what the split leaves after the blocks it is to sit beside (the experts' down
// product, 3-4 an SM) keep the driver's reserve each (four are left free) and after its own.
inline std::optional<StagedPlan> PlanStaged(const StagedDevice& d, int64_t cols, int64_t out, int64_t row_bytes,
                                            bool norm, int64_t neighbour_smem = 0) {
  if (d.smem_per_sm <= 0 || d.sm_count <= 0 || cols % 8 != 0 || row_bytes <= 0 || row_bytes % 16 != 0 || out <= 0) {
    return std::nullopt;
  }
  const int64_t x_bytes = norm ? 6 * cols : 0;
  // The kernel's static shared memory is `warps` floats (under 64 bytes); 128 covers it.
  const int64_t avail =
      std::min(d.smem_per_sm - 4 * d.reserved - neighbour_smem, d.max_smem_block) - d.reserved - 128 - x_bytes;
  const int64_t rows_per_block = (out + d.sm_count - 1) / d.sm_count;
  constexpr int kShapes[][2] = {{2, 4}, {1, 4}, {1, 2}};
  for (int need = 0; need < 3; ++need) {
    for (const auto& s : kShapes) {
      const int64_t g = s[0] * s[1];
      const int64_t slots = avail > 0 ? avail / (g * row_bytes) : 0;
      const int64_t groups = (rows_per_block + g - 1) / g;
      const int64_t want = need == 0 ? groups : need == 1 ? std::min<int64_t>(3, groups) : std::min<int64_t>(2, groups);
      if (slots < want || slots < 1) continue;
      StagedPlan p;
      p.rw = s[0], p.warps = s[1];
      p.slots = static_cast<int>(std::min<int64_t>({kMaxStagedSlots, slots, groups}));
      p.rows_per_block = rows_per_block;
      p.blocks = (out + rows_per_block - 1) / rows_per_block;
      p.groups = groups;
      p.smem = x_bytes + p.slots * g * row_bytes;
      return p;
    }
  }
  return std::nullopt;
}

}  // namespace tandem::kernels
