// The decode bench's prefill rows without the GPU: which rows a run times (--prefill's single
// sequences, then --prefill-batch's several prompts in one step), the step each row runs, the KV
// pool that holds every row and decode point of the run, the check that this pool fits the GPU's
// free memory, and the prefill table. bench/decode_bench.cc times the steps; tests/bench checks
// the rest on the CPU (tests/bench/decode_bench_prefill_test.cc).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "bench/decode_bench_flags.h"
#include "engine/step.h"

namespace tandem::bench {

// One prefill row of the run; `batched`: from --prefill-batch (else --prefill, one sequence).
struct PrefillRow {
  PrefillBatch shape;
  bool batched = false;
};

// --prefill's lengths as rows of one sequence, then --prefill-batch's rows, in flag order.
std::vector<PrefillRow> PrefillRows(const DecodeBenchOptions& o);

// The one step a row runs: sequence s (0..N-1) holds L tokens from position 0, in the blocks
// [s * ceil(L / block_size), (s + 1) * ceil(L / block_size)) and state slot s, logits of its last
// token wanted, as the serving scheduler batches a group of new prompts.
engine::StepBatch PrefillStep(const PrefillBatch& shape, int block_size);

// The KV pool one run allocates (per format): enough blocks and state slots for the largest
// decode batch at the longest context (with the positions its timed steps advance) and for
// every prefill row.
struct KvPool {
  int64_t blocks = 0;
  int32_t state_slots = 0;
};
// Blocks a decode point's sequences reserve each (the longest context's need: the pool holds the
// largest batch of them), and the blocks a point at context ctx puts in each sequence's block table
// (its own need, as the server's scheduler grows tables: a captured graph's table width, a power of
// two, then follows the point's context, and so do the kernel choices made from it).
int DecodeBlocksPerSeq(const DecodeBenchOptions& o);
int DecodeTableBlocks(const DecodeBenchOptions& o, int ctx);
KvPool PlanKvPool(const DecodeBenchOptions& o);

// The pool must fit in `free_bytes` (the GPU's free memory once the weights are loaded) with a
// tenth left for the activations of the largest step: FailedPrecondition naming the flag and the
// row that asks for too much (--prefill-batch 64x8192 needs KV for 524288 tokens ...), checked
// before the allocation so that a long run does not fail at its first prefill row.
absl::Status CheckKvPoolFits(const DecodeBenchOptions& o, double bytes_per_token, double state_bytes_per_slot,
                             double free_bytes);

// One timed prefill row: the wall-clock ms of each run of its step.
struct PrefillTiming {
  PrefillRow row;
  std::vector<double> ms;
};

// The prefill table (markdown): sequences, tokens per sequence, ms (median, min-max) and tokens/s
// of every token of the step (N x L over the median). Empty for no rows.
std::string PrefillTable(const std::vector<PrefillTiming>& rows);

}  // namespace tandem::bench
