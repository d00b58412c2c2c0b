// The command-line conventions of tandemctl, tandem-agentd and tandem-infer, on CLI11 (Debian's
// libcli11-dev): one place decides how a command line is parsed and what the exit code is, so the
// three programs cannot drift into different dialects again.
//   --help on every command and subcommand   -> the flags, on stdout, exit 0
//   --version everywhere                     -> "<program> <build id>", exit 0
//   a usage error                            -> "<program>: <what, naming the flag>" on stderr, exit 2
//   "--flag value" and "--flag=value"        -> the same; a repeated flag: the last one wins
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "absl/status/status.h"

namespace tandem::cli {

inline constexpr int kExitUsage = 2;

// A command (or subcommand) App set up the tandem way. Options added to it and to subcommands made
// from it afterwards inherit the defaults (last value of a repeated flag wins, defaults shown in
// --help). `version` is printed by --version; pass the same one for every App of a program.
std::unique_ptr<CLI::App> NewApp(const std::string& name, const std::string& description,
                                 std::function<std::string()> version);

// A subcommand of `parent` with the same conventions (it inherits them from NewApp); `--version`
// also works after it. Its flags go into the returned App. The parent's --help lists it by the
// first line of `description`; its own --help shows all of it.
CLI::App* AddCommand(CLI::App* parent, const std::string& name, const std::string& description);

// Parses `args` (without the program name) into `app`. Returns the exit code when the program
// should stop now: 0 after --help or --version (printed to stdout), kExitUsage after a usage error
// (printed to stderr). nullopt: parsed, run the command.
std::optional<int> Parse(CLI::App& app, const std::vector<std::string>& args);

// For library parsers whose callers want a Status (and for their tests): InvalidArgument with the
// parse error's text; --help and --version are errors too (a library call has nobody to print to).
absl::Status ParseToStatus(CLI::App& app, const std::vector<std::string>& args);

// A rule across flags that failed after parsing (e.g. "--out is required"): prints it as Parse
// prints a usage error, pointing at the command's --help, and returns kExitUsage.
int UsageError(const CLI::App& command, const std::string& message);

// "--name SECONDS": a positive number of seconds (fractions allowed) up to max_seconds, stored as
// milliseconds.
CLI::Option* AddSeconds(CLI::App* app, const std::string& name, std::chrono::milliseconds* out,
                        const std::string& help, double max_seconds = 86400);

// "--name VALUE" that may be given many times ("--model-root /a --model-root /b"), each time one
// value, kept in order.
CLI::Option* AddRepeated(CLI::App* app, const std::string& name, std::vector<std::string>* out,
                         const std::string& help);

// "--json": the command prints one JSON object on stdout instead of text (same exit codes).
CLI::Option* AddJson(CLI::App* app, bool* json);

}  // namespace tandem::cli
