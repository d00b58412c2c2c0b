// The paged KV cache (engine/kv_cache.cc): the block allocator's free list (order, exhaustion,
// frees), EnsureBlocks growing a block table, PagedKvCache's layout (a position's K and V in the
// block its table names, per layer) in each element type, the KV dtype names and sizes, and the
// fp8 cache's per-layer scales read from a checkpoint.
#include "engine/kv_cache.h"

#include <map>

#include <gtest/gtest.h>

#include "engine/model/safetensors.h"
#include "tests/common/test_util.h"

namespace tandem::engine {
namespace {

// Named float tensors in memory: the scales ReadKvScales looks for.
class MapCheckpoint final : public Checkpoint {
 public:
  std::map<std::string, Tensor> tensors;
  bool Has(const std::string& name) const override { return tensors.count(name) > 0; }
  absl::StatusOr<std::vector<int64_t>> Shape(const std::string& name) const override {
    if (!Has(name)) return absl::NotFoundError(name);
    return tensors.at(name).shape;
  }
  absl::StatusOr<Tensor> Read(const std::string& name, const std::vector<int64_t>& shape) const override {
    if (!Has(name)) return absl::NotFoundError(name);
    if (tensors.at(name).shape != shape) return absl::InvalidArgumentError("shape of " + name);
    return tensors.at(name);
  }
  absl::StatusOr<Tensor> ReadSlice(const std::string& name, const std::vector<int64_t>&, int, int64_t,
                                   int64_t) const override {
    return absl::UnimplementedError(name);
  }
  std::vector<std::string> Names() const override {
    std::vector<std::string> n;
    for (const auto& [k, v] : tensors) n.push_back(k);
    return n;
  }
};

TEST(KvCache, BlockAllocator) {
  BlockAllocator alloc(3);
  EXPECT_EQ(*alloc.Allocate(), 0);
  EXPECT_EQ(*alloc.Allocate(), 1);
  EXPECT_EQ(alloc.num_used(), 2);
  std::vector<int32_t> table;
  EXPECT_TRUE(EnsureBlocks(alloc, 16, 16, table).ok());  // one block covers 16 tokens
  EXPECT_EQ(table, (std::vector<int32_t>{2}));
  auto full = alloc.Allocate();
  EXPECT_EQ(full.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_FALSE(EnsureBlocks(alloc, 16, 17, table).ok());
  alloc.Free(1);
  alloc.Free(1);  // double free is ignored
  EXPECT_EQ(alloc.num_free(), 1);
  EXPECT_EQ(*alloc.Allocate(), 1);
  alloc.Free(std::vector<int32_t>{0, 1, 2});
  EXPECT_EQ(alloc.num_free(), 3);
  KvCacheSpec spec{48, 2, 128, 2};
  EXPECT_EQ(spec.bytes_per_token(), 2 * 48 * 2 * 128 * 2);
}

// A shared block (two choices of one request holding the prompt's blocks) is free only after
// its last holder frees it; sharing a free block does not make it used.
TEST(KvCache, SharedBlocksAreFreedByTheirLastHolder) {
  BlockAllocator alloc(2);
  const int32_t b = *alloc.Allocate();
  alloc.Share(b);
  alloc.Share(b);
  EXPECT_EQ(alloc.holders(b), 3);
  EXPECT_EQ(alloc.num_used(), 1);
  alloc.Free(b);
  alloc.Free(b);
  EXPECT_EQ(alloc.num_free(), 1);
  alloc.Free(b);
  EXPECT_EQ(alloc.num_free(), 2);
  alloc.Free(b);  // one free too many is ignored
  alloc.Share(b);  // and a free block cannot be shared
  EXPECT_EQ(alloc.holders(b), 0);
  EXPECT_EQ(alloc.num_free(), 2);
}

TEST(KvCache, DtypeNamesAndSizes) {
  EXPECT_EQ(*ParseKvDtype("auto", KvDtype::kBf16), KvDtype::kBf16);  // the backend's own default
  EXPECT_EQ(*ParseKvDtype("", KvDtype::kF32), KvDtype::kF32);
  EXPECT_EQ(*ParseKvDtype("f32", KvDtype::kBf16), KvDtype::kF32);
  EXPECT_EQ(*ParseKvDtype("bf16", KvDtype::kF32), KvDtype::kBf16);
  EXPECT_EQ(*ParseKvDtype("fp8", KvDtype::kF32), KvDtype::kFp8);
  EXPECT_EQ(*ParseKvDtype("fp8_e4m3", KvDtype::kF32), KvDtype::kFp8);
  for (const char* bad : {"fp16", "FP8", "fp8_e5m2", "float32"}) {
    auto d = ParseKvDtype(bad, KvDtype::kF32);
    ASSERT_FALSE(d.ok()) << bad;
    EXPECT_NE(d.status().message().find(bad), std::string::npos) << d.status();
    EXPECT_NE(d.status().message().find("auto, f32, bf16 or fp8"), std::string::npos) << d.status();
  }
  EXPECT_STREQ(KvDtypeName(KvDtype::kFp8), "fp8");
  EXPECT_STREQ(KvDtypeName(KvDtype::kBf16), "bf16");
  EXPECT_STREQ(KvDtypeName(KvDtype::kF32), "f32");
  // The same memory holds 2x the tokens of bf16 in fp8, 4x those of float32.
  KvCacheSpec spec{48, 4, 128, KvDtypeBytes(KvDtype::kBf16)};
  const int64_t bf16 = spec.bytes_per_token();
  spec.bytes_per_element = KvDtypeBytes(KvDtype::kFp8);
  EXPECT_EQ(2 * spec.bytes_per_token(), bf16);
  spec.bytes_per_element = KvDtypeBytes(KvDtype::kF32);
  EXPECT_EQ(spec.bytes_per_token(), 2 * bf16);
}

TEST(KvCache, ElementTypesLayOutTheSameSlots) {
  PagedKvCache f32(1, 4, 2, 1, 32);
  PagedKvCache fp8(1, 4, 2, 1, 32, KvDtype::kFp8);
  EXPECT_EQ(fp8.dtype(), KvDtype::kFp8);
  const std::vector<int32_t> table = {3, 1};
  // Position 2 is block 1 slot 0: slot 2 of the pool, 64 elements in, whatever their size.
  EXPECT_EQ(f32.key(0, table, 2) - f32.keys(0), 64);
  EXPECT_EQ(fp8.key<kernels::fp8_e4m3>(0, table, 2) - fp8.keys<kernels::fp8_e4m3>(0), 64);
  EXPECT_EQ(reinterpret_cast<const uint8_t*>(fp8.value<kernels::fp8_e4m3>(0, table, 3)) -
                reinterpret_cast<const uint8_t*>(fp8.values<kernels::fp8_e4m3>(0)),
            96);
  // The last slot of an fp8 pool (block 3, slot 1) is inside the allocation, and starts zeroed.
  kernels::fp8_e4m3* last = fp8.value<kernels::fp8_e4m3>(0, table, 1);
  EXPECT_EQ(last - fp8.values<kernels::fp8_e4m3>(0), 7 * 32);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(last[i].bits, 0);
}

TEST(KvCache, ScalesFromTheCheckpointOrOne) {
  ModelConfig cfg;
  cfg.num_hidden_layers = 4;
  cfg.layer_types = {"linear_attention", "full_attention", "linear_attention", "full_attention"};
  WeightNames names{"model."};
  MapCheckpoint ckpt;
  ckpt.tensors["model.layers.1.self_attn.k_scale"] = Tensor{{}, {0.5f}};
  ckpt.tensors["model.layers.1.self_attn.v_scale"] = Tensor{{1}, {2.0f}};
  ckpt.tensors["model.layers.3.self_attn.v_proj.v_scale"] = Tensor{{}, {0.25f}};  // ModelOpt's name
  auto s = ReadKvScales(ckpt, names, cfg);
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_EQ(s->size(), 2u);  // the two full-attention layers, in order
  EXPECT_EQ((*s)[0].k, 0.5f);
  EXPECT_EQ((*s)[0].v, 2.0f);
  EXPECT_EQ((*s)[1].k, 1.0f);  // none in the checkpoint
  EXPECT_EQ((*s)[1].v, 0.25f);

  ckpt.tensors["model.layers.3.self_attn.k_scale"] = Tensor{{}, {-1.0f}};
  auto neg = ReadKvScales(ckpt, names, cfg);
  ASSERT_FALSE(neg.ok());
  EXPECT_NE(neg.status().message().find("model.layers.3.self_attn.k_scale"), std::string::npos) << neg.status();
  ckpt.tensors["model.layers.3.self_attn.k_scale"] = Tensor{{2}, {1.0f, 1.0f}};
  auto two = ReadKvScales(ckpt, names, cfg);
  ASSERT_FALSE(two.ok());
  EXPECT_NE(two.status().message().find("one value"), std::string::npos) << two.status();
}

TEST(KvCache, ExhaustionSaysSoAndFreeingRecovers) {
  BlockAllocator alloc(4);
  std::vector<int32_t> got;
  for (int i = 0; i < 4; ++i) got.push_back(*alloc.Allocate());
  EXPECT_EQ(got, (std::vector<int32_t>{0, 1, 2, 3}));  // block 0 first, then in order
  EXPECT_EQ(alloc.num_free(), 0);
  EXPECT_EQ(alloc.num_total(), 4);
  auto full = alloc.Allocate();
  ASSERT_FALSE(full.ok());
  EXPECT_EQ(full.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(full.status().message(), "kv cache full: all 4 blocks in use");
  // The last freed block is handed out first; ids outside the pool are ignored.
  alloc.Free(2);
  alloc.Free(0);
  alloc.Free(-1);
  alloc.Free(4);
  EXPECT_EQ(alloc.num_free(), 2);
  EXPECT_EQ(*alloc.Allocate(), 0);
  EXPECT_EQ(*alloc.Allocate(), 2);
  EXPECT_FALSE(alloc.Allocate().ok());
}

TEST(KvCache, EnsureBlocksGrowsOnlyWhatIsMissing) {
  BlockAllocator alloc(3);
  std::vector<int32_t> table;
  ASSERT_TRUE(EnsureBlocks(alloc, 4, 0, table).ok());  // nothing to cover
  EXPECT_TRUE(table.empty());
  ASSERT_TRUE(EnsureBlocks(alloc, 4, 5, table).ok());  // 5 tokens: 2 blocks of 4
  EXPECT_EQ(table, (std::vector<int32_t>{0, 1}));
  ASSERT_TRUE(EnsureBlocks(alloc, 4, 8, table).ok());  // still covered
  EXPECT_EQ(table.size(), 2u);
  // 13 tokens need 4 blocks; the pool has one more: the table keeps what it got.
  const absl::Status st = EnsureBlocks(alloc, 4, 13, table);
  EXPECT_EQ(st.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(table, (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(alloc.num_free(), 0);
}

TEST(KvCache, PositionsMapThroughTheBlockTable) {
  PagedKvCache kv(1, 10, 4, 2, 3);  // 1 layer, 10 blocks of 4 tokens, 2 kv heads, head_dim 3
  std::vector<int32_t> table = {5, 2, 9};
  // Position 6 is block table[1] = 2, slot 2: element offset (2 * 4 + 2) * 6.
  float* k6 = kv.key(0, table, 6);
  float* k0 = kv.key(0, {0}, 0);
  EXPECT_EQ(k6 - k0, (2 * 4 + 2) * 6);
  EXPECT_EQ(kv.value(0, table, 8) - kv.value(0, {0}, 0), (9 * 4 + 0) * 6);
}

TEST(KvCache, LayersAndKeysAndValuesAreSeparateZeroedPools) {
  PagedKvCache none;
  EXPECT_FALSE(none.allocated());
  PagedKvCache kv(2, 3, 2, 1, 4);  // 2 layers, 3 blocks of 2 tokens, 1 kv head, head_dim 4
  ASSERT_TRUE(kv.allocated());
  EXPECT_EQ(kv.num_blocks(), 3);
  EXPECT_EQ(kv.block_size(), 2);
  const std::vector<int32_t> table = {2, 0};
  // Position 3 is block 0, slot 1: slot index 1 of the pool, elements [4, 8).
  float* k = kv.key(1, table, 3);
  EXPECT_EQ(k, kv.keys(1) + 4);
  EXPECT_EQ(kv.value(1, table, 3), kv.values(1) + 4);
  for (int i = 0; i < 4; ++i) k[i] = 1.0f + i;
  // Written through layer 1's K only: its V and layer 0 still read zeros.
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(kv.keys(1)[4 + i], 1.0f + i);
    EXPECT_EQ(kv.values(1)[4 + i], 0.0f);
    EXPECT_EQ(kv.keys(0)[4 + i], 0.0f);
  }
  // Position 0 is block 2, slot 0: the pool's slot 4, elements [16, 20) of 24.
  EXPECT_EQ(kv.key(0, table, 0) - kv.keys(0), 16);
}

// The same through a real safetensors file: scalar scales (shape [], as vLLM's exports store
// them, and [1]) in bf16 and float32.
TEST(KvCache, ScalesFromASafetensorsFile) {
  tandem::testing::TempDir dir;
  ASSERT_TRUE(WriteSafetensors(dir / "model.safetensors",
                               {{"model.layers.0.self_attn.k_scale", DType::kF32, {}, {0.125f}, {}, {}},
                                {"model.layers.0.self_attn.v_scale", DType::kBF16, {1}, {3.0f}, {}, {}}})
                  .ok());
  auto ckpt = Checkpoint::Open(dir.path());
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  ModelConfig cfg;
  cfg.num_hidden_layers = 2;
  auto s = ReadKvScales(**ckpt, WeightNames{"model."}, cfg);
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_EQ(s->size(), 2u);
  EXPECT_EQ((*s)[0].k, 0.125f);
  EXPECT_EQ((*s)[0].v, 3.0f);
  EXPECT_EQ((*s)[1].k, 1.0f);
  EXPECT_EQ((*s)[1].v, 1.0f);
}

}  // namespace
}  // namespace tandem::engine
