#include "common/secret_file.h"

#include <sys/stat.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "tests/common/test_util.h"

namespace tandem {
namespace {

namespace fs = std::filesystem;

class SecretFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::MakeTempDir("tandem-secret");
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Write(const std::string& name, const std::string& text, mode_t mode) {
    const std::string p = (dir_ / name).string();
    std::ofstream(p, std::ios::binary) << text;
    chmod(p.c_str(), mode);
    return p;
  }
  fs::path dir_;
};

TEST_F(SecretFileTest, ReadsAnOwnerOnlySecretAndStripsTheNewline) {
  const std::string p = Write("token", "0123456789abcdef0123\n", 0600);
  auto s = ReadSecretFile(p, "the token file");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(*s, "0123456789abcdef0123");
}

TEST_F(SecretFileTest, RefusesGroupOrWorldReadableFilesNamingTheFix) {
  for (mode_t mode : {0644, 0640, 0604, 0620}) {
    const std::string p = Write("token" + std::to_string(mode), "0123456789abcdef0123\n", mode);
    auto s = ReadSecretFile(p, "the token file");
    ASSERT_FALSE(s.ok()) << std::oct << mode;
    EXPECT_EQ(s.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_NE(s.status().message().find("chmod 600 " + p), absl::string_view::npos) << s.status();
    EXPECT_EQ(s.status().message().find("0123456789abcdef"), absl::string_view::npos) << "the secret leaked";
  }
}

TEST_F(SecretFileTest, RefusesShortSecrets) {
  const std::string p = Write("short", "x\n", 0600);
  auto s = ReadSecretFile(p, "the token file");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("at least 16"), absl::string_view::npos) << s.status();
  const std::string ws = Write("blank", " \n\n", 0600);
  EXPECT_FALSE(ReadSecretFile(ws, "the token file").ok());
}

TEST_F(SecretFileTest, RefusesMissingFilesAndDirectories) {
  auto missing = ReadSecretFile((dir_ / "nope").string(), "--api-key-file");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("--api-key-file"), absl::string_view::npos);
  chmod(dir_.c_str(), 0700);
  EXPECT_FALSE(ReadSecretFile(dir_.string(), "the token file").ok());
}

TEST_F(SecretFileTest, RulesCanRelaxTheLength) {
  const std::string p = Write("pem", "k", 0600);
  SecretFileRules r;
  r.min_bytes = 1;
  EXPECT_TRUE(ReadSecretFile(p, "the key", r).ok());
}

}  // namespace
}  // namespace tandem
