// A scope path (trace/record.h, ScopeId) as one line for people, for `show`, the diff's text
// and the export: its range names outermost first, joined by " / ", each level that the next
// one already names left out: the PyTorch hooks of `lockstep run` name a module by its path in
// the model, so "blocks.1 (forward) / blocks.1.mlp (forward)" reads "blocks.1.mlp (forward)".
// The JSON report keeps every level.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace lockstep::tools {

// A level is left out when the next level's name, without its " (phase)" suffix, starts with
// this level's name without its suffix followed by '.', and both have the same suffix.
// "" for an empty path.
std::string scope_text(const std::vector<std::string_view>& path);
std::string scope_text(const std::vector<std::string>& path);

}  // namespace lockstep::tools
