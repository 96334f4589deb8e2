// lockstep: one binary, subcommands (run, diff, check, hunt, show, stats, verify, export,
// gather, audit).
// Every input error ends here as one line naming the file and the problem, exit code 2.
#include <malloc.h>

#include <cstdio>
#include <exception>
#include <map>

#include <CLI/CLI.hpp>

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
    for (CLI::App* sub : app.get_subcommands()) where = sub->get_name() + ": ";
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
