// Step markers: NVTX ranges and marks (through nvtx_injection.cpp), the explicit C API, and the
// pattern in LOCKSTEP_STEP_ON. Markers never start a trace: before the first CUDA event they
// only count.
#include "collectors/events.h"
#include "collectors/lockstep.h"
#include "collectors/runtime.h"
#include "common/self_time.h"

namespace lockstep::collectors {

bool marker_range_push(const char* message) {
  if (message == nullptr || inside_shim_call() || !Tracer::possible()) return false;
  self_time::Scope timed(self_time::Phase::Marker);
  uint32_t finished = 0;
  if (!Tracer::steps().on_marker(message, &finished)) return false;
  if (Tracer* tracer = Tracer::existing())
    tracer->step_advanced(finished, message, static_cast<uint64_t>(MarkerSource::Nvtx),
                          marker_step_number(message));
  return true;
}

void marker_step(const char* name, std::optional<uint64_t> job_step) {
  if (inside_shim_call() || !Tracer::possible()) return;
  self_time::Scope timed(self_time::Phase::Marker);
  Tracer* tracer = Tracer::existing();
  if (tracer != nullptr) tracer->flush_deferred(Tracer::FlushCause::Step);
  const uint32_t finished = Tracer::steps().on_explicit();
  if (tracer != nullptr)
    tracer->step_advanced(finished, name != nullptr ? name : "lockstep_step",
                          static_cast<uint64_t>(MarkerSource::Api), job_step);
}

}  // namespace lockstep::collectors

extern "C" void lockstep_step(void) { lockstep::collectors::marker_step(nullptr); }
extern "C" void lockstep_step_number(unsigned long long n) {
  lockstep::collectors::marker_step("lockstep_step", n);
}
extern "C" void lockstep_marker(const char* text) {
  lockstep::collectors::marker_range_push(text);
}
extern "C" void lockstep_step_order_streams(void) {
  lockstep::collectors::Tracer::stream_steps().enable();
}
extern "C" void lockstep_mark(const char* name) {
  if (name == nullptr) return lockstep::collectors::marker_step("lockstep_mark");
  lockstep::collectors::marker_step(name, lockstep::collectors::marker_step_number(name));
}
