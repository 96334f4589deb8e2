// `lockstep check --resume-at K`: runs a job once straight through and once resumed from the
// checkpoint the first run saved at step K, then diffs the two by the job's step numbers
// (alignment.h): resume certification.
//
// The contract with the job (tools/README.md, "Resume certification"): both runs get
// LOCKSTEP_RESUME_AT=K and LOCKSTEP_CHECKPOINT=DIR/checkpoint in their environment, and every
// "{resume_at}" / "{checkpoint}" in their arguments is replaced by the same values. The first run
// finds no file at LOCKSTEP_CHECKPOINT: it runs from its start and, before step K, saves there
// everything the steps from K on depend on. The second finds the file: it loads it and runs steps
// K to the end. Both number their steps (lockstep_step_number(n), lockstep.step(n), markers named
// "step N"), so that the diff pairs them by those numbers.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tools/launch.h"

namespace lockstep::tools {

struct ResumeCheckRequest {
  uint64_t resume_at = 0;
  TraceRequest trace;  // trace.dir: the base directory (straight/, resumed/, checkpoint)
  bool json = false;   // the diff as JSON on stdout
};

// Exit code as diff's: 0 resume bit-exact, 1 divergent, 2 incomplete or bad input. Throws
// InputError when a run fails, writes no checkpoint, or does not number its steps.
int run_resume_check(const ResumeCheckRequest& request);

// `command` with "{resume_at}" and "{checkpoint}" replaced in every argument.
std::vector<std::string> resume_arguments(const std::vector<std::string>& command,
                                          uint64_t resume_at, const std::string& checkpoint);

}  // namespace lockstep::tools
