// CUPTI validation mode (LOCKSTEP_VALIDATE=1; validation runs only, never production tracing).
// Around every call the shim forwards that can launch kernels (launches, cuBLAS / cuBLASLt,
// NCCL, graph launches) it pushes a CUPTI external correlation id; at exit it reads CUPTI's
// CONCURRENT_KERNEL activity and writes LOCKSTEP_DIR/coverage-<pid>.json: every executed kernel
// is either accounted (it ran inside such a region) or missed (cupti_coverage.h).
// libcupti is dlopened at the first such call, never linked. With validation off the hooks pay
// one predictable branch on a bool set once at load.
#pragma once

#include <utility>

#include "common/hot_flags.h"
#include "cupti_coverage.h"

namespace lockstep::interpose::validation {

// LOCKSTEP_VALIDATE, read once when the shim is loaded, in the line of switches every traced
// call reads (common/hot_flags.h).
inline bool enabled() {
  return __builtin_expect(hot_flags.validation.load(std::memory_order_relaxed), false);
}

// Pushes an external id (CUSTOM0) for `scope` while it lives; the first one starts CUPTI.
// `traced` = the shim reports this call (false: it forwards it untraced on purpose).
class Bracket {
 public:
  Bracket(coverage::PushScope scope, bool traced);
  ~Bracket();
  Bracket(const Bracket&) = delete;
  Bracket& operator=(const Bracket&) = delete;

 private:
  bool pushed_ = false;
};

// forward() inside a Bracket when validation is on; plain forward() otherwise.
// Always inlined: taking forward's address in a call would keep an interceptor's closure in
// memory on its every call, validating or not (interpose/launch_hooks.cpp).
template <typename Forward>
[[gnu::always_inline]] inline auto bracketed(coverage::PushScope scope, bool traced,
                                             Forward&& forward) {
  if (!enabled() || scope == coverage::PushScope::None) return forward();
  Bracket bracket(scope, traced);
  return forward();
}

}  // namespace lockstep::interpose::validation
