// The ranges open on each thread, as the scope every record carries (trace/record.h, ScopeId):
// NVTX push/pop of the core and domain modules (nvtx_injection.cpp), lockstep_scope_push/pop
// (lockstep.h), and through either the PyTorch hooks of `lockstep run`, which name each module's
// forward and backward and the optimizer's step. Each thread keeps its own stack of names; the
// scope id of the stack is interned (Tracer::intern_scope) on the first record after the stack
// changed, so that a record costs one thread-local read.
#pragma once

#include <cstdint>
#include <string_view>

#include "collectors/hot_thread.h"
#include "trace/record.h"

namespace lockstep::collectors {

class Tracer;

// A range opens on the calling thread. `domain`: the NVTX domain (null for the core module and
// the C API): a pop closes the innermost range of its own domain, so that two domains whose
// pushes and pops interleave keep their names. `transparent`: a step marker's range (the step
// already says it), which keeps the scope of its parent, so that every step's ops share scopes.
void scope_push(std::string_view name, const void* domain, bool transparent);
// Closes the innermost range of `domain` open on the calling thread; nothing if none is.
void scope_pop(const void* domain);

// The scope open on the calling thread as an id of `tracer`'s trace (0: none). Inline for the
// thread that never opened a range (every record's stamp reads it: at broad, without the PyTorch
// hooks' scopes, every thread); open_scope for one that did.
trace::ScopeId open_scope(Tracer& tracer);
inline trace::ScopeId current_scope(Tracer& tracer) {
  if (t_hot.scopes == nullptr) [[likely]]
    return 0;
  return open_scope(tracer);
}

// Ranges kept per thread: a job that pushes without ever popping stops growing the stack here;
// pushes past it are counted and popped first.
inline constexpr int kMaxScopeDepth = 64;

}  // namespace lockstep::collectors
