// Path confinement of the agent's model access (agentd/model_roots.h).
#include "agentd/model_roots.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <iostream>

#include "tests/common/fake_node.h"
#include "tests/common/test_util.h"

namespace tandem::agentd {
namespace {
namespace fs = std::filesystem;
using tandem::testing::TempDir;
using tandem::testing::WriteTextFile;

TEST(ModelRootsTest, WithoutRootsEveryPathIsRefusedNamingTheFlag) {
  ModelRoots none;
  auto r = none.Resolve("/models/qwen");
  ASSERT_TRUE(absl::IsPermissionDenied(r.status())) << r.status();
  EXPECT_NE(r.status().message().find("--model-root"), absl::string_view::npos);
  EXPECT_NE(r.status().message().find("/models/qwen"), absl::string_view::npos);
}

TEST(ModelRootsTest, CreateRefusesMissingAndRelativeRoots) {
  TempDir tmp;
  EXPECT_TRUE(absl::IsInvalidArgument(ModelRoots::Create({tmp / "missing"}).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(ModelRoots::Create({"relative/dir"}).status()));
  WriteTextFile(tmp / "file", "x");
  EXPECT_TRUE(absl::IsInvalidArgument(ModelRoots::Create({tmp / "file"}).status()));
}

TEST(ModelRootsTest, ResolvesInsideAndRefusesEverythingElse) {
  TempDir tmp;
  WriteTextFile(tmp / "models/qwen/config.json", "{}");
  WriteTextFile(tmp / "other/secret", "x");
  fs::create_directory_symlink(tmp / "other", tmp / "models/escape");
  fs::create_directory_symlink(tmp / "models/qwen", tmp / "models/alias");
  auto roots = ModelRoots::Create({tmp / "models"});
  ASSERT_TRUE(roots.ok()) << roots.status();
  const std::string canon = fs::canonical(tmp / "models/qwen").string();

  EXPECT_EQ(*roots->Resolve(tmp / "models/qwen"), canon);
  EXPECT_EQ(*roots->Resolve(tmp / "models/qwen/"), canon);
  EXPECT_EQ(*roots->Resolve(tmp / "models/alias"), canon) << "a symlink that stays inside is fine";
  EXPECT_EQ(*roots->Resolve(tmp / "models/./qwen/../qwen"), canon);

  for (const std::string& bad : {std::string("/etc"), std::string("/"), tmp / "models/../other", tmp / "models/escape",
                                tmp / "models/escape/secret", tmp / "modelsX", tmp / "other"}) {
    auto r = roots->Resolve(bad);
    std::cout << bad << ": " << r.status() << "\n";
    EXPECT_TRUE(absl::IsPermissionDenied(r.status())) << bad << ": " << r.status();
    EXPECT_NE(r.status().message().find(bad), absl::string_view::npos) << "the refusal names the path";
  }
  EXPECT_TRUE(absl::IsInvalidArgument(roots->Resolve("models/qwen").status()));
  EXPECT_TRUE(absl::IsNotFound(roots->Resolve(tmp / "models/nope").status()));
}

TEST(ModelRootsTest, CheckTreeFindsSymlinksThatLeave) {
  TempDir tmp;
  WriteTextFile(tmp / "models/qwen/config.json", "{}");
  WriteTextFile(tmp / "models/blobs/abc", "weights");
  fs::create_symlink(tmp / "models/blobs/abc", tmp / "models/qwen/model.safetensors");  // HF cache layout: inside
  fs::create_symlink(tmp / "models/qwen/gone", tmp / "models/qwen/dangling");
  auto roots = ModelRoots::Create({tmp / "models"});
  ASSERT_TRUE(roots.ok());
  const std::string qwen = *roots->Resolve(tmp / "models/qwen");
  EXPECT_TRUE(roots->CheckTree(qwen).ok());

  fs::create_directories(tmp / "models/qwen/sub/deeper");
  fs::create_symlink("/etc/shadow", tmp / "models/qwen/sub/deeper/tokenizer.json");
  absl::Status st = roots->CheckTree(qwen);
  std::cout << st << "\n";
  ASSERT_TRUE(absl::IsPermissionDenied(st)) << st;
  EXPECT_NE(st.message().find("sub/deeper/tokenizer.json"), absl::string_view::npos);

  // A symlink loop ends the walk instead of hanging it.
  fs::remove(tmp / "models/qwen/sub/deeper/tokenizer.json");
  fs::create_directory_symlink(tmp / "models/qwen", tmp / "models/qwen/sub/loop");
  EXPECT_TRUE(roots->CheckTree(qwen).ok());
}

TEST(ModelRootsTest, SeveralRoots) {
  TempDir tmp;
  WriteTextFile(tmp / "a/m1/config.json", "{}");
  WriteTextFile(tmp / "b/m2/config.json", "{}");
  auto roots = ModelRoots::Create({tmp / "a", tmp / "b"});
  ASSERT_TRUE(roots.ok());
  EXPECT_TRUE(roots->Resolve(tmp / "a/m1").ok());
  EXPECT_TRUE(roots->Resolve(tmp / "b/m2").ok());
  EXPECT_EQ(roots->roots().size(), 2u);
}

}  // namespace
}  // namespace tandem::agentd
