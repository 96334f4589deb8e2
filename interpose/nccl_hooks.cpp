// NCCL collectives and point-to-point -> collectors::nccl_begin/end, groups ->
// nccl_group_start/end, communicators -> nccl_comm_created/destroyed. Every API is also
// exported as pnccl*; each wrapper forwards to its own real symbol. One Nccl nesting scope:
// NCCL reaching one of its own exported APIs through us is one event.
#include "collectors/events.h"
#include "hook_support.h"

using namespace lockstep::interpose;
namespace collectors = lockstep::collectors;

namespace {

using collectors::NcclCall;
using collectors::NcclOp;

template <typename Forward>
ncclResult_t traced_nccl(Forward&& forward, const NcclCall& call) {
  return traced_call(
      Scope::Nccl, forward, [&] { return collectors::nccl_begin(call); },
      [](uint64_t token, ncclResult_t result) { collectors::nccl_end(token, result); });
}

NcclCall call(NcclOp op, const char* api, const void* send, void* recv, size_t count,
              ncclDataType_t datatype, ncclRedOp_t redop, int root_or_peer, ncclComm_t comm,
              cudaStream_t stream) {
  NcclCall c;
  c.op = op;
  c.api = api;
  c.send = send;
  c.recv = recv;
  c.count = count;
  c.datatype = datatype;
  c.redop = redop;
  c.root_or_peer = root_or_peer;
  c.comm = comm;
  c.stream = stream;
  return c;
}

void created(bool outermost, const char* api, ncclComm_t comm, ncclComm_t parent, int color,
             int key, int nranks, int rank) {
  if (comm == nullptr) return;  // e.g. ncclCommSplit with NCCL_SPLIT_NOCOLOR
  report_state(outermost, [&] {
    collectors::NcclCommCreated c;
    c.api = api;
    c.comm = comm;
    c.parent = parent;
    c.color = color;
    c.key = key;
    c.nranks = nranks;
    c.rank = rank;
    collectors::nccl_comm_created(c);
  });
}

}  // namespace

#define LOCKSTEP_NCCL_REDUCE_ALL(name, op)                                                         \
  LOCKSTEP_INTERCEPTOR ncclResult_t name(const void* sendbuff, void* recvbuff, size_t count,       \
                                         ncclDataType_t datatype, ncclRedOp_t redop,               \
                                         ncclComm_t comm, cudaStream_t stream) {                   \
    return traced_nccl(                                                                            \
        [&] {                                                                                      \
          return LOCKSTEP_FORWARD(name, sendbuff, recvbuff, count, datatype, redop, comm, stream); \
        },                                                                                         \
        call(op, #name, sendbuff, recvbuff, count, datatype, redop, -1, comm, stream));            \
  }
LOCKSTEP_NCCL_REDUCE_ALL(ncclAllReduce, NcclOp::AllReduce)
LOCKSTEP_NCCL_REDUCE_ALL(pncclAllReduce, NcclOp::AllReduce)
LOCKSTEP_NCCL_REDUCE_ALL(ncclReduceScatter, NcclOp::ReduceScatter)
LOCKSTEP_NCCL_REDUCE_ALL(pncclReduceScatter, NcclOp::ReduceScatter)
#undef LOCKSTEP_NCCL_REDUCE_ALL

#define LOCKSTEP_NCCL_ROOTED(name, op)                                                            \
  LOCKSTEP_INTERCEPTOR ncclResult_t name(const void* sendbuff, void* recvbuff, size_t count,      \
                                         ncclDataType_t datatype, int root, ncclComm_t comm,      \
                                         cudaStream_t stream) {                                   \
    return traced_nccl(                                                                           \
        [&] {                                                                                     \
          return LOCKSTEP_FORWARD(name, sendbuff, recvbuff, count, datatype, root, comm, stream); \
        },                                                                                        \
        call(op, #name, sendbuff, recvbuff, count, datatype, ncclSum, root, comm, stream));       \
  }
LOCKSTEP_NCCL_ROOTED(ncclBroadcast, NcclOp::Broadcast)
LOCKSTEP_NCCL_ROOTED(pncclBroadcast, NcclOp::Broadcast)
LOCKSTEP_NCCL_ROOTED(ncclGather, NcclOp::Gather)
LOCKSTEP_NCCL_ROOTED(pncclGather, NcclOp::Gather)
LOCKSTEP_NCCL_ROOTED(ncclScatter, NcclOp::Scatter)
LOCKSTEP_NCCL_ROOTED(pncclScatter, NcclOp::Scatter)
#undef LOCKSTEP_NCCL_ROOTED

#define LOCKSTEP_NCCL_BCAST(name)                                                              \
  LOCKSTEP_INTERCEPTOR ncclResult_t name(void* buff, size_t count, ncclDataType_t datatype,    \
                                         int root, ncclComm_t comm, cudaStream_t stream) {     \
    return traced_nccl(                                                                        \
        [&] { return LOCKSTEP_FORWARD(name, buff, count, datatype, root, comm, stream); },     \
        call(NcclOp::Bcast, #name, buff, buff, count, datatype, ncclSum, root, comm, stream)); \
  }
LOCKSTEP_NCCL_BCAST(ncclBcast)
LOCKSTEP_NCCL_BCAST(pncclBcast)
#undef LOCKSTEP_NCCL_BCAST

#define LOCKSTEP_NCCL_REDUCE(name)                                                              \
  LOCKSTEP_INTERCEPTOR ncclResult_t name(const void* sendbuff, void* recvbuff, size_t count,    \
                                         ncclDataType_t datatype, ncclRedOp_t redop, int root,  \
                                         ncclComm_t comm, cudaStream_t stream) {                \
    return traced_nccl(                                                                         \
        [&] {                                                                                   \
          return LOCKSTEP_FORWARD(name, sendbuff, recvbuff, count, datatype, redop, root, comm, \
                                  stream);                                                      \
        },                                                                                      \
        call(NcclOp::Reduce, #name, sendbuff, recvbuff, count, datatype, redop, root, comm,     \
             stream));                                                                          \
  }
LOCKSTEP_NCCL_REDUCE(ncclReduce)
LOCKSTEP_NCCL_REDUCE(pncclReduce)
#undef LOCKSTEP_NCCL_REDUCE

#define LOCKSTEP_NCCL_GATHER_ALL(name, op)                                                         \
  LOCKSTEP_INTERCEPTOR ncclResult_t name(const void* sendbuff, void* recvbuff, size_t count,       \
                                         ncclDataType_t datatype, ncclComm_t comm,                 \
                                         cudaStream_t stream) {                                    \
    return traced_nccl(                                                                            \
        [&] { return LOCKSTEP_FORWARD(name, sendbuff, recvbuff, count, datatype, comm, stream); }, \
        call(op, #name, sendbuff, recvbuff, count, datatype, ncclSum, -1, comm, stream));          \
  }
LOCKSTEP_NCCL_GATHER_ALL(ncclAllGather, NcclOp::AllGather)
LOCKSTEP_NCCL_GATHER_ALL(pncclAllGather, NcclOp::AllGather)
LOCKSTEP_NCCL_GATHER_ALL(ncclAlltoAll, NcclOp::AlltoAll)
LOCKSTEP_NCCL_GATHER_ALL(pncclAlltoAll, NcclOp::AlltoAll)
#undef LOCKSTEP_NCCL_GATHER_ALL

#define LOCKSTEP_NCCL_SEND(name)                                                               \
  LOCKSTEP_INTERCEPTOR ncclResult_t name(const void* sendbuff, size_t count,                   \
                                         ncclDataType_t datatype, int peer, ncclComm_t comm,   \
                                         cudaStream_t stream) {                                \
    return traced_nccl(                                                                        \
        [&] { return LOCKSTEP_FORWARD(name, sendbuff, count, datatype, peer, comm, stream); }, \
        call(NcclOp::Send, #name, sendbuff, nullptr, count, datatype, ncclSum, peer, comm,     \
             stream));                                                                         \
  }
LOCKSTEP_NCCL_SEND(ncclSend)
LOCKSTEP_NCCL_SEND(pncclSend)
#undef LOCKSTEP_NCCL_SEND

#define LOCKSTEP_NCCL_RECV(name)                                                                \
  LOCKSTEP_INTERCEPTOR ncclResult_t name(void* recvbuff, size_t count, ncclDataType_t datatype, \
                                         int peer, ncclComm_t comm, cudaStream_t stream) {      \
    return traced_nccl(                                                                         \
        [&] { return LOCKSTEP_FORWARD(name, recvbuff, count, datatype, peer, comm, stream); },  \
        call(NcclOp::Recv, #name, nullptr, recvbuff, count, datatype, ncclSum, peer, comm,      \
             stream));                                                                          \
  }
LOCKSTEP_NCCL_RECV(ncclRecv)
LOCKSTEP_NCCL_RECV(pncclRecv)
#undef LOCKSTEP_NCCL_RECV

// ---- groups: reported after the real call (start only when it succeeded) ----
#define LOCKSTEP_NCCL_GROUP_START(name)                                  \
  LOCKSTEP_INTERCEPTOR ncclResult_t name() {                             \
    Nesting nesting(Scope::Nccl);                                        \
    const ncclResult_t r = LOCKSTEP_FORWARD(name);                       \
    if (r == ncclSuccess && nesting.outermost() && trace_operations()) { \
      try {                                                              \
        collectors::nccl_group_start();                                  \
      } catch (...) {}                                                   \
    }                                                                    \
    return r;                                                            \
  }
LOCKSTEP_NCCL_GROUP_START(ncclGroupStart)
LOCKSTEP_NCCL_GROUP_START(pncclGroupStart)
#undef LOCKSTEP_NCCL_GROUP_START

#define LOCKSTEP_NCCL_GROUP_END(name)                                              \
  LOCKSTEP_INTERCEPTOR ncclResult_t name() {                                       \
    Nesting nesting(Scope::Nccl);                                                  \
    /* grouped collectives launch here */                                          \
    const ncclResult_t r =                                                         \
        nesting.outermost() && validation::enabled()                               \
            ? validation::bracketed(coverage::PushScope::Nccl, trace_operations(), \
                                    [&] { return LOCKSTEP_FORWARD(name); })        \
            : LOCKSTEP_FORWARD(name);                                              \
    if (nesting.outermost() && trace_operations()) {                               \
      try {                                                                        \
        collectors::nccl_group_end(r);                                             \
      } catch (...) {}                                                             \
    }                                                                              \
    return r;                                                                      \
  }
LOCKSTEP_NCCL_GROUP_END(ncclGroupEnd)
LOCKSTEP_NCCL_GROUP_END(pncclGroupEnd)
#undef LOCKSTEP_NCCL_GROUP_END

// ---- communicators ----
// NCCL's own setup work inside communicator creation (copies of its device-side pointers,
// internal allocations and kernels) is not the job's and differs between runs: it runs as if
// inside the shim, so it is neither traced nor fingerprinted.
template <typename Forward>
ncclResult_t internal_work(Forward&& forward) {
  collectors::ShimCallGuard internal;
  return forward();
}

#define LOCKSTEP_NCCL_INIT_RANK(name)                                                       \
  LOCKSTEP_INTERCEPTOR ncclResult_t name(ncclComm_t* comm, int nranks, ncclUniqueId commId, \
                                         int rank) {                                        \
    Nesting nesting(Scope::Nccl);                                                           \
    const ncclResult_t r =                                                                  \
        internal_work([&] { return LOCKSTEP_FORWARD(name, comm, nranks, commId, rank); });  \
    if ((r == ncclSuccess || r == ncclInProgress) && comm != nullptr)                       \
      created(nesting.outermost(), #name, *comm, nullptr, 0, 0, nranks, rank);              \
    return r;                                                                               \
  }
LOCKSTEP_NCCL_INIT_RANK(ncclCommInitRank)
LOCKSTEP_NCCL_INIT_RANK(pncclCommInitRank)
#undef LOCKSTEP_NCCL_INIT_RANK

#define LOCKSTEP_NCCL_INIT_RANK_CONFIG(name)                                                       \
  LOCKSTEP_INTERCEPTOR ncclResult_t name(ncclComm_t* comm, int nranks, ncclUniqueId commId,        \
                                         int rank, ncclConfig_t* config) {                         \
    Nesting nesting(Scope::Nccl);                                                                  \
    const ncclResult_t r =                                                                         \
        internal_work([&] { return LOCKSTEP_FORWARD(name, comm, nranks, commId, rank, config); }); \
    if ((r == ncclSuccess || r == ncclInProgress) && comm != nullptr)                              \
      created(nesting.outermost(), #name, *comm, nullptr, 0, 0, nranks, rank);                     \
    return r;                                                                                      \
  }
LOCKSTEP_NCCL_INIT_RANK_CONFIG(ncclCommInitRankConfig)
LOCKSTEP_NCCL_INIT_RANK_CONFIG(pncclCommInitRankConfig)
#undef LOCKSTEP_NCCL_INIT_RANK_CONFIG

#define LOCKSTEP_NCCL_INIT_ALL(name)                                                        \
  LOCKSTEP_INTERCEPTOR ncclResult_t name(ncclComm_t* comms, int ndev, const int* devlist) { \
    Nesting nesting(Scope::Nccl);                                                           \
    const ncclResult_t r =                                                                  \
        internal_work([&] { return LOCKSTEP_FORWARD(name, comms, ndev, devlist); });        \
    if (r == ncclSuccess && comms != nullptr) {                                             \
      for (int i = 0; i < ndev; ++i)                                                        \
        created(nesting.outermost(), #name, comms[i], nullptr, 0, 0, ndev, i);              \
    }                                                                                       \
    return r;                                                                               \
  }
LOCKSTEP_NCCL_INIT_ALL(ncclCommInitAll)
LOCKSTEP_NCCL_INIT_ALL(pncclCommInitAll)
#undef LOCKSTEP_NCCL_INIT_ALL

#define LOCKSTEP_NCCL_INIT_SCALABLE(name)                                                       \
  LOCKSTEP_INTERCEPTOR ncclResult_t name(ncclComm_t* newcomm, int nranks, int myrank, int nId,  \
                                         ncclUniqueId* commIds, ncclConfig_t* config) {         \
    Nesting nesting(Scope::Nccl);                                                               \
    const ncclResult_t r = internal_work(                                                       \
        [&] { return LOCKSTEP_FORWARD(name, newcomm, nranks, myrank, nId, commIds, config); }); \
    if ((r == ncclSuccess || r == ncclInProgress) && newcomm != nullptr)                        \
      created(nesting.outermost(), #name, *newcomm, nullptr, 0, 0, nranks, myrank);             \
    return r;                                                                                   \
  }
LOCKSTEP_NCCL_INIT_SCALABLE(ncclCommInitRankScalable)
LOCKSTEP_NCCL_INIT_SCALABLE(pncclCommInitRankScalable)
#undef LOCKSTEP_NCCL_INIT_SCALABLE

// nranks / rank of split and shrink children are not in the arguments (0 here); collectors
// can ask ncclCommCount / ncclCommUserRank through the symbol resolver.
#define LOCKSTEP_NCCL_SPLIT(name)                                                                  \
  LOCKSTEP_INTERCEPTOR ncclResult_t name(ncclComm_t comm, int color, int key, ncclComm_t* newcomm, \
                                         ncclConfig_t* config) {                                   \
    Nesting nesting(Scope::Nccl);                                                                  \
    const ncclResult_t r =                                                                         \
        internal_work([&] { return LOCKSTEP_FORWARD(name, comm, color, key, newcomm, config); });  \
    if ((r == ncclSuccess || r == ncclInProgress) && newcomm != nullptr)                           \
      created(nesting.outermost(), #name, *newcomm, comm, color, key, 0, 0);                       \
    return r;                                                                                      \
  }
LOCKSTEP_NCCL_SPLIT(ncclCommSplit)
LOCKSTEP_NCCL_SPLIT(pncclCommSplit)
#undef LOCKSTEP_NCCL_SPLIT

#define LOCKSTEP_NCCL_SHRINK(name)                                                              \
  LOCKSTEP_INTERCEPTOR ncclResult_t name(ncclComm_t comm, int* excludeRanksList,                \
                                         int excludeRanksCount, ncclComm_t* newcomm,            \
                                         ncclConfig_t* config, int shrinkFlags) {               \
    Nesting nesting(Scope::Nccl);                                                               \
    const ncclResult_t r = internal_work([&] {                                                  \
      return LOCKSTEP_FORWARD(name, comm, excludeRanksList, excludeRanksCount, newcomm, config, \
                              shrinkFlags);                                                     \
    });                                                                                         \
    if ((r == ncclSuccess || r == ncclInProgress) && newcomm != nullptr)                        \
      created(nesting.outermost(), #name, *newcomm, comm, 0, 0, 0, 0);                          \
    return r;                                                                                   \
  }
LOCKSTEP_NCCL_SHRINK(ncclCommShrink)
LOCKSTEP_NCCL_SHRINK(pncclCommShrink)
#undef LOCKSTEP_NCCL_SHRINK

// Reported before the real call: the handle is gone once it returns.
#define LOCKSTEP_NCCL_DESTROY(name)                                                      \
  LOCKSTEP_INTERCEPTOR ncclResult_t name(ncclComm_t comm) {                              \
    Nesting nesting(Scope::Nccl);                                                        \
    if (comm != nullptr)                                                                 \
      report_state(nesting.outermost(), [&] { collectors::nccl_comm_destroyed(comm); }); \
    return LOCKSTEP_FORWARD(name, comm);                                                 \
  }
LOCKSTEP_NCCL_DESTROY(ncclCommDestroy)
LOCKSTEP_NCCL_DESTROY(pncclCommDestroy)
LOCKSTEP_NCCL_DESTROY(ncclCommAbort)
LOCKSTEP_NCCL_DESTROY(pncclCommAbort)
#undef LOCKSTEP_NCCL_DESTROY
