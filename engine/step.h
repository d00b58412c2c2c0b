// The unit of work of one forward call: a batch of sequences, each contributing a chunk of tokens
// (a prefill chunk or one decode token). Rank 0 plans a step and broadcasts it (Serialize) so that
// every rank runs the same step; the KV of a sequence lives in the blocks of its block table.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace tandem::engine {

struct SeqChunk {
  int64_t seq_id = 0;
  std::vector<int32_t> tokens;       // the chunk's tokens, at positions start_pos, start_pos+1, ...
  int32_t start_pos = 0;             // position of tokens[0] in the sequence
  std::vector<int32_t> block_table;  // KV blocks of the sequence; must cover start_pos + tokens.size()
  bool want_logits = false;          // logits of the chunk's last token
  bool want_all_logits = false;      // logits of every token of the chunk (golden tests, `logits`)
};

struct StepBatch {
  std::vector<SeqChunk> seqs;

  int64_t num_tokens() const;
  // A simple little-endian binary format (magic, version, then each chunk's fields).
  std::string Serialize() const;
  static absl::StatusOr<StepBatch> Deserialize(const std::string& bytes);
};

// Logits gathered on rank 0, one row per requested token, in batch order (each chunk's rows in
// token order). Other ranks get an empty Logits.
struct Logits {
  int64_t vocab = 0;
  std::vector<float> data;          // (rows, vocab)
  std::vector<int64_t> seq_ids;     // (rows) the sequence of each row
  std::vector<int32_t> positions;   // (rows) the position of the token whose next-token logits these are

  int64_t rows() const { return static_cast<int64_t>(seq_ids.size()); }
  const float* row(int64_t i) const { return data.data() + i * vocab; }
};

}  // namespace tandem::engine
