// Stands in for libnccl.so.2: each API also exported as its pnccl* twin (the same function).
#include "call_counter.h"
#include "interpose/cuda_api.h"

STUB_EXPORT int fakenccl_calls(const char* name) { return stub::calls(name); }

STUB_EXPORT ncclResult_t pncclAllReduce(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t,
                                        ncclComm_t, cudaStream_t) {
  stub::count("AllReduce");
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
STUB_EXPORT ncclResult_t ncclCommInitRank(ncclComm_t* comm, int, ncclUniqueId, int) {
  stub::count("CommInitRank");
  *comm = reinterpret_cast<ncclComm_t>(0x1234);
  return ncclSuccess;
}
STUB_EXPORT ncclResult_t ncclCommDestroy(ncclComm_t) {
  stub::count("CommDestroy");
  return ncclSuccess;
}
