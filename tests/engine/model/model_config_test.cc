// config.json parsing: the three tiny reference configs, both spellings, wrappers, errors.
#include "engine/model/model_config.h"

#include <algorithm>

#include <gtest/gtest.h>

#include "nlohmann/json.hpp"
#include "tests/engine/model/test_util.h"

namespace tandem::engine {
namespace {

using nlohmann::json;
using testing::Msg;
using testing::TempDir;
using testing::TestData;
using testing::WriteAll;

TEST(ModelConfig, TinyQwen3Moe) {
  auto c = LoadModelConfig(TestData("qwen3moe-tiny"));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->model_type, "qwen3_moe");
  EXPECT_EQ(c->architecture, "Qwen3MoeForCausalLM");
  EXPECT_EQ(c->num_hidden_layers, 4);
  EXPECT_EQ(c->hidden_size, 128);
  EXPECT_EQ(c->num_attention_heads, 8);
  EXPECT_EQ(c->num_key_value_heads, 4);
  EXPECT_EQ(c->head_dim, 32);
  EXPECT_EQ(c->num_experts, 16);
  EXPECT_EQ(c->num_experts_per_tok, 4);
  EXPECT_EQ(c->vocab_size, 4096);
  EXPECT_EQ(c->moe_intermediate_size, 64);
  EXPECT_EQ(c->intermediate_size, 256);
  EXPECT_EQ(c->rope_theta, 1000000.0);  // from rope_parameters
  EXPECT_EQ(c->rms_norm_eps, 1e-6);
  EXPECT_TRUE(c->norm_topk_prob);
  EXPECT_FALSE(c->tie_word_embeddings);
  EXPECT_EQ(c->decoder_sparse_step, 1);
  EXPECT_TRUE(c->mlp_only_layers.empty());
  EXPECT_TRUE(c->eos_token_ids.empty());  // null in config.json
  EXPECT_EQ(c->bos_token_id, -1);
  EXPECT_EQ(c->torch_dtype, "bfloat16");
  EXPECT_EQ(c->max_position_embeddings, 4096);
  EXPECT_EQ(c->RotaryDim(), 32);
  EXPECT_FALSE(c->IsHybrid());
  EXPECT_FALSE(c->attention_output_gate);
  EXPECT_FALSE(c->zero_centered_norms);
  EXPECT_TRUE(c->wrapper_model_type.empty());
  for (int l = 0; l < 4; ++l) {
    EXPECT_FALSE(c->IsLinearAttentionLayer(l));
    EXPECT_TRUE(c->IsMoeLayer(l));
    EXPECT_TRUE(c->IsFullAttentionLayer(l));
  }
  std::printf("  qwen3moe-tiny: layers %lld hidden %lld heads %lld/%lld head_dim %lld experts %lld "
              "top-%lld vocab %lld theta %g\n",
              (long long)c->num_hidden_layers, (long long)c->hidden_size,
              (long long)c->num_attention_heads, (long long)c->num_key_value_heads,
              (long long)c->head_dim, (long long)c->num_experts, (long long)c->num_experts_per_tok,
              (long long)c->vocab_size, c->rope_theta);
}

void ExpectTinyHybrid(const ModelConfig& c) {
  EXPECT_TRUE(c.IsHybrid());
  EXPECT_EQ(c.layer_types, (std::vector<std::string>{"linear_attention", "linear_attention",
                                                     "linear_attention", "full_attention"}));
  EXPECT_FALSE(c.IsFullAttentionLayer(0));
  EXPECT_TRUE(c.IsFullAttentionLayer(3));
  EXPECT_EQ(c.partial_rotary_factor, 0.25);
  EXPECT_EQ(c.RotaryDim(), 8);
  EXPECT_EQ(c.rope_theta, 10000.0);
  EXPECT_EQ(c.num_key_value_heads, 2);
  EXPECT_EQ(c.num_experts, 16);
  EXPECT_EQ(c.shared_expert_intermediate_size, 64);
  EXPECT_EQ(c.linear_num_key_heads, 4);
  EXPECT_EQ(c.linear_num_value_heads, 8);
  EXPECT_EQ(c.linear_key_head_dim, 32);
  EXPECT_EQ(c.linear_value_head_dim, 32);
  EXPECT_EQ(c.linear_conv_kernel_dim, 4);
  for (int l = 0; l < 4; ++l) EXPECT_TRUE(c.IsMoeLayer(l));
  EXPECT_TRUE(c.IsLinearAttentionLayer(0));
  EXPECT_FALSE(c.IsLinearAttentionLayer(3));
  EXPECT_EQ(c.LinearKeyDim(), 128);
  EXPECT_EQ(c.LinearValueDim(), 256);
  EXPECT_EQ(c.LinearConvDim(), 512);  // conv1d.weight [512, 1, 4] in both fixtures
  EXPECT_TRUE(c.attention_output_gate);
  EXPECT_TRUE(c.zero_centered_norms);
  EXPECT_EQ(c.mtp_num_hidden_layers, 0);
  EXPECT_EQ(c.hidden_act, "silu");
  EXPECT_EQ(c.rope_type, "default");
}

TEST(ModelConfig, TinyHybrids) {
  auto q35 = LoadModelConfig(TestData("qwen35moe-tiny"));
  ASSERT_TRUE(q35.ok()) << q35.status();
  EXPECT_EQ(q35->model_type, "qwen3_5_moe_text");
  ExpectTinyHybrid(*q35);
  auto next = LoadModelConfig(TestData("qwen3next-tiny"));
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(next->model_type, "qwen3_next");
  EXPECT_EQ(next->intermediate_size, 256);
  ExpectTinyHybrid(*next);
}

json MinimalQwen3Moe() {
  return json{{"model_type", "qwen3_moe"}, {"vocab_size", 1000}, {"hidden_size", 64},
              {"num_hidden_layers", 2},     {"num_attention_heads", 4},
              {"num_key_value_heads", 2},   {"num_experts", 8},
              {"num_experts_per_tok", 2},   {"moe_intermediate_size", 32}};
}

TEST(ModelConfig, OlderSpellingsAndDefaults) {
  json j = MinimalQwen3Moe();
  j.erase("num_experts");
  j["num_local_experts"] = 8;
  j["rope_theta"] = 5e5;
  j["eos_token_id"] = 151645;
  j["bos_token_id"] = 151643;
  j["torch_dtype"] = "bfloat16";
  j["tie_word_embeddings"] = true;
  auto c = ParseModelConfig(j.dump(), "x/config.json");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->num_experts, 8);
  EXPECT_EQ(c->rope_theta, 5e5);
  EXPECT_EQ(c->head_dim, 16);  // hidden / heads
  EXPECT_EQ(c->eos_token_ids, (std::vector<int64_t>{151645}));
  EXPECT_EQ(c->bos_token_id, 151643);
  EXPECT_EQ(c->torch_dtype, "bfloat16");
  EXPECT_TRUE(c->tie_word_embeddings);
  EXPECT_EQ(c->rope_type, "default");

  j["eos_token_id"] = {151645, 151643};
  j["mlp_only_layers"] = {0};
  j["intermediate_size"] = 128;
  c = ParseModelConfig(j.dump(), "x/config.json");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->eos_token_ids, (std::vector<int64_t>{151645, 151643}));
  EXPECT_FALSE(c->IsMoeLayer(0));
  EXPECT_TRUE(c->IsMoeLayer(1));

  // decoder_sparse_step 2: only odd layers (1, 3, ...) are MoE.
  j["mlp_only_layers"] = json::array();
  j["decoder_sparse_step"] = 2;
  c = ParseModelConfig(j.dump(), "x/config.json");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_FALSE(c->IsMoeLayer(0));
  EXPECT_TRUE(c->IsMoeLayer(1));
}

TEST(ModelConfig, GenerationConfigEosMerged) {
  TempDir dir;
  json j = MinimalQwen3Moe();
  j["eos_token_id"] = 151643;
  WriteAll(dir / "config.json", j.dump());
  WriteAll(dir / "generation_config.json",
           json{{"eos_token_id", {151645, 151643}}, {"bos_token_id", 151643}}.dump());
  auto c = LoadModelConfig(dir.path());
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->eos_token_ids, (std::vector<int64_t>{151643, 151645}));
  EXPECT_EQ(c->bos_token_id, 151643);
  WriteAll(dir / "generation_config.json", "{nope");
  auto bad = LoadModelConfig(dir.path());
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(Msg(bad.status()).find("generation_config.json"), std::string::npos);
}

TEST(ModelConfig, MultimodalWrapperReadsTextConfig) {
  json text = {{"model_type", "qwen3_5_moe_text"}, {"vocab_size", 4096},
               {"hidden_size", 128},               {"num_hidden_layers", 8},
               {"num_attention_heads", 8},         {"num_key_value_heads", 2},
               {"head_dim", 32},                   {"num_experts", 16},
               {"num_experts_per_tok", 4},         {"moe_intermediate_size", 64},
               {"shared_expert_intermediate_size", 64},
               {"linear_num_key_heads", 4},        {"linear_num_value_heads", 8},
               {"linear_key_head_dim", 32},        {"linear_value_head_dim", 32},
               {"linear_conv_kernel_dim", 4},      {"eos_token_id", 248044},
               {"mtp_num_hidden_layers", 1},       {"attn_output_gate", true},
               {"rope_parameters", {{"rope_theta", 1e7}, {"partial_rotary_factor", 0.25},
                                    {"rope_type", "default"}}}};
  json wrapper = {{"model_type", "qwen3_5_moe"},
                  {"architectures", {"Qwen3_5MoeForConditionalGeneration"}},
                  {"tie_word_embeddings", false},
                  {"vision_config", {{"hidden_size", 1152}}},
                  {"text_config", text}};
  auto c = ParseModelConfig(wrapper.dump(), "mm/config.json");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->model_type, "qwen3_5_moe_text");
  EXPECT_EQ(c->wrapper_model_type, "qwen3_5_moe");
  EXPECT_TRUE(c->attention_output_gate);
  EXPECT_EQ(c->mtp_num_hidden_layers, 1);
  EXPECT_EQ(c->architecture, "Qwen3_5MoeForConditionalGeneration");
  EXPECT_EQ(c->hidden_size, 128);
  EXPECT_EQ(c->rope_theta, 1e7);
  EXPECT_EQ(c->eos_token_ids, (std::vector<int64_t>{248044}));
  // No layer_types: every 4th layer is full attention.
  ASSERT_EQ(c->layer_types.size(), 8u);
  EXPECT_EQ(c->layer_types[3], "full_attention");
  EXPECT_EQ(c->layer_types[7], "full_attention");
  EXPECT_EQ(c->layer_types[4], "linear_attention");

  wrapper["text_config"].erase("hidden_size");
  auto missing = ParseModelConfig(wrapper.dump(), "mm/config.json");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(Msg(missing.status()), "mm/config.json: missing required key 'text_config.hidden_size'");
}

TEST(ModelConfig, ErrorsNameKeyAndFile) {
  struct Case {
    const char* what;
    std::function<void(json&)> edit;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {"unsupported architecture", [](json& j) { j["model_type"] = "llama"; },
       "m/config.json: unsupported architecture: model_type 'llama' (supported: qwen3_moe, "
       "qwen3_next, qwen3_5_moe, qwen3_5_moe_text)"},
      {"missing model_type", [](json& j) { j.erase("model_type"); },
       "m/config.json: missing required key 'model_type'"},
      {"missing hidden_size", [](json& j) { j.erase("hidden_size"); },
       "m/config.json: missing required key 'hidden_size'"},
      {"missing experts", [](json& j) { j.erase("num_experts"); },
       "m/config.json: missing required key 'num_experts' (or 'num_local_experts')"},
      {"string heads", [](json& j) { j["num_attention_heads"] = "4"; },
       "m/config.json: key 'num_attention_heads': expected an integer, found \"4\""},
      {"zero layers", [](json& j) { j["num_hidden_layers"] = 0; },
       "m/config.json: key 'num_hidden_layers': value 0 out of range"},
      {"kv does not divide", [](json& j) { j["num_key_value_heads"] = 3; },
       "m/config.json: key 'num_key_value_heads': 3 does not divide num_attention_heads 4"},
      {"top-k > experts", [](json& j) { j["num_experts_per_tok"] = 9; },
       "m/config.json: key 'num_experts_per_tok': 9 exceeds the number of experts 8"},
      {"spellings disagree", [](json& j) { j["num_local_experts"] = 4; },
       "m/config.json: key 'num_local_experts': 4 disagrees with num_experts 8"},
      {"dense layer without size", [](json& j) { j["mlp_only_layers"] = {1}; },
       "m/config.json: missing required key 'intermediate_size'"},
      {"bad layer type", [](json& j) { j["layer_types"] = {"full_attention", "sliding"}; },
       "m/config.json: key 'layer_types': unknown layer type 'sliding'"},
      {"hybrid without linear keys", [](json& j) { j["model_type"] = "qwen3_next"; },
       "m/config.json: missing required key 'linear_num_key_heads'"},
      {"bad rope", [](json& j) { j["rope_parameters"] = {{"rope_theta", "big"}}; },
       "m/config.json: key 'rope_parameters.rope_theta': expected a number"},
      {"gate on qwen3_moe", [](json& j) { j["attn_output_gate"] = true; },
       "m/config.json: key 'attn_output_gate': true is supported only for the hybrid models"},
      {"activation", [](json& j) { j["hidden_act"] = "gelu"; },
       "m/config.json: key 'hidden_act': unsupported value 'gelu' (supported: silu)"},
      {"rope type", [](json& j) { j["rope_parameters"] = {{"rope_type", "yarn"}}; },
       "m/config.json: key 'rope_parameters.rope_type': unsupported value 'yarn'"},
      {"old rope scaling", [](json& j) { j["rope_scaling"] = {{"type", "linear"}}; },
       "m/config.json: key 'rope_scaling.type': unsupported value 'linear'"},
      {"not an object", [](json& j) { j = json::array(); }, "m/config.json: expected a JSON object"},
  };
  for (const auto& c : cases) {
    json j = MinimalQwen3Moe();
    c.edit(j);
    auto got = ParseModelConfig(j.dump(), "m/config.json");
    ASSERT_FALSE(got.ok()) << c.what;
    EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument) << c.what;
    EXPECT_EQ(Msg(got.status()).rfind(c.expected, 0), 0u)
        << c.what << ": got '" << got.status().message() << "'";
    std::printf("  %-26s -> %s\n", c.what, Msg(got.status()).c_str());
  }
  auto junk = ParseModelConfig("{\"model_type\": ", "m/config.json");
  ASSERT_FALSE(junk.ok());
  EXPECT_EQ(Msg(junk.status()).rfind("m/config.json: malformed JSON", 0), 0u);
  TempDir empty;
  auto none = LoadModelConfig(empty.path());
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(Msg(none.status()).find("config.json"), std::string::npos);
}


// The published configs of the models the operators run (their text fields as on the hub):
// Qwen3-Next-80B-A3B (top-level rope keys, no layer_types) and Qwen3.5-35B-A3B (multimodal
// wrapper, mrope keys in rope_parameters that text-only serving ignores, attn_output_gate, mtp).
TEST(ModelConfig, PublishedHybridConfigs) {
  const char* next = R"({"architectures": ["Qwen3NextForCausalLM"], "attention_bias": false,
    "bos_token_id": 151643, "decoder_sparse_step": 1, "eos_token_id": 151645,
    "full_attention_interval": 4, "head_dim": 256, "hidden_act": "silu", "hidden_size": 2048,
    "intermediate_size": 5120, "linear_conv_kernel_dim": 4, "linear_key_head_dim": 128,
    "linear_num_key_heads": 16, "linear_num_value_heads": 32, "linear_value_head_dim": 128,
    "max_position_embeddings": 262144, "mlp_only_layers": [], "model_type": "qwen3_next",
    "moe_intermediate_size": 512, "norm_topk_prob": true, "num_attention_heads": 16,
    "num_experts": 512, "num_experts_per_tok": 10, "num_hidden_layers": 48,
    "num_key_value_heads": 2, "partial_rotary_factor": 0.25, "rms_norm_eps": 1e-06,
    "rope_scaling": null, "rope_theta": 10000000, "shared_expert_intermediate_size": 512,
    "tie_word_embeddings": false, "torch_dtype": "bfloat16", "vocab_size": 151936})";
  auto n = ParseModelConfig(next, "next/config.json");
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(n->layer_types.size(), 48u);
  EXPECT_TRUE(n->IsLinearAttentionLayer(0));
  EXPECT_TRUE(n->IsFullAttentionLayer(47));
  EXPECT_EQ(n->RotaryDim(), 64);
  EXPECT_EQ(n->rope_theta, 1e7);
  EXPECT_EQ(n->LinearConvDim(), 8192);
  EXPECT_TRUE(n->attention_output_gate);
  EXPECT_EQ(n->eos_token_ids, (std::vector<int64_t>{151645}));

  json text = {{"attn_output_gate", true}, {"dtype", "bfloat16"}, {"eos_token_id", 248044},
               {"full_attention_interval", 4}, {"head_dim", 256}, {"hidden_act", "silu"},
               {"hidden_size", 2048}, {"linear_conv_kernel_dim", 4}, {"linear_key_head_dim", 128},
               {"linear_num_key_heads", 16}, {"linear_num_value_heads", 32},
               {"linear_value_head_dim", 128}, {"max_position_embeddings", 262144},
               {"mlp_only_layers", json::array()}, {"model_type", "qwen3_5_moe_text"},
               {"moe_intermediate_size", 512}, {"mtp_num_hidden_layers", 1},
               {"mtp_use_dedicated_embeddings", false}, {"num_attention_heads", 16},
               {"num_experts", 256}, {"num_experts_per_tok", 8}, {"num_hidden_layers", 40},
               {"num_key_value_heads", 2}, {"rms_norm_eps", 1e-6},
               {"shared_expert_intermediate_size", 512}, {"vocab_size", 248320},
               {"rope_parameters", {{"mrope_interleaved", true}, {"mrope_section", {11, 11, 10}},
                                    {"rope_type", "default"}, {"rope_theta", 10000000},
                                    {"partial_rotary_factor", 0.25}}}};
  json layer_types = json::array();
  for (int l = 0; l < 40; ++l) layer_types.push_back(l % 4 == 3 ? "full_attention" : "linear_attention");
  text["layer_types"] = layer_types;
  const json wrapper = {{"architectures", {"Qwen3_5MoeForConditionalGeneration"}},
                        {"image_token_id", 248056}, {"model_type", "qwen3_5_moe"},
                        {"text_config", text}, {"tie_word_embeddings", false},
                        {"vision_config", {{"depth", 27}, {"hidden_size", 1152}}}};
  auto q = ParseModelConfig(wrapper.dump(), "q35/config.json");
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_EQ(q->wrapper_model_type, "qwen3_5_moe");
  EXPECT_EQ(q->num_experts, 256);
  EXPECT_EQ(q->mtp_num_hidden_layers, 1);
  EXPECT_EQ(q->RotaryDim(), 64);
  EXPECT_TRUE(q->IsFullAttentionLayer(39));
  EXPECT_FALSE(q->tie_word_embeddings);
  for (int l = 0; l < 40; ++l) EXPECT_TRUE(q->IsMoeLayer(l));
  std::printf("  Qwen3.5-35B-A3B: %lld layers (%lld full attention), %lld experts top-%lld, shared %lld\n",
              (long long)q->num_hidden_layers, (long long)std::count(q->layer_types.begin(), q->layer_types.end(), "full_attention"),
              (long long)q->num_experts, (long long)q->num_experts_per_tok, (long long)q->shared_expert_intermediate_size);
  // A wrong entry in the published list is refused naming it.
  json bad = wrapper;
  bad["text_config"]["layer_types"][5] = "mamba";
  auto refused = ParseModelConfig(bad.dump(), "q35/config.json");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(Msg(refused.status()).rfind("q35/config.json: key 'text_config.layer_types': unknown layer type 'mamba'", 0), 0u)
      << refused.status();
}

TEST(ModelConfig, BlockScaledFp8) {
  auto c = LoadModelConfig(TestData("qwen3moe-fp8-tiny"));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->quant_method, "fp8");
  EXPECT_EQ(c->weight_block_out, 32);
  EXPECT_EQ(c->weight_block_in, 32);
  auto plain = LoadModelConfig(TestData("qwen3moe-tiny"));
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(plain->quant_method, "");
  EXPECT_EQ(plain->weight_block_out, 0);
}

TEST(ModelConfig, Nvfp4) {
  auto c = LoadModelConfig(TestData("qwen3moe-nvfp4-tiny"));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->quant_method, "modelopt");
  EXPECT_EQ(c->quant_algo, "NVFP4");
  EXPECT_EQ(c->quant_group_size, 16);
  EXPECT_EQ(c->weight_block_out, 0);
}

// Unknown methods, formats, ModelOpt algos and group sizes are refused naming them.
TEST(ModelConfig, QuantizationRefusals) {
  const json base = json::parse(testing::ReadTextFile(TestData("qwen3moe-fp8-tiny/config.json")));
  auto parse = [&](const json& quant) {
    json j = base;
    j["quantization_config"] = quant;
    return ParseModelConfig(j.dump(), "config.json");
  };
  auto unknown = parse({{"quant_method", "gptq"}, {"bits", 4}});
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(Msg(unknown.status()).find("unknown quantization method 'gptq'"), std::string::npos) << unknown.status();
  auto nvfp4 = parse({{"quant_method", "modelopt"}, {"quant_algo", "NVFP4"}, {"group_size", 16}});
  ASSERT_TRUE(nvfp4.ok()) << nvfp4.status();
  EXPECT_EQ(nvfp4->quant_algo, "NVFP4");
  auto w4a8 = parse({{"quant_method", "modelopt"}, {"quant_algo", "W4A8_AWQ"}, {"group_size", 128}});
  EXPECT_EQ(w4a8.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(Msg(w4a8.status()).find("quant_algo 'W4A8_AWQ' is not supported (supported: NVFP4)"), std::string::npos)
      << w4a8.status();
  auto group32 = parse({{"quant_method", "modelopt"}, {"quant_algo", "NVFP4"}, {"group_size", 32}});
  EXPECT_EQ(group32.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(Msg(group32.status()).find("quantization_config.group_size': expected 16 for NVFP4, found 32"),
            std::string::npos) << group32.status();
  auto no_algo = parse({{"quant_method", "modelopt"}, {"group_size", 16}});
  EXPECT_NE(Msg(no_algo.status()).find("quantization_config.quant_algo"), std::string::npos) << no_algo.status();
  auto e5m2 = parse({{"quant_method", "fp8"}, {"fmt", "e5m2"}, {"weight_block_size", {128, 128}}});
  EXPECT_NE(Msg(e5m2.status()).find("quantization_config.fmt"), std::string::npos) << e5m2.status();
  for (const json& block : {json(), json::array({128}), json::array({0, 128}), json::array({128, "x"})}) {
    json q = {{"quant_method", "fp8"}, {"fmt", "e4m3"}};
    if (!block.is_null()) q["weight_block_size"] = block;
    auto bad = parse(q);
    EXPECT_NE(Msg(bad.status()).find("quantization_config.weight_block_size"), std::string::npos) << bad.status();
  }
  auto ok = parse({{"quant_method", "fp8"}, {"weight_block_size", {128, 64}}});
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->weight_block_out, 128);
  EXPECT_EQ(ok->weight_block_in, 64);
}

}  // namespace
}  // namespace tandem::engine
