// What a diff finds, in plain values (no pool ids), ready for the text and JSON reports.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tools/diff/alignment.h"
#include "tools/why/environment.h"
#include "tools/why/nccl_choice.h"
#include "tools/diff/setup_phase.h"
#include "tools/replay_verdict.h"

namespace lockstep::tools {

// origin: every compared input matched and an output differed (this op made the difference).
// receiver: an input already differed (the op only carried a difference made elsewhere; when
//   nothing traced in the window wrote it and the window starts after the trace's first step,
//   a difference made before the window: Divergence::made_before_step).
// structural: the two runs did different work here (another op, count, field, buffer layout).
// metric: only a metric payload differed (no fingerprinted input says where it came from).
// state: a State record's fingerprint differed (a parameter, gradient or optimizer state after
//   the step): it dates the divergence, never names its origin (the op that wrote it does).
// host input: a copy from host memory to the device whose host source (fingerprinted on the CPU,
//   trace::kHostSourceLabel) differed: the difference entered from the host, not from a GPU op.
//   It is where the difference entered, as an origin is (the culprit), but no GPU op made it.
// The order is the blame order's tie-break inside a step and collective epoch.
enum class Classification { Origin, HostInput, Structural, Receiver, Metric, State };
const char* classification_name(Classification c);  // "origin", "host input", ...
// The detail line of a host input: "the bytes copied from host memory differ (step 2,
// cudaMemcpyAsync, 4 bytes): the difference entered from the host" (the bytes fingerprinted:
// the copy's, or its first LOCKSTEP_HOST_HASH_BYTES).
std::string host_input_detail(uint64_t step, const std::string& api, uint64_t bytes);

// A State record's state_kind field (trace/record_kinds.def): "parameter", "gradient",
// "optimizer", "user"; "kind N" for a value this version does not know.
std::string state_kind_name(uint64_t state_kind);

// Why a structural divergence is structural.
enum class StructuralKind { None, Inserted, Deleted, Reordered, Fields, Buffers };
const char* structural_kind_name(StructuralKind k);

struct BufferDiff {
  std::string role;  // "in" | "out"
  std::string label;
  std::string dtype;
  uint64_t bytes = 0;
  uint64_t fingerprint_a = 0, fingerprint_b = 0;
};

// One line of context around a structural divergence.
struct ContextLine {
  uint64_t seq = 0;
  std::string text;  // "kernel name" / "collective ncclAllReduce comm 0 #3"
  bool marked = false;
};

struct Divergence {
  int rank = 0;
  uint32_t step = 0;  // run A's trace step (the diff's key for a pair of steps)
  // Run B's trace step (another under number alignment) and the job's number of the step
  // (number alignment only): set once the diff is done (annotate_steps).
  uint32_t step_b = 0;
  std::optional<uint64_t> job_step;
  uint32_t stream = 0;
  Classification classification = Classification::Origin;
  StructuralKind structural = StructuralKind::None;
  std::string kind;  // record kind CLI name
  std::string name;
  // The ranges open on the op's thread (module and phase under `lockstep run`'s PyTorch hooks:
  // "blocks.1.mlp (forward)"), outermost first; empty: none. Run A's (B's for an op only B has).
  std::vector<std::string> scope;
  uint32_t occurrence = 0;        // 1-based occurrence of (kind, name) on this stream in this step
  uint64_t seq_a = 0, seq_b = 0;  // 0 where the op is absent from that run
  std::optional<BufferDiff> buffer;
  std::string detail;  // one line for people
  bool is_collective = false;
  uint64_t comm_id = 0, comm_seq = 0;
  int received_from = -1;  // receiver collective: a rank whose input differed
  // Receiver of a difference made before this step: the window of fingerprinted (or compared)
  // steps starts here, after the trace's first step, and nothing traced in it wrote the
  // differing input. Fingerprinting earlier steps finds its writer.
  std::optional<uint32_t> made_before_step;
  // Ordering inside the rank and across ranks.
  uint64_t anchor_seq = 0;  // seq in run A (or of the A op just before an inserted op)
  uint8_t anchor_sub = 0;
  uint32_t epoch = 0;  // collectives of the step before this op on this rank
  std::vector<ContextLine> context_a, context_b;      // structural only
  std::vector<uint64_t> fields;  // the op's record fields (A's, else B's): tools/why/ reads them
  std::vector<uint64_t> fields_b;  // B's record fields where both runs have the op (a pair)
  size_t context_before_a = 0, context_before_b = 0;  // lines before the divergence point
};

struct MetricDivergence {
  int rank = 0;
  uint32_t step = 0;  // run A's trace step; step_b, job_step (below) as in Divergence
  uint32_t stream = 0;
  std::string name;
  uint32_t occurrence = 0;
  uint64_t seq_a = 0, seq_b = 0;
  uint64_t dtype_hint = 0;
  std::vector<uint8_t> a, b;
  uint32_t step_b = 0;
  std::optional<uint64_t> job_step;
};

// The first State record of a rank (or of the runs) whose fingerprint differed: the state
// after step `step` is no longer the same.
struct StateDivergence {
  int rank = 0;
  uint32_t step = 0;
  std::string name;  // "blocks.0.wte.weight", "...:grad", "...:exp_avg"
  uint64_t state_kind = 0;
  uint64_t bytes = 0;
  uint64_t seq_a = 0, seq_b = 0;
  uint64_t fingerprint_a = 0, fingerprint_b = 0;
  uint32_t step_b = 0;  // as in Divergence
  std::optional<uint64_t> job_step;
};

// A collective whose fingerprints differed, to tell receivers from origins across ranks.
struct CollectiveStatus {
  uint64_t comm_id = 0, comm_seq = 0;
  bool in_differs = false, out_differs = false;
};

// The set-up phase of one rank (setup_phase.h), compared apart from the steps.
struct SetupResult {
  int rank = 0;
  StepSpan a, b;                  // trace steps and records of each run's set-up
  bool equal_by_summary = false;  // skipped: the phases' summaries matched
  bool compared = false;          // decoded and compared
  uint64_t records_compared = 0;
  uint64_t differences = 0;            // structural differences and differing records
  std::optional<Divergence> first;     // the first of them, in the phase's order
  bool identical() const { return equal_by_summary || (compared && differences == 0); }
};

struct RankResult {
  int rank = 0;
  std::optional<Divergence> first;
  std::vector<Divergence> structural;  // capped
  uint64_t structural_total = 0;
  std::optional<MetricDivergence> metric;
  std::optional<StateDivergence> state;
  std::vector<CollectiveStatus> collectives;  // those that differed, capped
  uint64_t records_compared = 0;
  uint64_t divergent_records = 0;
  uint64_t steps_compared = 0, steps_skipped = 0;
  std::optional<uint32_t> first_step, last_step;  // of the steps compared or skipped as equal
  std::optional<uint32_t> window_first_step;      // CompareOptions::window_first_step
  // Kernels whose guessed input region differed before any traced op of this rank had
  // diverged: the differing bytes were written by no traced op (a scratch buffer's leftovers,
  // memory the allocator handed out uninitialised), or, in a window that starts after the
  // trace's first step, a difference made before it (made_before_step). Not divergences; the
  // first is shown when the rank's metric or state differs and nothing else explains it, and
  // one made before the window also when the rank diverges later anyway (combine_ranks).
  uint64_t unexplained = 0;
  std::optional<Divergence> first_unexplained;
  // The rank's earliest receivers after its first divergence (CompareOptions::receivers_cap):
  // the ops that read what the first divergence made, e.g. the GEMM that used a host input.
  std::vector<Divergence> receivers_after;
  std::vector<std::string> warnings;
  std::optional<SetupResult> setup;
  // Choices autotuning made differently, in the set-up and the first steps compared.
  std::vector<ChoiceDifference> choices;
  uint64_t choices_total = 0;
  // Collectives NCCL ran with another algorithm, protocol or channel count (tools/why/).
  NcclChoiceNotes nccl_choices;
};

struct DiffResult {
  bool divergent = false;
  std::vector<RankResult> ranks;           // by rank
  std::vector<Divergence> first_by_epoch;  // each rank's first divergence, in blame order
  std::optional<Divergence> culprit;       // first origin (or structural) in that order
  std::vector<Divergence> culprit_receivers;  // the culprit rank's first receivers after it
  // The culprit's call stack, when a run recorded it (Stack records: LOCKSTEP_STACKS), set by
  // the diff command (op_stack.h), not the engine: 'a' or 'b', 's' for hunt's stack run (0:
  // none), and the frames.
  char culprit_stack_run = 0;
  std::vector<std::string> culprit_python, culprit_native;
  // The culprit relaunched on its own inputs (replay_verdict.h), when a run replayed it: set by
  // hunt's stage 4 and `lockstep replay`, not the engine.
  std::optional<ReplayVerdict> culprit_replay;
  std::optional<MetricDivergence> metric;  // earliest step, then lowest rank
  std::optional<StateDivergence> state;    // earliest step, then lowest rank
  std::vector<Divergence> structural;      // all ranks, capped
  uint64_t structural_total = 0;
  uint64_t records_compared = 0, steps_compared = 0, steps_skipped = 0;
  uint64_t divergent_records = 0;  // counted where steps were decoded (not in skipped steps)
  uint64_t unexplained = 0;        // RankResult::unexplained, all ranks
  std::vector<std::string> warnings;
  // What the verdict covers: the steps compared or skipped as equal (all ranks), and why
  // anything the runs hold was not compared (a file cut off, salvaged, without its end record).
  std::optional<uint32_t> first_step, last_step;
  std::optional<uint32_t> trace_first_step, trace_last_step;  // steps either run holds
  // First step of the window that was fingerprinted (the trace headers' LOCKSTEP_STEPS) and
  // compared (--steps), when it starts after the trace's first step: a difference may have been
  // made before it. nullopt: the window starts at the trace's first step.
  std::optional<uint32_t> window_first_step;
  std::vector<std::string> not_compared;
  // The set-up phase: the first rank's whose set-up differs, else rank 0's (number alignment,
  // both runs with set-up steps; nullopt otherwise). Never part of the verdict.
  std::optional<SetupResult> setup;
  // Choices autotuning made differently (every rank's, each once): the report's first lines.
  std::vector<ChoiceDifference> choices;
  uint64_t choices_total = 0;
  // Which steps were paired (the first rank's: ranks normally agree; a warning says when not).
  // Under number alignment first_step/last_step above are run A's trace steps of the pairs.
  StepAlignment alignment;
  // The two runs' headers compared (tools/why/environment.h): shown first, never a verdict.
  EnvironmentComparison environment;
  // Collectives NCCL ran with other choices (every rank's): shown after it, never a verdict.
  NcclChoiceNotes nccl_choices;
};

// identical: no divergence and every step both runs hold was compared, nothing cut off,
// dropped, corrupt or unfinished. divergent: a divergence in the compared range (real whatever
// else is missing). incomplete: neither can be said.
enum class Verdict { Identical, Divergent, Incomplete };
inline Verdict verdict_of(const DiffResult& r) {
  if (r.divergent) return Verdict::Divergent;
  return r.not_compared.empty() ? Verdict::Identical : Verdict::Incomplete;
}
const char* verdict_name(Verdict v);  // "identical" | "divergent" | "incomplete"
// The earliest step where anything differs: a rank's first divergence, a metric, a state.
std::optional<uint32_t> earliest_diverging_step(const DiffResult& r);
// The first divergence, in blame order, of a receiver of a difference made before the window
// (Divergence::made_before_step); null when there is none.
const Divergence* first_made_before_window(const DiffResult& r);
// The diff by scope: when the first divergence (blame order) is a receiver, the scope its op
// ran in, which is the first scope (module and phase) whose ops diverged: at broad, where only
// collectives are fingerprinted, "the gradient all-reduce in the backward of blocks.5". Null when
// the first divergence is no receiver or ran outside every range.
const Divergence* first_diverging_scope(const DiffResult& r);
// One line: what was compared (steps A-B, N records) and what was not, and why.
std::string coverage_line(const DiffResult& r);
// The job's numbers of the steps compared under number alignment (first_step..last_step's
// pairs, unnumbered ones counted with the numbered step before them); nullopt under ordinal
// alignment or when nothing was compared.
struct JobStepRange {
  uint64_t first = 0, last = 0;  // first > last: no numbered step among them (set-up only)
  bool with_setup = false;       // the steps before the first number (set-up) were compared too
};
std::optional<JobStepRange> compared_job_steps(const DiffResult& r);
// "steps 4-7" / "step 4" / "set-up and steps 0-7".
std::string job_steps_text(const JobStepRange& range);

}  // namespace lockstep::tools
