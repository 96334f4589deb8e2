// Synthetic training runs written through TraceWriter, for the CLI's tests and benchmark (not
// part of the CLI). A run is `world_size` ranks doing `steps` steps of: kernels spread over the
// compute streams (with a GEMM every fourth op), an all-reduce of the state on the last stream,
// an optimizer kernel, and a loss metric. Values flow like data: each op's input fingerprint is
// the previous op's output, and the all-reduce mixes every rank's state, so a planted change
// propagates as it would in a real job.
//
// Optionally (Spec::weights) each rank also has a weight tensor that the first kernel of every
// step reads and updates (an embedding with its backward), and that feeds the values of the
// step only from Spec::weights_feed_from on: a difference in it stays out of every GEMM,
// collective and loss until then, as bf16 rounding hid the differing embedding weights of
// issue #35 for four steps. With Spec::state a State record after the optimizer fingerprints
// the rank's parameters (weights and state), as the shim's State records do.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/op_spec.h"

namespace lockstep::tools::synth {

struct Plant {
  enum Kind {
    Output,    // the op's output fingerprint changes (an origin); everything after receives it
    Insert,    // an extra kernel before the op
    Delete,    // the op is not launched
    GemmAlgo,  // the GEMM at this index picks another algorithm (and computes another D)
    Metric,    // only the loss payload of this step changes
    Weights,   // the first kernel of the step writes other weights (Spec::weights; an origin
               // that nothing else shows before Spec::weights_feed_from)
    // Faults of one rank inside one run (lockstep audit): the all-reduce's receive buffer of
    // this rank differs from the other ranks' (the rank goes on from it), or the optimizer
    // update (Spec::replica_update) computes other bytes from the same inputs.
    Received,
    Replica,
  } kind = Output;
  int rank = 0;
  uint32_t step = 0;
  uint32_t index = 0;  // op index within the step
};

struct Spec {
  int world_size = 2;
  uint32_t steps = 4;
  uint32_t ops_per_step = 8;  // compute ops per rank per step
  uint32_t streams = 2;       // compute streams; the all-reduce uses stream streams + 1
  bool metrics = true;
  std::string level = "full";  // broad: only GEMMs and collectives carry fingerprints
  uint32_t fp_first_step = 0, fp_last_step = UINT32_MAX;  // fingerprint window (LOCKSTEP_STEPS)
  std::vector<Plant> plants;
  std::optional<int> only_rank;              // write just this rank's file (one process per rank)
  std::optional<int> header_world_size;      // lie in the header (tests of bad input)
  std::optional<std::string> header_run_id;  // another run's id in the headers (default: run_id)
  bool flush_every_step = true;              // false: record blocks span several steps
  size_t block_bytes = 0;                    // the writer's block size (0: its default)
  size_t writer_memory = 64u << 20;
  // Level full's flagged inputs on every fingerprinted kernel: an input "arg1" learned read-only
  // (a digest, no output entry) and an input "arg2" not written since its allocation (no value).
  bool flagged_inputs = false;

  bool weights = false;                     // the weight tensor above (kernel 0's arg2 region)
  uint32_t weights_feed_from = UINT32_MAX;  // the step from which the weights feed the values
  bool state = false;                       // a State record per rank and step (see above)
  bool stacks = false;  // a Stack record after every kernel (LOCKSTEP_STACKS naming them all)
  // LOCKSTEP_REPLAY as the shim answers it: after the kernel launch `replay` names (step, stream,
  // name, occurrence), a Replay record of `replays` relaunches over two regions, of which the
  // first `replay_differing` give other digests than the job's launch; with `replay_refused`
  // set, a refused one with that reason.
  std::optional<settings::OpSpec> replay;
  uint32_t replays = 16;
  uint32_t replay_differing = 0;
  std::string replay_refused;
  // The job numbers its steps: trace step 0 is set-up (two host-to-device copies, no marker) and
  // each later trace step starts with a StepMarker "step N" numbering it as the job's step N
  // (the loop index; plants name it too). With resume_at = K (> 0) the run is the same job
  // resumed from a checkpoint taken before step K: its trace step 0 is the restore prologue
  // (set-up and the checkpoint's copies), then job steps K..steps-1 are its trace steps 1...,
  // with the same values as a straight run's. Collectives count comm_seq from the process's
  // start, as the shim does.
  bool numbered = false;
  uint32_t resume_at = 0;
  std::vector<uint32_t> skip_steps;  // job steps the loop skips (a gap in the numbering)
  bool restore_differs = false;      // the restore loads another state (every rank's differs)
  // The optimizer update reads the reduced gradients and the parameters ("arg1", the same on
  // every rank) and writes the parameters back ("arg1"): what data-parallel replicas do alike.
  bool replica_update = false;
  // Scopes, as `lockstep run`'s module hooks give them: compute op i in "Model (forward) /
  // layers.<i / 2> (forward)", the all-reduce in "layers.0 (backward)" (DDP's gradient
  // all-reduce), the optimizer kernel in "optimizer.step", metrics and states in none.
  bool scopes = false;
  // JSON object text merged into every rank's header last (the environment's facts: versions,
  // "environment" variables), so that two runs can differ in what they ran on.
  std::string header_extra;
  // NCCL's own choices in every collective record (record_kinds.def, Collective: trace values
  // of enum_names.def's NcclAlgo / NcclProto, e.g. 2 Ring, 1 Tree, 3 Simple); 0: not recorded,
  // as in a trace written before the shim recorded them.
  uint64_t nccl_algo = 0, nccl_proto = 0, nccl_channels = 0;
};

// Writes the run into `dir` (created; its manifest written with `run_id`). Returns an error
// message, empty on success.
std::string write_run(const std::string& dir, const Spec& spec,
                      const std::string& run_id = "synthetic");

}  // namespace lockstep::tools::synth
