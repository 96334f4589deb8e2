// cuBLAS and cuBLASLt GEMMs: one record per GEMM with exact operand extents, every scale / amax /
// epilogue buffer labelled, and what the library chose (algorithm, workspace).
#include <cublasLt.h>
#include <cublas_v2.h>

#include "collectors/call_stack.h"
#include "collectors/driver_api.h"
#include "collectors/events.h"
#include "collectors/extents.h"
#include "collectors/lt_copies.h"
#include "collectors/lt_identity.h"
#include "collectors/staged_call.h"
#include "common/self_time.h"
#include "common/hot.h"

namespace lockstep::collectors {
namespace {

using F = trace::fields::Gemm;

// The enclosing GEMM call or a nested one (an Lt call made by cublasGemmEx): a token that only
// keeps the nesting counters.
uint64_t nested_gemm() {
  uint64_t token = 0;
  CallState& nested = push_call(CallKind::Nested, &token);
  OpenApi& api = open_api();
  ++api.depth, ++api.gemm_depth;
  nested.raised_depth = nested.raised_gemm = true;
  return token;
}

LOCKSTEP_HOT CallState& open_gemm(Tracer* tracer, const char* api_name, CUstream stream,
                                  uint64_t* token) {
  CallState& call = push_call(CallKind::Gemm, token, stream);
  OpenApi& api = open_api();
  api.gemm_opened();
  call.raised_depth = call.raised_gemm = true;
  call.tracer = tracer;
  call.stream = stream;
  tracer->stamp_literal(&call.record, trace::RecordKind::Gemm, api_name, stream, false);
  return call;
}

LOCKSTEP_HOT void end_gemm(uint64_t token, int status) {
  CallState* call = returned_call(token);
  if (call == nullptr) return;
  if (call->kind == CallKind::Gemm) {
    Tracer* tracer = call->tracer;
    if (call->pending != nullptr) {
      // D waits for the next kernel on this stream, like a kernel's outputs (one hash launch).
      if (status == 0)
        tracer->defer_outputs(call->pending, call->stream, false, call->outputs,
                              /*not_capturing=*/false);
      tracer->release(call->pending, status == 0);
    } else if (status == 0) {
      tracer->append(call->record);
    }
  }
  finish_call(call);
}

LOCKSTEP_HOT CUstream cublas_stream(cublasHandle_t handle) {
  using Fn = cublasStatus_t (*)(cublasHandle_t, cudaStream_t*);
  static auto get_stream = reinterpret_cast<Fn>(resolve("cublasGetStream_v2"));
  cudaStream_t stream = nullptr;
  if (get_stream != nullptr) {
    ShimCallGuard guard;
    get_stream(handle, &stream);
  }
  return reinterpret_cast<CUstream>(stream);
}

// cuBLAS reads alpha/beta through host pointers unless the handle says device.
bool cublas_host_pointer_mode(cublasHandle_t handle) {
  using Fn = cublasStatus_t (*)(cublasHandle_t, cublasPointerMode_t*);
  static auto get_mode = reinterpret_cast<Fn>(resolve("cublasGetPointerMode_v2"));
  cublasPointerMode_t mode = CUBLAS_POINTER_MODE_HOST;
  if (get_mode != nullptr) {
    ShimCallGuard guard;
    if (get_mode(handle, &mode) != CUBLAS_STATUS_SUCCESS) return false;
  }
  return mode == CUBLAS_POINTER_MODE_HOST;
}

int compute_type_bytes(int32_t compute_type) {
  switch (compute_type) {
    case CUBLAS_COMPUTE_16F:
    case CUBLAS_COMPUTE_16F_PEDANTIC:
      return 2;
    case CUBLAS_COMPUTE_64F:
    case CUBLAS_COMPUTE_64F_PEDANTIC:
    case CUBLAS_COMPUTE_64F_EMULATED_FIXEDPOINT:
      return 8;
    default:
      return 4;
  }
}

}  // namespace

// ---- classic cuBLAS -----------------------------------------------------------------------------
namespace {

void set_cublas_fields(trace::Record& r, const CublasGemm& g) {
  r.fields[F::m] = g.m, r.fields[F::n] = g.n, r.fields[F::k] = g.k;
  r.fields[F::batch] = g.batch;
  r.fields[F::trans_a] = g.trans_a, r.fields[F::trans_b] = g.trans_b;
  r.fields[F::type_a] = g.type_a, r.fields[F::type_b] = g.type_b;
  r.fields[F::type_c] = g.type_c, r.fields[F::type_d] = g.type_c;
  r.fields[F::compute_type] = static_cast<uint64_t>(g.compute_type);
  r.fields[F::algo] = static_cast<uint64_t>(static_cast<int64_t>(g.algo));
}

// Below full a classic GEMM's record is its identity alone: built in the writer's staging slot
// and committed before the real call, taken back if the call fails, as a broad launch's
// (kernels.cpp) and a copied cuBLASLt GEMM's (lt_copies.cpp); not a call-stack entry copied into
// the writer at its end (on the H200's host a GEMM's begin and append cost ~1 us at broad, a
// kernel launch's ~0.25: docs/performance.md). The open one per thread, plain data.
constexpr uint64_t kStagedGemmToken = 0xb40ad00000000003ull;  // lt_copies.cpp's is ...0002
thread_local constinit StagedCall t_staged_gemm;

// A token for staged_gemm_end, or 0 where the writer refuses to stage (then the general path).
LOCKSTEP_HOT uint64_t staged_gemm_begin(Tracer* tracer, const CublasGemm& g) {
  StagedCall& slot = t_staged_gemm;
  if (slot.open) return 0;  // never: a GEMM inside a GEMM is nested_gemm's
  const CUstream stream = cublas_stream(g.handle);  // a library call: before the slot is taken
  trace::Record* staged = tracer->stage();
  if (staged == nullptr) return 0;
  tracer->stamp_literal(staged, trace::RecordKind::Gemm, g.api, stream, false);
  staged->clear_fields_below(F::kCount);
  set_cublas_fields(*staged, g);
  slot.opened(tracer, tracer->commit_staged());
  open_api().gemm_opened();  // what it calls (cuBLASLt, its kernels) is its own
  return kStagedGemmToken;
}

// False for any token but staged_gemm_begin's (the call is then closed).
LOCKSTEP_HOT bool staged_gemm_end(uint64_t token, int status) {
  if (token != kStagedGemmToken) return false;
  if (t_staged_gemm.close(status)) open_api().gemm_closed();
  return true;
}

}  // namespace

LOCKSTEP_HOT uint64_t cublas_gemm_begin(const CublasGemm& g) {
  if (!active()) return 0;
  if (open_api().gemm_depth > 0) return nested_gemm();
  Tracer* tracer = Tracer::get();
  if (tracer == nullptr || tracer->level() < Level::Broad) return nested_gemm();
  self_time::Scope timed(self_time::Phase::GemmBegin);
  if (tracer->level() != Level::Full) {  // identity only (its fields), as lt_matmul_begin
    if (const uint64_t token = staged_gemm_begin(tracer, g); token != 0) return token;
  }
  uint64_t token = 0;
  CallState& call = open_gemm(tracer, g.api, cublas_stream(g.handle), &token);
  trace::Record& r = call.record;
  set_cublas_fields(r, g);

  std::vector<PlannedRegion> inputs;
  if (tracer->level() != Level::Full) {  // the writer would not stage: appended at the end
    start_fingerprints(call, inputs);
    return token;
  }
  const GemmOperandExtents e = cublas_gemm_extents(g);
  const bool hash = tracer->fingerprint_step(r.step);
  if (g.pointer_arrays) {
    // Device arrays of pointers: the pointers move between runs and the hash kernel does not
    // follow them; recorded by position only.
    const uint64_t n = e.pointer_array_bytes;
    tracer->add_buffer(&r, nullptr, "A_ptrs", trace::Role::In, trace::DType::U64, g.A, n, true,
                       false);
    tracer->add_buffer(&r, nullptr, "B_ptrs", trace::Role::In, trace::DType::U64, g.B, n, true,
                       false);
    tracer->add_buffer(&r, nullptr, "C_ptrs", trace::Role::In, trace::DType::U64, g.C, n, true,
                       false);
  } else {
    tracer->add_buffer(&r, &inputs, "A", trace::Role::In, cuda_dtype(g.type_a), g.A, e.a_bytes,
                       true, hash);
    tracer->add_buffer(&r, &inputs, "B", trace::Role::In, cuda_dtype(g.type_b), g.B, e.b_bytes,
                       true, hash);
    // With beta == 0 C is not read: recorded by shape, not fingerprinted.
    const bool reads_c =
        !(cublas_host_pointer_mode(g.handle) && host_scalar_is_zero(g.beta, g.scale_type));
    tracer->add_buffer(&r, reads_c ? &inputs : nullptr, "C", trace::Role::In, cuda_dtype(g.type_c),
                       g.C, e.c_bytes, true, hash && reads_c);
    // D is C's buffer after the call.
    tracer->add_buffer(&r, &call.outputs, "D", trace::Role::Out, cuda_dtype(g.type_c), g.C,
                       e.c_bytes, true, hash);
    call.writes_known = hash;  // D is all it writes (pointer arrays: not known)
  }
  start_fingerprints(call, inputs);
  return token;
}

LOCKSTEP_HOT void cublas_gemm_end(uint64_t token, int status) {
  if (!staged_gemm_end(token, status)) end_gemm(token, status);
}

// ---- cuBLASLt -----------------------------------------------------------------------------------
LOCKSTEP_HOT uint64_t lt_matmul_begin(const LtMatmul& mm) {
  if (!active()) return 0;
  if (open_api().gemm_depth > 0) return nested_gemm();  // inside cublasGemmEx: the same GEMM
  Tracer* tracer = Tracer::get();
  if (tracer == nullptr || tracer->level() < Level::Broad) return nested_gemm();
  self_time::Scope timed(self_time::Phase::GemmBegin);
  // Below full, a GEMM whose objects can be copied is recorded from the copies (lt_copies.h).
  const bool full = tracer->level() == Level::Full;
  if (!full) {
    const uint64_t token = lt_copied_begin(tracer, mm);
    if (token != 0) return token;
  }
  const DescGet desc_get = lt_getters().desc;
  ShimCallGuard reading;  // descriptor reads are the shim's own calls
  const LtIdentity id = read_lt_identity({mm.desc, mm.a_layout, mm.b_layout, mm.c_layout,
                                          mm.d_layout, mm.algo},
                                         full ? LtDepth::Whole : LtDepth::Identity, tracer);
  const LtLayout &a = id.a, &b = id.b, &c = id.c, &d = id.d;
  const uint64_t m = id.m, n = id.n, k = id.k;
  const int64_t batch = id.batch;
  auto pointer = [&](cublasLtMatmulDescAttributes_t attr) {
    return desc_attr<const void*>(desc_get, mm.desc, attr, nullptr);
  };

  uint64_t token = 0;
  CallState& call = open_gemm(tracer, "cublasLtMatmul", mm.stream, &token);
  trace::Record& r = call.record;
  set_lt_identity_fields(r, id, mm.workspace_bytes);

  std::vector<PlannedRegion> inputs;
  if (!full) {  // identity only: no operands, scales or epilogue buffers
    start_fingerprints(call, inputs);
    return token;
  }
  const auto scale_type =
      desc_attr<int32_t>(desc_get, mm.desc, CUBLASLT_MATMUL_DESC_SCALE_TYPE, CUDA_R_32F);
  const auto pointer_mode =
      desc_attr<int32_t>(desc_get, mm.desc, CUBLASLT_MATMUL_DESC_POINTER_MODE, 0);
  const bool hash = tracer->fingerprint_step(r.step);
  auto& outputs = call.outputs;
  using trace::Role;
  // Its writes are known when every output is planned (not through device pointer arrays),
  // plus the workspace its kernels write (not hashed).
  call.writes_known = hash;
  if (hash && mm.workspace != nullptr && mm.workspace_bytes > 0 && tracer->reuses_digests()) {
    const auto ws = reinterpret_cast<uintptr_t>(mm.workspace);
    const auto hit = tracer->allocations().find(ws);
    call.writes_only.push_back({static_cast<CUdeviceptr>(ws), mm.workspace_bytes, 0,
                                hit ? hit->base : 0, hit ? ws + hit->readable : 0});
  }
  auto operand = [&](const char* label, Role role, const void* ptr, const LtLayout& l,
                     std::vector<PlannedRegion>* plan) {
    if (l.batch_mode == CUBLASLT_BATCH_MODE_POINTER_ARRAY) {
      call.writes_known = false;
      tracer->add_buffer(&r, nullptr, std::string(label) + "_ptrs", role, trace::DType::U64, ptr,
                         static_cast<uint64_t>(std::max(l.batch_count, 1)) * sizeof(void*), true,
                         false);
      return;
    }
    tracer->add_buffer(&r, plan, label, role, cuda_dtype(l.type), ptr, lt_layout_bytes(l), true,
                       hash && plan != nullptr);
  };
  operand("A", Role::In, mm.A, a, &inputs);
  operand("B", Role::In, mm.B, b, &inputs);
  // With beta == 0 C is not read (C == D is common): recorded by shape, not fingerprinted.
  const bool reads_c = !(pointer_mode == CUBLASLT_POINTER_MODE_HOST &&
                         host_scalar_is_zero(mm.beta, static_cast<cudaDataType>(scale_type)));
  if (mm.C != nullptr) operand("C", Role::In, mm.C, c, reads_c ? &inputs : nullptr);
  operand("D", Role::Out, mm.D, d, &outputs);

  // Scales: `outer` x `inner` as in extents.h (A: M x K, B: N x K, C/D: N x M column-major).
  auto scale = [&](const char* label, Role role, const void* ptr,
                   cublasLtMatmulMatrixScale_t scale_mode, uint64_t outer, uint64_t inner) {
    if (ptr == nullptr) return;
    uint64_t bytes = scale_buffer_bytes(scale_mode, outer, inner);
    const bool scalar = scale_mode == CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F;
    if (!scalar) bytes *= static_cast<uint64_t>(batch);  // per-matrix stride unverified: clamped
    // BLK128x128 padding and batched block scales are not documented exactly: hashed only
    // within a known allocation.
    const bool exact =
        scalar || (scale_mode != CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F && batch == 1);
    tracer->add_buffer(&r, role == Role::In ? &inputs : &outputs, label, role,
                       scale_dtype(scale_mode), ptr, bytes, exact, hash);
  };
  scale("A_scale", Role::In, id.a_scale, id.mode_a, m, k);
  scale("B_scale", Role::In, id.b_scale, id.mode_b, n, k);
  auto other_scale = [&](const char* label, Role role, cublasLtMatmulDescAttributes_t ptr_attr,
                         cublasLtMatmulDescAttributes_t mode_attr) {
    const void* ptr = pointer(ptr_attr);
    scale(label, role, ptr, scale_mode(desc_get, mm.desc, mode_attr, ptr), n, m);
  };
  other_scale("C_scale", Role::In, CUBLASLT_MATMUL_DESC_C_SCALE_POINTER,
              CUBLASLT_MATMUL_DESC_C_SCALE_MODE);
  other_scale("D_scale", Role::In, CUBLASLT_MATMUL_DESC_D_SCALE_POINTER,
              CUBLASLT_MATMUL_DESC_D_SCALE_MODE);
  other_scale("D_out_scale", Role::Out, CUBLASLT_MATMUL_DESC_D_OUT_SCALE_POINTER,
              CUBLASLT_MATMUL_DESC_D_OUT_SCALE_MODE);
  const int amax_bytes = compute_type_bytes(id.compute);
  const trace::DType amax_dtype = amax_bytes == 8   ? trace::DType::F64
                                  : amax_bytes == 2 ? trace::DType::F16
                                                    : trace::DType::F32;
  tracer->add_buffer(&r, &outputs, "D_amax", Role::Out, amax_dtype,
                     pointer(CUBLASLT_MATMUL_DESC_AMAX_D_POINTER), amax_bytes, true, hash);

  // Epilogue buffers.
  const EpilogueBuffers ep = epilogue_buffers(id.epilogue);
  if (ep.bias) {
    auto bias_type = static_cast<cudaDataType>(
        desc_attr<int32_t>(desc_get, mm.desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, -1));
    if (cuda_type_bits(bias_type) == 0) bias_type = ep.bias_is_output ? c.type : d.type;
    const uint64_t length = ep.bias_along_columns ? n : m;
    const auto stride =
        desc_attr<int64_t>(desc_get, mm.desc, CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE, 0);
    const int bits = cuda_type_bits(bias_type);
    const uint64_t bytes = strided_batch_bytes(bits_to_bytes(length, bits), batch, stride, bits);
    tracer->add_buffer(&r, ep.bias_is_output ? &outputs : &inputs,
                       ep.bias_is_output ? "bias_grad" : "bias",
                       ep.bias_is_output ? Role::Out : Role::In, cuda_dtype(bias_type),
                       pointer(CUBLASLT_MATMUL_DESC_BIAS_POINTER), bytes, true, hash);
  }
  if (ep.aux) {
    const auto ld = desc_attr<int64_t>(desc_get, mm.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, 0);
    const auto stride =
        desc_attr<int64_t>(desc_get, mm.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE, 0);
    auto aux_type = static_cast<cudaDataType>(
        desc_attr<int32_t>(desc_get, mm.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE, -1));
    if (cuda_type_bits(aux_type) == 0) aux_type = d.type;
    const int bits = ep.aux_is_bitmask ? 1 : cuda_type_bits(aux_type);
    const uint64_t bytes = column_major_strided_bytes(
        static_cast<int64_t>(m), static_cast<int64_t>(n), ld, batch, stride, bits);
    tracer->add_buffer(&r, ep.aux_is_output ? &outputs : &inputs, "aux",
                       ep.aux_is_output ? Role::Out : Role::In,
                       ep.aux_is_bitmask ? trace::DType::Bytes : cuda_dtype(aux_type),
                       pointer(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER), bytes, true, hash);
    tracer->add_buffer(&r, &inputs, "aux_scale", Role::In, trace::DType::F32,
                       pointer(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_SCALE_POINTER), 4, true, hash);
    tracer->add_buffer(&r, &outputs, "aux_amax", Role::Out, amax_dtype,
                       pointer(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_AMAX_POINTER), amax_bytes, true,
                       hash);
  }
  // Device-side alpha/beta (POINTER_MODE DEVICE and the vector modes).
  if (pointer_mode != CUBLASLT_POINTER_MODE_HOST) {
    const int bits = cuda_type_bits(static_cast<cudaDataType>(scale_type));
    const bool vector = pointer_mode >= CUBLASLT_POINTER_MODE_DEVICE_VECTOR;
    tracer->add_buffer(&r, &inputs, "alpha", Role::In,
                       cuda_dtype(static_cast<cudaDataType>(scale_type)), mm.alpha,
                       bits_to_bytes(vector ? m : 1, bits), true, hash);
    if (pointer_mode == CUBLASLT_POINTER_MODE_DEVICE ||
        pointer_mode == CUBLASLT_POINTER_MODE_DEVICE_VECTOR)
      tracer->add_buffer(&r, &inputs, "beta", Role::In,
                         cuda_dtype(static_cast<cudaDataType>(scale_type)), mm.beta,
                         bits_to_bytes(vector ? m : 1, bits), true, hash);
  }
  start_fingerprints(call, inputs);
  return token;
}

LOCKSTEP_HOT void lt_matmul_end(uint64_t token, int status) {
  if (!lt_copied_end(token, status)) end_gemm(token, status);
}

}  // namespace lockstep::collectors
