// The unit of work of one forward call: a batch of sequences, each contributing a chunk of tokens
// (a prefill chunk or one decode token). Rank 0 plans a step and broadcasts it (Serialize) so that
// every rank runs the same step; the KV of a sequence lives in the blocks of its block table.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/logit_storage.h"

namespace tandem::engine {

struct SeqChunk {
  int64_t seq_id = 0;
  std::vector<int32_t> tokens;       // the chunk's tokens, at positions start_pos, start_pos+1, ...
  int32_t start_pos = 0;             // position of tokens[0] in the sequence
  std::vector<int32_t> block_table;  // KV blocks of the sequence; must cover start_pos + tokens.size()
  bool want_logits = false;          // logits of the chunk's last token
  bool want_all_logits = false;      // logits of every token of the chunk (golden tests, `logits`)
  // Models with per-sequence recurrent state (the hybrids' Gated DeltaNet layers): the slot of the
  // model's state pool this sequence owns; -1 = none (models without such state ignore it). A chunk
  // starting at position 0 restarts the slot's state from zeros; any other chunk continues it.
  int32_t state_slot = -1;
};

// One copy of a KV block or of a state slot, src -> dst, whole (every layer, K and V, conv and
// recurrent state alike).
struct CopyOp {
  int32_t src = 0;
  int32_t dst = 0;
};

struct StepBatch {
  std::vector<SeqChunk> seqs;
  // Copies the model makes at the start of the step, before any chunk reads or writes the cache:
  // the choices of an n > 1 request start from their parent's state after the prompt (the
  // parent's partial last KV block into a block of the child's own, the parent's state slot into
  // the child's), taken before the parent's next token changes them. They ride with the step
  // rather than a command of their own so that every rank applies them at the same point of the
  // same step: the step that follows the fork and no later, without one more broadcast. Applied in
  // list order (a block freed by one sequence may be the destination of a later copy).
  std::vector<CopyOp> block_copies;
  std::vector<CopyOp> state_copies;

  int64_t num_tokens() const;
  // A simple little-endian binary format (magic, version, then each chunk's fields).
  std::string Serialize() const;
  static absl::StatusOr<StepBatch> Deserialize(const std::string& bytes);
};

// The checks every backend makes on a step before running it: a KV pool exists (num_blocks > 0:
// FailedPrecondition "Forward before AllocateKvCache"), and every chunk is non-empty, starts at a
// position >= 0, has a block table covering its positions with block ids inside the pool, and
// token ids inside the vocabulary (InvalidArgument naming the sequence). `state_slots` is the size
// of the model's state pool, or kNoStateSlots for a model without per-sequence state; a model
// with state needs every chunk's state_slot inside the pool and no two chunks of the step in one
// slot (FailedPrecondition "Forward before allocating state slots" for an empty pool). Copies
// need source and destination inside their pool and distinct; a model without state takes no
// state copies.
inline constexpr int32_t kNoStateSlots = -1;
absl::Status CheckBatch(const StepBatch& batch, int32_t num_blocks, int32_t block_size, int64_t vocab,
                        int32_t state_slots);

// A step flattened for the layers, as one int32 array (the cuda backend copies it to the device as
// is; the kernels read everything that changes between steps from it): per token its id,
// position, KV slot (block * block_size + offset in the block) and sequence index; the indices of
// the R tokens whose logits are wanted (the last of a chunk, or all of it); the block tables as a
// (S, max_blocks) matrix, unused entries 0; per sequence its state slot (SeqChunk::state_slot);
// per sequence the index of its first token, then T (S + 1 values: sequence s has the tokens
// [seq_starts[s], seq_starts[s + 1])).
struct StepMeta {
  int64_t T = 0, R = 0, S = 0, max_blocks = 0;
  int64_t tokens() const { return 0; }
  int64_t pos() const { return T; }
  int64_t slot() const { return 2 * T; }
  int64_t token_seq() const { return 3 * T; }
  int64_t rows() const { return 4 * T; }
  int64_t tables() const { return 4 * T + R; }
  int64_t state_slots() const { return tables() + S * max_blocks; }
  int64_t seq_starts() const { return state_slots() + S; }
  int64_t total() const { return seq_starts() + S + 1; }
};
// The sizes of `batch`'s metadata. pad_tables rounds max_blocks up to a power of two (a captured
// graph serves every step up to its table width, so a growing sequence recaptures log(n) times).
StepMeta PlanStepMeta(const StepBatch& batch, bool pad_tables);
// Writes `batch` (checked by CheckBatch) to out[0, meta.total()) in StepMeta's order.
void WriteStepMeta(const StepBatch& batch, const StepMeta& meta, int32_t block_size, int32_t* out);

// Logits gathered on rank 0, one row per requested token, in batch order (each chunk's rows in
// token order). Other ranks get an empty Logits. `data` may live in memory the backend lends
// (engine/logit_storage.h: the CUDA backend's page-locked buffers); a copy of it is the caller's own.
struct Logits {
  int64_t vocab = 0;
  LogitVector data;                 // (rows, vocab)
  std::vector<int64_t> seq_ids;     // (rows) the sequence of each row
  std::vector<int32_t> positions;   // (rows) the position of the token whose next-token logits these are

  int64_t rows() const { return static_cast<int64_t>(seq_ids.size()); }
  const float* row(int64_t i) const { return data.data() + i * vocab; }
};

}  // namespace tandem::engine
