// Pure aggregation of a validation run's activity records (see cupti_coverage.h).
#include "cupti_coverage.h"

#include <cctype>
#include <cstdio>
#include <unordered_map>

#include <cupti_driver_cbid.h>
#include <cupti_runtime_cbid.h>
#include <nlohmann/json.hpp>

namespace lockstep::interpose::coverage {

namespace {
constexpr uint64_t kScopeMask = 0x7, kUntracedBit = 0x8, kLibraryShift = 4, kSequenceShift = 8;
}  // namespace

uint64_t encode(const ExternalId& id) {
  return (id.sequence << kSequenceShift) |
         (static_cast<uint64_t>(id.library) & kScopeMask) << kLibraryShift |
         (id.traced ? 0 : kUntracedBit) | (static_cast<uint64_t>(id.scope) & kScopeMask);
}

bool validation_requested(const char* value) {
  if (value == nullptr) return false;
  std::string v(value);
  for (char& c : v) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return v == "1" || v == "true" || v == "yes" || v == "on";
}

ExternalId decode(uint64_t value) {
  ExternalId id;
  id.sequence = value >> kSequenceShift;
  id.scope = static_cast<PushScope>(value & kScopeMask);
  id.library = static_cast<PushScope>((value >> kLibraryShift) & kScopeMask);
  id.traced = (value & kUntracedBit) == 0;
  return id;
}

const char* source_name(Source source) {
  switch (source) {
    case Source::NvccStub:
      return "nvcc_stub";
    case Source::RuntimeLaunch:
      return "runtime_launch";
    case Source::Triton:
      return "driver_triton";
    case Source::Cublas:
      return "cublas";
    case Source::Nccl:
      return "nccl";
    case Source::Graph:
      return "graph_replay";
    case Source::Other:
      return "other";
    case Source::kCount:
      break;
  }
  return "other";
}

bool is_own_hash_kernel(const std::string& name) {
  return name.rfind("lsf1", 0) == 0 || name.find("lockstep") != std::string::npos;
}

Source classify_api(ApiDomain domain, uint32_t cbid) {
  if (domain == ApiDomain::Runtime) {
    switch (cbid) {
      case CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000:
      case CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_ptsz_v13000:
        return Source::NvccStub;
      case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000:
      case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000:
      case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060:
      case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060:
      case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_v9000:
      case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_ptsz_v9000:
        return Source::RuntimeLaunch;
      case CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000:
      case CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_ptsz_v10000:
        return Source::Graph;
      default:
        return Source::Other;
    }
  }
  switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz:
      return Source::Triton;
    case CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch:
    case CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz:
      return Source::Graph;
    default:
      return Source::Other;
  }
}

Report aggregate(const Activity& activity) {
  Report report;
  report.dropped_records = activity.dropped_records;

  // correlation id -> the API that launched (runtime wins over a driver call nested in it).
  struct Api {
    bool present = false;
    ApiDomain domain = ApiDomain::Driver;
    uint32_t cbid = 0;
  };
  std::unordered_map<uint32_t, Api> apis;
  apis.reserve(activity.apis.size());
  for (const ApiActivity& a : activity.apis) {
    Api& slot = apis[a.correlation_id];
    if (!slot.present || (slot.domain == ApiDomain::Driver && a.domain == ApiDomain::Runtime))
      slot = {true, a.domain, a.cbid};
  }
  // correlation id -> external id (CUPTI reports the top of the CUSTOM0 stack: the innermost).
  std::unordered_map<uint32_t, uint64_t> externals;
  externals.reserve(activity.externals.size());
  for (const ExternalCorrelation& e : activity.externals)
    externals[e.correlation_id] = e.external_id;

  for (const KernelActivity& k : activity.kernels) {
    if (is_own_hash_kernel(k.name)) {
      ++report.own_hash_kernels;
      continue;
    }
    ++report.kernels;
    const auto api_it = apis.find(k.correlation_id);
    const Api api = api_it != apis.end() ? api_it->second : Api{};
    Source source = api.present ? classify_api(api.domain, api.cbid) : Source::Other;
    if (k.graph_id != 0) source = Source::Graph;

    const auto ext_it = externals.find(k.correlation_id);
    if (ext_it == externals.end()) {
      ++report.missed;
      ++report.sources[static_cast<int>(source)].missed;
      if (report.missed_names.size() < Report::kMaxMissedNames ||
          report.missed_names.count(k.name) != 0)
        ++report.missed_names[k.name];
      const uint32_t key =
          api.present
              ? (static_cast<uint32_t>(api.domain == ApiDomain::Driver) << 16 | (api.cbid & 0xffff))
              : 0xffffffffu;
      ++report.missed_cbids[key];
      continue;
    }
    const ExternalId id = decode(ext_it->second);
    if (!id.traced) {  // e.g. NCCL's communicator setup, which the shim runs untraced on purpose
      ++report.shim_internal;
      continue;
    }
    if (source != Source::Graph) {
      if (id.library == PushScope::Blas || id.scope == PushScope::Blas) source = Source::Cublas;
      if (id.library == PushScope::Nccl || id.scope == PushScope::Nccl) source = Source::Nccl;
    }
    ++report.accounted;
    SourceCounts& counts = report.sources[static_cast<int>(source)];
    ++counts.accounted;
    if (id.scope == PushScope::Launch || id.scope == PushScope::Graph) ++counts.by_launch_hook;
  }
  return report;
}

std::string to_json(const Report& report, long pid) {
  nlohmann::json j;
  j["pid"] = pid;
  j["kernels"] = report.kernels;
  j["accounted"] = report.accounted;
  j["missed"] = report.missed;
  j["shim_internal"] = report.shim_internal;
  j["own_hash_kernels"] = report.own_hash_kernels;
  j["dropped_records"] = report.dropped_records;
  nlohmann::json sources = nlohmann::json::object();
  for (int i = 0; i < static_cast<int>(Source::kCount); ++i) {
    const SourceCounts& c = report.sources[i];
    sources[source_name(static_cast<Source>(i))] = {
        {"accounted", c.accounted}, {"missed", c.missed}, {"by_launch_hook", c.by_launch_hook}};
  }
  j["sources"] = sources;
  nlohmann::json names = nlohmann::json::array();
  for (const auto& [name, count] : report.missed_names)
    names.push_back({{"name", name}, {"count", count}});
  j["missed_kernels"] = names;
  nlohmann::json cbids = nlohmann::json::array();
  for (const auto& [key, count] : report.missed_cbids) {
    if (key == 0xffffffffu) {
      cbids.push_back({{"domain", "none"}, {"cbid", nullptr}, {"count", count}});
    } else {
      cbids.push_back({{"domain", (key >> 16) != 0 ? "driver" : "runtime"},
                       {"cbid", key & 0xffff},
                       {"count", count}});
    }
  }
  j["missed_apis"] = cbids;
  return j.dump(2) + "\n";
}

std::string summary_line(const Report& report) {
  char line[256];
  std::snprintf(line, sizeof(line),
                "lockstep: coverage %llu/%llu kernels accounted, %llu missed, %llu shim-internal, "
                "%llu own hash kernels, %llu activity records dropped",
                static_cast<unsigned long long>(report.accounted),
                static_cast<unsigned long long>(report.kernels),
                static_cast<unsigned long long>(report.missed),
                static_cast<unsigned long long>(report.shim_internal),
                static_cast<unsigned long long>(report.own_hash_kernels),
                static_cast<unsigned long long>(report.dropped_records));
  return line;
}

}  // namespace lockstep::interpose::coverage
