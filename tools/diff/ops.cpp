#include "tools/diff/ops.h"

namespace lockstep::tools {

uint32_t StringPool::intern(std::string_view text) {
  auto it = ids_.find(text);
  if (it != ids_.end()) return it->second;
  uint32_t id = static_cast<uint32_t>(texts_.size());
  texts_.emplace_back(text);  // a deque never moves its elements: the view key stays valid
  ids_.emplace(texts_.back(), id);
  return id;
}

void OpTable::clear() {
  ops_.clear();
  fields_used_ = buffers_used_ = 0;  // the arenas keep their size for the next window
  payload_.clear();
}

void OpTable::add(const trace::Record& record, uint32_t name, std::span<const uint32_t> labels,
                  uint32_t scope) {
  add_with(
      record, name,
      [&](size_t i, trace::StringId) { return i < labels.size() ? labels[i] : uint32_t{0}; },
      scope);
}

std::string join_scope(const std::vector<std::string_view>& names) {
  std::string joined;
  for (std::string_view name : names) {
    if (!joined.empty()) joined += kScopeSeparator;
    joined += name;
  }
  return joined;
}

std::vector<std::string> split_scope(std::string_view joined) {
  std::vector<std::string> names;
  if (joined.empty()) return names;
  size_t at = 0;
  for (;;) {
    const size_t end = joined.find(kScopeSeparator, at);
    names.emplace_back(joined.substr(at, end == std::string_view::npos ? end : end - at));
    if (end == std::string_view::npos) return names;
    at = end + 1;
  }
}

size_t OpTable::memory_bytes() const {
  return ops_.capacity() * sizeof(Op) + fields_.capacity() * sizeof(uint64_t) +
         buffers_.capacity() * sizeof(OpBuffer) + payload_.capacity();
}

}  // namespace lockstep::tools
