#include <cstdio>
#include <regex>

#include <fmt/format.h>

#include "tools/regex_text.h"
#include "tools/commands/commands.h"
#include "tools/why/names.h"
#include "tools/record_text.h"
#include "tools/run_set.h"
#include "trace/reader.h"

namespace lockstep::tools {

namespace {

struct ShowRequest {
  std::string dir;
  std::optional<int> rank;
  std::optional<uint32_t> step;
  std::string grep;
  uint64_t limit = 0;
  bool salvage = false;
  bool file_order = false;
};

}  // namespace

CommandRunner add_show_command(CLI::App& app) {
  auto request = std::make_shared<ShowRequest>();
  CLI::App* sub = app.add_subcommand(
      "show", "Print a trace's records, one line each, in the order the process made the calls");
  sub->add_option("DIR", request->dir, "Trace directory (or one .lstrace file)")->required();
  sub->add_option("--rank", request->rank, "Only this rank");
  sub->add_flag_callback(
      "--verbose", [] { set_full_names(true); },
      "Full kernel names in the text (template arguments, lambdas), not the shortened ones");
  sub->add_option("--step", request->step, "Only this step");
  sub->add_option("--grep", request->grep,
                  "Only records whose name matches this regex (ECMAScript, searched in the name's "
                  "first 8 KiB)");
  sub->add_option("--limit", request->limit, "Stop after this many lines per rank (0: no limit)")
      ->check(whole_number());
  sub->add_flag("--salvage", request->salvage,
                "Show the valid prefix of a file with a corrupt block (else exit 2)");
  sub->add_flag("--file-order", request->file_order,
                "Print records in the order the file holds them (per thread, block by block) "
                "instead of sequence order; streams without sorting");
  sub->footer(R"(Each line: rank, step, seq (the process's call order), stream, thread, kind, name
(a kernel's shortened to its function and operator, _scatter_gather_elementwise_kernel<ReduceAdd>;
--verbose: in full), then the fields (zero ones left out), enum values by name as the CUDA,
cuBLAS and NCCL headers spell them (type_a=CUDA_R_16BF compute_type=CUBLAS_COMPUTE_32F
datatype=ncclBfloat16 redop=ncclSum), a cuBLASLt algorithm as id/tile/stages/split-k or
"heuristic" (none given) with its reduction_scheme, cta_swizzling... when not 0,
then each buffer (role, label, dtype, bytes, fingerprint or -, dropped, unwritten, and flags),
a metric's payload decoded by its dtype (guessed from its size when the trace does not say),
a warning as a sentence, and last the scope: the ranges open on the calling thread (NVTX
push/pop, lockstep_scope_push; under `lockstep run`, a PyTorch module's path and phase, as
in | scope GPT (forward) / blocks.1.mlp (forward)). Records are in sequence order per rank,
steps in order.

Examples:
  lockstep show runs/a --rank 0 --step 3
  lockstep show runs/a --grep 'ncclAllReduce|gemm' --limit 20
  lockstep show runs/a --file-order | head     # no sorting: fastest on a huge trace
  lockstep show runs/a --step 3 | grep 'scope blocks.1.mlp (backward)')");
  return [request] {
    std::optional<std::regex> pattern;
    if (!request->grep.empty()) {
      if (request->grep.size() > kMaxRegexPattern)
        throw InputError(fmt::format("--grep: a pattern of {} characters; at most {}",
                                     request->grep.size(), kMaxRegexPattern));
      try {
        pattern.emplace(request->grep, std::regex::ECMAScript | std::regex::optimize);
      } catch (const std::regex_error& e) {
        throw InputError(
            fmt::format("--grep: '{}' is not a valid regex: {}", request->grep, e.what()));
      }
    }
    OpenOptions open_options;
    open_options.salvage = request->salvage;
    RunSet run = open_run_set(request->dir, open_options);
    for (const std::string& w : run.warnings) warn(w);
    if (request->rank && !run.find(*request->rank))
      throw InputError(fmt::format("{}: no trace file for rank {}", request->dir, *request->rank));
    for (const RankFile& file : run.files) {
      if (request->rank && file.rank != *request->rank) continue;
      std::unique_ptr<trace::TraceReader> reader = file.open();
      if (file.salvaged) warn(file.integrity.corruption + "; showing the prefix before it");
      uint32_t first = request->step.value_or(0), last = request->step.value_or(UINT32_MAX);
      uint64_t shown = 0;
      std::string out;
      auto print = [&](const trace::Record& r) {
        if (r.step < first || r.step > last) return true;
        if (pattern && !regex_search_bounded(reader->string(r.name), *pattern))
          return true;
        out = record_line(file.rank, r, *reader);
        out += '\n';
        std::fputs(out.c_str(), stdout);
        return request->limit == 0 || ++shown < request->limit;
      };
      if (request->file_order)
        reader->for_each_record(first, last, print);
      else
        for_each_record_in_seq_order(*reader, first, last, print);
      if (reader->truncated())
        warn(fmt::format("{}: cut off at offset {}; showing the valid prefix", file.path,
                         reader->truncation_offset()));
    }
    return 0;
  };
}

}  // namespace lockstep::tools
