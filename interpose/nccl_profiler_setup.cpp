// At load, before the job can create an NCCL communicator: tell collectors/ where the shim's
// own file is, so that NCCL_PROFILER_PLUGIN can point NCCL at the profiler plugin the shim
// exports (nccl_profiler.cpp). Kept apart from the plugin's entry points so that a test can
// link those without this constructor.
#include <dlfcn.h>

#include "collectors/events.h"
#include "nccl_profiler_abi.h"

extern "C" const lockstep::interpose::nccl_profiler::PluginV5 ncclProfiler_v5;

namespace {

__attribute__((constructor)) void offer_the_shim_as_nccl_profiler() {
  Dl_info info{};
  if (dladdr(static_cast<const void*>(&ncclProfiler_v5), &info) == 0 || info.dli_fname == nullptr)
    return;
  try {
    lockstep::collectors::nccl_profiler_setup(info.dli_fname);
  } catch (...) {}
}

}  // namespace
