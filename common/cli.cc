#include "common/cli.h"

#include <cmath>
#include <cstdio>
#include <iostream>
#include <sstream>

namespace tandem::cli {
namespace {

// "tandemctl preflight": the command's name after its parents'.
std::string FullName(const CLI::App& command) {
  std::string name = command.get_name();
  for (const CLI::App* p = command.get_parent(); p != nullptr; p = p->get_parent()) name = p->get_name() + " " + name;
  return name;
}

// The subcommand the command line chose, deepest first: where a usage error belongs.
const CLI::App& ChosenCommand(const CLI::App& app) {
  const CLI::App* at = &app;
  while (!at->get_subcommands().empty()) at = at->get_subcommands().front();
  return *at;
}

// Lists a subcommand by the first line of its description; its own --help shows all of it.
class Formatter final : public CLI::Formatter {
 public:
  std::string make_subcommand(const CLI::App* sub) const override {
    std::stringstream out;
    const std::string& d = sub->get_description();
    CLI::detail::format_help(out, sub->get_display_name(true), d.substr(0, d.find('\n')), column_width_);
    return out.str();
  }
};

}  // namespace

std::unique_ptr<CLI::App> NewApp(const std::string& name, const std::string& description,
                                 std::function<std::string()> version) {
  auto app = std::make_unique<CLI::App>(description, name);
  // The hand-written parsers before CLI11 let a later "--flag v" replace an earlier one; scripts
  // that append an override to a default command line rely on it.
  app->option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast)->always_capture_default();
  app->set_help_flag("-h,--help", "print this help and exit");
  app->set_version_flag("--version", std::move(version), "print the build id and exit");
  app->formatter(std::make_shared<Formatter>());
  app->get_formatter()->column_width(34);
  return app;
}

CLI::App* AddCommand(CLI::App* parent, const std::string& name, const std::string& description) {
  CLI::App* sub = parent->add_subcommand(name, description);
  // Options of the parent (--version) keep working after the subcommand's name.
  sub->fallthrough();
  return sub;
}

std::optional<int> Parse(CLI::App& app, const std::vector<std::string>& args) {
  std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 takes them last first
  try {
    app.parse(reversed);
    return std::nullopt;
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) {
      // --help (of the chosen subcommand) or --version, on stdout.
      app.exit(e, std::cout, std::cerr);
      std::cout.flush();
      return 0;
    }
    const CLI::App& chosen = ChosenCommand(app);
    // CLI11 says only "A subcommand is required" when the first word is no command it knows, or
    // a flag: name what it got instead.
    if (&chosen == &app && app.get_require_subcommand_min() > 0 && !args.empty() && !args[0].empty() &&
        dynamic_cast<const CLI::RequiredError*>(&e) != nullptr) {
      return UsageError(app, args[0][0] == '-' ? "a command must come first, before " + args[0]
                                               : "unknown command '" + args[0] + "'");
    }
    return UsageError(chosen, e.what());
  }
}

absl::Status ParseToStatus(CLI::App& app, const std::vector<std::string>& args) {
  std::vector<std::string> reversed(args.rbegin(), args.rend());
  try {
    app.parse(reversed);
    return absl::OkStatus();
  } catch (const CLI::ParseError& e) {
    return absl::InvalidArgumentError(e.get_exit_code() == 0 ? e.get_name() : e.what());
  }
}

int UsageError(const CLI::App& command, const std::string& message) {
  const std::string name = FullName(command);
  std::fprintf(stderr, "%s: %s\nRun '%s --help' for its flags.\n", name.c_str(), message.c_str(), name.c_str());
  return kExitUsage;
}

CLI::Option* AddSeconds(CLI::App* app, const std::string& name, std::chrono::milliseconds* out,
                        const std::string& help, double max_seconds) {
  std::ostringstream shown;
  shown << static_cast<double>(out->count()) / 1000.0;
  return app
      ->add_option_function<double>(
          name, [out](const double& s) { *out = std::chrono::milliseconds(std::llround(s * 1000)); }, help)
      ->check(CLI::Range(0.001, max_seconds).description(""))
      ->type_name("SECONDS")
      ->default_str(shown.str());
}

CLI::Option* AddRepeated(CLI::App* app, const std::string& name, std::vector<std::string>* out,
                         const std::string& help) {
  // One value per occurrence: a vector option would otherwise swallow the arguments after it.
  return app->add_option(name, *out, help)
      ->expected(1)
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->default_str("");  // not "[]"
}

CLI::Option* AddJson(CLI::App* app, bool* json) {
  return app->add_flag("--json", *json, "print one JSON object on stdout instead of text (same exit codes)");
}

}  // namespace tandem::cli
