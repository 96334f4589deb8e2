#include "trace/scope_table.h"

#include <utility>

namespace lockstep::trace {

ScopeId ScopeTable::intern(ScopeId parent, StringId name) {
  const uint64_t key = (static_cast<uint64_t>(parent) << 32) | name;
  std::lock_guard lock(mutex_);
  if (auto it = ids_.find(key); it != ids_.end()) return it->second;
  if (next_id_ >= kMaxScopes) return 0;
  const ScopeId id = next_id_++;
  ids_.emplace(key, id);
  pending_.push_back({id, parent, name});
  return id;
}

std::vector<ScopeDefinition> ScopeTable::take_pending() {
  std::lock_guard lock(mutex_);
  return std::exchange(pending_, {});
}

}  // namespace lockstep::trace
