// The JSON header of a trace file and the process facts it records.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace lockstep::trace {

// Version of lockstep that wrote a file (CMake project version).
const char* lockstep_version();

// Rank facts from the launcher's environment (env.h lists the variables; the first one set and
// not empty is the one read). Values are strict: decimal digits only, world size 1..kMaxWorldSize
// (format.h), rank and local rank 0..world size - 1. A bad value is not taken (that fact stays
// unknown: a trace without a rank) and adds one line to `problems`, naming the variable, its
// value and what is accepted, for the shim to print once.
struct RankInfo {
  std::optional<int> rank, world_size, local_rank;
  std::optional<int> local_world_size;  // ranks on this node (the world's layout)
  std::vector<std::string> problems;
};
RankInfo rank_from_env();

std::string host_name();
std::vector<std::string> command_line();  // /proc/self/cmdline
std::string iso8601_now();                // UTC, milliseconds: 2026-11-29T18:40:03.123Z

// The header: rank, world_size, local_rank (null when unknown), host, pid, command_line,
// start_time, lockstep_version, format_version; then every key of `extra` (GPU name and UUID,
// driver / runtime / NCCL / cuBLAS versions, configuration...), which the caller supplies.
nlohmann::json build_trace_header(const nlohmann::json& extra = nlohmann::json::object());

// The shim's configuration in the header: an object under kConfigKey holding, among others,
// the LOCKSTEP_STEPS window as "first_step" and "last_step" (inclusive; last UINT32_MAX when
// open). A reader learns from it which steps were fingerprinted.
inline constexpr const char* kConfigKey = "lockstep_config";

// What else in the process can change numbers (collectors/environment.cpp writes them, the diff's
// environment comparison reads them: tools/why/environment.cpp).
inline constexpr const char* kGpuCountKey = "gpu_count";          // devices the process sees
inline constexpr const char* kCudnnVersionKey = "cudnn_version";  // cudnnGetVersion(), if loaded
// {"torch": "2.11.0+cu130", "triton": ...}: Python packages beside the job's loaded libraries.
inline constexpr const char* kPythonPackagesKey = "python_packages";
// {"NAME": "value"}: the variables of env::kNumericsVars and LOCKSTEP_RECORD_ENV that are set.
inline constexpr const char* kEnvironmentKey = "environment";
nlohmann::json config_window_json(uint32_t first_step, uint32_t last_step);
// The window's first step, or nullopt when the header does not say (an older or foreign writer).
std::optional<uint32_t> fingerprint_first_step(const nlohmann::json& header);

}  // namespace lockstep::trace
