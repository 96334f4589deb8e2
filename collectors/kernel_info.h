// What lockstep knows about a kernel function (demangled name, parameter layout), shared by
// launches (kernels.cpp) and the kernel nodes of CUDA graphs (graphs.cpp); kept by
// kernel_info.cpp.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <cuda.h>

#include "collectors/events.h"
#include "collectors/kernel_params.h"
#include "collectors/kernel_writes.h"
#include "collectors/pointer_roles.h"
#include "collectors/runtime.h"

namespace lockstep::collectors {

// What every launch reads comes first: one cache line.
struct KernelInfo {
  trace::StringId name_id = 0;
  bool layout_known = false;
  bool selected = true;  // LOCKSTEP_KERNELS
  bool is_nccl = false;
  bool stacks = false;  // LOCKSTEP_STACKS: its launches record their call stack (stacks.h)
  bool replay = false;  // LOCKSTEP_REPLAY names it (replay.h)
  std::vector<ParamInfo> layout;
  std::string name;                       // demangled
  std::unique_ptr<PointerRoles> roles;    // level full (LOCKSTEP_LEARN_READONLY), else null
  std::optional<WholeWrite> whole_write;  // a known whole-region writer (kernel_writes.h)
  std::optional<StridedWrite> strided_write;  // a strided elementwise writer (kernel_writes.h)
  std::optional<ScratchWord> scratch;     // a known scratch word (kernel_writes.h)
  std::optional<ReducedElement> reduced;  // a reduction's output word (kernel_writes.h)
  std::optional<TensorList> tensor_list;  // a multi-tensor-apply address table (kernel_writes.h)
  std::optional<CatWrite> cat_write;       // a concatenation (kernel_writes.h)
  // The code it belongs to (null: not known, dropped at every unload): code_unloading.
  const void* module = nullptr;
  const void* library = nullptr;
};

// Described once per handle (driver queries under a ShimCallGuard), then cached.
const KernelInfo& kernel_info(Tracer* tracer, FunctionHandle kind, const void* handle);

// What a launch below full needs, copied into the per-thread cache slot: no second miss.
struct KernelBrief {
  const KernelInfo* info = nullptr;
  trace::StringId name_id = 0;
  bool selected = true;
  bool is_nccl = false;
  bool stacks = false;
  bool replay = false;
};
KernelBrief kernel_brief(Tracer* tracer, FunctionHandle kind, const void* handle);
// Starts the miss of kernel_brief's cache slot for `handle`, for a caller with other work to do
// before it asks.
void prefetch_kernel_brief(const void* handle);

// The name of a kernel record staged at broad with trace::kDeferredName, for the writer's name
// resolver, which first unpacks the record's Kernel fields (staged packed, with the handle, in
// its first line: kernels.cpp, namespace packed): looked up on the thread that encodes it,
// through the same cache as at the launch. 0 ("") if it cannot be described.
trace::StringId deferred_kernel_name(Tracer* tracer, trace::Record& record);

// "arg3", or "arg3+8" for a pointer inside a by-value struct parameter.
std::string arg_label(const PointerArg& arg, const std::vector<ParamInfo>& layout);

// graphs.cpp: a kernel launched into capture `capture_id` of `graph` (numbers the graph).
void note_captured_kernel(uint64_t capture_id, CUgraph graph);

}  // namespace lockstep::collectors
