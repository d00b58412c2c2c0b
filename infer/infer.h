// What tandem-infer does, as library code (infer_main.cc only parses flags into InferOptions):
// tokenize; generate; dump prompt logits. Ranks run as threads of this process or as separate
// processes (rank 0 spawns ranks 1..N-1 as copies of this binary with --rank/--world/--store).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace tandem::infer {

struct InferOptions {
  std::string command;             // "tokenize", "generate", "logits"
  std::string model_dir;
  std::string backend = "cpu";
  int tp = 1;
  std::string ranks = "threads";   // "threads" or "processes" (when tp > 1)
  int threads = 0;                 // matmul threads per rank; 0 = cores / tp
  std::string kv_cache_dtype = "auto";  // --kv-cache-dtype auto|f32|bf16|fp8 (ModelLoadOptions)
  // Input: text (tokenized with the folder's tokenizer) or ids.
  std::string text;                // tokenize --text, generate --prompt
  bool has_text = false;
  bool chat = false;               // generate: wrap --prompt as one user turn of the chat template
  bool enable_thinking = true;     // with --chat: false adds the empty think block
  std::vector<int32_t> prompt_ids; // --prompt-ids
  // Generation.
  int max_tokens = 16;
  float temperature = 0.0f;
  uint64_t seed = 0;
  bool json = false;
  bool stats = false;              // decode tokens/s to stderr
  std::string out;                 // logits --out FILE
  int kv_block_size = 16;
  int timeout_ms = 30000;          // each collective; the rendezvous gets twice as long
  // Set only in spawned rank processes (hidden flags).
  int rank = 0;
  int world = 0;                   // > 0: this process is rank `rank` of a spawned group
  std::string store_dir;           // FileStore rendezvous directory
  std::vector<std::string> argv;   // this process's arguments (to spawn copies of it)
};

// Runs the command; returns what rank 0 prints to stdout (JSON or text). Worker processes
// (world > 0, rank > 0) return "".
absl::StatusOr<std::string> RunInfer(const InferOptions& options);

// "1,2,3" -> {1, 2, 3}; InvalidArgument naming the bad element.
absl::StatusOr<std::vector<int32_t>> ParseIdList(const std::string& text);

}  // namespace tandem::infer
