// What lockstep knows about each kernel function (kernel_info.h): described once per handle
// through the driver (name, parameter layout, the code it belongs to), kept in one shared map,
// read at launches through a direct-mapped cache per thread, and dropped when its code is
// unloaded. The launches that read it: kernels.cpp; graphs' kernel nodes: graphs.cpp.
#include <cxxabi.h>

#include <cstdlib>
#include <memory>
#include <shared_mutex>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <fmt/format.h>

#include "collectors/driver_api.h"
#include "collectors/events.h"
#include "collectors/kernel_info.h"
#include "collectors/replay.h"
#include "common/hot.h"

namespace lockstep::collectors {
namespace {

std::shared_mutex g_kernels_mutex;
std::unordered_map<const void*, std::unique_ptr<KernelInfo>> g_kernels;
std::unordered_set<const void*> g_kernel_handles;  // handles known to be CUkernels
// What code_unloading took out of g_kernels: kept, never freed (a record held for its digests or
// a graph's node may still point at one), and only what was unloaded (or not known to belong to
// any code), so bounded by the code the job loaded.
std::vector<std::unique_ptr<KernelInfo>> g_unloaded_kernels;

std::string demangle(const char* mangled) {
  if (mangled == nullptr) return "?";
  int status = 0;
  char* text = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
  if (status != 0 || text == nullptr) return mangled;
  std::string out(text);
  std::free(text);
  return out;
}

template <typename Handle, typename GetInfo>
void read_layout(Handle handle, GetInfo get_info, KernelInfo* info) {
  if (get_info == nullptr) return;
  for (size_t index = 0; index < 4096; ++index) {
    size_t offset = 0, size = 0;
    if (get_info(handle, index, &offset, &size) != CUDA_SUCCESS) break;  // past the last one
    info->layout.push_back({static_cast<uint32_t>(offset), static_cast<uint32_t>(size)});
  }
  info->layout_known = true;
}

std::unique_ptr<KernelInfo> describe(Tracer* tracer, FunctionHandle kind, const void* handle) {
  ShimCallGuard guard;
  auto info = std::make_unique<KernelInfo>();
  const Driver& d = driver();
  const char* mangled = nullptr;
  bool as_kernel = kind == FunctionHandle::RuntimeKernel || kind == FunctionHandle::DriverKernel;
  CUfunction function = nullptr;
  if (kind == FunctionHandle::DriverUnknown) {
    std::shared_lock lock(g_kernels_mutex);
    as_kernel = g_kernel_handles.contains(handle);
  }
  if (kind == FunctionHandle::HostStub) {
    using Fn = int (*)(void**, const void*);  // cudaGetFuncBySymbol(cudaFunction_t*, const void*)
    auto by_symbol = reinterpret_cast<Fn>(resolve("cudaGetFuncBySymbol"));
    void* resolved = nullptr;
    if (by_symbol != nullptr && by_symbol(&resolved, handle) == 0)
      function = static_cast<CUfunction>(resolved);
  } else if (!as_kernel) {
    function = reinterpret_cast<CUfunction>(const_cast<void*>(handle));
  }
  // The code it belongs to, so that its unload drops this description (code_unloading).
  const auto library_of = [&](CUkernel kernel) {
    CUlibrary library = nullptr;
    if (d.kernelGetLibrary != nullptr && d.kernelGetLibrary(&library, kernel) == CUDA_SUCCESS)
      info->library = library;
  };
  if (as_kernel) {
    auto kernel = reinterpret_cast<CUkernel>(const_cast<void*>(handle));
    if (d.kernelGetName != nullptr) d.kernelGetName(&mangled, kernel);
    read_layout(kernel, d.kernelGetParamInfo, info.get());
    library_of(kernel);
  } else if (function != nullptr) {
    if (d.funcGetName != nullptr && d.funcGetName(&mangled, function) != CUDA_SUCCESS)
      mangled = nullptr;
    if (mangled == nullptr && kind == FunctionHandle::DriverUnknown && d.kernelGetName != nullptr) {
      // Not a CUfunction after all: try it as a CUkernel.
      auto kernel = reinterpret_cast<CUkernel>(const_cast<void*>(handle));
      if (d.kernelGetName(&mangled, kernel) == CUDA_SUCCESS) {
        read_layout(kernel, d.kernelGetParamInfo, info.get());
        library_of(kernel);
      }
    } else {
      read_layout(function, d.funcGetParamInfo, info.get());
      CUmodule module = nullptr;
      if (d.funcGetModule != nullptr && d.funcGetModule(&module, function) == CUDA_SUCCESS)
        info->module = module;
    }
  }
  info->name = demangle(mangled);
  info->name_id = tracer->intern(info->name);
  info->selected = tracer->kernel_selected(info->name);
  info->stacks = tracer->kernel_stacks(info->name);
  info->replay = replay_names(tracer, info->name);
  info->is_nccl = info->name.starts_with("nccl");
  if (tracer->learns_roles()) info->roles = std::make_unique<PointerRoles>(&info->name);
  if (info->layout_known) {
    info->whole_write = whole_write_of(info->name, info->layout);
    info->strided_write = strided_write_of(info->name, info->layout);
    info->scratch = scratch_word_of(info->name, info->layout);
    info->reduced = reduced_element_of(info->name, info->layout);
    info->tensor_list = tensor_list_of(info->name, info->layout);
    info->cat_write = cat_write_of(info->name, info->layout);
  }
  return info;
}

}  // namespace

namespace {
const KernelInfo* find_or_describe(Tracer* tracer, FunctionHandle kind, const void* handle) {
  {
    std::shared_lock lock(g_kernels_mutex);
    if (auto it = g_kernels.find(handle); it != g_kernels.end()) return it->second.get();
  }
  auto described = describe(tracer, kind, handle);
  std::unique_lock lock(g_kernels_mutex);
  return g_kernels.try_emplace(handle, std::move(described)).first->second.get();
}
}  // namespace

namespace {
// A direct-mapped cache per thread in front of the shared map. Between two launches the job's own
// work evicts the shim's data from the CPU caches: one slot is one miss, where a hash map
// lookup is a division and two or three dependent misses.
struct BriefSlot {
  const void* handle;
  uint32_t epoch;  // hot_flags.code_epoch when filled
  KernelBrief brief;
};
constexpr size_t kBriefSlots = 1024;
thread_local BriefSlot* t_brief_slots = nullptr;  // constant-initialized; heap, never freed

// The rare paths out of line, so that the per-launch ones below inline into the launch.
[[gnu::noinline, gnu::cold]] BriefSlot* new_brief_slots() {
  return t_brief_slots = new BriefSlot[kBriefSlots]();
}
[[gnu::noinline]] KernelBrief fill_brief_slot(BriefSlot& slot, Tracer* tracer, FunctionHandle kind,
                                              const void* handle) {
  // The epoch before the lookup: an unload between them leaves the slot stale, looked up again.
  const uint32_t epoch = hot_flags.code_epoch.load(std::memory_order_acquire);
  const KernelInfo* found = find_or_describe(tracer, kind, handle);
  slot = {handle, epoch,
          KernelBrief{found, found->name_id, found->selected, found->is_nccl, found->stacks,
                      found->replay}};
  return slot.brief;
}

inline BriefSlot& brief_slot(const void* handle) {
  BriefSlot* slots = t_brief_slots;
  if (slots == nullptr) [[unlikely]]
    slots = new_brief_slots();
  const auto bits = reinterpret_cast<uintptr_t>(handle);
  return slots[(bits >> 4 ^ bits >> 14) & (kBriefSlots - 1)];
}
}  // namespace

void prefetch_kernel_brief(const void* handle) { __builtin_prefetch(&brief_slot(handle)); }

LOCKSTEP_HOT KernelBrief kernel_brief(Tracer* tracer, FunctionHandle kind, const void* handle) {
  BriefSlot& slot = brief_slot(handle);
  if (slot.handle == handle && handle != nullptr &&
      slot.epoch == hot_flags.code_epoch.load(std::memory_order_relaxed)) [[likely]]
    return slot.brief;
  return fill_brief_slot(slot, tracer, kind, handle);
}

const KernelInfo& kernel_info(Tracer* tracer, FunctionHandle kind, const void* handle) {
  return *kernel_brief(tracer, kind, handle).info;
}

std::string arg_label(const PointerArg& arg, const std::vector<ParamInfo>& layout) {
  const uint32_t inside = arg.byte_offset - layout[arg.param].offset;
  if (inside == 0) return fmt::format("arg{}", arg.param);
  return fmt::format("arg{}+{}", arg.param, inside);
}

void remember_kernel_handle(const void* handle) {
  std::unique_lock lock(g_kernels_mutex);
  g_kernel_handles.insert(handle);
}

void code_unloading(const void* module, const void* library) {
  // First the records that wait for their names (a broad launch's, named by the writer's thread):
  // while the driver still answers for this code. Not under g_kernels_mutex: naming takes it.
  if (Tracer* tracer = Tracer::existing()) tracer->name_deferred_records();
  // A library's functions in this context (the runtime's lazily loaded kernels, cudaGetFuncBySymbol)
  // belong to its module here.
  if (library != nullptr && module == nullptr) {
    const Driver& d = driver();
    CUmodule of_library = nullptr;
    ShimCallGuard guard;
    if (d.libraryGetModule != nullptr &&
        d.libraryGetModule(&of_library, static_cast<CUlibrary>(const_cast<void*>(library))) ==
            CUDA_SUCCESS)
      module = of_library;
  }
  std::unique_lock lock(g_kernels_mutex);
  size_t dropped = 0;
  for (auto it = g_kernels.begin(); it != g_kernels.end();) {
    const KernelInfo& info = *it->second;
    const bool unknown = info.module == nullptr && info.library == nullptr;
    const bool of_library = library != nullptr && info.library == library;
    const bool of_module = module != nullptr && info.module == module;
    if (!unknown && !of_library && !of_module) {
      ++it;
      continue;
    }
    if (of_library) g_kernel_handles.erase(it->first);
    g_unloaded_kernels.push_back(std::move(it->second));
    it = g_kernels.erase(it);
    ++dropped;
  }
  if (dropped > 0) hot_flags.code_epoch.fetch_add(1, std::memory_order_release);
}

}  // namespace lockstep::collectors
