// The JSON header of a trace file and the process facts it records.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace lockstep::trace {

// Version of lockstep that wrote a file (CMake project version).
const char* lockstep_version();

// Rank facts from the launcher's environment (env.h lists the variables, first hit wins).
struct RankInfo {
  std::optional<int> rank, world_size, local_rank;
};
RankInfo rank_from_env();

std::string host_name();
std::vector<std::string> command_line();  // /proc/self/cmdline
std::string iso8601_now();                // UTC, milliseconds: 2026-11-29T18:40:03.123Z

// The header: rank, world_size, local_rank (null when unknown), host, pid, command_line,
// start_time, lockstep_version, format_version; then every key of `extra` (GPU name and UUID,
// driver / runtime / NCCL / cuBLAS versions, configuration...), which the caller supplies.
nlohmann::json build_trace_header(const nlohmann::json& extra = nlohmann::json::object());

}  // namespace lockstep::trace
