#include "infer/make_model.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <vector>

#include "common/status.h"
#include "engine/model/safetensors.h"
#include "nlohmann/json.hpp"

namespace tandem::infer {

using engine::DType;
using engine::NamedTensorData;
using engine::WriteSafetensors;
namespace fs = std::filesystem;

namespace {

// A bf16 tensor of N(0, std) values (std = 0.02, the initializer range of Qwen3 configs).
NamedTensorData RandomTensor(const std::string& name, std::vector<int64_t> shape, float stddev,
                             std::mt19937_64& rng) {
  NamedTensorData t;
  t.name = name;
  t.dtype = DType::kBF16;
  t.shape = std::move(shape);
  int64_t n = 1;
  for (int64_t d : t.shape) n *= d;
  std::normal_distribution<float> dist(0.0f, stddev);
  t.floats.resize(n);
  for (auto& v : t.floats) v = dist(rng);
  return t;
}

// RMSNorm weights start at one.
NamedTensorData Ones(const std::string& name, int64_t n) {
  NamedTensorData t;
  t.name = name;
  t.dtype = DType::kBF16;
  t.shape = {n};
  t.floats.assign(n, 1.0f);
  return t;
}

absl::Status WriteText(const fs::path& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  out.close();
  if (!out) return absl::InternalError("cannot write " + path.string());
  return absl::OkStatus();
}

}  // namespace

absl::Status MakeRandomQwen3MoeModel(const MakeModelOptions& o) {
  if (o.out_dir.empty()) return absl::InvalidArgumentError("make-model: --out is required");
  if (o.num_heads % o.num_kv_heads != 0) {
    return absl::InvalidArgumentError("make-model: num_heads must be a multiple of num_kv_heads");
  }
  fs::path dir(o.out_dir);
  std::error_code ec;
  if (fs::exists(dir / "config.json", ec)) {
    return absl::AlreadyExistsError(o.out_dir + " already holds a config.json; refusing to overwrite");
  }
  fs::create_directories(dir, ec);
  if (ec) return absl::InternalError("cannot create " + o.out_dir + ": " + ec.message());

  // Tokenizer first: a missing tokenizer is an error the user should see before the weights are
  // written.
  std::vector<int64_t> eos = {151645, 151643};  // <|im_end|>, <|endoftext|> in Qwen3's tokenizer
  if (!o.tokenizer_dir.empty()) {
    for (const char* f : {"tokenizer.json", "tokenizer_config.json"}) {
      fs::path src = fs::path(o.tokenizer_dir) / f;
      if (!fs::exists(src, ec)) {
        return absl::NotFoundError("tokenizer folder " + o.tokenizer_dir + " has no " + f);
      }
      fs::copy_file(src, dir / f, fs::copy_options::overwrite_existing, ec);
      if (ec) return absl::InternalError("copy " + src.string() + ": " + ec.message());
    }
  }

  const int64_t h = o.hidden_size, d = o.head_dim;
  nlohmann::json config = {
      {"architectures", {"Qwen3MoeForCausalLM"}},
      {"model_type", "qwen3_moe"},
      {"vocab_size", o.vocab_size},
      {"hidden_size", h},
      {"intermediate_size", 2 * h},
      {"moe_intermediate_size", o.moe_intermediate_size},
      {"num_hidden_layers", o.num_layers},
      {"num_attention_heads", o.num_heads},
      {"num_key_value_heads", o.num_kv_heads},
      {"head_dim", d},
      {"num_experts", o.num_experts},
      {"num_experts_per_tok", o.experts_per_tok},
      {"decoder_sparse_step", 1},
      {"mlp_only_layers", nlohmann::json::array()},
      {"norm_topk_prob", true},
      {"tie_word_embeddings", false},
      {"rms_norm_eps", 1e-6},
      {"rope_theta", 1000000.0},
      {"max_position_embeddings", 4096},
      {"hidden_act", "silu"},
      {"attention_bias", false},
      {"torch_dtype", "bfloat16"},
      {"bos_token_id", 151643},
      {"eos_token_id", eos},
      {"tandem_generated", "random weights (tandem-infer make-model); output text is nonsense"},
  };
  RETURN_IF_ERROR(WriteText(dir / "config.json", config.dump(2) + "\n"));
  nlohmann::json gen = {{"eos_token_id", eos}, {"bos_token_id", 151643}, {"do_sample", false}};
  RETURN_IF_ERROR(WriteText(dir / "generation_config.json", gen.dump(2) + "\n"));

  std::mt19937_64 rng(o.seed);
  const float s = 0.02f;
  std::vector<NamedTensorData> t;
  t.push_back(RandomTensor("model.embed_tokens.weight", {o.vocab_size, h}, s, rng));
  for (int64_t l = 0; l < o.num_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    t.push_back(Ones(p + "input_layernorm.weight", h));
    t.push_back(Ones(p + "post_attention_layernorm.weight", h));
    t.push_back(RandomTensor(p + "self_attn.q_proj.weight", {o.num_heads * d, h}, s, rng));
    t.push_back(RandomTensor(p + "self_attn.k_proj.weight", {o.num_kv_heads * d, h}, s, rng));
    t.push_back(RandomTensor(p + "self_attn.v_proj.weight", {o.num_kv_heads * d, h}, s, rng));
    t.push_back(RandomTensor(p + "self_attn.o_proj.weight", {h, o.num_heads * d}, s, rng));
    t.push_back(Ones(p + "self_attn.q_norm.weight", d));
    t.push_back(Ones(p + "self_attn.k_norm.weight", d));
    t.push_back(RandomTensor(p + "mlp.gate.weight", {o.num_experts, h}, s, rng));
    for (int64_t e = 0; e < o.num_experts; ++e) {
      const std::string ep = p + "mlp.experts." + std::to_string(e) + ".";
      t.push_back(RandomTensor(ep + "gate_proj.weight", {o.moe_intermediate_size, h}, s, rng));
      t.push_back(RandomTensor(ep + "up_proj.weight", {o.moe_intermediate_size, h}, s, rng));
      t.push_back(RandomTensor(ep + "down_proj.weight", {h, o.moe_intermediate_size}, s, rng));
    }
  }
  t.push_back(Ones("model.norm.weight", h));
  t.push_back(RandomTensor("lm_head.weight", {o.vocab_size, h}, s, rng));
  return WriteSafetensors((dir / "model.safetensors").string(), t);
}

}  // namespace tandem::infer

namespace tandem::infer {

void AddMakeModelFlags(CLI::App* command, MakeModelOptions* o) {
  command->footer(
      "Writes a small qwen3_moe checkpoint with RANDOM weights (bf16, hub key layout) and copies\n"
      "tokenizer.json/tokenizer_config.json from --tokenizer-from. Its output text is nonsense:\n"
      "it exists to run the whole stack where no real checkpoint is available.");
  const auto positive = CLI::PositiveNumber.description("");
  command->add_option("--out", o->out_dir, "the folder to create")->type_name("DIR")->required();
  command->add_option("--tokenizer-from", o->tokenizer_dir, "copy the tokenizer files from this model folder")
      ->type_name("DIR");
  command->add_option("--seed", o->seed, "random seed")->check(positive);
  command->add_option("--hidden", o->hidden_size, "hidden size")->check(positive);
  command->add_option("--layers", o->num_layers, "decoder layers")->check(positive);
  command->add_option("--experts", o->num_experts, "routed experts")->check(positive);
  command->add_option("--vocab", o->vocab_size, "vocabulary size")->check(positive);
}

int RunMakeModelCommand(MakeModelOptions o) {
  if (o.experts_per_tok > o.num_experts) o.experts_per_tok = o.num_experts;
  absl::Status st = MakeRandomQwen3MoeModel(o);
  if (!st.ok()) {
    std::fprintf(stderr, "tandem-infer make-model: %s\n", std::string(st.message()).c_str());
    return 1;
  }
  std::printf("wrote %s (qwen3_moe, random weights, vocab %lld, hidden %lld, %lld layers, %lld experts)\n",
              o.out_dir.c_str(), static_cast<long long>(o.vocab_size),
              static_cast<long long>(o.hidden_size), static_cast<long long>(o.num_layers),
              static_cast<long long>(o.num_experts));
  return 0;
}

}  // namespace tandem::infer
