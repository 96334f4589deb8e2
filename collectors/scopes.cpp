// Per-thread range stacks and their scope ids (scopes.h).
#include "collectors/scopes.h"

#include <string>
#include <vector>

#include "collectors/lockstep.h"
#include "collectors/runtime.h"
#include "common/hot.h"

namespace lockstep::collectors {
namespace {

inline constexpr size_t kMaxNameBytes = 512;  // a range name longer than this is cut

struct Frame {
  std::string name;  // capacity kept when the frame is reused
  const void* domain = nullptr;
  bool transparent = false;
  trace::ScopeId id = 0;           // of this frame's path, in the trace of `id_for`
  const Tracer* id_for = nullptr;  // null: not interned yet (or the parent changed)
};

}  // namespace

// Declared in hot_thread.h, which holds the thread's pointer to it.
struct ThreadScopes {
  std::vector<Frame> frames;  // [0, depth) open, outermost first
  size_t depth = 0;
  int overflow = 0;                     // pushes past kMaxScopeDepth not yet popped
  trace::ScopeId current = 0;           // the innermost scope's id...
  const Tracer* current_for = nullptr;  // ...in this tracer's trace; null: the stack changed
};

namespace {

// Heap, never freed: records are still made during exit, after thread_local destructors.
ThreadScopes& thread_scopes() {
  if (t_hot.scopes == nullptr) t_hot.scopes = new ThreadScopes;
  return *t_hot.scopes;
}

// Interns every frame whose id is not of `tracer`'s trace, outermost first (a frame's id needs
// its parent's): after a push, one new frame; after a fork, the whole stack.
[[gnu::noinline]] trace::ScopeId resolve(Tracer& tracer, ThreadScopes& s) {
  trace::ScopeId parent = 0;
  for (size_t i = 0; i < s.depth; ++i) {
    Frame& frame = s.frames[i];
    if (frame.transparent) continue;
    if (frame.id_for != &tracer) {
      frame.id = tracer.intern_scope(parent, frame.name);
      frame.id_for = &tracer;
    }
    parent = frame.id;
  }
  s.current = parent;
  s.current_for = &tracer;
  return parent;
}

}  // namespace

void scope_push(std::string_view name, const void* domain, bool transparent) {
  if (!Tracer::possible()) return;
  ThreadScopes& s = thread_scopes();
  if (s.depth >= static_cast<size_t>(kMaxScopeDepth)) {
    ++s.overflow;
    return;
  }
  if (s.depth == s.frames.size()) s.frames.emplace_back();
  Frame& frame = s.frames[s.depth++];
  frame.name.assign(name.substr(0, kMaxNameBytes));
  frame.domain = domain;
  frame.transparent = transparent;
  frame.id_for = nullptr;
  if (!transparent) s.current_for = nullptr;
}

void scope_pop(const void* domain) {
  ThreadScopes* s = t_hot.scopes;
  if (s == nullptr) return;
  if (s->overflow > 0) {
    --s->overflow;
    return;
  }
  size_t at = s->depth;
  while (at > 0 && s->frames[at - 1].domain != domain) --at;
  if (at == 0) return;  // nothing of this domain is open: a stray pop
  const size_t index = at - 1;
  if (!s->frames[index].transparent) s->current_for = nullptr;
  if (index + 1 < s->depth) {
    // Another domain's ranges sit above: they move down one level, and their paths (and ids)
    // lose this one.
    for (size_t i = index; i + 1 < s->depth; ++i) {
      std::swap(s->frames[i], s->frames[i + 1]);
      s->frames[i].id_for = nullptr;
    }
    s->current_for = nullptr;
  }
  --s->depth;
}

LOCKSTEP_LAUNCH_PATH trace::ScopeId open_scope(Tracer& tracer) {
  ThreadScopes* s = t_hot.scopes;
  if (s == nullptr) return 0;  // the thread never opened a range (current_scope's test)
  if (s->current_for == &tracer) [[likely]]
    return s->current;
  return resolve(tracer, *s);
}

}  // namespace lockstep::collectors

extern "C" void lockstep_scope_push(const char* name) {
  lockstep::collectors::scope_push(name != nullptr ? name : "", nullptr, false);
}
extern "C" void lockstep_scope_pop(void) { lockstep::collectors::scope_pop(nullptr); }
