// Stands in for libnccl.so.2: each API also exported as its pnccl* twin (the same function).
#include <dlfcn.h>

#include <cstdlib>

#include "call_counter.h"
#include "interpose/cuda_api.h"
#include "interpose/nccl_profiler_abi.h"

STUB_EXPORT int fakenccl_calls(const char* name) { return stub::calls(name); }

// NCCL's profiler plugin loading, as NCCL 2.28 does it (src/plugin/profiler.cc): at the first
// communicator, dlopen the library NCCL_PROFILER_PLUGIN names and dlsym "ncclProfiler_v5"; init
// per communicator; startEvent for each collective it plans, on the launching thread.
namespace {
namespace profiler = lockstep::interpose::nccl_profiler;
const profiler::PluginV5* g_profiler = nullptr;
void* g_profiler_context = nullptr;
int g_profiler_mask = 0;

void load_profiler(int nranks, int rank) {
  if (g_profiler == nullptr) {
    const char* name = std::getenv("NCCL_PROFILER_PLUGIN");
    if (name == nullptr) return;
    void* lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) return;
    g_profiler = static_cast<const profiler::PluginV5*>(dlsym(lib, "ncclProfiler_v5"));
    if (g_profiler == nullptr) return;
  }
  if (g_profiler->init(&g_profiler_context, 0x5eed, &g_profiler_mask, "", 1, nranks, rank,
                       nullptr) != ncclSuccess)
    g_profiler = nullptr;
}

void plan_collective(const char* func, const void* send, void* recv, size_t count) {
  if (g_profiler == nullptr || (g_profiler_mask & profiler::kColl) == 0) return;
  profiler::EventDescr d{};
  d.type = profiler::kColl;
  d.coll.func = func;
  d.coll.send = send;
  d.coll.recv = recv;
  d.coll.count = count;
  d.coll.datatype = "ncclFloat32";
  d.coll.channels = 4;
  d.coll.algo = "Ring";
  d.coll.proto = "LL128";
  void* handle = nullptr;
  g_profiler->start_event(g_profiler_context, &handle, &d);
  if (handle != nullptr) g_profiler->stop_event(handle);
}
}  // namespace

STUB_EXPORT int fakenccl_profiler_loaded() { return g_profiler != nullptr; }

STUB_EXPORT ncclResult_t pncclAllReduce(const void* send, void* recv, size_t count, ncclDataType_t,
                                        ncclRedOp_t, ncclComm_t, cudaStream_t) {
  stub::count("AllReduce");
  plan_collective("AllReduce", send, recv, count);
  return ncclSuccess;
}
STUB_EXPORT ncclResult_t ncclAllReduce(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t,
                                       ncclComm_t, cudaStream_t)
    __attribute__((weak, alias("pncclAllReduce")));
STUB_EXPORT ncclResult_t ncclGroupStart() {
  stub::count("GroupStart");
  return ncclSuccess;
}
STUB_EXPORT ncclResult_t ncclGroupEnd() {
  stub::count("GroupEnd");
  return ncclSuccess;
}
STUB_EXPORT ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId, int rank) {
  stub::count("CommInitRank");
  *comm = reinterpret_cast<ncclComm_t>(0x1234);
  load_profiler(nranks, rank);
  return ncclSuccess;
}
STUB_EXPORT ncclResult_t ncclCommDestroy(ncclComm_t) {
  stub::count("CommDestroy");
  return ncclSuccess;
}
