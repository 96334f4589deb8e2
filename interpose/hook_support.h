// What every wrapper does around the real call: nesting, gating, and never letting a collector
// failure reach the job.
#pragma once

#include <cstdint>
#include <utility>

#include "common/self_time.h"
#include "cupti_validation.h"
#include "interception.h"
#include "scope.h"

namespace lockstep::interpose {

// Returned when the real function cannot be found (nothing to forward to).
template <typename Result>
Result missing_result();
template <>
inline CUresult missing_result<CUresult>() {
  return CUDA_ERROR_NOT_FOUND;
}
template <>
inline cudaError_t missing_result<cudaError_t>() {
  return cudaErrorSharedObjectSymbolNotFound;
}
template <>
inline cublasStatus_t missing_result<cublasStatus_t>() {
  return CUBLAS_STATUS_NOT_INITIALIZED;
}
template <>
inline ncclResult_t missing_result<ncclResult_t>() {
  return ncclSystemError;
}

// The CUPTI validation scope of a nesting scope (scopes that cannot launch kernels: None).
inline coverage::PushScope validation_scope(Scope scope) {
  switch (scope) {
    case Scope::Launch:
      return coverage::PushScope::Launch;
    case Scope::Blas:
      return coverage::PushScope::Blas;
    case Scope::Nccl:
      return coverage::PushScope::Nccl;
    default:
      return coverage::PushScope::None;
  }
}

// LOCKSTEP_DEBUG's timing or LOCKSTEP_VALIDATE's brackets on: a traced call's other branch (both
// switches in the line of hot flags every traced call reads).
inline bool timed_or_validated() {
  return collectors::self_time::enabled.load(std::memory_order_relaxed) || validation::enabled();
}

// forward() inside a `scope` nesting level; when validating (cupti_validation.h), inside an
// external correlation id too; when this is the outermost call of that scope and
// operations are traced, brackets it with begin() -> token and end(token, result).
// Always inlined: each interceptor's instantiation is its own (its lambdas' types), and one shared
// by two interceptors (a _ptsz twin) would otherwise be a call, its frame and its code lines.
template <typename Forward, typename Begin, typename End>
[[gnu::always_inline]] inline auto traced_call(Scope scope, Forward&& forward, Begin&& begin,
                                               End&& end) {
  Nesting nesting(scope);
  if (!nesting.outermost()) [[unlikely]]
    return forward();
  // bracketed() is forward() itself unless validating.
  if (!trace_operations()) [[unlikely]]
    return validation::bracketed(validation_scope(scope), false, forward);
  namespace self_time = collectors::self_time;
  uint64_t token = 0;
  // LOCKSTEP_DEBUG's timing and LOCKSTEP_VALIDATE's brackets on a branch of their own (one test,
  // both switches in the line every traced call reads): the plain path passes none of the three
  // scopes, each of which, off, still costs a load, a branch and a store to the stack (18
  // instructions and 3 code lines of a broad launch, bench/collectors/launch_lines.py). Inline,
  // not a call: an out-of-line function would need the three closures built in memory.
  if (timed_or_validated()) [[unlikely]] {
    try {
      self_time::Scope timed(self_time::Phase::CallBegin);
      token = begin();
    } catch (...) {
      token = 0;
    }
    auto result = [&] {
      self_time::Scope timed(self_time::Phase::RealCall);  // once: nested layers return above
      return validation::bracketed(validation_scope(scope), true, forward);
    }();
    try {
      self_time::Scope timed(self_time::Phase::CallEnd);
      end(token, result);
    } catch (...) {}
    return result;
  }
  try {
    token = begin();
  } catch (...) {
    token = 0;
  }
  auto result = forward();
  try {
    end(token, result);
  } catch (...) {}
  return result;
}

// Runs a state report (allocation map, handles, ...) unless it is the shim's own call or a
// nested layer of a call already reported.
template <typename Report>
void report_state(bool outermost, Report&& report) {
  if (!outermost || !track_state()) return;
  try {
    report();
  } catch (...) {}
}

}  // namespace lockstep::interpose

// Forward to the real `name`, or return the "missing" status when there is none. Always inlined:
// a launch's forward is written out in its paths (plain, timed, replayed), and as a call of its
// own it sat outside the launch's section (a code line and a page more per launch).
#define LOCKSTEP_FORWARD(name, ...)                                                  \
  ([&]() __attribute__((always_inline)) {                                            \
    auto real_fn = REAL(name);                                                       \
    using ResultType = decltype(real_fn(__VA_ARGS__));                               \
    return real_fn != nullptr ? real_fn(__VA_ARGS__)                                 \
                              : ::lockstep::interpose::missing_result<ResultType>(); \
  }())
