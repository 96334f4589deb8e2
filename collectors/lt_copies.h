// cuBLASLt GEMMs below level full, recorded from copies of their objects.
//
// A GEMM's identity is a dozen attribute reads, each a library call on code and data that the
// job's own work evicted since the last GEMM: ~850 ns a GEMM on the launching thread on the
// H200's host, more than four kernel launches' records (docs/performance.md, "Broad on a
// launch-bound job"). But cuBLASLt's objects are plain structs: cublasLtMatmulDescInit and
// cublasLtMatrixLayoutInit set up caller-owned memory of the header's opaque sizes and have no
// destroy, so what an object says is in its bytes; an algorithm is a value (cublasLtMatmulAlgo_t,
// copied by every caller of the heuristics). So at broad the launching thread copies the bytes
// (256 for the descriptor, 64 per layout and for the algorithm) into a ring of its own, stages
// the record where the writer takes it (TraceWriter::stage) naming the ring's entry, commits it
// before the real call and takes it back if the call fails, as a kernel launch at broad does
// (kernels.cpp); the writer's thread reads the copies through the same getters (lt_identity.h)
// before it encodes the record, and frees the entry.
//
// That bytes say everything is not promised. So the first copied GEMM of a thread and every
// 64th after it is also read on the launching thread from the objects themselves, and the
// writer compares: a difference turns the copies off for the process and leaves a Warning
// record (code 10); records copied before it may carry wrong identity fields. The writer must
// call cuBLASLt while the library is still usable: the first copy registers an exit handler,
// which runs before libcublasLt's own destructors (registered earlier, when it was loaded),
// that turns the copies off and writes out every record appended so far.
#pragma once

#include <cstdint>

#include "collectors/events.h"
#include "trace/record.h"

namespace lockstep::collectors {

class Tracer;

// A token for lt_copied_end, or 0 where this GEMM cannot be recorded so (copies off, no
// descriptor, the writer refuses to stage, a copied GEMM already open on this thread): then the
// caller reads the objects itself.
uint64_t lt_copied_begin(Tracer* tracer, const LtMatmul& matmul);
// True if `token` was lt_copied_begin's (the call is then closed), false for any other token.
bool lt_copied_end(uint64_t token, int status);

// On the thread that encodes a Gemm record staged with trace::kDeferredName: its identity fields
// from the copies in the entry it names, which is freed. Returns the record's name.
trace::StringId complete_copied_gemm(Tracer* tracer, trace::Record& record);

// Copies on or off for the process (on at start). The CPU tests' fake descriptors keep their
// attributes outside their bytes: their copies would not read back.
void set_lt_copies(bool on);

}  // namespace lockstep::collectors
