#include "bench/decode_bench_flags.h"

#include <gtest/gtest.h>

#include <string>

#include "engine/model.h"

namespace tandem::bench {
namespace {

TEST(DecodeBenchFlags, HybridNamesParse) {
  for (const char* name : {"qwen3-30b-a3b", "qwen3.5-35b-a3b", "qwen3-next-80b-a3b"}) {
    auto o = ParseDecodeBenchFlags({"--backend", "cuda", "--synthetic", name, "--tp", "2", "--batches", "1,8"});
    ASSERT_TRUE(o.ok()) << o.status();
    EXPECT_EQ(o->synthetic, name);
    EXPECT_EQ(o->tp, 2);
    EXPECT_EQ(o->batches, (std::vector<int>{1, 8}));
    EXPECT_EQ(o->contexts, (std::vector<int>{1024, 4096}));
    EXPECT_FALSE(o->help);
  }
}

// An unknown name fails at parse time (before any GPU work) and lists the three known names.
TEST(DecodeBenchFlags, UnknownSyntheticListsTheNames) {
  auto o = ParseDecodeBenchFlags({"--synthetic", "qwen3-next"});
  ASSERT_FALSE(o.ok());
  EXPECT_EQ(o.status().code(), absl::StatusCode::kNotFound);
  const std::string msg(o.status().message());
  for (const char* name : {"qwen3-30b-a3b", "qwen3.5-35b-a3b", "qwen3-next-80b-a3b"}) {
    EXPECT_NE(msg.find(name), std::string::npos) << msg;
  }
}

TEST(DecodeBenchFlags, HelpListsTheNames) {
  auto o = ParseDecodeBenchFlags({"--help"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_TRUE(o->help);
  const std::string usage = DecodeBenchUsage();
  EXPECT_NE(usage.find("one of: qwen3-30b-a3b, qwen3.5-35b-a3b, qwen3-next-80b-a3b\n"), std::string::npos) << usage;
}

TEST(DecodeBenchFlags, BadFlagsAreNamed) {
  auto unknown = ParseDecodeBenchFlags({"--batch", "1"});
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(std::string(unknown.status().message()), "bench: unknown flag --batch");
  auto list = ParseDecodeBenchFlags({"--contexts", "1024,x"});
  ASSERT_FALSE(list.ok());
  EXPECT_EQ(std::string(list.status().message()), "bad number list: 1024,x");
  auto missing = ParseDecodeBenchFlags({"--synthetic"});
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(std::string(missing.status().message()), "flag --synthetic needs a value");
  EXPECT_FALSE(ParseDecodeBenchFlags({"--backend", "cpu"}).ok());
}

// "--flag=value" works as "--flag value", as on every tandem command line.
TEST(DecodeBenchFlags, BothFlagForms) {
  auto spaced = ParseDecodeBenchFlags({"--batches", "1,8", "--tp", "2", "--kv-dtype", "fp8"});
  auto joined = ParseDecodeBenchFlags({"--batches=1,8", "--tp=2", "--kv-dtype=fp8"});
  ASSERT_TRUE(spaced.ok()) << spaced.status();
  ASSERT_TRUE(joined.ok()) << joined.status();
  EXPECT_EQ(joined->batches, (std::vector<int>{1, 8}));
  EXPECT_EQ(joined->batches, spaced->batches);
  EXPECT_EQ(joined->tp, 2);
  EXPECT_EQ(joined->kv_dtype, "fp8");
  EXPECT_FALSE(ParseDecodeBenchFlags({"--no-kernel-table=1"}).ok()) << "a switch takes no value";
  EXPECT_FALSE(ParseDecodeBenchFlags({"--quant-prefill-split=1"}).ok()) << "a switch takes no value";
}

TEST(DecodeBenchFlags, QuantPrefillSplitIsOffUnlessAsked) {
  auto def = ParseDecodeBenchFlags({"--weights", "fp8"});
  ASSERT_TRUE(def.ok()) << def.status();
  EXPECT_FALSE(def->quant_prefill_split);
  auto on = ParseDecodeBenchFlags({"--weights", "fp8,nvfp4", "--quant-prefill-split"});
  ASSERT_TRUE(on.ok()) << on.status();
  EXPECT_TRUE(on->quant_prefill_split);
  EXPECT_NE(DecodeBenchUsage().find("--quant-prefill-split"), std::string::npos);
}

// The decode attention kernel, chosen for same-run A/Bs and timelines (session 32).
TEST(DecodeBenchFlags, DecodeAttentionChoice) {
  auto def = ParseDecodeBenchFlags({});
  ASSERT_TRUE(def.ok()) << def.status();
  EXPECT_EQ(def->decode_attention, "split");
  auto on = ParseDecodeBenchFlags({"--decode-attention=paged"});
  ASSERT_TRUE(on.ok()) << on.status();
  EXPECT_EQ(on->decode_attention, "paged");
  EXPECT_FALSE(ParseDecodeBenchFlags({"--decode-attention", "auto"}).ok());
  auto bad = ParseDecodeBenchFlags({"--decode-attention", "tiled"});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("tiled"), std::string::npos) << bad.status();
  EXPECT_NE(DecodeBenchUsage().find("--decode-attention"), std::string::npos);
  // The most K/V buffers a block of it may take: 3 (the model's default) unless asked; counts under 2
  // are refused here, counts past the kernels' most by the model.
  EXPECT_EQ(def->decode_attention_buffers, 3);
  EXPECT_EQ(def->decode_attention_buffers, engine::ModelLoadOptions{}.cuda_decode_attention_buffers);
  auto two = ParseDecodeBenchFlags({"--decode-attention-buffers=2"});
  ASSERT_TRUE(two.ok()) << two.status();
  EXPECT_EQ(two->decode_attention_buffers, 2);
  auto one = ParseDecodeBenchFlags({"--decode-attention-buffers", "1"});
  ASSERT_FALSE(one.ok());
  EXPECT_NE(one.status().message().find("--decode-attention-buffers"), std::string::npos) << one.status();
  EXPECT_FALSE(ParseDecodeBenchFlags({"--decode-attention-buffers", "deep"}).ok());
  EXPECT_NE(DecodeBenchUsage().find("--decode-attention-buffers"), std::string::npos);
}

// The decode-attention A/B switch of session 18 is gone (the split kernel is the decode batches'
// attention since its A/B): the flag is refused, not ignored.
TEST(DecodeBenchFlags, RetiredSwitchIsRefused) {
  EXPECT_FALSE(ParseDecodeBenchFlags({"--decode-attention-split"}).ok());
}

TEST(DecodeBenchFlags, WeightsDefaultAndLists) {
  using kernels::WeightFormat;
  auto def = ParseDecodeBenchFlags({});
  ASSERT_TRUE(def.ok()) << def.status();
  EXPECT_EQ(def->weights, (std::vector<WeightFormat>{WeightFormat::kBf16}));
  auto one = ParseDecodeBenchFlags({"--weights", "nvfp4"});
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ(one->weights, (std::vector<WeightFormat>{WeightFormat::kNvfp4}));
  auto all = ParseDecodeBenchFlags({"--weights", "bf16,fp8,nvfp4", "--batches", "1"});
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(all->weights, (std::vector<WeightFormat>{WeightFormat::kBf16, WeightFormat::kFp8Block, WeightFormat::kNvfp4}));
  for (WeightFormat f : all->weights) {
    auto back = ParseDecodeBenchFlags({"--weights", WeightFormatName(f)});
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(back->weights, std::vector<WeightFormat>{f});
  }
  EXPECT_NE(DecodeBenchUsage().find("--weights bf16|fp8|nvfp4"), std::string::npos) << DecodeBenchUsage();
}

// A bad --weights value is refused naming it (and what is accepted); a format listed twice too.
TEST(DecodeBenchFlags, BadWeightsAreNamed) {
  auto bad = ParseDecodeBenchFlags({"--weights", "fp8,int4"});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(std::string(bad.status().message()),
            "bench: unknown --weights format 'int4' (bf16, fp8 or nvfp4, or a list of them: bf16,fp8,nvfp4)");
  auto empty = ParseDecodeBenchFlags({"--weights", "bf16,"});
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.status().message().find("''"), absl::string_view::npos) << empty.status();
  auto twice = ParseDecodeBenchFlags({"--weights", "fp8,bf16,fp8"});
  ASSERT_FALSE(twice.ok());
  EXPECT_EQ(std::string(twice.status().message()), "bench: --weights lists fp8 twice");
  EXPECT_FALSE(ParseDecodeBenchFlags({"--weights"}).ok());
}

// --prefill-batch: 8x1024 by default, a list of NxL rows, and an empty value for none.
TEST(DecodeBenchFlags, PrefillBatchDefaultListAndEmpty) {
  auto def = ParseDecodeBenchFlags({});
  ASSERT_TRUE(def.ok()) << def.status();
  EXPECT_EQ(def->prefill_batches, (std::vector<PrefillBatch>{{8, 1024}}));
  EXPECT_EQ(def->prefill_lengths, (std::vector<int>{512, 2048}));
  auto list = ParseDecodeBenchFlags({"--prefill-batch", "8x1024,4x2048,32x64"});
  ASSERT_TRUE(list.ok()) << list.status();
  EXPECT_EQ(list->prefill_batches, (std::vector<PrefillBatch>{{8, 1024}, {4, 2048}, {32, 64}}));
  auto joined = ParseDecodeBenchFlags({"--prefill-batch=2x16"});
  ASSERT_TRUE(joined.ok()) << joined.status();
  EXPECT_EQ(joined->prefill_batches, (std::vector<PrefillBatch>{{2, 16}}));
  for (auto args : {std::vector<std::string>{"--prefill-batch="}, std::vector<std::string>{"--prefill-batch", ""}}) {
    auto off = ParseDecodeBenchFlags(args);
    ASSERT_TRUE(off.ok()) << off.status();
    EXPECT_TRUE(off->prefill_batches.empty());
  }
  // --prefill= likewise runs no single-sequence prefill rows; an empty batch or context list is refused.
  for (auto args : {std::vector<std::string>{"--prefill="}, std::vector<std::string>{"--prefill", ""}}) {
    auto off = ParseDecodeBenchFlags(args);
    ASSERT_TRUE(off.ok()) << off.status();
    EXPECT_TRUE(off->prefill_lengths.empty());
  }
  EXPECT_FALSE(ParseDecodeBenchFlags({"--batches="}).ok());
  EXPECT_FALSE(ParseDecodeBenchFlags({"--contexts="}).ok());
  EXPECT_EQ(PrefillBatchName({4, 2048}), "4x2048");
  EXPECT_NE(DecodeBenchUsage().find("--prefill-batch 8x1024"), std::string::npos) << DecodeBenchUsage();
}

// A malformed row is refused naming it; a row listed twice too.
TEST(DecodeBenchFlags, BadPrefillBatchIsNamed) {
  for (const char* bad :
       {"8", "8x", "x1024", "0x1024", "8x0", "8x1024x2", "8*1024", "-1x8", "+8x1024", " 8x1024", "8x1e3"}) {
    auto o = ParseDecodeBenchFlags({"--prefill-batch", std::string("4x16,") + bad});
    ASSERT_FALSE(o.ok()) << bad;
    EXPECT_EQ(o.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(std::string(o.status().message()),
              std::string("bench: bad --prefill-batch row '") + bad +
                  "' (SEQUENCESxTOKENS, or a list of them: 8x1024,4x2048; empty for none)");
  }
  auto trailing = ParseDecodeBenchFlags({"--prefill-batch", "8x1024,"});
  ASSERT_FALSE(trailing.ok());
  EXPECT_NE(trailing.status().message().find("row ''"), absl::string_view::npos) << trailing.status();
  auto twice = ParseDecodeBenchFlags({"--prefill-batch", "8x1024,2x64,8x1024"});
  ASSERT_FALSE(twice.ok());
  EXPECT_EQ(std::string(twice.status().message()), "bench: --prefill-batch lists 8x1024 twice");
  EXPECT_FALSE(ParseDecodeBenchFlags({"--prefill-batch"}).ok());
}

}  // namespace
}  // namespace tandem::bench
