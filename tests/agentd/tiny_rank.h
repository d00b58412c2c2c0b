// Requests for an in-process rank of the tiny test model (tests/data/qwen3moe-tiny, cpu): its load,
// and the join of a group of one (the head alone), for the EngineHost and ControlService tests.
#pragma once

#include <cstdint>

#include "tandem/v1/agent.pb.h"
#include "tests/common/test_util.h"

namespace tandem::agentd {

// A cpu load of the tiny model as `rank` of `world`, one thread.
inline v1::LoadModelRequest TinyLoad(uint32_t rank, uint32_t world) {
  v1::LoadModelRequest l;
  l.set_model_path(testing::CanonicalTestdataDir() + "/qwen3moe-tiny");
  l.set_backend("cpu");
  l.set_rank(rank);
  l.set_world_size(world);
  l.set_threads(1);
  return l;
}

// JoinGroup of `generation` as a group of one: the API on a free loopback port, a KV pool and a
// model length of 4096 tokens (room for long probes).
inline v1::JoinGroupRequest SoloJoin(uint64_t generation) {
  v1::JoinGroupRequest j;
  j.set_generation(generation);
  j.set_world_size(1);
  j.set_api_listen("127.0.0.1:0");
  j.set_kv_tokens(4096);
  j.set_max_model_len(4096);
  return j;
}

}  // namespace tandem::agentd
