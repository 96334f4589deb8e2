#include <cstdio>

#include <fmt/format.h>

#include "common/settings.h"
#include "tools/commands/commands.h"
#include "tools/facts.h"
#include "tools/launch.h"
#include "tools/run_set.h"

namespace lockstep::tools {

std::string trace_summary_line(const std::string& dir) {
  RunSet run;
  try {
    run = open_run_set(dir);
  } catch (const std::exception& e) {
    return fmt::format("no trace: {}", e.what());
  }
  std::vector<RankFacts> facts = scan_run(run, ScanOptions{});
  uint64_t records = 0, dropped = 0;
  uint32_t first_step = UINT32_MAX, last_step = 0;
  bool any_step = false, truncated = false;
  for (const RankFacts& f : facts) {
    records += f.records;
    dropped += f.dropped_records;
    truncated = truncated || f.truncated;
    if (!f.record_steps.empty()) {
      any_step = true;
      first_step = std::min(first_step, f.record_steps.front());
      last_step = std::max(last_step, f.record_steps.back());
    }
  }
  std::string steps = any_step ? fmt::format("steps {}-{}", first_step, last_step) : "no steps";
  return fmt::format("{}/{} rank{}, {} records, {}, {} dropped{}", run.files.size(),
                     run.world_size, run.world_size == 1 ? "" : "s", records, steps, dropped,
                     truncated ? ", cut off" : "");
}

void add_setting_flags(CLI::App* sub, TraceRequest& request, bool own_output) {
  for (const settings::Setting& setting : settings::all()) {
    if (*setting.cli_flag == '\0') continue;
    if (own_output && (setting.id == settings::Id::Dir || setting.id == settings::Id::Overwrite))
      continue;
    const RequestField field = request_field(request, setting.id);
    std::string help = settings::cli_help(setting);
    if (setting.id == settings::Id::Dir)
      help += " (default ./lockstep-trace-<time>, a new one)";
    else if (setting.id == settings::Id::Level)
      help += fmt::format(" (default {})", settings::kLevelNames[settings::kDefaultLevel]);
    if (field.flag != nullptr)
      sub->add_flag(setting.cli_flag, *field.flag, help);
    else if (field.text != nullptr)
      sub->add_option(setting.cli_flag, *field.text, help);
    else
      throw std::logic_error(std::string(setting.name) + " has a flag but no request field");
  }
}

CommandRunner add_run_command(CLI::App& app) {
  auto request = std::make_shared<TraceRequest>();
  CLI::App* sub = app.add_subcommand("run", "Run a command with the lockstep shim preloaded");
  add_setting_flags(sub, *request, /*own_output=*/false);
  sub->add_option("--torch-alloc", request->torch_alloc, kTorchAllocHelp)->capture_default_str();
  sub->add_option("--jax-alloc", request->jax_alloc, kJaxAllocHelp)
      ->capture_default_str();
  sub->add_option("--jax-graphs", request->jax_graphs, kJaxGraphsHelp)->capture_default_str();
  auto audit = std::make_shared<bool>(false);
  sub->add_flag("--audit", *audit,
                "When the job exits 0, audit its trace (lockstep audit): exit 1 if a rank is "
                "suspect");
  sub->add_option("command", request->command, "The command to run, after --")->required();
  sub->footer(R"(Every process of the job (torchrun, mpirun, srun...) writes its own file into the
directory. The exit status is the command's (128+N if signal N ended it); 2 if lockstep itself
could not start it; with --audit and a command that exited 0, the audit's (0 clean, 1 suspect, 2 incomplete). liblockstep.so is found through $LOCKSTEP_LIB or next to this binary.
At --level full a kernel's pointer arguments are fingerprinted from the pointer to the end of
their allocation; PyTorch's caching allocator packs many tensors into one allocation, so by
default (--torch-alloc auto) a full-level run of a PyTorch job uses its cudaMallocAsync backend,
one allocation per tensor. The job's numbers do not change; a PYTORCH_CUDA_ALLOC_CONF you set
yourself is kept. XLA (JAX) sub-allocates from one preallocated arena the same way: at --level
full (--jax-alloc auto) the job gets XLA_PYTHON_CLIENT_ALLOCATOR=platform (one allocation per
buffer, nothing preallocated) unless you set that variable yourself, and XLA's command buffers
(CUDA graphs) off (--jax-graphs auto), so that each kernel of a program is fingerprinted on its
own: the same kernels run in the same order.

Examples:
  lockstep run -o runs/a -- python train.py --steps 50
  lockstep run -o runs/b --level full --steps 40-42 -- torchrun --nproc-per-node 8 train.py
  lockstep run --kernels 'gemm|reduce' -- ./my_cuda_app
  lockstep run --audit -- torchrun --nproc-per-node 8 train.py   # then lockstep audit)");
  return [request, audit] {
    check_request(*request);  // before a default directory is made for a run that cannot start
    if (request->dir.empty()) request->dir = default_trace_dir();
    LaunchResult result = launch_traced(*request);
    std::fprintf(stderr, "lockstep: trace in %s: %s\n", request->dir.c_str(),
                 trace_summary_line(request->dir).c_str());
    // The job's own failure comes first; a clean exit is then only as good as the audit.
    if (*audit && result.exit_code == 0) return run_audit(request->dir, false, false);
    return result.exit_code;
  };
}

}  // namespace lockstep::tools
