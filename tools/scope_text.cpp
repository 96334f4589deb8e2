#include "tools/scope_text.h"

namespace lockstep::tools {
namespace {

// "blocks.1.mlp (forward)" -> {"blocks.1.mlp", " (forward)"}; no suffix: {name, ""}.
std::pair<std::string_view, std::string_view> split_phase(std::string_view name) {
  if (!name.ends_with(')')) return {name, {}};
  const size_t open = name.rfind(" (");
  if (open == std::string_view::npos) return {name, {}};
  return {name.substr(0, open), name.substr(open)};
}

// `inner` names `outer` already: a submodule of it in the same phase.
bool implied_by(std::string_view outer, std::string_view inner) {
  const auto [outer_path, outer_phase] = split_phase(outer);
  const auto [inner_path, inner_phase] = split_phase(inner);
  return !outer_path.empty() && outer_phase == inner_phase &&
         inner_path.size() > outer_path.size() + 1 && inner_path.starts_with(outer_path) &&
         inner_path[outer_path.size()] == '.';
}

}  // namespace

std::string scope_text(const std::vector<std::string_view>& path) {
  std::string text;
  for (size_t i = 0; i < path.size(); ++i) {
    if (i + 1 < path.size() && implied_by(path[i], path[i + 1])) continue;
    if (!text.empty()) text += " / ";
    text += path[i];
  }
  return text;
}

std::string scope_text(const std::vector<std::string>& path) {
  return scope_text(std::vector<std::string_view>(path.begin(), path.end()));
}

}  // namespace lockstep::tools
