// Coverage of a CUPTI validation run (LOCKSTEP_VALIDATE=1), as a pure function of activity
// records: which executed kernels ran inside a region where the shim had pushed an external
// correlation id (accounted), which did not (missed), and through which entry point.
// cupti_validation.cpp feeds it from CUPTI buffers; the CPU tests feed it synthetic records.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace lockstep::interpose::coverage {

// What the shim was doing when it pushed an external id (the low bits of the id's value).
enum class PushScope : uint8_t { None = 0, Launch = 1, Blas = 2, Nccl = 3, Graph = 4 };

struct ExternalId {
  uint64_t sequence = 0;  // per-process counter
  PushScope scope = PushScope::None;
  PushScope library = PushScope::None;  // outermost library scope open on the thread (Blas/Nccl)
  bool traced = true;  // false: the shim forwarded without reporting (its own work)
};
uint64_t encode(const ExternalId& id);
// LOCKSTEP_VALIDATE: "1", "true", "yes", "on" (any case) -> true; anything else or null -> false.
bool validation_requested(const char* value);
ExternalId decode(uint64_t value);

enum class ApiDomain : uint8_t { Runtime, Driver };

// One record of each activity kind, reduced to what coverage needs.
struct KernelActivity {
  uint32_t correlation_id = 0;
  std::string name;
  uint32_t graph_id = 0;  // non-zero for kernels replayed from a CUDA graph
};
struct ApiActivity {
  uint32_t correlation_id = 0;
  ApiDomain domain = ApiDomain::Runtime;
  uint32_t cbid = 0;
};
struct ExternalCorrelation {
  uint32_t correlation_id = 0;
  uint64_t external_id = 0;  // CUSTOM0 only
};

struct Activity {
  std::vector<KernelActivity> kernels;
  std::vector<ApiActivity> apis;
  std::vector<ExternalCorrelation> externals;
  uint64_t dropped_records = 0;
};

// Where a kernel came from: the library scope of its external id, else the API that launched
// it (its correlation id's API record, runtime preferred over driver).
enum class Source : uint8_t {
  NvccStub,       // runtime __cudaLaunchKernel(_ptsz)
  RuntimeLaunch,  // runtime cudaLaunchKernel / ExC / Cooperative
  Triton,         // driver cuLaunchKernel* outside any library scope (Triton, cuBLASLt's own ...)
  Cublas,         // inside a cuBLAS / cuBLASLt call
  Nccl,           // inside an NCCL call
  Graph,          // replayed by cudaGraphLaunch / cuGraphLaunch
  Other,          // another API, or no API record
  kCount
};
const char* source_name(Source source);

struct SourceCounts {
  uint64_t accounted = 0;
  uint64_t missed = 0;
  uint64_t by_launch_hook = 0;  // accounted, and the innermost id came from a launch wrapper
};

struct Report {
  uint64_t kernels = 0;  // executed, hash kernels excluded
  uint64_t accounted = 0;
  uint64_t missed = 0;
  uint64_t shim_internal = 0;     // ran inside a call the shim forwards untraced on purpose
  uint64_t own_hash_kernels = 0;  // lockstep's fingerprint kernels (excluded from the above)
  uint64_t dropped_records = 0;
  SourceCounts sources[static_cast<int>(Source::kCount)];
  std::map<std::string, uint64_t> missed_names;  // at most kMaxMissedNames names
  std::map<uint32_t, uint64_t> missed_cbids;     // (domain << 16 | cbid) -> kernels
  static constexpr size_t kMaxMissedNames = 20;
};

bool is_own_hash_kernel(const std::string& name);  // lsf1_* / *lockstep*
Source classify_api(ApiDomain domain, uint32_t cbid);
Report aggregate(const Activity& activity);
std::string to_json(const Report& report, long pid);
std::string summary_line(const Report& report);

}  // namespace lockstep::interpose::coverage
