// The writer's scope table: a scope (parent scope, name) interned into an id once per file, and
// the definitions not yet written (Scope records of a Scopes block, format.h). Thread-safe; the
// shim calls it only when a thread opens a range stack it has not seen, never per record
// (collectors/scopes.h keeps each thread's current id).
#pragma once

#include <cstdint>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "trace/record.h"

namespace lockstep::trace {

struct ScopeDefinition {
  ScopeId id = 0;
  ScopeId parent = 0;
  StringId name = 0;
};

class ScopeTable {
 public:
  // Far above any model's module count times its phases; past it a new scope is 0 (no scope)
  // rather than memory without bound (a job naming a range after its step or sample).
  static constexpr uint32_t kMaxScopes = 1u << 20;

  // Same id for the same (parent, name); 0 once kMaxScopes scopes exist. `parent` must be 0 or
  // an id this table returned.
  ScopeId intern(ScopeId parent, StringId name);

  // Definitions interned since the last call, in id order.
  std::vector<ScopeDefinition> take_pending();

 private:
  std::mutex mutex_;
  std::unordered_map<uint64_t, ScopeId> ids_;  // key: parent << 32 | name
  std::vector<ScopeDefinition> pending_;
  ScopeId next_id_ = 1;
};

}  // namespace lockstep::trace
