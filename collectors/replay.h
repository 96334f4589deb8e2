// Replay (LOCKSTEP_REPLAY, LOCKSTEP_REPLAYS): is one kernel launch nondeterministic on identical
// inputs? The launch the setting names (step, stream ordinal, kernel name, occurrence: how the
// diff names a culprit) is relaunched N times from the state it started from, and each
// relaunch's output is fingerprinted; the job then goes on from the state its own launch left.
//
// All of it is enqueued on the launch's own stream, in order, with no host synchronization:
//   before the job's launch   copy every region -> S0           (replay_before, kernels.cpp)
//   the job's launch          (forwarded by the hook)
//   after it                  hash the regions (the job's), copy every region -> S1, then N
//                             times: S0 -> regions, the same launch again, hash the regions;
//                             finally S1 -> regions, free S0 and S1  (replay_after, the hook)
// The regions are the launch's pointer arguments into known allocations, each to the end of its
// mapped run (what the launch may read or write), overlapping ones merged. S0 and S1 are one
// stream-ordered allocation of twice their bytes, refused with a reason (a Replay record with
// outcome refused) when cuMemGetInfo says it does not fit. The digests arrive as any record's
// (a Replay record, trace/record_kinds.def); tools/replay_verdict.h turns them into the verdict.
//
// Level full only (the launch's arguments are decoded there); refused with a reason: a launch on
// a capturing stream (a graph), an NCCL kernel (a relaunch would wait for its peers), a kernel
// whose parameter layout is unknown or with no pointer into a known allocation. A library's
// kernels (inside cuBLAS) are their call's, never a kernel record, so never named here. What a
// launch writes through a pointer the shim does not see (a pointer stored in device memory) is
// neither snapshotted nor restored (README, Known limits).
#pragma once

#include <functional>
#include <string_view>

#include "collectors/events.h"
#include "collectors/hot_thread.h"
#include "trace/record.h"

namespace lockstep::collectors {

class Tracer;
struct KernelInfo;

// Whether LOCKSTEP_REPLAY names a kernel of this demangled name (described once per kernel).
bool replay_names(Tracer* tracer, std::string_view demangled_name);

// kernel_launch_begin, for a launch of a kernel replay_names() named, after its record was
// stamped: counts the occurrence; for the one named, snapshots its regions (S0) and arms the
// calling thread, or appends a refused Replay record.
void replay_before(Tracer* tracer, const trace::Record& launch_record, const KernelLaunch& launch,
                   const KernelInfo& info, bool capturing);

// The launch hook, right after the job's launch returned: true when replay_before armed this
// thread (one thread-local load, inlined: the hot path pays nothing else).
// The flag is in the line of the open call (collectors/hot_thread.h), which the launch has read.
inline bool replay_armed() { return open_api().replay_armed != nullptr; }
// ... then this, with the job's result and a way to launch the same kernel with the same
// arguments again (the hook's own forward: the caller's argument memory is unchanged until the
// call returns). Enqueues the replays and the restore; appends the Replay record when its
// digests arrive.
void replay_after(int result, const std::function<int()>& relaunch);

}  // namespace lockstep::collectors
