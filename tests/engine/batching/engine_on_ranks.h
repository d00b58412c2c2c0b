// Helper of the LLMEngine tests on a real backend (options.backend: cpu, or cuda with every rank on
// the current GPU): loads a model folder on `tp` ranks
// (threads, each talking through a TimedComm as the server does to export all-reduce times);
// rank 0 builds an engine and runs the test's body, the other ranks serve steps until the engine
// shuts down.
#pragma once

#include <functional>
#include <string>

#include <gtest/gtest.h>

#include "common/status.h"
#include "engine/batching/llm_engine.h"
#include "engine/batching/timed_comm.h"
#include "engine/comm/rank_threads.h"
#include "engine/model.h"
#include "engine/step_driver.h"

namespace tandem::engine::testing {

// `after` (optional) runs on rank 0 once the engine has shut down, with rank 0's TimedComm and the
// number of steps the engine ran.
inline void WithEngineOn(const std::string& model_dir, int tp, const EngineOptions& options,
                         const tokenizer::Tokenizer* tok, const std::function<void(LLMEngine&)>& body,
                         const std::function<void(const TimedComm&, int64_t)>& after = {}) {
  absl::Status st = RunRanksAsThreads(tp, [&](Comm& comm) -> absl::Status {
    ModelLoadOptions mo;
    mo.backend = options.backend;
    mo.rank = comm.rank();
    mo.world = comm.world_size();
    mo.threads = 1;
    TimedComm timed(&comm);
    mo.comm = &timed;
    ASSIGN_OR_RETURN(auto model, Model::Load(model_dir, mo));
    if (comm.rank() != 0) return RunWorkerLoop(*model, timed);
    StepDriver driver(model.get(), &timed);
    ASSIGN_OR_RETURN(auto engine, LLMEngine::Create(&driver, tok, options));
    body(*engine);
    const int64_t steps = engine->Stats().iterations;
    engine->Shutdown();
    if (after) after(timed, steps);
    return absl::OkStatus();
  });
  ASSERT_TRUE(st.ok()) << st;
}

}  // namespace tandem::engine::testing
