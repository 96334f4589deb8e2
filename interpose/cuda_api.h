// The real CUDA / cuBLAS / NCCL headers, plus the few declarations they do not give a host
// compiler, and one function type per hooked signature (hooked_symbols.def names them).
// The hooks are compiled against these headers: a wrapper whose parameters differ from the
// header's declaration is a compile error ("conflicting declaration of C function").
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>
#include <nccl.h>

// cuda.h maps the name to the 5-argument v2; the library also exports the 4-argument original.
#undef cuGetProcAddress
extern "C" CUresult cuGetProcAddress(const char* symbol, void** pfn, int cudaVersion,
                                     cuuint64_t flags);

// cuda.h maps the name to the 2-argument v2 (CUDA 10.1); the library also exports the
// 1-argument CUDA 10.0 original and its per-thread twin (cudaTypedefs.h declares their PFN
// types only for the driver's own build, so they are spelled out here).
#undef cuStreamBeginCapture
extern "C" CUresult cuStreamBeginCapture(CUstream hStream);
extern "C" CUresult cuStreamBeginCapture_ptsz(CUstream hStream);

// nvcc 13 <<<>>> stubs call these (crt/device_functions.h declares them for nvcc only).
extern "C" cudaError_t __cudaGetKernel(cudaKernel_t* kernel, const void* entry);
extern "C" cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim,
                                          void** args, size_t sharedMem, cudaStream_t stream);
extern "C" cudaError_t __cudaLaunchKernel_ptsz(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim,
                                               void** args, size_t sharedMem, cudaStream_t stream);

namespace lockstep::interpose::sig {

template <typename Pfn>
using driver = std::remove_pointer_t<Pfn>;

// ---- cudart ----
using cudaRuntimeStubLaunch = cudaError_t(cudaKernel_t, dim3, dim3, void**, size_t, cudaStream_t);
using cudaGetKernelFn = cudaError_t(cudaKernel_t*, const void*);
using cudaLibraryGetKernelFn = cudaError_t(cudaKernel_t*, cudaLibrary_t, const char*);
using cudaLaunchKernelFn = cudaError_t(const void*, dim3, dim3, void**, size_t, cudaStream_t);
using cudaLaunchKernelExCFn = cudaError_t(const cudaLaunchConfig_t*, const void*, void**);
using cudaGetDriverEntryPointFn = cudaError_t(const char*, void**, unsigned long long,
                                              cudaDriverEntryPointQueryResult*);
using cudaGetDriverEntryPointByVersionFn = cudaError_t(const char*, void**, unsigned int,
                                                       unsigned long long,
                                                       cudaDriverEntryPointQueryResult*);
using cudaMallocFn = cudaError_t(void**, size_t);
using cudaMallocAsyncFn = cudaError_t(void**, size_t, cudaStream_t);
using cudaMallocFromPoolAsyncFn = cudaError_t(void**, size_t, cudaMemPool_t, cudaStream_t);
using cudaFreeFn = cudaError_t(void*);
using cudaFreeAsyncFn = cudaError_t(void*, cudaStream_t);
using cudaMemcpyFn = cudaError_t(void*, const void*, size_t, cudaMemcpyKind);
using cudaMemcpyAsyncFn = cudaError_t(void*, const void*, size_t, cudaMemcpyKind, cudaStream_t);
using cudaMemsetFn = cudaError_t(void*, int, size_t);
using cudaMemsetAsyncFn = cudaError_t(void*, int, size_t, cudaStream_t);
using cudaGraphInstantiateFn = cudaError_t(cudaGraphExec_t*, cudaGraph_t, unsigned long long);
using cudaGraphInstantiateWithParamsFn = cudaError_t(cudaGraphExec_t*, cudaGraph_t,
                                                     cudaGraphInstantiateParams*);
using cudaGraphLaunchFn = cudaError_t(cudaGraphExec_t, cudaStream_t);

// ---- driver (from cudaTypedefs.h, the ABI each exported name has) ----
using cuGetProcAddressFn = driver<PFN_cuGetProcAddress_v11030>;
using cuGetProcAddress_v2Fn = driver<PFN_cuGetProcAddress_v12000>;
using cuLaunchKernelFn = driver<PFN_cuLaunchKernel_v4000>;
using cuLaunchKernelExFn = driver<PFN_cuLaunchKernelEx_v11060>;
using cuLaunchCooperativeKernelFn = driver<PFN_cuLaunchCooperativeKernel_v9000>;
using cuLibraryGetKernelFn = driver<PFN_cuLibraryGetKernel_v12000>;
using cuModuleUnloadFn = driver<PFN_cuModuleUnload_v2000>;
using cuLibraryUnloadFn = driver<PFN_cuLibraryUnload_v12000>;
using cuMemAllocFn = driver<PFN_cuMemAlloc_v3020>;
using cuMemAllocPitchFn = driver<PFN_cuMemAllocPitch_v3020>;
using cuMemFreeFn = driver<PFN_cuMemFree_v3020>;
using cuMemAllocAsyncFn = driver<PFN_cuMemAllocAsync_v11020>;
using cuMemAllocFromPoolAsyncFn = driver<PFN_cuMemAllocFromPoolAsync_v11020>;
using cuMemFreeAsyncFn = driver<PFN_cuMemFreeAsync_v11020>;
using cuMemAddressReserveFn = driver<PFN_cuMemAddressReserve_v10020>;
using cuMemAddressFreeFn = driver<PFN_cuMemAddressFree_v10020>;
using cuMemMapFn = driver<PFN_cuMemMap_v10020>;
using cuMemUnmapFn = driver<PFN_cuMemUnmap_v10020>;
using cuMemcpyDtoHFn = driver<PFN_cuMemcpyDtoH_v3020>;
using cuMemcpyHtoDFn = driver<PFN_cuMemcpyHtoD_v3020>;
using cuMemcpyDtoDFn = driver<PFN_cuMemcpyDtoD_v3020>;
using cuMemcpyDtoHAsyncFn = driver<PFN_cuMemcpyDtoHAsync_v3020>;
using cuMemcpyHtoDAsyncFn = driver<PFN_cuMemcpyHtoDAsync_v3020>;
using cuMemcpyDtoDAsyncFn = driver<PFN_cuMemcpyDtoDAsync_v3020>;
using cuMemcpyAsyncFn = driver<PFN_cuMemcpyAsync_v4000>;
using cuMemsetD8Fn = driver<PFN_cuMemsetD8_v3020>;
using cuMemsetD32Fn = driver<PFN_cuMemsetD32_v3020>;
using cuMemsetD8AsyncFn = driver<PFN_cuMemsetD8Async_v3020>;
using cuMemsetD32AsyncFn = driver<PFN_cuMemsetD32Async_v3020>;
using cuGraphInstantiateWithFlagsFn = driver<PFN_cuGraphInstantiateWithFlags_v11040>;
using cuGraphInstantiateWithParamsFn = driver<PFN_cuGraphInstantiateWithParams_v12000>;
using cuGraphLaunchFn = driver<PFN_cuGraphLaunch_v10000>;
// stream order points (stream_order_hooks.cpp); _ptsz twins have the same ABI
using cuEventRecordFn = driver<PFN_cuEventRecord_v2000>;
using cuEventRecordWithFlagsFn = driver<PFN_cuEventRecordWithFlags_v11010>;
using cuStreamWaitEventFn = driver<PFN_cuStreamWaitEvent_v3020>;
using cuStreamSynchronizeFn = driver<PFN_cuStreamSynchronize_v2000>;
using cuStreamQueryFn = driver<PFN_cuStreamQuery_v2000>;
using cuCtxSynchronizeFn = driver<PFN_cuCtxSynchronize_v2000>;
using cuCtxSynchronize_v2Fn = driver<PFN_cuCtxSynchronize_v13000>;
using cuStreamBeginCaptureFn = CUresult(CUstream);  // PFN_cuStreamBeginCapture_v10000
using cuStreamBeginCapture_v2Fn = driver<PFN_cuStreamBeginCapture_v10010>;
using cuStreamBeginCaptureToGraphFn = driver<PFN_cuStreamBeginCaptureToGraph_v12030>;
using cuLaunchHostFuncFn = driver<PFN_cuLaunchHostFunc_v10000>;
using cuStreamAddCallbackFn = driver<PFN_cuStreamAddCallback_v5000>;
using cuStreamDestroyFn = driver<PFN_cuStreamDestroy_v4000>;

// ---- cuBLAS / cuBLASLt (cublas_api.h has C++ overloads of some names: spell the C ones) ----
using cublasGemmExFn = cublasStatus_t(cublasHandle_t, cublasOperation_t, cublasOperation_t, int,
                                      int, int, const void*, const void*, cudaDataType, int,
                                      const void*, cudaDataType, int, const void*, void*,
                                      cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);
using cublasGemmEx_64Fn = cublasStatus_t(cublasHandle_t, cublasOperation_t, cublasOperation_t,
                                         int64_t, int64_t, int64_t, const void*, const void*,
                                         cudaDataType, int64_t, const void*, cudaDataType, int64_t,
                                         const void*, void*, cudaDataType, int64_t,
                                         cublasComputeType_t, cublasGemmAlgo_t);
template <typename T, typename I>
using cublasTypedGemm = cublasStatus_t(cublasHandle_t, cublasOperation_t, cublasOperation_t, I, I,
                                       I, const T*, const T*, I, const T*, I, const T*, T*, I);
template <typename T, typename I>
using cublasTypedStridedGemm = cublasStatus_t(cublasHandle_t, cublasOperation_t, cublasOperation_t,
                                              I, I, I, const T*, const T*, I, long long, const T*,
                                              I, long long, const T*, T*, I, long long, I);
using cublasSgemmFn = cublasTypedGemm<float, int>;
using cublasSgemm_64Fn = cublasTypedGemm<float, int64_t>;
using cublasDgemmFn = cublasTypedGemm<double, int>;
using cublasDgemm_64Fn = cublasTypedGemm<double, int64_t>;
using cublasHgemmFn = cublasTypedGemm<__half, int>;
using cublasHgemm_64Fn = cublasTypedGemm<__half, int64_t>;
using cublasSgemmStridedBatchedFn = cublasTypedStridedGemm<float, int>;
using cublasSgemmStridedBatched_64Fn = cublasTypedStridedGemm<float, int64_t>;
using cublasHgemmStridedBatchedFn = cublasTypedStridedGemm<__half, int>;
using cublasHgemmStridedBatched_64Fn = cublasTypedStridedGemm<__half, int64_t>;
template <typename I>
using cublasStridedBatchedEx = cublasStatus_t(cublasHandle_t, cublasOperation_t, cublasOperation_t,
                                              I, I, I, const void*, const void*, cudaDataType, I,
                                              long long, const void*, cudaDataType, I, long long,
                                              const void*, void*, cudaDataType, I, long long, I,
                                              cublasComputeType_t, cublasGemmAlgo_t);
using cublasGemmStridedBatchedExFn = cublasStridedBatchedEx<int>;
using cublasGemmStridedBatchedEx_64Fn = cublasStridedBatchedEx<int64_t>;
template <typename I>
using cublasBatchedEx = cublasStatus_t(cublasHandle_t, cublasOperation_t, cublasOperation_t, I, I,
                                       I, const void*, const void* const[], cudaDataType, I,
                                       const void* const[], cudaDataType, I, const void*,
                                       void* const[], cudaDataType, I, I, cublasComputeType_t,
                                       cublasGemmAlgo_t);
using cublasGemmBatchedExFn = cublasBatchedEx<int>;
using cublasGemmBatchedEx_64Fn = cublasBatchedEx<int64_t>;
using cublasLtMatmulFn = cublasStatus_t(cublasLtHandle_t, cublasLtMatmulDesc_t, const void*,
                                        const void*, cublasLtMatrixLayout_t, const void*,
                                        cublasLtMatrixLayout_t, const void*, const void*,
                                        cublasLtMatrixLayout_t, void*, cublasLtMatrixLayout_t,
                                        const cublasLtMatmulAlgo_t*, void*, size_t, cudaStream_t);

// ---- NCCL ----
using ncclAllReduceFn = ncclResult_t(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t,
                                     ncclComm_t, cudaStream_t);
using ncclBroadcastFn = ncclResult_t(const void*, void*, size_t, ncclDataType_t, int, ncclComm_t,
                                     cudaStream_t);
using ncclBcastFn = ncclResult_t(void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
using ncclReduceFn = ncclResult_t(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, int,
                                  ncclComm_t, cudaStream_t);
using ncclAllGatherFn = ncclResult_t(const void*, void*, size_t, ncclDataType_t, ncclComm_t,
                                     cudaStream_t);
using ncclReduceScatterFn = ncclAllReduceFn;
using ncclAlltoAllFn = ncclAllGatherFn;
using ncclGatherFn = ncclBroadcastFn;
using ncclScatterFn = ncclBroadcastFn;
using ncclSendFn = ncclResult_t(const void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
using ncclRecvFn = ncclResult_t(void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
using ncclGroupFn = ncclResult_t();
using ncclCommInitRankFn = ncclResult_t(ncclComm_t*, int, ncclUniqueId, int);
using ncclCommInitRankConfigFn = ncclResult_t(ncclComm_t*, int, ncclUniqueId, int, ncclConfig_t*);
using ncclCommInitAllFn = ncclResult_t(ncclComm_t*, int, const int*);
using ncclCommInitRankScalableFn = ncclResult_t(ncclComm_t*, int, int, int, ncclUniqueId*,
                                                ncclConfig_t*);
using ncclCommSplitFn = ncclResult_t(ncclComm_t, int, int, ncclComm_t*, ncclConfig_t*);
using ncclCommShrinkFn = ncclResult_t(ncclComm_t, int*, int, ncclComm_t*, ncclConfig_t*, int);
using ncclCommDestroyFn = ncclResult_t(ncclComm_t);

}  // namespace lockstep::interpose::sig
