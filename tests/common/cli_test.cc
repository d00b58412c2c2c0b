// common/cli.h: the conventions every tandem program's command line follows, on a small App that
// has a subcommand like theirs: both flag forms, last value wins, --help / --version exit 0 on
// stdout, usage errors exit 2 naming the flag, seconds and --json.
#include "common/cli.h"

#include <gtest/gtest.h>

namespace tandem::cli {
namespace {

struct Toy {
  std::unique_ptr<CLI::App> app = NewApp("toy", "a toy program", [] { return "toy 1.2.3 sha256:abc"; });
  CLI::App* run = nullptr;
  std::string file = "cluster.yaml";
  int tp = 1;
  bool json = false;
  std::chrono::milliseconds timeout{5000};
  std::vector<std::string> roots;

  Toy() {
    run = AddCommand(app.get(), "run", "run something");
    run->add_option("-f,--file", file, "cluster file");
    run->add_option("--tp", tp, "ranks")->check(CLI::Range(1, 64));
    AddJson(run, &json);
    AddSeconds(run, "--timeout", &timeout, "deadline");
    AddRepeated(run, "--root", &roots, "repeatable");
    app->require_subcommand(1);
  }
};

// Runs Parse with stdout and stderr captured.
struct Outcome {
  std::optional<int> code;
  std::string out, err;
};
Outcome ParseCaptured(Toy& toy, const std::vector<std::string>& args) {
  ::testing::internal::CaptureStdout();
  ::testing::internal::CaptureStderr();
  Outcome o;
  o.code = Parse(*toy.app, args);
  o.out = ::testing::internal::GetCapturedStdout();
  o.err = ::testing::internal::GetCapturedStderr();
  return o;
}

TEST(CliTest, BothFlagFormsAndTheLastValueWins) {
  Toy toy;
  Outcome o = ParseCaptured(toy, {"run", "--file=a.yaml", "--tp", "2", "--timeout=2.5", "--json", "-f", "b.yaml"});
  EXPECT_FALSE(o.code.has_value()) << o.err;
  EXPECT_EQ(toy.file, "b.yaml");
  EXPECT_EQ(toy.tp, 2);
  EXPECT_EQ(toy.timeout.count(), 2500);
  EXPECT_TRUE(toy.json);
  EXPECT_TRUE(toy.run->parsed());
}

TEST(CliTest, ARepeatableFlagKeepsEveryValueInOrder) {
  Toy toy;
  Outcome o = ParseCaptured(toy, {"run", "--root", "/a", "--root=/b", "--tp", "3", "--root", "/c"});
  ASSERT_FALSE(o.code.has_value()) << o.err;
  EXPECT_EQ(toy.roots, (std::vector<std::string>{"/a", "/b", "/c"}));
  EXPECT_EQ(toy.tp, 3);
  Toy extra;
  o = ParseCaptured(extra, {"run", "--root", "/a", "/b"});
  EXPECT_EQ(o.code, kExitUsage) << "one value per --root: " << o.err;
}

TEST(CliTest, HelpOfTheSubcommandOnStdoutExitsZero) {
  Toy toy;
  Outcome o = ParseCaptured(toy, {"run", "--help"});
  ASSERT_EQ(o.code, 0);
  EXPECT_NE(o.out.find("--timeout"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("SECONDS=5"), std::string::npos) << "the default is shown\n" << o.out;
  EXPECT_NE(o.out.find("--json"), std::string::npos) << o.out;
  EXPECT_EQ(o.err, "");
  Toy top;
  o = ParseCaptured(top, {"-h"});
  ASSERT_EQ(o.code, 0);
  EXPECT_NE(o.out.find("run"), std::string::npos) << "the top help lists the subcommands\n" << o.out;
}

TEST(CliTest, VersionAnywhereExitsZero) {
  for (const std::vector<std::string>& args : {std::vector<std::string>{"--version"}, {"run", "--version"}}) {
    Toy toy;
    Outcome o = ParseCaptured(toy, args);
    ASSERT_EQ(o.code, 0) << o.err;
    EXPECT_EQ(o.out, "toy 1.2.3 sha256:abc\n");
  }
}

TEST(CliTest, UsageErrorsExitTwoNamingTheFlag) {
  struct Case {
    std::vector<std::string> args;
    std::string named;
  };
  const Case cases[] = {{{"run", "--bogus"}, "--bogus"},
                        {{"run", "--tp", "0"}, "--tp"},
                        {{"run", "--tp=many"}, "--tp"},
                        {{"run", "--timeout", "0"}, "--timeout"},
                        {{"run", "--file"}, "--file"},
                        {{}, "subcommand"},
                        {{"walk"}, "unknown command 'walk'"},
                        {{"--tp", "2"}, "before --tp"}};
  for (const Case& c : cases) {
    Toy toy;
    Outcome o = ParseCaptured(toy, c.args);
    ASSERT_EQ(o.code, kExitUsage) << c.named;
    EXPECT_NE(o.err.find(c.named), std::string::npos) << o.err;
    EXPECT_NE(o.err.find("--help"), std::string::npos) << "points at --help: " << o.err;
    EXPECT_EQ(o.out, "");
    std::cout << o.err;
  }
  Toy toy;
  Outcome o = ParseCaptured(toy, {"run", "--bogus"});
  EXPECT_EQ(o.err.rfind("toy run: ", 0), 0u) << "the message starts with the command: " << o.err;
}

TEST(CliTest, ParseToStatusCarriesTheMessage) {
  Toy toy;
  absl::Status st = ParseToStatus(*toy.app, {"run", "--tp", "x"});
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("--tp"), absl::string_view::npos) << st;
  Toy ok;
  EXPECT_TRUE(ParseToStatus(*ok.app, {"run", "--tp", "3"}).ok());
  EXPECT_EQ(ok.tp, 3);
}

}  // namespace
}  // namespace tandem::cli
