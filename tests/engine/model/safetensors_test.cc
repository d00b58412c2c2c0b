// safetensors header parser, f16/bf16 conversions, writer round trips and broken files.
#include "engine/model/safetensors.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "engine/model/checkpoint.h"
#include "tests/engine/model/test_util.h"

namespace tandem::engine {
namespace {

using testing::MakeSafetensorsBytes;
using testing::Msg;
using testing::ReadTextFile;
using testing::TempDir;
using testing::WriteAll;

TEST(SafetensorsHeader, ParsesValidHeaderSortedWithMetadata) {
  const std::string h = R"({"__metadata__":{"format":"pt"},
    "b":{"dtype":"BF16","shape":[2,3],"data_offsets":[16,28]},
    "a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},
    "s":{"dtype":"I64","shape":[],"data_offsets":[28,36]},
    "e":{"dtype":"F16","shape":[0,5],"data_offsets":[36,36]}})";
  auto t = ParseSafetensorsHeader(h, 36);
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_EQ(t->size(), 4u);
  EXPECT_EQ((*t)[0].name, "a");
  EXPECT_EQ((*t)[1].name, "b");
  EXPECT_EQ((*t)[1].dtype, DType::kBF16);
  EXPECT_EQ((*t)[1].shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ((*t)[1].data_begin, 16u);
  EXPECT_EQ((*t)[1].nbytes(), 12u);
  EXPECT_EQ((*t)[2].numel(), 0);
  EXPECT_EQ((*t)[3].numel(), 1);  // scalar
}

struct BadHeader {
  const char* what;
  std::string header;
  uint64_t data_bytes;
  std::string expected_substring;
};

TEST(SafetensorsHeader, RejectsBadHeadersWithClearMessages) {
  const std::vector<BadHeader> cases = {
      {"not JSON", "{\"a\": ", 0, "malformed header"},
      {"not an object", "[1,2]", 0, "malformed header: the header must be a JSON object"},
      {"entry not object", R"({"a":5})", 0, "malformed header: tensor 'a': entry must be an object"},
      {"missing dtype", R"({"a":{"shape":[1],"data_offsets":[0,4]}})", 4, "missing 'dtype'"},
      {"unsupported dtype", R"({"w":{"dtype":"F8_E5M2","shape":[1],"data_offsets":[0,1]}})", 1,
       "unsupported dtype F8_E5M2 for tensor w"},
      {"missing shape", R"({"a":{"dtype":"F32","data_offsets":[0,4]}})", 4, "missing 'shape'"},
      {"negative dim", R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", 4,
       "shape[0] is negative"},
      {"float dim", R"({"a":{"dtype":"F32","shape":[1.5],"data_offsets":[0,4]}})", 4,
       "must be a non-negative integer"},
      {"numel overflow",
       R"({"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,4]}})", 4,
       "too many elements"},
      {"bytes overflow",
       R"({"a":{"dtype":"F64","shape":[4611686018427387904],"data_offsets":[0,4]}})", 4,
       "too many bytes"},
      {"missing offsets", R"({"a":{"dtype":"F32","shape":[1]}})", 4, "missing 'data_offsets'"},
      {"offsets of 3", R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4,8]}})", 8,
       "must be [begin, end]"},
      {"end before begin", R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[8,4]}})", 8,
       "end before they begin"},
      {"size mismatch", R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}})", 8,
       "hold 4 bytes but F32 [2] needs 8"},
      {"beyond data", R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 6,
       "truncated: tensor 'a' ends at byte 8 of the data section, which has only 6 bytes"},
      {"overlap",
       R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
       8, "malformed header: tensors 'a' [0, 8) and 'b' [4, 8) overlap"},
      {"metadata not strings", R"({"__metadata__":{"format":1}})", 0,
       "__metadata__ value of 'format' must be a string"},
  };
  for (const auto& c : cases) {
    auto t = ParseSafetensorsHeader(c.header, c.data_bytes);
    ASSERT_FALSE(t.ok()) << c.what;
    EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument) << c.what;
    EXPECT_NE(Msg(t.status()).find(c.expected_substring), std::string::npos)
        << c.what << ": got '" << t.status().message() << "'";
    std::printf("  %-22s -> %s\n", c.what, Msg(t.status()).c_str());
  }
}

TEST(Conversions, F16KnownValues) {
  struct Case {
    uint16_t bits;
    float value;
  };
  const Case cases[] = {
      {0x3c00, 1.0f},          {0xc000, -2.0f},
      {0x3555, 0.333251953125f},  // nearest half to 1/3
      {0x7bff, 65504.0f},      // largest finite
      {0x0400, 6.103515625e-05f},  // smallest normal 2^-14
      {0x0001, 5.9604644775390625e-08f},  // smallest subnormal 2^-24
      {0x03ff, 6.097555160522461e-05f},   // largest subnormal 1023 * 2^-24
      {0x8001, -5.9604644775390625e-08f},
      {0x0000, 0.0f},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(F16ToFloat(c.bits), c.value) << std::hex << c.bits;
    std::printf("  f16 0x%04x -> %.10g (expected %.10g)\n", c.bits, F16ToFloat(c.bits), c.value);
  }
  EXPECT_TRUE(std::signbit(F16ToFloat(0x8000)));
  EXPECT_EQ(F16ToFloat(0x8000), 0.0f);
  EXPECT_EQ(F16ToFloat(0x7c00), std::numeric_limits<float>::infinity());
  EXPECT_EQ(F16ToFloat(0xfc00), -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(F16ToFloat(0x7e00)));
  EXPECT_TRUE(std::isnan(F16ToFloat(0x7c01)));  // signalling nan stays nan, not inf
}

TEST(Conversions, Bf16RoundsToNearestEven) {
  auto bits = [](uint32_t u) {
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  };
  EXPECT_EQ(FloatToBf16(1.0f), 0x3f80);
  EXPECT_EQ(FloatToBf16(-2.0f), 0xc000);
  EXPECT_EQ(FloatToBf16(bits(0x3f808000)), 0x3f80);  // tie, even stays
  EXPECT_EQ(FloatToBf16(bits(0x3f818000)), 0x3f82);  // tie, odd rounds up
  EXPECT_EQ(FloatToBf16(bits(0x3f808001)), 0x3f81);  // above tie
  EXPECT_EQ(FloatToBf16(bits(0x3f807fff)), 0x3f80);  // below tie
  EXPECT_EQ(FloatToBf16(bits(0x7f7fffff)), 0x7f80);  // rounds to inf, as RNE says
  EXPECT_TRUE(std::isnan(Bf16ToFloat(FloatToBf16(std::nanf("")))));
  EXPECT_TRUE(std::isnan(Bf16ToFloat(FloatToBf16(bits(0x7f800001)))));  // nan payload in low bits
  EXPECT_EQ(Bf16ToFloat(0x3f80), 1.0f);
  EXPECT_EQ(Bf16ToFloat(0xc049), -3.140625f);
}

TEST(SafetensorsWriter, RoundTripsF32Bf16I32) {
  TempDir dir;
  const std::string path = dir / "t.safetensors";
  std::vector<float> f = {0.0f, -1.5f, 3.14159265f, 1e-20f, 65504.0f, -7e30f};
  std::vector<int32_t> ids = {0, -1, 2147483647, -2147483647 - 1, 42};
  std::vector<NamedTensorData> tensors(3);
  tensors[0] = {"logits", DType::kF32, {2, 3}, f, {}, {}};
  tensors[1] = {"weights.bf16", DType::kBF16, {3, 2}, f, {}, {}};
  tensors[2] = {"ids", DType::kI32, {5}, {}, ids, {}};
  ASSERT_TRUE(WriteSafetensors(path, tensors).ok());

  const std::string bytes = ReadTextFile(path);
  uint64_t header_len = 0;
  std::memcpy(&header_len, bytes.data(), 8);
  EXPECT_EQ((8 + header_len) % 8, 0u) << "data section is 8-byte aligned";

  auto file = SafetensorsFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  ASSERT_EQ((*file)->tensors().size(), 3u);
  auto logits = (*file)->ReadFloat("logits");
  ASSERT_TRUE(logits.ok());
  EXPECT_EQ(logits->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(logits->data, f);  // bit-exact
  auto w = (*file)->ReadFloat("weights.bf16");
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w->shape, (std::vector<int64_t>{3, 2}));
  for (size_t i = 0; i < f.size(); ++i) {
    EXPECT_EQ(w->data[i], Bf16ToFloat(FloatToBf16(f[i])));
    EXPECT_LE(std::fabs(w->data[i] - f[i]), std::fabs(f[i]) * (1.0f / 256)) << i;
    std::printf("  bf16 round trip %.9g -> %.9g\n", f[i], w->data[i]);
  }
  auto got_ids = (*file)->ReadInts("ids");
  ASSERT_TRUE(got_ids.ok());
  ASSERT_EQ(got_ids->size(), ids.size());
  for (size_t i = 0; i < ids.size(); ++i) EXPECT_EQ((*got_ids)[i], ids[i]);

  EXPECT_EQ((*file)->ReadFloat("ids").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*file)->ReadInts("logits").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*file)->ReadFloat("nope").status().code(), absl::StatusCode::kNotFound);
}

TEST(SafetensorsWriter, RejectsWrongCountsAndDtypes) {
  TempDir dir;
  std::vector<NamedTensorData> t(1);
  t[0] = {"x", DType::kF32, {2, 2}, {1, 2, 3}, {}, {}};
  EXPECT_FALSE(WriteSafetensors(dir / "a.safetensors", t).ok());
  t[0] = {"x", DType::kI64, {1}, {}, {1}, {}};
  EXPECT_FALSE(WriteSafetensors(dir / "a.safetensors", t).ok());
  t[0] = {"x", DType::kF16, {2}, {}, {}, std::string("\x00\x3c\x00\xc0", 4)};  // raw f16 [1, -2]
  ASSERT_TRUE(WriteSafetensors(dir / "f16.safetensors", t).ok());
  auto f = SafetensorsFile::Open(dir / "f16.safetensors");
  ASSERT_TRUE(f.ok());
  auto v = (*f)->ReadFloat("x");
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->data, (std::vector<float>{1.0f, -2.0f}));
}

// A small valid file to cut up.
std::string ValidFile(const TempDir& dir) {
  std::vector<NamedTensorData> t(2);
  t[0] = {"a", DType::kF32, {4}, {1, 2, 3, 4}, {}, {}};
  t[1] = {"b", DType::kBF16, {2, 2}, {1, 2, 3, 4}, {}, {}};
  const std::string path = dir / "valid.safetensors";
  EXPECT_TRUE(WriteSafetensors(path, t).ok());
  return ReadTextFile(path);
}

TEST(SafetensorsFile, BrokenFilesNameTheFileAndTheProblem) {
  TempDir dir;
  const std::string valid = ValidFile(dir);
  struct Case {
    const char* what;
    std::string bytes;
    std::string expected;
  };
  std::string header_8192(8, '\0');
  header_8192[1] = 0x20;  // 8192 little-endian
  std::string huge(8, '\0');
  huge[4] = 0x01;  // 2^32 bytes: over the 100 MB limit
  const std::vector<Case> cases = {
      {"truncated data", valid.substr(0, valid.size() - 3),
       "model.safetensors: truncated: tensor 'b' ends at byte 24 of the data section, which has "
       "only 21 bytes"},
      {"header longer than file", header_8192 + std::string(92, ' '),
       "model.safetensors: truncated: header says 8192 bytes but file has 100"},
      {"header over limit", huge + "{}", "model.safetensors: malformed header: header length"},
      {"shorter than 8 bytes", std::string(3, '\0'),
       "model.safetensors: truncated: file has 3 bytes, less than the 8-byte header length"},
      {"malformed JSON", MakeSafetensorsBytes("{\"a\":{\"dtype\":\"F32\",", ""),
       "model.safetensors: malformed header: "},
      {"overlapping offsets",
       MakeSafetensorsBytes(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                            R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                            std::string(12, '\0')),
       "model.safetensors: malformed header: tensors 'a' [0, 8) and 'b' [4, 12) overlap"},
      {"unsupported dtype",
       MakeSafetensorsBytes(R"({"w":{"dtype":"F8_E5M2","shape":[2],"data_offsets":[0,2]}})",
                            std::string(2, '\0')),
       "model.safetensors: unsupported dtype F8_E5M2 for tensor w"},
  };
  for (const auto& c : cases) {
    const std::string path = dir / "model.safetensors";
    WriteAll(path, c.bytes);
    auto f = SafetensorsFile::Open(path);
    ASSERT_FALSE(f.ok()) << c.what;
    EXPECT_EQ(Msg(f.status()).find(c.expected), 0u)
        << c.what << ": got '" << f.status().message() << "'";
    std::printf("  %-24s -> %s\n", c.what, Msg(f.status()).substr(0, 140).c_str());
  }
  auto missing = SafetensorsFile::Open(dir / "absent.safetensors");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
}

// Every e4m3fn code against the rule written out by hand: sign bit 7, exponent bits 6..3 (bias 7),
// mantissa bits 2..0; exponent 0 is subnormal (m / 8 * 2^-6); no infinities, only S.1111.111
// is nan (so 0x7e = 448 is the largest finite value).
TEST(SafetensorsConvert, F8E4M3EveryCode) {
  for (int code = 0; code < 256; ++code) {
    const uint8_t b = static_cast<uint8_t>(code);
    const float got = F8E4M3ToFloat(b);
    const int e = (code >> 3) & 15, m = code & 7;
    if (e == 15 && m == 7) {
      EXPECT_TRUE(std::isnan(got)) << code;
      continue;
    }
    double want = e == 0 ? (m / 8.0) * std::pow(2.0, -6) : (1.0 + m / 8.0) * std::pow(2.0, e - 7);
    if (code & 0x80) want = -want;
    EXPECT_EQ(static_cast<double>(got), want) << "code " << code;
    EXPECT_EQ(std::signbit(got), (code & 0x80) != 0) << code;  // 0x80 is -0
  }
  EXPECT_EQ(F8E4M3ToFloat(0x7e), 448.0f);
  EXPECT_EQ(F8E4M3ToFloat(0x38), 1.0f);
  EXPECT_EQ(F8E4M3ToFloat(0x01), std::ldexp(1.0f, -9));
  EXPECT_EQ(F8E4M3ToFloat(0xf8), -256.0f);
  EXPECT_TRUE(std::isnan(F8E4M3ToFloat(0xff)));
  // The header names it F8_E4M3 and it converts through ConvertToFloat.
  auto dt = DTypeFromName("F8_E4M3");
  ASSERT_TRUE(dt.ok()) << dt.status();
  EXPECT_EQ(*dt, DType::kF8E4M3);
  EXPECT_EQ(DTypeSize(DType::kF8E4M3), 1u);
  const uint8_t src[3] = {0x38, 0xc0, 0x7e};
  float dst[3];
  ASSERT_TRUE(ConvertToFloat(DType::kF8E4M3, src, 3, dst).ok());
  EXPECT_EQ(dst[0], 1.0f);
  EXPECT_EQ(dst[1], -2.0f);
  EXPECT_EQ(dst[2], 448.0f);
}

}  // namespace
}  // namespace tandem::engine
