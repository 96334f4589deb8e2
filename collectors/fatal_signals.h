// Sealing the trace when a signal is about to kill the job.
//
// A job killed by a signal never runs its atexit handlers, so its trace has no End block and
// reads as a readable prefix (never complete): that is already right. On the signals a process
// can catch, the shim also writes an End block that says so ("signal 15", not clean), so that
// `lockstep verify` can tell a job that was killed from one whose disk filled or whose file was
// cut off.
//
// Only signals whose disposition is the default (the process dies) get our handler, once, when
// the tracer starts. A signal the job handles itself (Python's SIGINT, a framework's SIGTERM
// handler) is left alone: the job decides what it means, and if it then exits normally the
// atexit close writes the real End block. A handler the job installs later simply replaces ours.
// Our handler seals (TraceWriter::seal_after_signal: async-signal-safe, best effort), restores
// the default disposition and lets the signal do what it would have done: the job's exit status
// is the same as without the shim.
#pragma once

namespace lockstep::trace {
class TraceWriter;
}

namespace lockstep::collectors {

// The signals sealed, in order: termination requests and the faults a process can catch.
// SIGKILL and SIGSTOP cannot be caught: a trace killed by them has no End block.
extern const int kSealedSignals[];
extern const int kSealedSignalCount;

// Installs the handler on every sealed signal whose disposition is the default. `writer` lives
// until exit (the Tracer is never deleted). Call once per process; later calls do nothing.
void seal_trace_on_fatal_signals(trace::TraceWriter* writer);

}  // namespace lockstep::collectors
