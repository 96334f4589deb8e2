// The shim as NCCL's profiler plugin (NCCL 2.23+; ABI v5 in nccl_profiler_abi.h): NCCL dlopens
// the library NCCL_PROFILER_PLUGIN names, which the shim's constructor
// (nccl_profiler_setup.cpp) points at the shim itself, and calls dlsym("ncclProfiler_v5"). The
// plugin asks for collective events only (no proxy, kernel or network events, which would cost
// NCCL's proxy thread time) and hands each collective's algorithm, protocol and channel count to
// collectors/ as an NcclChoice; collectors/ matches it to the collective's record. Mechanics
// only: no state per communicator, every handle null (NCCL then never calls stopEvent for it),
// every entry point returns ncclSuccess and never throws into NCCL.
#include "collectors/events.h"
#include "interception.h"
#include "nccl_profiler_abi.h"

namespace collectors = lockstep::collectors;
namespace profiler = lockstep::interpose::nccl_profiler;

namespace {

// The context NCCL keeps per communicator: the shim needs none, but NCCL skips finalize for a
// null one, so every communicator gets this address.
char g_context;

ncclResult_t init(void** context, uint64_t /*comm_id*/, int* activation_mask,
                  const char* /*comm_name*/, int /*nodes*/, int nranks, int rank,
                  profiler::Logger /*log*/) {
  if (context != nullptr) *context = &g_context;
  if (activation_mask != nullptr) *activation_mask = static_cast<int>(profiler::kColl);
  try {
    collectors::nccl_profiler_loaded(nranks, rank);
  } catch (...) {}
  return ncclSuccess;
}

ncclResult_t start_event(void* /*context*/, void** handle, profiler::EventDescr* descr) {
  if (handle != nullptr) *handle = nullptr;
  if (descr == nullptr || descr->type != profiler::kColl) return ncclSuccess;
  collectors::NcclChoice choice;
  choice.func = descr->coll.func != nullptr ? descr->coll.func : "";
  choice.send = descr->coll.send;
  choice.recv = descr->coll.recv;
  choice.seq_number = descr->coll.seq_number;
  choice.algo = descr->coll.algo;
  choice.proto = descr->coll.proto;
  choice.channels = descr->coll.channels;
  try {
    collectors::nccl_choice(choice);
  } catch (...) {}
  return ncclSuccess;
}

ncclResult_t stop_event(void* /*handle*/) { return ncclSuccess; }

ncclResult_t record_event_state(void* /*handle*/, profiler::EventState /*state*/,
                                void* /*state_args*/) {
  return ncclSuccess;
}

ncclResult_t finalize(void* /*context*/) { return ncclSuccess; }

}  // namespace

// Exported (exports.map: nccl*) under the name NCCL looks for.
LOCKSTEP_INTERCEPTOR const profiler::PluginV5 ncclProfiler_v5 = {
    "lockstep", init, start_event, stop_event, record_event_state, finalize};
