// The binary interface of NCCL's profiler plugin, version 5: what NCCL 2.28 looks for in the
// library NCCL_PROFILER_PLUGIN names (dlopen, then dlsym "ncclProfiler_v5"; NCCL 2.28 tries v5,
// then v4 ... v1; 2.29 adds v6 whose collective descriptor is the same). Written from NVIDIA's
// layout, not copied: NVIDIA/nccl src/include/plugin/profiler/profiler_v5.h at the 2.28.3
// release (commit f1308997d0420148b1be1c24d63f19d902ae589b) and ext-profiler/README.md, which
// ask plugin authors to carry the definitions they implement. Only what the shim reads is
// spelled out; the static_asserts pin the offsets NCCL writes, so a mistyped field fails the
// build instead of reading the wrong bytes.
//
// Event types (ncclProfileColl, ...) are bits of the activation mask init() returns; NCCL calls
// startEvent for a type only when its bit (or a dependent one) is set.
#pragma once

#include <cstddef>
#include <cstdint>

#include <nccl.h>

namespace lockstep::interpose::nccl_profiler {

// Event type bits (profiler.h of the same release: ncclProfileGroup = 1 << 0, ...).
enum EventType : uint64_t {
  kGroup = 1u << 0,
  kColl = 1u << 1,
  kP2p = 1u << 2,
  kProxyOp = 1u << 3,
  kProxyStep = 1u << 4,
  kProxyCtrl = 1u << 5,
  kKernelCh = 1u << 6,
  kNetPlugin = 1u << 7,
  kGroupApi = 1u << 8,
  kCollApi = 1u << 9,
  kP2pApi = 1u << 10,
  kKernelLaunch = 1u << 11,
};

// ncclProfilerEventDescr_v5_t: a type, the parent object, the rank, then a union whose member
// the type selects. `coll` is filled by NCCL when it plans the collective (seqNumber is the
// k-th collective of that function on the communicator; algo and proto are NCCL's names:
// "Ring", "Tree", "NVLS", ..., "LL", "LL128", "Simple").
struct EventDescr {
  uint64_t type;
  void* parent;
  int rank;
  union {
    struct {
      uint64_t seq_number;
      const char* func;
      const void* send;
      void* recv;
      size_t count;
      int root;
      const char* datatype;
      uint8_t channels;
      uint8_t warps;
      const char* algo;
      const char* proto;
      void* parent_group;
    } coll;
    struct {
      const char* func;
      void* buff;
      const char* datatype;
      size_t count;
      int peer;
      uint8_t channels;
      void* parent_group;
    } p2p;
    unsigned char largest_member[64];  // proxyOp, kernelCh, ...: never read, never larger
  };
};
static_assert(offsetof(EventDescr, coll) == 24);
static_assert(offsetof(EventDescr, coll.seq_number) == 24);
static_assert(offsetof(EventDescr, coll.func) == 32);
static_assert(offsetof(EventDescr, coll.send) == 40);
static_assert(offsetof(EventDescr, coll.recv) == 48);
static_assert(offsetof(EventDescr, coll.count) == 56);
static_assert(offsetof(EventDescr, coll.datatype) == 72);
static_assert(offsetof(EventDescr, coll.channels) == 80);
static_assert(offsetof(EventDescr, coll.algo) == 88);
static_assert(offsetof(EventDescr, coll.proto) == 96);
static_assert(offsetof(EventDescr, p2p.channels) == 60);

// ncclProfilerEventState_v5_t is an int-sized enum; its state arguments a union the shim never
// reads.
using EventState = int;
using Logger = void (*)(int level, unsigned long flags, const char* file, int line, const char* fmt,
                        ...);

// ncclProfiler_v5_t.
struct PluginV5 {
  const char* name;
  ncclResult_t (*init)(void** context, uint64_t comm_id, int* activation_mask,
                       const char* comm_name, int nodes, int nranks, int rank, Logger log);
  ncclResult_t (*start_event)(void* context, void** handle, EventDescr* descr);
  ncclResult_t (*stop_event)(void* handle);
  ncclResult_t (*record_event_state)(void* handle, EventState state, void* state_args);
  ncclResult_t (*finalize)(void* context);
};

}  // namespace lockstep::interpose::nccl_profiler
