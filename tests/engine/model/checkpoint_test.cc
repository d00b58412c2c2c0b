// Checkpoint folders: the tiny reference model, slices, shards, broken folders.
#include "engine/model/checkpoint.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <ctime>

#include "engine/model/safetensors.h"
#include "nlohmann/json.hpp"
#include "tests/engine/model/test_util.h"

namespace tandem::engine {
namespace {

using testing::Msg;
using testing::ReadTextFile;
using testing::Shard;
using testing::TempDir;
using testing::TestData;
using testing::WriteAll;

// Decodes a bf16 tensor straight from the file bytes, without our parser: nlohmann for the
// header, a 16-bit shift for the values.
std::vector<float> DecodeBf16Independently(const std::string& path, const std::string& name,
                                           std::vector<int64_t>* shape) {
  const std::string bytes = ReadTextFile(path);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<uint8_t>(bytes[i]);
  auto header = nlohmann::json::parse(bytes.substr(8, n));
  const auto& e = header.at(name);
  EXPECT_EQ(e.at("dtype"), "BF16");
  *shape = e.at("shape").get<std::vector<int64_t>>();
  const uint64_t begin = e.at("data_offsets")[0], end = e.at("data_offsets")[1];
  std::vector<float> out;
  for (uint64_t off = 8 + n + begin; off < 8 + n + end; off += 2) {
    uint32_t u = (static_cast<uint32_t>(static_cast<uint8_t>(bytes[off + 1])) << 24) |
                 (static_cast<uint32_t>(static_cast<uint8_t>(bytes[off])) << 16);
    float f;
    std::memcpy(&f, &u, 4);
    out.push_back(f);
  }
  return out;
}

TEST(Checkpoint, TinyQwen3MoeReadsMatchRawBytes) {
  const std::string dir = TestData("qwen3moe-tiny");
  auto ckpt = Checkpoint::Open(dir);
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  const auto names = (*ckpt)->Names();
  EXPECT_EQ(names.size(), 231u);  // 3 globals + 4 layers x (9 attention/norm + 1 router + 48 experts)
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
  EXPECT_TRUE((*ckpt)->Has("lm_head.weight"));
  EXPECT_FALSE((*ckpt)->Has("golden"));  // golden.safetensors beside it is not part of the model

  for (const std::string name : {"model.layers.0.mlp.gate.weight",
                                 "model.layers.3.mlp.experts.15.down_proj.weight",
                                 "model.embed_tokens.weight", "model.norm.weight"}) {
    std::vector<int64_t> shape;
    const std::vector<float> ref =
        DecodeBf16Independently(dir + "/model.safetensors", name, &shape);
    auto got_shape = (*ckpt)->Shape(name);
    ASSERT_TRUE(got_shape.ok());
    EXPECT_EQ(*got_shape, shape);
    auto t = (*ckpt)->Read(name, shape);
    ASSERT_TRUE(t.ok()) << t.status();
    EXPECT_EQ(t->shape, shape);
    EXPECT_EQ(t->numel(), static_cast<int64_t>(ref.size()));
    EXPECT_EQ(t->data, ref) << name;
    std::printf("  %s %s: ours [%g %g %g ...] raw [%g %g %g ...] (%zu values equal)\n",
                name.c_str(), ShapeString(shape).c_str(), t->data[0], t->data[1], t->data[2],
                ref[0], ref[1], ref[2], ref.size());
  }

  auto view = (*ckpt)->View("model.norm.weight");
  ASSERT_TRUE(view.ok());
  EXPECT_EQ(view->dtype, DType::kBF16);
  EXPECT_EQ(view->nbytes, 256u);
}

// Every tensor of every tiny model opens and converts; prints the load rate (informational).
TEST(Checkpoint, ReadsEveryTensorOfEveryTinyModel) {
  for (const char* model : {"qwen3moe-tiny", "qwen35moe-tiny", "qwen3next-tiny"}) {
    const auto t0 = std::chrono::steady_clock::now();
    const std::clock_t c0 = std::clock();
    auto ckpt = Checkpoint::Open(TestData(model));
    ASSERT_TRUE(ckpt.ok()) << ckpt.status();
    size_t values = 0;
    double sum = 0;
    for (const std::string& name : (*ckpt)->Names()) {
      auto shape = (*ckpt)->Shape(name);
      ASSERT_TRUE(shape.ok());
      auto t = (*ckpt)->Read(name, *shape);
      ASSERT_TRUE(t.ok()) << t.status();
      values += t->data.size();
      for (float v : t->data) sum += v;
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double cpu = static_cast<double>(std::clock() - c0) / CLOCKS_PER_SEC;
    EXPECT_TRUE(std::isfinite(sum));
    std::printf("  %s: %zu tensors, %zu values (%.1f MB bf16): wall %.1f ms, cpu %.1f ms "
                "(%.0f MB/s of cpu)\n", model, (*ckpt)->Names().size(), values, values * 2 / 1e6,
                s * 1e3, cpu * 1e3, values * 2 / 1e6 / cpu);
  }
}

// ReadSlice(dim, start, len) must equal the same block cut out of Read.
void ExpectSliceMatchesRead(const Checkpoint& ckpt, const std::string& name, int dim,
                            int64_t start, int64_t len) {
  auto shape = ckpt.Shape(name);
  ASSERT_TRUE(shape.ok());
  auto full = ckpt.Read(name, *shape);
  auto part = ckpt.ReadSlice(name, *shape, dim, start, len);
  ASSERT_TRUE(full.ok() && part.ok()) << part.status();
  std::vector<int64_t> want_shape = *shape;
  want_shape[dim] = len;
  EXPECT_EQ(part->shape, want_shape);
  int64_t outer = 1, inner = 1;
  for (int i = 0; i < dim; ++i) outer *= (*shape)[i];
  for (size_t i = dim + 1; i < shape->size(); ++i) inner *= (*shape)[i];
  std::vector<float> want;
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t r = start; r < start + len; ++r) {
      for (int64_t i = 0; i < inner; ++i) {
        want.push_back(full->data[(o * (*shape)[dim] + r) * inner + i]);
      }
    }
  }
  EXPECT_EQ(part->data, want) << name << " dim " << dim;
  std::printf("  %s %s dim %d [%lld, %lld): %zu values equal, first %g\n", name.c_str(),
              ShapeString(*shape).c_str(), dim, static_cast<long long>(start),
              static_cast<long long>(start + len), want.size(), want.empty() ? 0.0f : want[0]);
}

TEST(Checkpoint, ReadSliceEqualsPartOfRead) {
  auto ckpt = Checkpoint::Open(TestData("qwen3moe-tiny"));
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  // Column-parallel (dim 0) and row-parallel (dim 1) shards of a 2-way split.
  ExpectSliceMatchesRead(**ckpt, "model.layers.1.self_attn.q_proj.weight", 0, 128, 128);
  ExpectSliceMatchesRead(**ckpt, "model.layers.1.self_attn.o_proj.weight", 1, 128, 128);
  ExpectSliceMatchesRead(**ckpt, "model.layers.2.mlp.experts.7.gate_proj.weight", 0, 16, 16);
  ExpectSliceMatchesRead(**ckpt, "model.layers.2.mlp.experts.7.down_proj.weight", 1, 48, 16);
  ExpectSliceMatchesRead(**ckpt, "lm_head.weight", 0, 1024, 1024);

  auto hybrid = Checkpoint::Open(TestData("qwen35moe-tiny"));
  ASSERT_TRUE(hybrid.ok()) << hybrid.status();
  ExpectSliceMatchesRead(**hybrid, "model.layers.0.linear_attn.conv1d.weight", 0, 256, 128);
  ExpectSliceMatchesRead(**hybrid, "model.layers.0.linear_attn.conv1d.weight", 2, 1, 2);

  const std::vector<int64_t> q = {256, 128};
  const std::string name = "model.layers.0.self_attn.q_proj.weight";
  EXPECT_FALSE((*ckpt)->ReadSlice(name, q, 2, 0, 1).ok());
  EXPECT_FALSE((*ckpt)->ReadSlice(name, q, 0, 200, 100).ok());
  EXPECT_FALSE((*ckpt)->ReadSlice(name, q, 1, -1, 2).ok());
}

TEST(Checkpoint, WrongShapeAndMissingTensorMessages) {
  const std::string dir = TestData("qwen3moe-tiny");
  auto ckpt = Checkpoint::Open(dir);
  ASSERT_TRUE(ckpt.ok());
  auto wrong = (*ckpt)->Read("model.layers.0.self_attn.q_proj.weight", {128, 256});
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Msg(wrong.status()),
            "tensor 'model.layers.0.self_attn.q_proj.weight' in model.safetensors: expected shape "
            "[128, 256], found [256, 128]");
  std::printf("  %s\n", Msg(wrong.status()).c_str());
  auto missing = (*ckpt)->Read("model.layers.0.mlp.gate.weights", {16, 128});
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(Msg(missing.status()),
            "tensor 'model.layers.0.mlp.gate.weights' not found in " + dir);
  std::printf("  %s\n", Msg(missing.status()).c_str());
  EXPECT_EQ((*ckpt)->Shape("nope").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ((*ckpt)->ReadSlice("nope", {1}, 0, 0, 1).status().code(), absl::StatusCode::kNotFound);
}

TEST(Checkpoint, DtypesF16ConvertedIntegerRejected) {
  TempDir dir;
  std::vector<NamedTensorData> t(3);
  // f16 [2, 2] = [[1, -2], [65504, 2^-24]] as raw little-endian bits.
  t[0] = {"h", DType::kF16, {2, 2}, {}, {}, std::string("\x00\x3c\x00\xc0\xff\x7b\x01\x00", 8)};
  t[1] = {"ids", DType::kI32, {2}, {}, {7, 8}, {}};
  t[2] = {"f", DType::kF32, {2}, {0.5f, 0.25f}, {}, {}};
  ASSERT_TRUE(WriteSafetensors(dir / "model.safetensors", t).ok());
  auto ckpt = Checkpoint::Open(dir.path());
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  auto h = (*ckpt)->Read("h", {2, 2});
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->data, (std::vector<float>{1.0f, -2.0f, 65504.0f, 5.9604644775390625e-08f}));
  auto h_col = (*ckpt)->ReadSlice("h", {2, 2}, 1, 1, 1);
  ASSERT_TRUE(h_col.ok());
  EXPECT_EQ(h_col->data, (std::vector<float>{-2.0f, 5.9604644775390625e-08f}));
  auto ids = (*ckpt)->Read("ids", {2});
  ASSERT_FALSE(ids.ok());
  EXPECT_EQ(ids.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(Msg(ids.status()).find("tensor 'ids'"), std::string::npos) << ids.status();
  EXPECT_NE(Msg(ids.status()).find("I32"), std::string::npos);
}

void WriteIndex(const TempDir& dir, const nlohmann::json& weight_map) {
  nlohmann::json index = {{"metadata", {{"total_size", 0}}}, {"weight_map", weight_map}};
  WriteAll(dir / "model.safetensors.index.json", index.dump(2));
}

TEST(Checkpoint, ShardedWithIndex) {
  TempDir dir;
  ASSERT_TRUE(WriteSafetensors(dir / "model-00001-of-00002.safetensors", Shard({"a", "b"})).ok());
  ASSERT_TRUE(WriteSafetensors(dir / "model-00002-of-00002.safetensors", Shard({"c"})).ok());
  WriteIndex(dir, {{"a", "model-00001-of-00002.safetensors"},
                   {"b", "model-00001-of-00002.safetensors"},
                   {"c", "model-00002-of-00002.safetensors"}});
  auto ckpt = Checkpoint::Open(dir.path());
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  EXPECT_EQ((*ckpt)->Names(), (std::vector<std::string>{"a", "b", "c"}));
  auto c = (*ckpt)->Read("c", {2, 3});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->data, (std::vector<float>{1, 2, 3, 4, 5, 6}));
  auto b = (*ckpt)->Read("b", {2, 3});
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->data[0], 11.0f);

  // The index names a tensor that its shard does not hold.
  WriteIndex(dir, {{"a", "model-00001-of-00002.safetensors"},
                   {"d", "model-00002-of-00002.safetensors"}});
  auto bad = Checkpoint::Open(dir.path());
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(Msg(bad.status()).find("tensor 'd'"), std::string::npos) << bad.status();
  EXPECT_NE(Msg(bad.status()).find("model-00002-of-00002.safetensors"), std::string::npos);
  std::printf("  %s\n", Msg(bad.status()).c_str());

  // A listed shard file is missing.
  WriteIndex(dir, {{"a", "model-00001-of-00003.safetensors"}, {"c", "model-00002-of-00002.safetensors"}});
  auto gone = Checkpoint::Open(dir.path());
  ASSERT_FALSE(gone.ok());
  EXPECT_EQ(gone.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(Msg(gone.status()).find("shard model-00001-of-00003.safetensors"), std::string::npos)
      << gone.status();
  std::printf("  %s\n", Msg(gone.status()).c_str());

  // A path instead of a file name is refused (the index is outside input).
  WriteIndex(dir, {{"a", "../model-00001-of-00002.safetensors"}});
  EXPECT_FALSE(Checkpoint::Open(dir.path()).ok());
  WriteAll(dir / "model.safetensors.index.json", "{\"weight_map\": [");
  EXPECT_FALSE(Checkpoint::Open(dir.path()).ok());
}

TEST(Checkpoint, SeveralFilesWithoutIndexAndDuplicates) {
  TempDir dir;
  ASSERT_TRUE(WriteSafetensors(dir / "part-a.safetensors", Shard({"x"})).ok());
  ASSERT_TRUE(WriteSafetensors(dir / "part-b.safetensors", Shard({"y"})).ok());
  auto ckpt = Checkpoint::Open(dir.path());
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  EXPECT_EQ((*ckpt)->Names(), (std::vector<std::string>{"x", "y"}));
  ASSERT_TRUE(WriteSafetensors(dir / "part-c.safetensors", Shard({"y"})).ok());
  auto dup = Checkpoint::Open(dir.path());
  ASSERT_FALSE(dup.ok());
  EXPECT_NE(Msg(dup.status()).find("tensor 'y' appears in both part-b.safetensors and part-c"),
            std::string::npos)
      << dup.status();

  TempDir empty;
  EXPECT_EQ(Checkpoint::Open(empty.path()).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(Checkpoint::Open(empty / "nowhere").status().code(), absl::StatusCode::kNotFound);
}

TEST(Checkpoint, BrokenModelFileErrorsNameTheFile) {
  TempDir dir;
  ASSERT_TRUE(WriteSafetensors(dir / "model.safetensors", Shard({"w"})).ok());
  const std::string bytes = ReadTextFile(dir / "model.safetensors");
  WriteAll(dir / "model.safetensors", bytes.substr(0, bytes.size() - 1));
  auto ckpt = Checkpoint::Open(dir.path());
  ASSERT_FALSE(ckpt.ok());
  EXPECT_EQ(Msg(ckpt.status()).rfind("model.safetensors: truncated", 0), 0u) << ckpt.status();
  std::printf("  %s\n", Msg(ckpt.status()).c_str());
}


// A fused-experts stack [E, rows, cols]: ReadIndexedSlice reads entry e's rows or columns, from
// the file directly and through the default (ReadSlice of the whole entry, then cut); errors name
// the tensor, the entry and the shape.
TEST(Checkpoint, ReadIndexedSliceOfAStack) {
  TempDir dir;
  std::vector<float> v(3 * 4 * 5);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i);
  ASSERT_TRUE(WriteSafetensors(dir / "model.safetensors", {{"stack", DType::kF32, {3, 4, 5}, v, {}, {}}}).ok());
  auto ckpt = Checkpoint::Open(dir.path());
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  testing::RecordingCheckpoint generic(**ckpt);
  for (const Checkpoint* c : {static_cast<const Checkpoint*>(ckpt->get()), static_cast<const Checkpoint*>(&generic)}) {
    auto rows = c->ReadIndexedSlice("stack", {3, 4, 5}, 2, 1, 1, 2);  // entry 2, rows 1..2
    ASSERT_TRUE(rows.ok()) << rows.status();
    EXPECT_EQ(rows->shape, (std::vector<int64_t>{2, 5}));
    std::vector<float> want;
    for (int r = 1; r < 3; ++r) {
      for (int k = 0; k < 5; ++k) want.push_back(static_cast<float>(40 + r * 5 + k));
    }
    EXPECT_EQ(rows->data, want);
    auto cols = c->ReadIndexedSlice("stack", {3, 4, 5}, 1, 2, 3, 2);  // entry 1, columns 3..4
    ASSERT_TRUE(cols.ok()) << cols.status();
    EXPECT_EQ(cols->shape, (std::vector<int64_t>{4, 2}));
    EXPECT_EQ(cols->data, (std::vector<float>{23, 24, 28, 29, 33, 34, 38, 39}));
    auto bad = c->ReadIndexedSlice("stack", {3, 4, 5}, 3, 1, 0, 1);
    ASSERT_FALSE(bad.ok());
    EXPECT_EQ(Msg(bad.status()), "tensor 'stack': slice [0, 1) of dim 1 of entry 3 out of range for shape [3, 4, 5]");
    EXPECT_FALSE(c->ReadIndexedSlice("stack", {3, 4, 5}, 0, 0, 0, 1).ok());  // dim 0 is the entry
    EXPECT_FALSE(c->ReadIndexedSlice("stack", {3, 4, 5}, 0, 2, 4, 2).ok());
    EXPECT_FALSE(c->ReadIndexedSlice("stack", {3, 5, 4}, 0, 1, 0, 1).ok());  // wrong shape
  }
}

}  // namespace
}  // namespace tandem::engine
