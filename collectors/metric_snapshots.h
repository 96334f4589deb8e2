// Shim-owned pinned slots for asynchronous metric copies.
//
// A job that copies its loss into its own pinned buffer with cudaMemcpyAsync may overwrite that
// buffer (the next step's loss) before the collector thread gets to read it; reading the job's
// buffer then records the wrong step's value (seen on the H200). So right after the job's copy
// the shim enqueues its own copy of the same device bytes, on the same stream, into a slot of
// its own, and reads that slot once the stream has passed it. Never synchronizes.
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda.h>

namespace lockstep::collectors {

// Enqueues a copy of `bytes` bytes at device address `src` into a free slot, ordered on
// `stream` (null = legacy default stream, or the per-thread one when per_thread_stream).
// Returns the slot's host address, or null when it cannot (no driver entry points, every slot
// busy, bytes larger than a slot, the copy failed): the caller then falls back to the job's
// own buffer.
const uint8_t* snapshot_metric(CUstream stream, bool per_thread_stream, CUdeviceptr src,
                               size_t bytes);
// The slot was read: it may be reused.
void release_metric_snapshot(const uint8_t* slot);

}  // namespace lockstep::collectors
