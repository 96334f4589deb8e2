// Stream-ordered steps (opt-in: lockstep_step_order_streams(), which the Python package calls
// for a JAX job): which step a record belongs to, decided by the order of work on its own stream
// rather than by which host thread happened to run first.
//
// The default rule stamps a record with the step counter as it is when the record is made. That
// is exact for a job whose threads are ordered by the step boundary (a PyTorch loop: the thread
// that ends the step makes the next step's launches). XLA launches from its own threads while
// the Python thread marks steps and reads the loss, so a launch made just before or just after
// the boundary lands in either step, depending on timing.
//
// The rule here:
//   - a thread that itself ended a step (marker, metric copy) stamps its later records with that
//     step or a later one: its work is ordered after the boundary;
//   - any other thread's record takes the step of the work before it on its own stream, and a
//     stream moves on to the next step (never past the counter) only at an order point of its
//     own (an event record on it, the metric copy itself): the places XLA ends one program's
//     work on a stream and the next program's starts. So a worker that launches a step's work
//     after the next step's marker (asynchronous dispatch) still puts it in its own step. A
//     stream seen for the first time takes the current step;
//   - a stream that waits on an event (cuStreamWaitEvent) takes at least the step of the work
//     the event was recorded after: XLA reads each step's loss back on one of two device-to-host
//     streams, in turn, each waiting on the compute stream's event; without this, a copy stream
//     used every other step would move one step per use and fall behind the step it copies;
//   - no stream lags more than one step behind the counter, so that a step's summary can be
//     written once the step after it ended (a stream with no order points at all then moves one
//     step late, at worst).
// Steps therefore end one step late in the writer (StepSummary), which changes no record.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <unordered_map>

namespace lockstep::collectors {

class StreamSteps {
 public:
  StreamSteps() = default;
  // The switch kept in `enabled` (the process's rule: common/hot_flags.h, read on every record).
  explicit StreamSteps(std::atomic<bool>* enabled) : enabled_(*enabled) {}
  void enable() { enabled_.store(true, std::memory_order_release); }
  bool enabled() const { return enabled_.load(std::memory_order_acquire); }

  // The step of a record made now by this thread on the stream `key` (the stream handle, or a
  // distinct value for each default stream), with the counter at `current`.
  uint32_t step_of(uintptr_t key, uint32_t current);
  // An order point on `key`: its next record is in the next step, if the counter got there.
  void order_point(uintptr_t key);
  // `event` is recorded on `key`: an order point, and the event carries the stream's step.
  void event_recorded(uintptr_t event, uintptr_t key);
  // `key` waits on `event`: its next record is in the event's step or a later one.
  void event_waited(uintptr_t key, uintptr_t event);
  // This thread ended a step, and `new_step` started: its records from now on are in it or
  // a later one.
  static void thread_started(uint32_t new_step);

 private:
  struct Stream {
    uint32_t step = 0;
    bool moves = false;  // an order point since its last record
  };
  std::atomic<bool> own_enabled_{false};
  std::atomic<bool>& enabled_ = own_enabled_;
  std::mutex mutex_;
  std::unordered_map<uintptr_t, Stream> streams_;
  std::unordered_map<uintptr_t, uint32_t> events_;  // event -> step of the work before it
};

}  // namespace lockstep::collectors
