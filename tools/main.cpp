// lockstep: one binary, subcommands (run, diff, check, hunt, show, stats, verify, export,
// gather, audit).
// Every input error ends here as one line naming the file and the problem, exit code 2.
#include <malloc.h>

#include <cstdio>
#include <exception>
#include <map>
#include <string>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "tools/commands/commands.h"
#include "tools/run_set.h"
#include "trace/reader.h"

#ifndef LOCKSTEP_VERSION
#define LOCKSTEP_VERSION "unknown"
#endif

namespace {

// One line whatever the message holds: a control character (a file named with a newline in it)
// is printed as \xNN, so that the error stays the one line a script reads.
int fail(const std::string& message) {
  std::string line;
  for (const char c : message) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\x%02x", static_cast<unsigned char>(c));
      line += escaped;
    } else {
      line += c;
    }
  }
  std::fprintf(stderr, "lockstep: %s\n", line.c_str());
  return lockstep::tools::kExitInvalid;
}

// For a command that runs a job (run, check, hunt, replay: a "command" after `--`), what stands
// before `--` that CLI11 reports only as the job's own words "not expected": the first word that
// is neither an option nor an option's value (`lockstep run DIR -- job`), or an option the
// command does not have (it took it, and what follows, for the job). "" if nothing is wrong there.
std::string before_the_command(const CLI::App* sub, int argc, char** argv) {
  if (sub->get_option_no_throw("command") == nullptr) return "";
  int at = 1;
  while (at < argc && !sub->check_name(argv[at])) ++at;
  int dashes = at;
  while (dashes < argc && std::string(argv[dashes]) != "--") ++dashes;
  if (dashes == argc) return "";
  const std::string name = sub->get_name();
  for (int i = at + 1; i < dashes; ++i) {
    const std::string word = argv[i];
    if (!word.starts_with("-")) {
      const bool has_output = sub->get_option_no_throw("-o") != nullptr;
      return fmt::format("'{}' comes before '--', where only options go; the command goes after "
                         "it{}",
                         word,
                         has_output ? fmt::format(" (for a folder to write into: -o {})", word)
                                    : "");
    }
    // --name=value, -xVALUE (a short option with its value attached), or the option alone.
    const bool short_option = !word.starts_with("--");
    const std::string option_name =
        short_option ? word.substr(0, 2) : word.substr(0, word.find('='));
    const CLI::Option* option = sub->get_option_no_throw(option_name);
    if (option == nullptr) return fmt::format("'{}' is not an option of {}", option_name, name);
    if (option_name == word && option->get_expected_min() > 0) ++i;  // its value
  }
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  using namespace lockstep::tools;
  // A run of thousands of rank files is opened file after file, each reader's tables freed as
  // the next is built: glibc's defaults handed that memory back to the kernel and faulted it in
  // again every few files (a tenth of an identical diff's time at 2,432 ranks, issue #34). Kept
  // instead; the peak stays what one worker's files need.
  ::mallopt(M_TRIM_THRESHOLD, 256 << 20);
  ::mallopt(M_MMAP_THRESHOLD, 32 << 20);
  CLI::App app("lockstep: bit-for-bit audit traces of GPU training runs", "lockstep");
  app.set_version_flag("--version", LOCKSTEP_VERSION);
  app.require_subcommand(1);
  app.footer(R"(Examples:
  lockstep run -o runs/a -- python train.py       # trace a job (any launcher inside)
  lockstep diff runs/a runs/b                      # first op whose inputs matched, outputs differed
  lockstep check -- python train.py                # CI gate: two traced runs, diffed
  lockstep hunt -- python train.py                 # broad runs, then full runs on the bad step
  lockstep audit runs/a                            # ranks that disagree within one run
Run 'lockstep COMMAND --help' for a command's options.)");
  std::map<CLI::App*, CommandRunner> runners;
  auto add = [&](CommandRunner runner) {
    runners[app.get_subcommands({}).back()] = std::move(runner);
  };
  add(add_run_command(app));
  add(add_diff_command(app));
  add(add_check_command(app));
  add(add_hunt_command(app));
  add(add_show_command(app));
  add(add_stats_command(app));
  add(add_verify_command(app));
  add(add_export_command(app));
  add(add_gather_command(app));
  add(add_audit_command(app));
  add(add_replay_command(app));
  if (argc > 1 && argv[1][0] != '-') {
    bool known = false;
    for (const CLI::App* sub : app.get_subcommands({})) known = known || sub->check_name(argv[1]);
    if (!known) return fail(std::string("unknown command '") + argv[1] + "' (see --help)");
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::string where;
    for (CLI::App* sub : app.get_subcommands()) {
      where = sub->get_name() + ": ";
      const std::string problem = before_the_command(sub, argc, argv);
      if (!problem.empty()) return fail(where + problem + " (see --help)");
    }
    return fail(where + e.what() + " (see --help)");
  }
  try {
    for (CLI::App* sub : app.get_subcommands()) return runners.at(sub)();
    return fail("no command given (see --help)");
  } catch (const lockstep::trace::TraceError& e) {
    return fail(e.what());
  } catch (const InputError& e) {
    return fail(e.what());
  } catch (const std::bad_alloc&) {
    return fail("out of memory");
  } catch (const std::exception& e) {
    return fail(std::string("internal error: ") + e.what());
  } catch (...) {
    return fail("internal error");
  }
}
