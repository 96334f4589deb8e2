// Stack records (trace/record_kinds.def, Stack): the call stack of a launch whose kernel
// LOCKSTEP_STACKS names, so that a culprit is answered with the job's file and line.
// `lockstep hunt` sets the setting for its culprit in one last run.
#pragma once

#include <cuda.h>

#include "trace/record.h"

namespace lockstep::collectors {

class Tracer;

// Appends the Stack record of `op` (a kernel record already stamped: its seq and step set),
// made on the calling thread: its Python frames (python_frames.h) and native frames
// (native_frames.h). Nothing outside the LOCKSTEP_STEPS window. Call with no lock of the
// shim held: it may wait for the GIL.
void record_stack(Tracer* tracer, const trace::Record& op, CUstream stream, bool per_thread);

}  // namespace lockstep::collectors
