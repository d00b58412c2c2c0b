// The LLMEngine implementation: one engine thread on rank 0 that loops
//   admit new requests -> plan a step (Scheduler) -> Forward on every rank (StepDriver)
//   -> sample each sequence that wanted logits -> detokenize, check stops -> callbacks.
// A request is a Group of n choices, each one sequence of the scheduler (choices 1.. are forked
// from choice 0 at its first token: they share the prompt's full KV blocks and start from copies
// of its partial block and state slot, so the prompt is computed once; Scheduler::Fork).
// Requests cross threads only through `mu_` (pending submissions, cancellations); everything
// the loop owns (scheduler, per-request state) is touched by the engine thread alone.
#include "engine/batching/llm_engine.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <condition_variable>
#include <deque>
#include <fstream>
#include <mutex>
#include <random>
#include <sstream>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "common/log.h"
#include "common/status.h"
#include "engine/batching/kv_sizing.h"
#include "engine/batching/logits_processors.h"
#include "engine/batching/sampler.h"
#include "engine/batching/scheduler.h"
#include "engine/batching/stop_strings.h"
#include "engine/tokenizer/tokenizer.h"
#ifdef TANDEM_HAVE_CUDA
#include "engine/cuda/cuda_model.h"
#endif

namespace tandem::engine {

namespace {

using Clock = std::chrono::steady_clock;

// MemAvailable of /proc/meminfo in bytes (0 when unreadable).
int64_t MemAvailableBytes() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  int64_t kb = 0;
  std::string unit;
  while (in >> key >> kb) {
    std::getline(in, unit);
    if (key == "MemAvailable:") return kb * 1024;
  }
  return 0;
}

std::string FractionText(double f) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", f);
  return buf;
}

// The pools: an explicit token count, else memory_fraction of this machine's MemAvailable (cpu)
// or of the device's memory (cuda: cuda::KvBlocksFromDeviceMemory, after the weights are on it),
// shared between the state slots (models with per-sequence state) and the KV pool by
// PoolsFromBudget (engine/batching/kv_sizing.h). Every rank allocates the sizes rank 0 picks here.
absl::StatusOr<KvPoolSize> KvPoolBlocks(const EngineOptions& o, const Model& model) {
  const KvCacheSpec spec = model.kv_spec();
  const int64_t per_token = spec.bytes_per_token();
  if (o.kv_tokens > 0) {
    ASSIGN_OR_RETURN(KvPoolSize p, PoolsFromKvTokens(o.kv_tokens, o.block_size, o.max_num_seqs, per_token,
                                                     spec.state_bytes_per_slot));
    // An explicit size is taken as given, but host memory it cannot fit in would end the
    // process in the allocation (kv_tokens 1e12 in a JoinGroup did: agent_rpc fuzz target).
    // cuda pools come from the device allocator, which reports failure.
    const int64_t avail = o.backend == "cuda" ? 0 : MemAvailableBytes();
    if (avail > 0 && p.total_bytes() > avail) {
      return absl::ResourceExhaustedError("kv_tokens " + std::to_string(o.kv_tokens) + " needs " +
                                          std::to_string(p.bytes >> 20) + " MiB of KV cache (+ " +
                                          std::to_string(p.state_bytes >> 20) + " MiB of state slots), more than the " +
                                          std::to_string(avail >> 20) + " MiB MemAvailable");
    }
    return p;
  }
  if (per_token <= 0) return absl::FailedPreconditionError("the model reports 0 KV bytes per token");
  ASSIGN_OR_RETURN(const double fraction, ResolveMemoryFraction(o.backend, o.memory_fraction));
  auto pools = [&](int64_t budget, const std::string& source) {
    return PoolsFromBudget(budget, o.block_size, o.max_num_seqs, o.max_model_len, per_token,
                           spec.state_bytes_per_slot, source);
  };
  if (o.backend == "cuda") {
#ifdef TANDEM_HAVE_CUDA
    // The device's budget as whole KV blocks (less than one block short of the bytes): the state
    // slots are taken out of it here, so the cuda side stays one function for both models.
    ASSIGN_OR_RETURN(const int32_t fit, cuda::KvBlocksFromDeviceMemory(model, fraction, o.block_size));
    const int64_t budget = static_cast<int64_t>(fit) * o.block_size * per_token;
    TLOG(INFO) << "KV sizing: " << fraction << " of the device's memory minus what is in use = " << (budget >> 20)
               << " MiB; " << per_token << " bytes per token (" << KvDtypeName(spec.dtype) << " KV), "
               << spec.state_bytes_per_slot
               << " bytes per state slot; max_num_seqs " << o.max_num_seqs << ", max_model_len " << o.max_model_len;
    return pools(budget, "device memory (memory_fraction " + FractionText(fraction) + ")");
#else
    return absl::FailedPreconditionError("backend cuda: this build has no CUDA (configure with -DTANDEM_CUDA=ON)");
#endif
  }
  const int64_t avail = MemAvailableBytes();
  if (avail <= 0) return absl::FailedPreconditionError("cannot read MemAvailable from /proc/meminfo; set kv_tokens");
  const int64_t budget = static_cast<int64_t>(fraction * static_cast<double>(avail));
  TLOG(INFO) << "KV sizing: " << fraction << " x MemAvailable " << (avail >> 20) << " MiB = " << (budget >> 20)
             << " MiB; " << per_token << " bytes per token (" << KvDtypeName(spec.dtype) << " KV), "
               << spec.state_bytes_per_slot
             << " bytes per state slot; max_num_seqs " << o.max_num_seqs << ", max_model_len " << o.max_model_len;
  return pools(budget, "host memory (memory_fraction " + FractionText(fraction) + ")");
}

bool Contains(const std::vector<int64_t>& v, int64_t x) { return std::find(v.begin(), v.end(), x) != v.end(); }
bool Contains(const std::vector<int32_t>& v, int32_t x) { return std::find(v.begin(), v.end(), x) != v.end(); }

class LLMEngineImpl final : public LLMEngine {
 public:
  // `num_state_slots` 0: the model keeps no per-sequence state.
  LLMEngineImpl(StepDriver* driver, const Tokenizer* tokenizer, EngineOptions options, int32_t num_blocks,
                int32_t num_state_slots)
      : driver_(driver),
        tokenizer_(tokenizer),
        options_(std::move(options)),
        vocab_(driver->model().config().vocab_size),
        eos_ids_(driver->model().config().eos_token_ids),
        kv_tokens_total_(static_cast<int64_t>(num_blocks) * options_.block_size),
        max_running_(num_state_slots > 0 ? std::min(options_.max_num_seqs, num_state_slots) : options_.max_num_seqs),
        seed_source_(std::random_device{}()),
        sched_(SchedulerConfig{options_.max_num_seqs, options_.max_num_batched_tokens, options_.block_size,
                               num_blocks, num_state_slots}) {
    stats_.kv_blocks_total = num_blocks;
    stats_.kv_tokens_total = static_cast<int64_t>(num_blocks) * options_.block_size;
    stats_.state_slots_total = num_state_slots;
    stats_.block_size = options_.block_size;
    stats_.kv_cache_dtype = KvDtypeName(driver->model().kv_spec().dtype);
  }
  ~LLMEngineImpl() override { Shutdown(); }

  void Start() { thread_ = std::thread([this] { Loop(); }); }

  absl::Status Submit(GenerationRequest request, GenerationCallback callback) override;
  void Cancel(const std::string& request_id) override;
  EngineStats Stats() const override {
    std::lock_guard<std::mutex> l(stats_mu_);
    return stats_;
  }
  bool healthy() const override { return healthy_.load(); }
  absl::Status fatal_error() const override {
    std::lock_guard<std::mutex> l(mu_);
    return fatal_;
  }
  void Shutdown() override;

 private:
  struct Group;
  // Engine-thread state of one choice of a request: one sequence of the scheduler.
  struct Request {
    explicit Request(Group* g, int32_t index) : group(g), req(g->req), choice(index) {}
    Group* group;                   // owns this choice
    const GenerationRequest& req;   // the group's
    const int32_t choice;           // index in the group, 0..n-1
    int64_t seq_id = 0;             // 0 while not in the scheduler (before its fork)
    bool finished = false;
    SamplerSettings sampler;
    LogitAdjustments adjust;
    TokenHistory history;                  // kept only when a penalty needs it
    std::vector<int32_t> min_tokens_mask;  // eos and stop token ids while under min_tokens
    std::unique_ptr<GrammarConstraint> grammar;  // SamplingParams::grammar; null without one
    std::mt19937_64 rng;
    std::unique_ptr<tokenizer::StreamDecoder> decoder;  // null without a tokenizer
    std::unique_ptr<StopStringMatcher> stops;
    int32_t generated = 0;  // sampled tokens, stop tokens included
    RequestTimes times{Clock::now()};  // made in Submit: that is when it was submitted
  };
  // Engine-thread state of one request: its n choices and what they share.
  struct Group {
    GenerationRequest req;
    GenerationCallback callback;
    std::vector<std::unique_ptr<Request>> choices;  // choice i at [i]; choice 0 runs the prefill
    int32_t open = 0;                   // choices not finished
    bool forked = false;                // choices 1.. have their sequences
    int64_t completion_tokens = 0;      // of the finished choices
    // Prompt logprobs (SamplingParams::prompt_logprobs): gathered over the prefill's chunks,
    // entry i for prompt token i + 1, sent once before the first token.
    std::vector<TokenLogprob> prompt_logprobs;
    bool prompt_logprobs_sent = false;
  };

  void Loop();
  void Admit(std::unique_ptr<Group> g);
  // Returns false after a fatal step error.
  bool RunStep();
  // One step's logits row for `r`'s sequence: a prompt row (prompt logprobs) or its next token(s).
  void HandleRow(Request& r, const Logits& logits, int64_t row);
  // Draws `r`'s next token from the model's `row` after r's own adjustments, masks and grammar.
  int32_t Draw(Request& r, const float* row, int64_t vocab);
  // `lp`: the token's logprob entry when the request asked for logprobs, else null.
  void HandleToken(Request& r, int32_t token, const TokenLogprob* lp);
  // Ends one choice (its final event); the last one ends the request (`finished`, usage).
  void FinishChoice(Request& r, const std::string& reason, const absl::Status& error);
  // Ends every unfinished choice of a request.
  void FinishRequest(const std::string& request_id, const std::string& reason, const absl::Status& error);
  void FailEverything(const absl::Status& error, const std::string& reason);
  void PublishStats();

  StepDriver* driver_;
  const Tokenizer* tokenizer_;
  const EngineOptions options_;
  const int64_t vocab_;
  const std::vector<int64_t> eos_ids_;
  const int64_t kv_tokens_total_;
  const int32_t max_running_;  // max_num_seqs, or fewer when the state slots are fewer

  std::mutex shutdown_mu_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::unique_ptr<Group>> pending_;  // submitted, not yet seen by the loop
  std::vector<std::string> cancels_;
  std::unordered_set<std::string> live_ids_;      // submitted and not yet finished
  bool stop_ = false;
  bool shut_down_ = false;
  absl::Status fatal_;
  std::atomic<bool> healthy_{true};
  std::atomic<int32_t> scheduler_waiting_{0};     // for the admission limit in Submit
  std::atomic<int32_t> scheduler_running_{0};
  int64_t next_auto_id_ = 0;
  std::mt19937_64 seed_source_;  // seeds of requests without one

  // Engine thread only.
  Scheduler sched_;
  std::unordered_map<std::string, std::unique_ptr<Group>> groups_;  // by request id
  std::unordered_map<int64_t, Request*> requests_;                  // the choices, by seq id
  int64_t next_seq_id_ = 1;
  std::vector<float> adjusted_row_;  // a row of logits after logit_bias / penalties / masks

  mutable std::mutex stats_mu_;
  EngineStats stats_;
  std::thread thread_;
};

absl::Status LLMEngineImpl::Submit(GenerationRequest request, GenerationCallback callback) {
  const auto& p = request.params;
  const int64_t n = static_cast<int64_t>(request.prompt_ids.size());
  if (n == 0) return absl::InvalidArgumentError("the prompt is empty");
  for (size_t i = 0; i < request.prompt_ids.size(); ++i) {
    const int32_t id = request.prompt_ids[i];
    if (id < 0 || id >= vocab_) {
      return absl::InvalidArgumentError("prompt token " + std::to_string(i) + " is id " + std::to_string(id) +
                                        ", outside the vocabulary [0, " + std::to_string(vocab_) + ")");
    }
  }
  if (p.max_tokens < 1) return absl::InvalidArgumentError("max_tokens must be at least 1, got " + std::to_string(p.max_tokens));
  if (n + p.max_tokens > options_.max_model_len) {
    return absl::InvalidArgumentError("the prompt (" + std::to_string(n) + " tokens) plus max_tokens (" +
                                      std::to_string(p.max_tokens) + ") is " + std::to_string(n + p.max_tokens) +
                                      " tokens, more than max_model_len " + std::to_string(options_.max_model_len));
  }
  if (n + p.max_tokens > kv_tokens_total_) {
    return absl::InvalidArgumentError("the prompt plus max_tokens is " + std::to_string(n + p.max_tokens) +
                                      " tokens, more than the whole KV pool of " +
                                      std::to_string(kv_tokens_total_));
  }
  if (!(p.temperature >= 0.0f) || std::isinf(p.temperature)) {
    return absl::InvalidArgumentError("temperature must be a finite number >= 0");
  }
  if (!(p.top_p > 0.0f && p.top_p <= 1.0f)) return absl::InvalidArgumentError("top_p must be in (0, 1]");
  if (p.top_k < 0) return absl::InvalidArgumentError("top_k must be >= 0 (0 = off)");
  if (!(p.min_p >= 0.0f && p.min_p <= 1.0f)) return absl::InvalidArgumentError("min_p must be in [0, 1]");
  if (!(p.presence_penalty >= -2.0f && p.presence_penalty <= 2.0f) ||
      !(p.frequency_penalty >= -2.0f && p.frequency_penalty <= 2.0f)) {
    return absl::InvalidArgumentError("presence_penalty and frequency_penalty must be in [-2, 2]");
  }
  if (!(p.repetition_penalty > 0.0f) || std::isinf(p.repetition_penalty)) {
    return absl::InvalidArgumentError("repetition_penalty must be a finite number > 0");
  }
  for (const auto& [id, bias] : p.logit_bias) {
    if (id < 0 || id >= vocab_ || !(bias >= -100.0f && bias <= 100.0f)) {
      return absl::InvalidArgumentError("logit_bias: token " + std::to_string(id) +
                                        " must be in the vocabulary [0, " + std::to_string(vocab_) +
                                        ") and its bias in [-100, 100]");
    }
  }
  if (p.min_tokens < 0 || p.min_tokens > p.max_tokens) {
    return absl::InvalidArgumentError("min_tokens must be in [0, max_tokens], got " + std::to_string(p.min_tokens));
  }
  if (p.logprobs < -1 || p.logprobs > kMaxLogprobs || p.prompt_logprobs < -1 || p.prompt_logprobs > kMaxLogprobs) {
    return absl::InvalidArgumentError("logprobs and prompt_logprobs must be in [-1, " + std::to_string(kMaxLogprobs) +
                                      "] (-1 = off)");
  }
  if (request.n < 1 || request.n > kMaxChoices) {
    return absl::InvalidArgumentError("n must be in [1, " + std::to_string(kMaxChoices) + "], got " +
                                      std::to_string(request.n));
  }

  auto g = std::make_unique<Group>();
  for (int32_t i = 0; i < request.n; ++i) {
    g->choices.push_back(std::make_unique<Request>(g.get(), i));
    Request* r = g->choices.back().get();
    r->sampler = SamplerSettings{p.temperature, p.top_k, p.top_p, p.min_p};
    r->adjust = LogitAdjustments{p.logit_bias, p.repetition_penalty, p.frequency_penalty, p.presence_penalty};
    if (p.repetition_penalty != 1.0f) r->history.prompt.insert(request.prompt_ids.begin(), request.prompt_ids.end());
    if (p.min_tokens > 0) {
      for (int64_t id : eos_ids_) r->min_tokens_mask.push_back(static_cast<int32_t>(id));
      r->min_tokens_mask.insert(r->min_tokens_mask.end(), p.stop_token_ids.begin(), p.stop_token_ids.end());
    }
    if (!p.stop.empty()) r->stops = std::make_unique<StopStringMatcher>(p.stop);
    if (p.grammar != nullptr) r->grammar = std::make_unique<GrammarConstraint>(p.grammar);
    if (tokenizer_ != nullptr) r->decoder = std::make_unique<tokenizer::StreamDecoder>(*tokenizer_, true);
  }
  g->open = request.n;
  g->callback = std::move(callback);
  {
    std::lock_guard<std::mutex> l(mu_);
    if (!fatal_.ok()) return absl::UnavailableError(std::string(fatal_.message()));
    if (shut_down_) return absl::UnavailableError("the engine is shut down");
    if (request.request_id.empty()) request.request_id = "engine-" + std::to_string(++next_auto_id_);
    if (live_ids_.count(request.request_id) != 0) {
      return absl::AlreadyExistsError("request id " + request.request_id + " is already in flight");
    }
    // Requests beyond what can run at once are the waiting ones, whether the loop has seen them
    // yet or not (a burst that arrives between two loop turns is not all "waiting").
    // Priority requests (probes) are never refused for load: a busy engine is a healthy one.
    const int64_t waiting = static_cast<int64_t>(pending_.size()) + scheduler_waiting_.load() +
                            scheduler_running_.load() - max_running_;
    if (waiting >= options_.max_waiting && !request.priority) {
      return absl::ResourceExhaustedError("the engine is overloaded: " + std::to_string(waiting) +
                                          " requests are waiting (max_waiting " +
                                          std::to_string(options_.max_waiting) + ")");
    }
    // Seeds are drawn here (under the lock) so that the engine thread's state stays its own.
    // Choice i draws with seed + i: choice 0 is what n = 1 gives, and each is reproducible.
    const uint64_t seed = p.seed.has_value() ? *p.seed : seed_source_();
    for (auto& c : g->choices) c->rng.seed(seed + static_cast<uint64_t>(c->choice));
    live_ids_.insert(request.request_id);
    g->req = std::move(request);
    pending_.push_back(std::move(g));
  }
  cv_.notify_one();
  return absl::OkStatus();
}

void LLMEngineImpl::Cancel(const std::string& request_id) {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (live_ids_.count(request_id) == 0) return;
    cancels_.push_back(request_id);
  }
  cv_.notify_one();
}

void LLMEngineImpl::Shutdown() {
  // Held throughout, so that a second caller (e.g. the destructor) returns only once the first
  // has joined the engine thread. Never call Shutdown from a callback (the engine thread).
  std::lock_guard<std::mutex> once(shutdown_mu_);
  {
    std::lock_guard<std::mutex> l(mu_);
    if (shut_down_) return;
    shut_down_ = true;
    stop_ = true;
  }
  cv_.notify_one();
  if (thread_.joinable()) thread_.join();
  // Release the workers. After a fatal error the group is broken (its comm aborted or about to
  // be): a Stop broadcast could not be matched, so the owner tears the group down instead.
  if (healthy_.load()) {
    absl::Status st = driver_->Stop();
    if (!st.ok()) TLOG(WARN) << "engine shutdown: stopping the workers: " << st.message();
  }
}

void LLMEngineImpl::Admit(std::unique_ptr<Group> g) {
  // Choice 0 runs the prefill; the others are forked from it at its first token (HandleRow).
  Request& first = *g->choices[0];
  first.seq_id = next_seq_id_++;
  sched_.Add(first.seq_id, g->req.prompt_ids, g->req.priority, g->req.params.prompt_logprobs >= 0);
  requests_[first.seq_id] = &first;
  groups_[g->req.request_id] = std::move(g);
}

void LLMEngineImpl::Loop() {
  for (;;) {
    if (options_.on_turn) options_.on_turn();
    std::deque<std::unique_ptr<Group>> incoming;
    std::vector<std::string> cancels;
    {
      std::unique_lock<std::mutex> l(mu_);
      // Idle: sleep until a submission, a cancellation or shutdown, waking every second to send
      // the workers a heartbeat (they wait for commands under the collective deadline).
      const bool woke = cv_.wait_for(l, std::chrono::seconds(1), [&] {
        return stop_ || !pending_.empty() || !cancels_.empty() || sched_.has_work();
      });
      if (stop_) break;
      if (!woke) {
        l.unlock();
        const absl::Status hb = driver_->Heartbeat();
        if (!hb.ok()) {
          FailEverything(absl::UnavailableError("engine heartbeat failed, the engine is down: " +
                                                std::string(hb.message())),
                         "error");
          break;
        }
        continue;
      }
      incoming.swap(pending_);
      cancels.swap(cancels_);
    }
    for (auto& g : incoming) Admit(std::move(g));
    if (!incoming.empty()) PublishStats();  // Submit's admission count sees them again
    for (const auto& rid : cancels) FinishRequest(rid, "abort", absl::OkStatus());
    if (sched_.has_work() && !RunStep()) break;
    PublishStats();
  }
  if (healthy_.load()) FailEverything(absl::OkStatus(), "abort");
  PublishStats();
}

bool LLMEngineImpl::RunStep() {
  StepPlan plan = sched_.Schedule();
  if (plan.empty()) {
    // Cannot happen while Submit rejects sequences larger than the pool; never spin if it does.
    TLOG(ERROR) << "engine: work is queued but no sequence can be scheduled (" << sched_.num_waiting()
                << " waiting, " << sched_.num_blocks_used() << " blocks used)";
    std::unique_lock<std::mutex> l(mu_);
    cv_.wait_for(l, std::chrono::milliseconds(50));
    return true;
  }
  PublishStats();  // the step in flight is what `running` and the KV usage show
  const auto t0 = Clock::now();
  for (const auto& c : plan.batch.seqs) {
    if (auto it = requests_.find(c.seq_id); it != requests_.end()) it->second->times.Scheduled(t0);
  }
  absl::StatusOr<Logits> logits = driver_->Forward(plan.batch);
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  if (!logits.ok()) {
    FailEverything(absl::UnavailableError("engine step failed, the engine is down: " +
                                          std::string(logits.status().message())),
                   "error");
    return false;
  }
  int64_t wanted = 0;
  for (const auto& c : plan.batch.seqs) {
    wanted += c.want_all_logits ? static_cast<int64_t>(c.tokens.size()) : (c.want_logits ? 1 : 0);
  }
  if (logits->rows() != wanted) {
    FailEverything(absl::InternalError("engine step returned " + std::to_string(logits->rows()) +
                                       " rows of logits for " + std::to_string(wanted) + " sequences"),
                   "error");
    return false;
  }
  {
    std::lock_guard<std::mutex> l(stats_mu_);
    ++stats_.iterations;
    stats_.preemptions = sched_.num_preemptions();
  }
  // Observers see the step before its tokens reach the clients.
  if (options_.on_step) {
    StepMetrics m;
    m.iteration = Stats().iterations;
    m.seconds = seconds;
    m.batch_tokens = plan.batch.num_tokens();
    m.prefill_tokens = plan.num_prefill_tokens;
    m.decode_tokens = plan.num_decode_tokens;
    m.num_seqs = static_cast<int32_t>(plan.batch.seqs.size());
    m.num_preempted = static_cast<int32_t>(plan.preempted.size());
    options_.on_step(m);
  }
  for (int64_t row = 0; row < logits->rows(); ++row) {
    auto it = requests_.find(logits->seq_ids[row]);
    if (it != requests_.end()) HandleRow(*it->second, *logits, row);
  }
  return true;
}

int32_t LLMEngineImpl::Draw(Request& r, const float* row_logits, int64_t vocab) {
  const bool mask = r.generated < r.req.params.min_tokens && !r.min_tokens_mask.empty();
  if (r.adjust.any() || mask || r.grammar != nullptr) {
    // The step's logits stay as the model gave them; each sequence adjusts its own copy.
    adjusted_row_.assign(row_logits, row_logits + vocab);
    AdjustLogits(adjusted_row_.data(), vocab, r.adjust, r.history);
    if (mask) MaskTokens(adjusted_row_.data(), vocab, r.min_tokens_mask);
    if (r.grammar != nullptr) r.grammar->MaskLogits(adjusted_row_.data(), vocab);
    row_logits = adjusted_row_.data();
  }
  int32_t token = SampleNextToken(row_logits, vocab, r.sampler, r.rng);
  if (r.grammar != nullptr) {
    token = r.grammar->Accept(token, row_logits, vocab, r.req.params.max_tokens - r.generated - 1);
  }
  if (r.adjust.penalties()) ++r.history.output_counts[token];
  return token;
}

void LLMEngineImpl::HandleRow(Request& r, const Logits& logits, int64_t row) {
  Group& g = *r.group;
  const SamplingParams& p = g.req.params;
  const SequenceState* seq = sched_.Find(r.seq_id);
  if (seq == nullptr) return;
  const float* row_logits = logits.row(row);
  const int32_t pos = logits.positions[row];
  const int32_t prompt_len = static_cast<int32_t>(g.req.prompt_ids.size());
  if (pos + 1 < static_cast<int32_t>(seq->tokens.size())) {
    // A row inside the sequence (want_all_logits): the logprob of the prompt token after it.
    // Rows come in position order; a prefill recomputed after a preemption repeats some.
    const int32_t next = pos + 1;
    if (p.prompt_logprobs >= 0 && next < prompt_len && next == static_cast<int32_t>(g.prompt_logprobs.size()) + 1) {
      g.prompt_logprobs.push_back(TokenLogprobOf(row_logits, logits.vocab, LogSumExp(row_logits, logits.vocab),
                                                 g.req.prompt_ids[next], p.prompt_logprobs));
    }
    return;
  }
  if (p.prompt_logprobs >= 0 && !g.prompt_logprobs_sent) {
    g.prompt_logprobs_sent = true;
    if (!g.prompt_logprobs.empty() && g.callback) {
      GenerationEvent ev;
      ev.prompt_logprobs = std::move(g.prompt_logprobs);
      g.callback(ev);
    }
    g.prompt_logprobs.clear();
  }
  // The choices that draw from this row: r, or at the prompt's end of an n > 1 request, all of
  // them (choices 1.. are forked here; their copies of the prompt's state ride with the next step).
  std::vector<Request*> drawers = {&r};
  if (g.req.n > 1 && !g.forked) {
    g.forked = true;
    for (size_t i = 1; i < g.choices.size(); ++i) drawers.push_back(g.choices[i].get());
  }
  std::vector<int32_t> tokens;
  for (Request* c : drawers) tokens.push_back(Draw(*c, row_logits, logits.vocab));
  const int64_t parent = r.seq_id;
  sched_.AppendToken(parent, tokens[0]);
  for (size_t i = 1; i < drawers.size(); ++i) {
    Request& c = *drawers[i];
    c.seq_id = next_seq_id_++;
    if (!sched_.Fork(parent, c.seq_id, tokens[i])) {
      // Cannot happen: the parent was just scheduled with its prompt computed.
      TLOG(ERROR) << "engine: cannot fork choice " << c.choice << " of " << g.req.request_id;
      c.seq_id = 0;
      continue;
    }
    requests_[c.seq_id] = &c;
  }
  // Logprobs: the model's distribution at this row (one log-sum-exp for every drawer).
  std::vector<TokenLogprob> lps;
  if (p.logprobs >= 0) {
    const double lse = LogSumExp(row_logits, logits.vocab);
    for (int32_t t : tokens) lps.push_back(TokenLogprobOf(row_logits, logits.vocab, lse, t, p.logprobs));
  }
  // The last choice to finish ends the request and frees the group: nothing touches `g` below.
  for (size_t i = 0; i < drawers.size(); ++i) {
    if (drawers[i]->seq_id != 0) {
      HandleToken(*drawers[i], tokens[i], lps.empty() ? nullptr : &lps[i]);
    } else {
      FinishChoice(*drawers[i], "error", absl::InternalError("the choice could not be forked"));
    }
  }
}

void LLMEngineImpl::HandleToken(Request& r, int32_t token, const TokenLogprob* lp) {
  ++r.generated;
  r.times.Token(Clock::now());
  {
    std::lock_guard<std::mutex> l(stats_mu_);
    ++stats_.generation_tokens_total;
    if (r.generated == 1 && r.choice == 0) stats_.prompt_tokens_total += static_cast<int64_t>(r.req.prompt_ids.size());
  }
  const SamplingParams& p = r.req.params;
  const bool stop_token = (!p.ignore_eos && Contains(eos_ids_, token)) || Contains(p.stop_token_ids, token);

  GenerationEvent ev;
  ev.choice = r.choice;
  bool stop_string = false;
  if (!stop_token) {
    ev.token_ids.push_back(token);
    if (lp != nullptr) ev.logprobs.push_back(*lp);
    if (r.decoder != nullptr) {
      const std::string piece = r.decoder->Push(token);
      ev.text_delta = r.stops != nullptr ? r.stops->Push(piece, &stop_string) : piece;
    }
  }
  std::string reason;
  if (stop_token || stop_string || (r.grammar != nullptr && r.grammar->terminated())) {
    reason = "stop";
  } else if (r.generated >= p.max_tokens) {
    reason = "length";
  }
  // At the end, whatever the decoder and the stop matcher still hold is text too (unless a stop
  // string cut it), and the tail may itself complete a stop string.
  if (!reason.empty() && !stop_string && r.decoder != nullptr) {
    const std::string tail = r.decoder->Flush();
    if (r.stops != nullptr) {
      ev.text_delta += r.stops->Push(tail, &stop_string);
      if (stop_string) {
        reason = "stop";
      } else {
        ev.text_delta += r.stops->Flush();
      }
    } else {
      ev.text_delta += tail;
    }
  }
  if ((!ev.token_ids.empty() || !ev.text_delta.empty()) && r.group->callback) r.group->callback(ev);
  if (!reason.empty()) FinishChoice(r, reason, absl::OkStatus());
}

void LLMEngineImpl::FinishChoice(Request& r, const std::string& reason, const absl::Status& error) {
  if (r.finished) return;
  r.finished = true;
  if (r.seq_id != 0) {
    requests_.erase(r.seq_id);
    sched_.Remove(r.seq_id);  // frees its blocks before the client hears that it is done
  }
  Group& g = *r.group;
  --g.open;
  g.completion_tokens += r.generated;
  if (options_.on_finish) {
    options_.on_finish(MeasureRequest(r.times, Clock::now(), reason, static_cast<int64_t>(g.req.prompt_ids.size()),
                                      r.generated));
  }
  GenerationEvent ev;
  ev.choice = r.choice;
  ev.choice_finished = true;
  ev.finish_reason = reason;
  ev.error = error;
  std::unique_ptr<Group> done;  // the request's last choice: the group goes with this event
  if (g.open == 0) {
    ev.finished = true;
    ev.prompt_tokens = static_cast<int64_t>(g.req.prompt_ids.size());
    ev.completion_tokens = g.completion_tokens;
    auto it = groups_.find(g.req.request_id);
    done = std::move(it->second);
    groups_.erase(it);
    std::lock_guard<std::mutex> l(mu_);
    live_ids_.erase(g.req.request_id);
  }
  PublishStats();
  if (g.callback) g.callback(ev);
}

void LLMEngineImpl::FinishRequest(const std::string& request_id, const std::string& reason, const absl::Status& error) {
  auto it = groups_.find(request_id);
  if (it == groups_.end()) return;
  std::vector<Request*> open;
  for (auto& c : it->second->choices) {
    if (!c->finished) open.push_back(c.get());
  }
  // In choice order; the last call ends the request (and frees what `open` points into).
  for (Request* c : open) FinishChoice(*c, reason, error);
}

void LLMEngineImpl::FailEverything(const absl::Status& error, const std::string& reason) {
  std::deque<std::unique_ptr<Group>> pending;
  {
    std::lock_guard<std::mutex> l(mu_);
    if (!error.ok()) {
      fatal_ = error;
      healthy_.store(false);
      TLOG(ERROR) << "engine: " << error.message() << "; failing " << (requests_.size() + pending_.size())
                  << " requests";
    }
    pending.swap(pending_);
    cancels_.clear();
  }
  for (auto& g : pending) Admit(std::move(g));
  // In submission order (choice 0's sequence ids grow with it).
  std::vector<std::pair<int64_t, std::string>> order;
  for (const auto& [rid, g] : groups_) order.emplace_back(g->choices[0]->seq_id, rid);
  std::sort(order.begin(), order.end());
  for (const auto& [seq, rid] : order) FinishRequest(rid, reason, error);
}

void LLMEngineImpl::PublishStats() {
  scheduler_waiting_.store(sched_.num_waiting());
  scheduler_running_.store(sched_.num_running());
  std::lock_guard<std::mutex> l(stats_mu_);
  stats_.running = sched_.num_running();
  stats_.waiting = sched_.num_waiting();
  stats_.kv_blocks_used = sched_.num_blocks_used();
  stats_.state_slots_used = sched_.num_state_slots_used();
  stats_.preemptions = sched_.num_preemptions();
}

}  // namespace

absl::StatusOr<std::unique_ptr<LLMEngine>> LLMEngine::Create(StepDriver* driver, const Tokenizer* tokenizer,
                                                             const EngineOptions& options) {
  if (driver == nullptr) return absl::InvalidArgumentError("LLMEngine needs a step driver");
  if (options.block_size < 1 || options.max_num_seqs < 1 || options.max_num_batched_tokens < 1 ||
      options.max_model_len < 1 || options.max_waiting < 0) {
    return absl::InvalidArgumentError(
        "engine options: block_size, max_num_seqs, max_num_batched_tokens and max_model_len must be >= 1");
  }
  if (options.kv_tokens <= 0) {
    RETURN_IF_ERROR(ResolveMemoryFraction(options.backend, options.memory_fraction).status());
  }
  ASSIGN_OR_RETURN(const KvPoolSize pool, KvPoolBlocks(options, driver->model()));
  const int32_t blocks = pool.blocks;
  // Models with per-sequence state (the hybrids) get their slots beside the KV blocks; the
  // scheduler hands one to each running sequence and takes it back when it ends or is preempted.
  RETURN_IF_ERROR(driver->AllocateKvCache(blocks, options.block_size, pool.state_slots));
  const int64_t tokens = pool.tokens;
  TLOG(INFO) << DescribeKvPool(pool, options.block_size);
  if (tokens < options.max_model_len) {
    TLOG(WARN) << "KV pool of " << tokens << " tokens is smaller than max_model_len " << options.max_model_len
               << ": longer requests are refused";
  }
  if (pool.state_slots > 0 && pool.state_slots < options.max_num_seqs) {
    TLOG(WARN) << "only " << pool.state_slots << " state slots fit (max_num_seqs " << options.max_num_seqs
               << "): at most " << pool.state_slots << " requests run at once";
  }
  auto engine = std::make_unique<LLMEngineImpl>(driver, tokenizer, options, blocks, pool.state_slots);
  engine->Start();
  return std::unique_ptr<LLMEngine>(std::move(engine));
}

}  // namespace tandem::engine
