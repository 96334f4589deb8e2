#include "collectors/stream_steps.h"

#include <algorithm>

namespace lockstep::collectors {
namespace {
// The newest step this thread started by ending the one before (0: none; step 0 is started by
// no one).
thread_local uint32_t t_started = 0;
}  // namespace

void StreamSteps::thread_started(uint32_t new_step) { t_started = std::max(t_started, new_step); }

uint32_t StreamSteps::step_of(uintptr_t key, uint32_t current) {
  const uint32_t floor = current > 0 ? current - 1 : 0;  // at most one step behind
  std::lock_guard lock(mutex_);
  Stream& s = streams_.try_emplace(key, Stream{current, false}).first->second;
  // An order point ends the stream's work of its step: what follows is the next step's (never
  // ahead of the counter). Not the counter itself: a stream a step behind stays a step behind.
  uint32_t step = s.moves ? std::min(s.step + 1, current) : s.step;
  step = std::max({step, std::min(t_started, current), floor});
  s.step = step;
  s.moves = false;
  return step;
}

void StreamSteps::order_point(uintptr_t key) {
  std::lock_guard lock(mutex_);
  auto it = streams_.find(key);
  if (it != streams_.end()) it->second.moves = true;
}

void StreamSteps::event_recorded(uintptr_t event, uintptr_t key) {
  std::lock_guard lock(mutex_);
  auto it = streams_.find(key);
  if (it == streams_.end()) {  // no work of the stream seen: the event says nothing of a step
    events_.erase(event);
    return;
  }
  events_[event] = it->second.step;  // events are reused: the latest record wins
  it->second.moves = true;
}

void StreamSteps::event_waited(uintptr_t key, uintptr_t event) {
  std::lock_guard lock(mutex_);
  auto ev = events_.find(event);
  if (ev == events_.end()) return;
  // An unseen stream starts at the event's step (step_of still raises it to the floor).
  Stream& s = streams_.try_emplace(key, Stream{ev->second, false}).first->second;
  s.step = std::max(s.step, ev->second);
}

}  // namespace lockstep::collectors
