#include "bench/decode_bench_prefill.h"

#include <algorithm>
#include <cstdio>

#include "bench/format_compare.h"

namespace tandem::bench {

namespace {

int64_t BlocksFor(int64_t tokens, int block_size) { return (tokens + block_size - 1) / block_size; }

// What one part of the run asks of the pool, and the flag that asks it.
struct Demand {
  std::string flag;
  int64_t tokens = 0;  // positions of KV it holds at once
  int64_t blocks = 0;
  int32_t slots = 0;
};

std::vector<Demand> Demands(const DecodeBenchOptions& o) {
  std::vector<Demand> out;
  const int max_b = o.batches.empty() ? 0 : *std::max_element(o.batches.begin(), o.batches.end());
  const int max_ctx = o.contexts.empty() ? 0 : *std::max_element(o.contexts.begin(), o.contexts.end());
  if (max_b > 0) {
    const int64_t per_seq = DecodeBlocksPerSeq(o);
    out.push_back({"--batches " + std::to_string(max_b) + " at --contexts " + std::to_string(max_ctx),
                   per_seq * o.block_size * max_b, per_seq * max_b, max_b});
  }
  for (const PrefillRow& r : PrefillRows(o)) {
    const int64_t per_seq = BlocksFor(r.shape.tokens, o.block_size);
    const std::string flag =
        r.batched ? "--prefill-batch " + PrefillBatchName(r.shape) : "--prefill " + std::to_string(r.shape.tokens);
    out.push_back({flag, int64_t{r.shape.sequences} * r.shape.tokens, per_seq * r.shape.sequences, r.shape.sequences});
  }
  return out;
}

std::string Gb(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f GB", bytes / 1e9);
  return buf;
}

}  // namespace

std::vector<PrefillRow> PrefillRows(const DecodeBenchOptions& o) {
  std::vector<PrefillRow> rows;
  for (int len : o.prefill_lengths) rows.push_back({{1, len}, false});
  for (const PrefillBatch& b : o.prefill_batches) rows.push_back({b, true});
  return rows;
}

engine::StepBatch PrefillStep(const PrefillBatch& shape, int block_size) {
  engine::StepBatch batch;
  const int64_t per_seq = BlocksFor(shape.tokens, block_size);
  for (int s = 0; s < shape.sequences; ++s) {
    engine::SeqChunk c;
    c.seq_id = s;
    // Different tokens in every prompt (the router then spreads them over the experts as real
    // prompts would); sequence 0 is the single-sequence rows' prompt.
    for (int i = 0; i < shape.tokens; ++i) {
      c.tokens.push_back(static_cast<int32_t>((static_cast<int64_t>(s) * shape.tokens + i) * 7919 % 150000));
    }
    for (int64_t b = 0; b < per_seq; ++b) c.block_table.push_back(static_cast<int32_t>(s * per_seq + b));
    c.want_logits = true;
    c.state_slot = s;
    batch.seqs.push_back(std::move(c));
  }
  return batch;
}

int DecodeTableBlocks(const DecodeBenchOptions& o, int ctx) {
  // Each point runs 3 warm-up steps and --runs x --steps timed ones past its context.
  return static_cast<int>(BlocksFor(ctx + o.steps * (o.runs + 2) + 1, o.block_size));
}

int DecodeBlocksPerSeq(const DecodeBenchOptions& o) {
  const int max_ctx = o.contexts.empty() ? 0 : *std::max_element(o.contexts.begin(), o.contexts.end());
  return DecodeTableBlocks(o, max_ctx);
}

KvPool PlanKvPool(const DecodeBenchOptions& o) {
  KvPool pool;
  for (const Demand& d : Demands(o)) {
    pool.blocks = std::max(pool.blocks, d.blocks);
    pool.state_slots = std::max(pool.state_slots, d.slots);
  }
  return pool;
}

absl::Status CheckKvPoolFits(const DecodeBenchOptions& o, double bytes_per_token, double state_bytes_per_slot,
                             double free_bytes) {
  const KvPool pool = PlanKvPool(o);
  auto bytes = [&](int64_t blocks, int32_t slots) {
    return static_cast<double>(blocks) * o.block_size * bytes_per_token + slots * state_bytes_per_slot;
  };
  const double need = bytes(pool.blocks, pool.state_slots);
  const double usable = 0.9 * free_bytes;
  if (need <= usable) return absl::OkStatus();
  // The pool is the largest of every part's demand: name the part that asks the most.
  const std::vector<Demand> demands = Demands(o);
  const Demand& top = *std::max_element(demands.begin(), demands.end(), [&](const Demand& a, const Demand& b) {
    return bytes(a.blocks, a.slots) < bytes(b.blocks, b.slots);
  });
  std::string why = "bench: " + top.flag + " needs KV for " + std::to_string(top.tokens) + " tokens";
  if (state_bytes_per_slot > 0) why += " and " + std::to_string(top.slots) + " state slots";
  why += " (" + Gb(bytes(top.blocks, top.slots)) + "; the run's pool " + Gb(need) + "), but the GPU has " +
         Gb(free_bytes) + " free after the weights, a tenth of it kept for the activations; ask for fewer or shorter";
  why += top.flag.rfind("--batches", 0) == 0 ? " sequences" : " prompts";
  return absl::FailedPreconditionError(why);
}

std::string PrefillTable(const std::vector<PrefillTiming>& rows) {
  if (rows.empty()) return "";
  std::string out =
      "\n| sequences | tokens per sequence | ms (median, min-max) | tokens/s |\n| ---: | ---: | ---: | ---: |\n";
  for (const PrefillTiming& t : rows) {
    const Spread s = Summarize(t.ms);
    const double tokens = static_cast<double>(t.row.shape.sequences) * t.row.shape.tokens;
    char buf[160];
    std::snprintf(buf, sizeof buf, "| %d | %d | %.1f (%.1f-%.1f) | %.0f |\n", t.row.shape.sequences, t.row.shape.tokens,
                  s.median, s.min, s.max, tokens * 1e3 / s.median);
    out += buf;
  }
  return out;
}

}  // namespace tandem::bench
