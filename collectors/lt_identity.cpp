// Reading a cuBLASLt GEMM's identity (lt_identity.h): attribute by attribute, layouts and
// algorithms through per-thread caches by their bytes on the job's thread.
#include "collectors/lt_identity.h"

#include <algorithm>
#include <atomic>
#include <optional>

#include "collectors/bytes_keyed_cache.h"
#include "collectors/driver_api.h"
#include "collectors/runtime.h"
#include "common/hot.h"

namespace lockstep::collectors {

const LtGetters& lt_getters() {
  static const LtGetters getters{
      reinterpret_cast<DescGet>(resolve("cublasLtMatmulDescGetAttribute")),
      reinterpret_cast<LayoutGet>(resolve("cublasLtMatrixLayoutGetAttribute")),
      reinterpret_cast<AlgoGet>(resolve("cublasLtMatmulAlgoConfigGetAttribute"))};
  return getters;
}

namespace {

bool is_complex(cudaDataType type) {
  switch (type) {
    case CUDA_C_16F:
    case CUDA_C_16BF:
    case CUDA_C_32F:
    case CUDA_C_64F:
    case CUDA_C_8I:
    case CUDA_C_8U:
    case CUDA_C_32I:
    case CUDA_C_32U:
    case CUDA_C_4I:
    case CUDA_C_4U:
    case CUDA_C_16I:
    case CUDA_C_16U:
    case CUDA_C_64I:
    case CUDA_C_64U:
      return true;
    default:
      return false;
  }
}

// Each attribute read is a library call (~50 ns), and a GEMM at full reads dozens: the batch
// stride only for batches, the imaginary plane only for complex types (their values are unused
// otherwise). Broad records a GEMM by identity only: a layout's type, and for A and D its shape.
enum class LayoutRead : uint8_t { Type = 1, Shape, Whole };  // deeper reads answer shallower
LOCKSTEP_HOT LtLayout read_layout_attributes(LayoutGet get, cublasLtMatrixLayout_t layout,
                                             LayoutRead what) {
  LtLayout l;
  if (get == nullptr || layout == nullptr) return l;
  size_t written = 0;
  uint32_t type = 0;
  if (get(layout, CUBLASLT_MATRIX_LAYOUT_TYPE, &type, sizeof(type), &written) == 0)
    l.type = static_cast<cudaDataType>(type);
  if (what == LayoutRead::Type) return l;
  get(layout, CUBLASLT_MATRIX_LAYOUT_ROWS, &l.rows, sizeof(l.rows), &written);
  get(layout, CUBLASLT_MATRIX_LAYOUT_COLS, &l.cols, sizeof(l.cols), &written);
  get(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &l.batch_count, sizeof(l.batch_count), &written);
  if (what == LayoutRead::Shape) return l;
  get(layout, CUBLASLT_MATRIX_LAYOUT_ORDER, &l.order, sizeof(l.order), &written);
  get(layout, CUBLASLT_MATRIX_LAYOUT_LD, &l.ld, sizeof(l.ld), &written);
  get(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_MODE, &l.batch_mode, sizeof(l.batch_mode), &written);
  if (l.batch_count > 1)
    get(layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &l.batch_stride,
        sizeof(l.batch_stride), &written);
  if (is_complex(l.type))
    get(layout, CUBLASLT_MATRIX_LAYOUT_PLANE_OFFSET, &l.plane_offset, sizeof(l.plane_offset),
        &written);
  return l;
}

// Layouts and algorithms by their bytes (bytes_keyed_cache.h): the same few shapes every step.
// One cache of each per thread (heap, never freed: hooks run during exit); turned off for the
// process by the first verification that finds the bytes did not tell all.
std::atomic<bool> g_layout_cache_off{false}, g_algo_cache_off{false};
using LayoutCache = BytesKeyedCache<sizeof(cublasLtMatrixLayoutOpaque_t), LtLayout>;
using AlgoCache = BytesKeyedCache<sizeof(cublasLtMatmulAlgo_t), LtAlgoConfig>;
thread_local LayoutCache* t_layouts = nullptr;
thread_local AlgoCache* t_algos = nullptr;
LayoutCache& layout_cache() {
  if (t_layouts == nullptr) t_layouts = new LayoutCache;
  return *t_layouts;
}
AlgoCache& algo_cache() {
  if (t_algos == nullptr) t_algos = new AlgoCache;
  return *t_algos;
}

// One GEMM's lookups, counted when it is described: a mismatch always (a debug line and the
// exit warning), hits and misses for the LOCKSTEP_DEBUG line at exit.
class CountLookups {
 public:
  explicit CountLookups(Tracer* tracer) : tracer_(tracer), before_(sum()) {}
  ~CountLookups() {
    const BytesKeyedCacheStats now = sum();
    if (now.mismatches != before_.mismatches) {
      tracer_->stats.lt_cache_mismatches.fetch_add(now.mismatches - before_.mismatches,
                                                   std::memory_order_relaxed);
      tracer_->debug(
          "cuBLASLt layout or algorithm bytes matched an earlier one's, its attributes "
          "did not: the attribute cache is off");
    }
    if (!tracer_->config().debug) return;
    tracer_->stats.lt_reads_cached.fetch_add(now.hits - before_.hits, std::memory_order_relaxed);
    tracer_->stats.lt_reads_missed.fetch_add(now.misses - before_.misses,
                                             std::memory_order_relaxed);
  }
  CountLookups(const CountLookups&) = delete;
  CountLookups& operator=(const CountLookups&) = delete;

 private:
  static BytesKeyedCacheStats sum() {
    const auto& l = layout_cache().stats();
    const auto& a = algo_cache().stats();
    return {l.hits + a.hits, l.misses + a.misses, l.verified + a.verified,
            l.mismatches + a.mismatches};
  }
  Tracer* tracer_;
  BytesKeyedCacheStats before_;
};

LOCKSTEP_HOT LtLayout read_layout(LayoutGet get, cublasLtMatrixLayout_t layout, LayoutRead what,
                                  bool cached) {
  if (get == nullptr || layout == nullptr) return {};
  if (!cached) return read_layout_attributes(get, layout, what);
  return layout_cache().get(
      layout, static_cast<uint8_t>(what), g_layout_cache_off,
      [&](uint8_t depth) { return read_layout_attributes(get, layout, LayoutRead{depth}); });
}

// The algorithm's configuration attributes (what the library chose), nine library calls: cached
// by the algorithm's bytes (algo_config) as layouts are.
LOCKSTEP_HOT LtAlgoConfig read_algo_config(const cublasLtMatmulAlgo_t* algo) {
  const AlgoGet get = lt_getters().algo;
  LtAlgoConfig config;
  if (get == nullptr) return config;
  // Each attribute read at its own width (the header's: 32 bits, the shape ids 16).
  auto read = [&]<typename T>(cublasLtMatmulAlgoConfigAttributes_t attr, T) -> T {
    T value = 0;
    size_t written = 0;
    if (get(algo, attr, &value, sizeof(value), &written) != CUBLAS_STATUS_SUCCESS) return 0;
    return value;
  };
  auto packed = [&](cublasLtMatmulAlgoConfigAttributes_t attr) -> uint64_t {
    return read(attr, uint32_t{}) & 0xffffu;
  };
  config.code = packed(CUBLASLT_ALGO_CONFIG_ID) | packed(CUBLASLT_ALGO_CONFIG_TILE_ID) << 16 |
                packed(CUBLASLT_ALGO_CONFIG_STAGES_ID) << 32 |
                packed(CUBLASLT_ALGO_CONFIG_SPLITK_NUM) << 48;
  config.reduction_scheme = read(CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, uint32_t{});
  config.cta_swizzling = read(CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, uint32_t{});
  config.custom_option = read(CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION, uint32_t{});
  config.inner_shape = read(CUBLASLT_ALGO_CONFIG_INNER_SHAPE_ID, uint16_t{});
  config.cluster_shape = read(CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, uint16_t{});
  return config;
}

LOCKSTEP_HOT LtAlgoConfig algo_config(const cublasLtMatmulAlgo_t* algo, bool cached) {
  if (algo == nullptr) return {};  // no algorithm given: cuBLASLt's heuristic chooses
  if (!cached) return read_algo_config(algo);
  return algo_cache().get(algo, 1, g_algo_cache_off,
                          [&](uint8_t) { return read_algo_config(algo); });
}

}  // namespace

LOCKSTEP_HOT LtIdentity read_lt_identity(const LtObjects& objects, LtDepth depth,
                                         Tracer* counted_by) {
  const LtGetters& get = lt_getters();
  const bool cached = counted_by != nullptr;
  std::optional<CountLookups> counting;
  if (cached) counting.emplace(counted_by);
  const bool whole = depth == LtDepth::Whole;
  const LayoutRead shape = whole ? LayoutRead::Whole : LayoutRead::Shape;
  const LayoutRead type_only = whole ? LayoutRead::Whole : LayoutRead::Type;
  LtIdentity id;
  id.a = read_layout(get.layout, objects.a, shape, cached);
  id.b = read_layout(get.layout, objects.b, type_only, cached);
  id.d = read_layout(get.layout, objects.d, shape, cached);
  id.c = objects.c == objects.d ? id.d : read_layout(get.layout, objects.c, type_only, cached);
  const cublasLtMatmulDesc_t desc = objects.desc;
  id.trans_a = desc_attr<int32_t>(get.desc, desc, CUBLASLT_MATMUL_DESC_TRANSA, CUBLAS_OP_N);
  id.trans_b = desc_attr<int32_t>(get.desc, desc, CUBLASLT_MATMUL_DESC_TRANSB, CUBLAS_OP_N);
  id.compute = desc_attr<int32_t>(get.desc, desc, CUBLASLT_MATMUL_DESC_COMPUTE_TYPE, 0);
  id.epilogue = desc_attr<uint32_t>(get.desc, desc, CUBLASLT_MATMUL_DESC_EPILOGUE,
                                    CUBLASLT_EPILOGUE_DEFAULT);
  id.a_scale = desc_attr<const void*>(get.desc, desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, nullptr);
  id.b_scale = desc_attr<const void*>(get.desc, desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, nullptr);
  id.mode_a = scale_mode(get.desc, desc, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, id.a_scale);
  id.mode_b = scale_mode(get.desc, desc, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, id.b_scale);
  id.m = id.d.rows, id.n = id.d.cols;
  id.k = id.trans_a == CUBLAS_OP_N ? id.a.cols : id.a.rows;
  id.batch = std::max<int32_t>(id.d.batch_count, 1);
  id.algo = algo_config(objects.algo, cached);
  return id;
}

LOCKSTEP_HOT void set_lt_identity_fields(trace::Record& r, const LtIdentity& id,
                                         uint64_t workspace_bytes) {
  using F = trace::fields::Gemm;
  r.fields[F::m] = id.m, r.fields[F::n] = id.n, r.fields[F::k] = id.k;
  r.fields[F::batch] = static_cast<uint64_t>(id.batch);
  r.fields[F::trans_a] = static_cast<uint64_t>(id.trans_a);
  r.fields[F::trans_b] = static_cast<uint64_t>(id.trans_b);
  r.fields[F::type_a] = id.a.type, r.fields[F::type_b] = id.b.type;
  r.fields[F::type_c] = id.c.type, r.fields[F::type_d] = id.d.type;
  r.fields[F::compute_type] = static_cast<uint64_t>(id.compute);
  r.fields[F::algo] = id.algo.code;
  r.fields[F::reduction_scheme] = id.algo.reduction_scheme;
  r.fields[F::cta_swizzling] = id.algo.cta_swizzling;
  r.fields[F::custom_option] = id.algo.custom_option;
  r.fields[F::inner_shape] = id.algo.inner_shape;
  r.fields[F::cluster_shape] = id.algo.cluster_shape;
  r.fields[F::workspace_bytes] = workspace_bytes;
  r.fields[F::scale_mode_a] = id.mode_a, r.fields[F::scale_mode_b] = id.mode_b;
  r.fields[F::epilogue] = id.epilogue;
}

}  // namespace lockstep::collectors
