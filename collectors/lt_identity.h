// A cuBLASLt GEMM's identity: what its matmul descriptor, matrix layouts and algorithm say, read
// one attribute at a time through the library's getters (each a library call). The Gemm record's
// identity fields come from here, read on the job's thread from the call's own objects
// (gemm.cpp) or on the trace writer's thread from copies of them (lt_copies.h).
#pragma once

#include <cstdint>

#include <cublasLt.h>

#include "collectors/extents.h"
#include "trace/record.h"

namespace lockstep::collectors {

class Tracer;

using DescGet = cublasStatus_t (*)(cublasLtMatmulDesc_t, cublasLtMatmulDescAttributes_t, void*,
                                   size_t, size_t*);
using LayoutGet = cublasStatus_t (*)(cublasLtMatrixLayout_t, cublasLtMatrixLayoutAttribute_t, void*,
                                     size_t, size_t*);
using AlgoGet = cublasStatus_t (*)(const cublasLtMatmulAlgo_t*,
                                   cublasLtMatmulAlgoConfigAttributes_t, void*, size_t, size_t*);
// The library's getters, resolved once (null where libcublasLt is not in the process).
struct LtGetters {
  DescGet desc = nullptr;
  LayoutGet layout = nullptr;
  AlgoGet algo = nullptr;
};
const LtGetters& lt_getters();

template <typename T>
T desc_attr(DescGet get, cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr,
            T fallback) {
  T value{};
  size_t written = 0;
  if (get == nullptr || get(desc, attr, &value, sizeof(value), &written) != CUBLAS_STATUS_SUCCESS)
    return fallback;
  return value;
}

// A scale's mode: read only when its pointer is set (no pointer: no scale, whatever the mode).
inline cublasLtMatmulMatrixScale_t scale_mode(DescGet get, cublasLtMatmulDesc_t desc,
                                              cublasLtMatmulDescAttributes_t mode_attr,
                                              const void* scale_pointer) {
  if (scale_pointer == nullptr) return CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F;
  return static_cast<cublasLtMatmulMatrixScale_t>(
      desc_attr<int32_t>(get, desc, mode_attr, CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F));
}

// What cuBLASLt chose: the packed `algo` field and the Gemm record's trailing algorithm fields.
struct LtAlgoConfig {
  static constexpr uint64_t kNone = UINT64_MAX;  // no algorithm given: the heuristic chooses
  uint64_t code = kNone;                         // id | tile << 16 | stages << 32 | split-k << 48
  uint32_t reduction_scheme = 0, cta_swizzling = 0, custom_option = 0;
  uint16_t inner_shape = 0, cluster_shape = 0;
  bool operator==(const LtAlgoConfig&) const = default;
};

// The objects of one cublasLtMatmul call, or copies of them. c may equal d; algo may be null.
struct LtObjects {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr, d = nullptr;
  const cublasLtMatmulAlgo_t* algo = nullptr;
};

// The GEMM's identity (the Gemm record's fields), with its layouts for the operand extents.
struct LtIdentity {
  LtLayout a, b, c, d;
  int32_t trans_a = CUBLAS_OP_N, trans_b = CUBLAS_OP_N, compute = 0;
  uint32_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  const void* a_scale = nullptr;  // scale pointers: a mode is read only where one is set
  const void* b_scale = nullptr;
  cublasLtMatmulMatrixScale_t mode_a = CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F;
  cublasLtMatmulMatrixScale_t mode_b = CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F;
  LtAlgoConfig algo;
  uint64_t m = 0, n = 0, k = 0;
  int64_t batch = 1;
};

// How much of the layouts to read: below full a GEMM is its identity (a layout's type, and for A
// and D its shape); full reads them whole for the operands' extents.
enum class LtDepth : uint8_t { Identity, Whole };
// `counted_by`: read through this thread's caches of layouts and algorithms by their bytes
// (bytes_keyed_cache.h), hits and mismatches counted in its stats; null: every attribute read
// from the library (copies on the writer's thread, and the verification of copies).
LtIdentity read_lt_identity(const LtObjects& objects, LtDepth depth, Tracer* counted_by);

// The Gemm record's fields from `id` (every field of the kind).
void set_lt_identity_fields(trace::Record& record, const LtIdentity& id, uint64_t workspace_bytes);

}  // namespace lockstep::collectors
