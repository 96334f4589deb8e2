// What the Tracer's parts share (tracer.cpp, tracer_hashing.cpp, tracer_digest_reuse.cpp,
// tracer_collector.cpp): small helpers, internal to the Tracer. The rest of collectors/ includes
// runtime.h only.
#pragma once

#include <algorithm>
#include <cstdint>
#include <utility>

#include <cuda.h>

#include "collectors/driver_api.h"
#include "collectors/runtime.h"

namespace lockstep::collectors {

// The calling thread's current context; null without one or without a driver (CPU tests).
inline CUcontext current_context(const Driver& d) {
  CUcontext ctx = nullptr;
  if (d.ctxGetCurrent != nullptr) d.ctxGetCurrent(&ctx);
  return ctx;
}

// The stream a digest in flight serves (region_digests.h). The per-thread default stream is one
// handle for a different stream in every thread: its digests serve only the thread that hashed
// them, so its key is a per-thread address (inline: one key per thread for every part).
inline const void* digest_stream_key(CUstream stream) {
  thread_local const char per_thread_stream_key = 0;
  return stream == CU_STREAM_PER_THREAD ? static_cast<const void*>(&per_thread_stream_key)
                                        : static_cast<const void*>(stream);
}

// What a write through region.ptr may reach: anywhere in its allocation's mapped run, before
// ptr (negative offsets) and past a clamped extent. [first, second).
inline std::pair<uint64_t, uint64_t> write_reach(const PlannedRegion& region) {
  return {region.alloc_base != 0 ? region.alloc_base : region.ptr,
          std::max<uint64_t>(region.run_end, region.ptr + region.bytes)};
}

}  // namespace lockstep::collectors
