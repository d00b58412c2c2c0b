// What every backend checks before loading (engine/load_checks.h): the model and layer types,
// the tensor-parallel split (named by the backend) and the comm against rank and world.
#include "engine/load_checks.h"

#include <gtest/gtest.h>

#include "engine/comm/comm.h"
#include "tests/common/null_comm.h"
#include "tests/engine/model/tiny_config.h"

namespace tandem::engine {
namespace {

void ExpectError(const absl::Status& st, absl::StatusCode code, const std::string& want) {
  EXPECT_EQ(st.code(), code) << st;
  EXPECT_NE(std::string(st.message()).find(want), std::string::npos) << st.message();
}

TEST(CheckModelSupported, ModelAndLayerTypesNameTheBackend) {
  EXPECT_TRUE(CheckModelSupported(testing::TinyMoeConfig(), 2, "cpu").ok());
  ModelConfig next = testing::TinyMoeConfig();
  next.model_type = "qwen3_next";
  ExpectError(CheckModelSupported(next, 1, "cuda"), absl::StatusCode::kUnimplemented,
              "model_type qwen3_next is not supported by the cuda backend yet");
  ModelConfig hybrid = testing::TinyMoeConfig();
  hybrid.layer_types = {"full_attention", "linear_attention"};
  ExpectError(CheckModelSupported(hybrid, 1, "cpu"), absl::StatusCode::kUnimplemented,
              "layer type linear_attention is not supported by the cpu backend yet");
}

TEST(CheckModelSupported, QuantizedWeightsOnlyWhereTheBackendComputesThem) {
  ModelConfig c = testing::TinyMoeConfig();
  c.quant_method = "fp8";
  c.weight_block_out = c.weight_block_in = 128;
  EXPECT_TRUE(CheckModelSupported(c, 2, "cpu", /*hybrid=*/true, /*fp8=*/true).ok());
  ExpectError(CheckModelSupported(c, 1, "cuda", /*hybrid=*/true), absl::StatusCode::kUnimplemented,
              "quant_method fp8 (quantized weights) is not supported by the cuda backend yet");
  c.quant_method = "modelopt";
  ExpectError(CheckModelSupported(c, 1, "cpu", /*hybrid=*/true, /*fp8=*/true), absl::StatusCode::kUnimplemented,
              "quant_method modelopt");
  EXPECT_TRUE(CheckModelSupported(c, 2, "cpu", /*hybrid=*/true, /*fp8=*/true, /*nvfp4=*/true).ok());
  ExpectError(CheckModelSupported(c, 1, "cuda", /*hybrid=*/true), absl::StatusCode::kUnimplemented,
              "quant_method modelopt (quantized weights) is not supported by the cuda backend yet");
  c.quant_method = "fp8";
  ExpectError(CheckModelSupported(c, 1, "cpu", /*hybrid=*/true, /*fp8=*/false, /*nvfp4=*/true),
              absl::StatusCode::kUnimplemented, "quant_method fp8");
}

TEST(CheckModelSupported, HybridModelsWhereTheBackendHasTheirLayers) {
  ModelConfig c = testing::TinyMoeConfig();
  c.model_type = "qwen3_5_moe_text";
  c.layer_types = {"linear_attention", "linear_attention", "linear_attention", "full_attention"};
  c.linear_num_key_heads = 4;
  c.linear_num_value_heads = 8;
  c.linear_key_head_dim = c.linear_value_head_dim = 32;
  c.shared_expert_intermediate_size = 64;
  for (int w : {1, 2, 4}) EXPECT_TRUE(CheckModelSupported(c, w, "cpu", true).ok()) << w;
  ExpectError(CheckModelSupported(c, 1, "cuda"), absl::StatusCode::kUnimplemented,
              "model_type qwen3_5_moe_text is not supported by the cuda backend yet");
  ExpectError(CheckModelSupported(c, 8, "cpu", true), absl::StatusCode::kInvalidArgument,
              "linear_num_key_heads (4) is not divisible by the tensor-parallel size 8");
  c.linear_num_value_heads = 6;
  ExpectError(CheckModelSupported(c, 1, "cpu", true), absl::StatusCode::kInvalidArgument,
              "linear_num_value_heads 6 is not a multiple of linear_num_key_heads 4");
  c.linear_num_value_heads = 8;
  c.layer_types[1] = "sliding_attention";
  ExpectError(CheckModelSupported(c, 1, "cpu", true), absl::StatusCode::kUnimplemented,
              "layer type sliding_attention is not supported by the cpu backend yet");
}

TEST(CheckModelSupported, SplitAndRouting) {
  ExpectError(CheckModelSupported(testing::TinyMoeConfig(), 3, "cpu"), absl::StatusCode::kInvalidArgument,
              "num_attention_heads (8) is not divisible by the tensor-parallel size 3");
  ModelConfig k = testing::TinyMoeConfig();
  k.num_experts_per_tok = 17;
  ExpectError(CheckModelSupported(k, 1, "cpu"), absl::StatusCode::kInvalidArgument,
              "num_experts_per_tok 17 must be in [1, num_experts=16]");
  k.mlp_only_layers = {0, 1, 2, 3};  // no MoE layer: the routing is not used
  EXPECT_TRUE(CheckModelSupported(k, 1, "cpu").ok());
}

TEST(CheckComm, ComesWithTheRankAndWorldItClaims) {
  ModelLoadOptions o;
  EXPECT_TRUE(CheckComm(o).ok());  // one rank, no comm
  o.world = 2;
  ExpectError(CheckComm(o), absl::StatusCode::kInvalidArgument, "tensor-parallel size 2 needs a comm");
  tandem::testing::NullComm comm(1, 2);
  o.comm = &comm;
  o.rank = 0;
  ExpectError(CheckComm(o), absl::StatusCode::kInvalidArgument, "comm is rank 1 of 2, options say rank 0 of 2");
  o.rank = 1;
  EXPECT_TRUE(CheckComm(o).ok());
}

}  // namespace
}  // namespace tandem::engine
