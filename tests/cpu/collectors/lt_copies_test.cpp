// cuBLASLt GEMMs below full recorded from copies of their objects (collectors/lt_copies.h): the
// record the writer completes from the copies is the one the objects themselves give, a failed
// GEMM leaves none, its own launches are its, and copies that read otherwise are caught and
// turned off. Over flat fakes (every attribute inside the object's bytes, as cuBLASLt's own
// structs) and, where libcublasLt is installed, over the real library's objects (no GPU needed).
#include <dlfcn.h>

#include <functional>
#include <set>

#include "collectors/lt_identity.h"
#include "tests/cpu/collectors/runtime_harness.h"

namespace lockstep::collectors {
namespace {

using F = trace::fields::Gemm;

// ---- flat fakes: the attributes at fixed places inside the header's opaque sizes ---------------
// A layout: extents.h's LtLayout, every attribute in its 64 bytes (the opaque size itself).
using FlatLayout = LtLayout;
struct FlatDesc {
  int32_t trans_a = CUBLAS_OP_N, trans_b = CUBLAS_OP_N, compute = CUBLAS_COMPUTE_32F;
  uint32_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  const void* a_scale = nullptr;
  const void* b_scale = nullptr;
  int32_t mode_a = 0, mode_b = 0;
};
static_assert(sizeof(FlatDesc) <= sizeof(cublasLtMatmulDescOpaque_t));
struct FlatAlgo {
  uint32_t id = 0, tile = 0, stages = 0, split_k = 0, reduction = 0, swizzle = 0, custom = 0;
  uint16_t inner = 0, cluster = 0;
};
static_assert(sizeof(FlatAlgo) <= sizeof(cublasLtMatmulAlgo_t));
// The objects fill storage of the opaque sizes, as the library's do (a copy reads 256 / 64).
template <typename Flat, typename Opaque>
struct alignas(8) Storage {
  Flat flat;
  uint8_t rest[sizeof(Opaque) - sizeof(Flat)] = {};
};
using DescStorage = Storage<FlatDesc, cublasLtMatmulDescOpaque_t>;
using LayoutStorage = FlatLayout;
using AlgoStorage = Storage<FlatAlgo, cublasLtMatmulAlgo_t>;
static_assert(sizeof(DescStorage) == 256 && sizeof(LayoutStorage) == 64 &&
              sizeof(AlgoStorage) == 64);

// Reads of the objects the test made (not of copies), counted; a descriptor in `g_lying` answers
// its compute type from outside its bytes (what copies could not see).
inline std::set<const void*> g_originals;
inline std::set<const void*> g_lying;
inline int g_original_reads = 0;

template <typename T>
cublasStatus_t put(T value, void* buf, size_t size, size_t* written) {
  if (size != sizeof(T)) return CUBLAS_STATUS_INVALID_VALUE;
  std::memcpy(buf, &value, sizeof(T));
  *written = sizeof(T);
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t flat_desc_get(cublasLtMatmulDesc_t object, cublasLtMatmulDescAttributes_t attr,
                             void* buf, size_t size, size_t* written) {
  g_original_reads += g_originals.count(object) != 0;
  const auto* d = reinterpret_cast<const FlatDesc*>(object);
  switch (attr) {
    case CUBLASLT_MATMUL_DESC_TRANSA:
      return put(d->trans_a, buf, size, written);
    case CUBLASLT_MATMUL_DESC_TRANSB:
      return put(d->trans_b, buf, size, written);
    case CUBLASLT_MATMUL_DESC_COMPUTE_TYPE:
      return put(d->compute + (g_lying.count(object) ? 1 : 0), buf, size, written);
    case CUBLASLT_MATMUL_DESC_EPILOGUE:
      return put(d->epilogue, buf, size, written);
    case CUBLASLT_MATMUL_DESC_A_SCALE_POINTER:
      return put(d->a_scale, buf, size, written);
    case CUBLASLT_MATMUL_DESC_B_SCALE_POINTER:
      return put(d->b_scale, buf, size, written);
    case CUBLASLT_MATMUL_DESC_A_SCALE_MODE:
      return put(d->mode_a, buf, size, written);
    case CUBLASLT_MATMUL_DESC_B_SCALE_MODE:
      return put(d->mode_b, buf, size, written);
    default:
      return CUBLAS_STATUS_INVALID_VALUE;
  }
}
cublasStatus_t flat_layout_get(cublasLtMatrixLayout_t object, cublasLtMatrixLayoutAttribute_t attr,
                               void* buf, size_t size, size_t* written) {
  g_original_reads += g_originals.count(object) != 0;
  const auto* l = reinterpret_cast<const FlatLayout*>(object);
  switch (attr) {
    case CUBLASLT_MATRIX_LAYOUT_TYPE:
      return put(l->type, buf, size, written);
    case CUBLASLT_MATRIX_LAYOUT_ORDER:
      return put(l->order, buf, size, written);
    case CUBLASLT_MATRIX_LAYOUT_ROWS:
      return put(l->rows, buf, size, written);
    case CUBLASLT_MATRIX_LAYOUT_COLS:
      return put(l->cols, buf, size, written);
    case CUBLASLT_MATRIX_LAYOUT_LD:
      return put(l->ld, buf, size, written);
    case CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT:
      return put(l->batch_count, buf, size, written);
    case CUBLASLT_MATRIX_LAYOUT_BATCH_MODE:
      return put(l->batch_mode, buf, size, written);
    case CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET:
      return put(l->batch_stride, buf, size, written);
    default:
      return CUBLAS_STATUS_INVALID_VALUE;
  }
}
cublasStatus_t flat_algo_get(const cublasLtMatmulAlgo_t* object,
                             cublasLtMatmulAlgoConfigAttributes_t attr, void* buf, size_t size,
                             size_t* written) {
  g_original_reads += g_originals.count(object) != 0;
  const auto* a = reinterpret_cast<const FlatAlgo*>(object);
  switch (attr) {
    case CUBLASLT_ALGO_CONFIG_ID:
      return put(a->id, buf, size, written);
    case CUBLASLT_ALGO_CONFIG_TILE_ID:
      return put(a->tile, buf, size, written);
    case CUBLASLT_ALGO_CONFIG_STAGES_ID:
      return put(a->stages, buf, size, written);
    case CUBLASLT_ALGO_CONFIG_SPLITK_NUM:
      return put(a->split_k, buf, size, written);
    case CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME:
      return put(a->reduction, buf, size, written);
    case CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING:
      return put(a->swizzle, buf, size, written);
    case CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION:
      return put(a->custom, buf, size, written);
    case CUBLASLT_ALGO_CONFIG_INNER_SHAPE_ID:
      return put(a->inner, buf, size, written);
    case CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID:
      return put(a->cluster, buf, size, written);
    default:
      return CUBLAS_STATUS_INVALID_VALUE;
  }
}
void* flat_resolver(const char* name) {
  const std::string n = name;
  if (n == "cublasLtMatmulDescGetAttribute") return reinterpret_cast<void*>(&flat_desc_get);
  if (n == "cublasLtMatrixLayoutGetAttribute") return reinterpret_cast<void*>(&flat_layout_get);
  if (n == "cublasLtMatmulAlgoConfigGetAttribute") return reinterpret_cast<void*>(&flat_algo_get);
  return fake_resolver_with_driver(name);
}

// Two GEMMs of other shapes, types and choices: a bf16 one with A transposed, a bias epilogue,
// C in its own layout and a chosen split-K algorithm; an fp32 batched one with C == D and the
// heuristic's algorithm.
struct TwoGemms {
  DescStorage desc1, desc2;
  LayoutStorage a1, b1, c1, d1, a2, b2, d2;
  AlgoStorage algo1;
  LtMatmul mm1, mm2;
  TwoGemms() {
    desc1.flat.trans_a = CUBLAS_OP_T;
    desc1.flat.epilogue = CUBLASLT_EPILOGUE_BIAS;
    a1 = {CUDA_R_16BF, CUBLASLT_ORDER_COL, 32, 64, 32};
    b1 = {CUDA_R_16BF, CUBLASLT_ORDER_COL, 32, 16, 32};
    c1 = {CUDA_R_32F, CUBLASLT_ORDER_COL, 64, 16, 64};
    d1 = {CUDA_R_16BF, CUBLASLT_ORDER_COL, 64, 16, 64};
    algo1.flat = {21, 18, 8, 4, CUBLASLT_REDUCTION_SCHEME_INPLACE, 1, 3, 5, 2};
    desc2.flat.compute = CUBLAS_COMPUTE_32F_FAST_TF32;
    a2 = {CUDA_R_32F, CUBLASLT_ORDER_COL, 8, 4, 8, 3};
    b2 = {CUDA_R_32F, CUBLASLT_ORDER_COL, 4, 2, 4, 3};
    d2 = {CUDA_R_32F, CUBLASLT_ORDER_COL, 8, 2, 8, 3};
    const CUdeviceptr base = 0x7f0000000000;
    mm1 = lt(&desc1, &a1, &b1, &c1, &d1, base);
    mm1.algo = reinterpret_cast<const cublasLtMatmulAlgo_t*>(&algo1);
    mm1.workspace_bytes = 1 << 20;
    mm2 = lt(&desc2, &a2, &b2, &d2, &d2, base);
    for (const void* object : {&desc1, &desc2}) g_originals.insert(object);
    for (const void* object : {&a1, &b1, &c1, &d1, &a2, &b2, &d2}) g_originals.insert(object);
    g_originals.insert(&algo1);
  }
  static LtMatmul lt(DescStorage* desc, LayoutStorage* a, LayoutStorage* b, LayoutStorage* c,
                     LayoutStorage* d, CUdeviceptr base) {
    LtMatmul mm;
    mm.desc = reinterpret_cast<cublasLtMatmulDesc_t>(desc);
    mm.a_layout = reinterpret_cast<cublasLtMatrixLayout_t>(a);
    mm.b_layout = reinterpret_cast<cublasLtMatrixLayout_t>(b);
    mm.c_layout = reinterpret_cast<cublasLtMatrixLayout_t>(c);
    mm.d_layout = reinterpret_cast<cublasLtMatrixLayout_t>(d);
    mm.A = reinterpret_cast<void*>(base);
    mm.B = reinterpret_cast<void*>(base + 0x10000);
    mm.C = mm.D = reinterpret_cast<void*>(base + 0x20000);
    return mm;
  }
};

class LtCopiesTest : public RuntimeTest {
 protected:
  // `body` in a child at broad over the flat fakes, copies on or off, with the two GEMMs made.
  ChildResult run_gemms(bool copies, const std::function<void(TwoGemms&)>& body) {
    return run_child(
        env("broad"),
        [&] {
          set_lt_copies(copies);
          on_alloc(0x7f0000000000, 1 << 20);
          static TwoGemms gemms;
          body(gemms);
        },
        &flat_resolver);
  }
  // The child's one trace (into *reader) and its Gemm records in seq order.
  std::vector<trace::Record> gemms_of(const ChildResult& child,
                                      std::unique_ptr<trace::TraceReader>* reader) {
    *reader = only_trace(child);
    if (!*reader) return {};
    return records_of_kind(**reader, trace::RecordKind::Gemm);
  }
};

TEST_F(LtCopiesTest, ABroadGemmFromCopiesHasTheFieldsItsObjectsGive) {
  std::vector<std::vector<uint64_t>> fields[2];
  for (const bool copies : {false, true}) {
    SCOPED_TRACE(copies ? "copies" : "objects read");
    fs::remove_all(dir_);
    ChildResult child = run_gemms(copies, [copies](TwoGemms& gemms) {
      g_original_reads = 0;
      for (int i = 0; i < 100; ++i) {
        lt_matmul_end(lt_matmul_begin(gemms.mm1), 0);
        lt_matmul_end(lt_matmul_begin(gemms.mm2), 0);
      }
      // Copied: the objects are read only on the thread's verification turns, GEMMs 1, 65,
      // 129 and 193 (each the first GEMM's: 10 layout, 6 descriptor, 9 algorithm reads).
      const int expected = 4 * (10 + 6 + 9);
      if (copies && g_original_reads != expected) {
        std::fprintf(stderr, "reads of the objects: %d, expected %d\n", g_original_reads, expected);
        std::fflush(stderr);
        std::_Exit(9);
      }
    });
    std::unique_ptr<trace::TraceReader> reader;
    const auto records = gemms_of(child, &reader);
    ASSERT_EQ(records.size(), 200u);
    for (const auto& r : records) {
      EXPECT_EQ(reader->string(r.name), "cublasLtMatmul");
      EXPECT_TRUE(r.payload.empty());
      fields[copies].emplace_back(r.fields.begin(), r.fields.begin() + F::kCount);
    }
    const auto& first = records[0].fields;
    EXPECT_EQ(first[F::m], 64u);
    EXPECT_EQ(first[F::n], 16u);
    EXPECT_EQ(first[F::k], 32u);  // A transposed: its rows
    EXPECT_EQ(first[F::type_c], uint64_t{CUDA_R_32F});
    EXPECT_EQ(first[F::type_d], uint64_t{CUDA_R_16BF});
    EXPECT_EQ(first[F::epilogue], uint64_t{CUBLASLT_EPILOGUE_BIAS});
    EXPECT_EQ(first[F::algo], 21u | 18u << 16 | uint64_t{8} << 32 | uint64_t{4} << 48);
    EXPECT_EQ(first[F::cluster_shape], 2u);
    EXPECT_EQ(first[F::workspace_bytes], 1u << 20);
    const auto& second = records[1].fields;
    EXPECT_EQ(second[F::batch], 3u);
    EXPECT_EQ(second[F::compute_type], uint64_t{CUBLAS_COMPUTE_32F_FAST_TF32});
    EXPECT_EQ(second[F::algo], LtAlgoConfig::kNone);
  }
  EXPECT_EQ(fields[0], fields[1]);
}

TEST_F(LtCopiesTest, CopiesThatReadOtherwiseThanTheirObjectsAreCaughtAndTurnedOff) {
  ChildResult child = run_gemms(true, [](TwoGemms& gemms) {
    g_lying.insert(&gemms.desc1);                  // its compute type is not in its bytes
    lt_matmul_end(lt_matmul_begin(gemms.mm1), 0);  // a verification turn: caught
    Tracer::existing()->flush_writer();            // the writer has compared
    for (int i = 0; i < 3; ++i) lt_matmul_end(lt_matmul_begin(gemms.mm1), 0);
  });
  std::unique_ptr<trace::TraceReader> reader;
  const auto records = gemms_of(child, &reader);
  ASSERT_EQ(records.size(), 4u);
  for (const auto& r : records)  // each from the objects: the first by the check, then copies off
    EXPECT_EQ(r.fields[F::compute_type], uint64_t{CUBLAS_COMPUTE_32F} + 1);
  uint64_t mismatches = 0;
  reader->for_each_record([&](const trace::Record& r) {
    if (r.kind == trace::RecordKind::Warning &&
        r.fields[trace::fields::Warning::code] == uint64_t(WarningCode::LtCopyMismatch))
      mismatches += r.fields[trace::fields::Warning::count];
    return true;
  });
  EXPECT_EQ(mismatches, 1u);
}

TEST_F(LtCopiesTest, ACopiedGemmThatFailedLeavesNoRecordAndItsLaunchesAreItsOwn) {
  ChildResult child = run_gemms(true, [](TwoGemms& gemms) {
    auto gemm_launching_a_kernel = [&](int status) {
      const uint64_t token = lt_matmul_begin(gemms.mm2);
      launch_function(reinterpret_cast<CUfunction>(0x1234), nullptr, nullptr, 7);
      lt_matmul_end(token, status);
    };
    gemm_launching_a_kernel(CUBLAS_STATUS_EXECUTION_FAILED);
    gemm_launching_a_kernel(0);
    // After the GEMM: the job's own launch again.
    launch_function(reinterpret_cast<CUfunction>(0x1234), nullptr, nullptr, 9);
  });
  std::unique_ptr<trace::TraceReader> reader;
  const auto gemms = gemms_of(child, &reader);
  ASSERT_EQ(gemms.size(), 1u);
  const auto kernels = records_of_kind(*reader, trace::RecordKind::Kernel);
  ASSERT_EQ(kernels.size(), 1u);
  EXPECT_EQ(kernels[0].fields[trace::fields::Kernel::grid_x], 9u);
  EXPECT_GT(kernels[0].seq, gemms[0].seq);
}

// More GEMMs than the copies' ring holds before the writer has read any (no step ends, no
// drain asked for): those that find the ring busy are read on the launching thread. Every record
// has its fields, whichever way it went.
TEST_F(LtCopiesTest, GemmsPastAFullRingOfCopiesAreReadWhereTheyAreMade) {
  ChildResult child = run_gemms(true, [](TwoGemms& gemms) {
    g_original_reads = 0;
    for (int i = 0; i < 1100; ++i) lt_matmul_end(lt_matmul_begin(gemms.mm2), 0);
    // Shown on failure: the verification turns alone read 18 x 10 times (layouts 4 + 1 + 4,
    // C is D; 6 of the descriptor; no algorithm), more when GEMMs were read for want of an
    // entry.
    std::fprintf(stderr, "reads of the objects: %d\n", g_original_reads);
  });
  std::unique_ptr<trace::TraceReader> reader;
  const auto records = gemms_of(child, &reader);
  ASSERT_EQ(records.size(), 1100u) << child.stderr_text;
  for (const auto& r : records) {
    ASSERT_EQ(r.fields[F::m], 8u) << r.seq;
    ASSERT_EQ(r.fields[F::batch], 3u) << r.seq;
    ASSERT_EQ(r.fields[F::compute_type], uint64_t{CUBLAS_COMPUTE_32F_FAST_TF32}) << r.seq;
  }
}

// ---- the real library's objects (copies on the CPU: no GPU needed) ---------------------------
void* g_cublaslt = nullptr;
void* real_lt_resolver(const char* name) {
  if (std::string(name).starts_with("cublasLt")) return dlsym(g_cublaslt, name);
  return fake_resolver_with_driver(name);
}

TEST_F(LtCopiesTest, CopiesOfTheRealLibrarysObjectsReadAsTheObjects) {
  g_cublaslt = dlopen("libcublasLt.so", RTLD_NOW | RTLD_LOCAL);
  if (g_cublaslt == nullptr) g_cublaslt = dlopen("libcublasLt.so.13", RTLD_NOW | RTLD_LOCAL);
  if (g_cublaslt == nullptr) GTEST_SKIP() << "no libcublasLt.so in this process's library path";
  std::vector<std::vector<uint64_t>> fields[2];
  for (const bool copies : {false, true}) {
    SCOPED_TRACE(copies ? "copies" : "objects read");
    fs::remove_all(dir_);
    ChildResult child = run_child(
        env("broad"),
        [copies] {
          set_lt_copies(copies);
          on_alloc(0x7f0000000000, 1 << 20);
          auto lt = [](const char* name) { return dlsym(g_cublaslt, name); };
          auto desc_create =
              reinterpret_cast<decltype(&cublasLtMatmulDescCreate)>(lt("cublasLtMatmulDescCreate"));
          auto desc_set = reinterpret_cast<decltype(&cublasLtMatmulDescSetAttribute)>(
              lt("cublasLtMatmulDescSetAttribute"));
          auto layout_create = reinterpret_cast<decltype(&cublasLtMatrixLayoutCreate)>(
              lt("cublasLtMatrixLayoutCreate"));
          auto layout_set = reinterpret_cast<decltype(&cublasLtMatrixLayoutSetAttribute)>(
              lt("cublasLtMatrixLayoutSetAttribute"));
          auto layout_destroy = reinterpret_cast<decltype(&cublasLtMatrixLayoutDestroy)>(
              lt("cublasLtMatrixLayoutDestroy"));
          cublasLtMatmulDesc_t desc = nullptr;
          desc_create(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F);
          const int32_t trans = CUBLAS_OP_T;
          desc_set(desc, CUBLASLT_MATMUL_DESC_TRANSA, &trans, sizeof trans);
          const uint32_t epilogue = CUBLASLT_EPILOGUE_GELU_BIAS;
          desc_set(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof epilogue);
          // As PyTorch: new layouts for every GEMM, destroyed after it.
          for (int i = 0; i < 70; ++i) {
            cublasLtMatrixLayout_t a, b, d;
            layout_create(&a, CUDA_R_16BF, 768, 2304 + i, 768);
            layout_create(&b, CUDA_R_16BF, 768, 4096, 768);
            layout_create(&d, CUDA_R_16BF, 2304 + i, 4096, 2304 + i);
            const int32_t batch = 1 + i % 3;
            for (auto* l : {a, b, d})
              layout_set(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch, sizeof batch);
            LtMatmul mm;
            mm.desc = desc;
            mm.a_layout = a, mm.b_layout = b, mm.c_layout = mm.d_layout = d;
            mm.A = reinterpret_cast<void*>(0x7f0000000000);
            mm.workspace_bytes = 4 << 20;
            lt_matmul_end(lt_matmul_begin(mm), 0);
            for (auto* l : {a, b, d}) layout_destroy(l);
          }
        },
        &real_lt_resolver);
    std::unique_ptr<trace::TraceReader> reader;
    const auto records = gemms_of(child, &reader);
    ASSERT_EQ(records.size(), 70u);
    for (size_t i = 0; i < records.size(); ++i) {
      const auto& f = records[i].fields;
      EXPECT_EQ(f[F::m], 2304 + i);
      EXPECT_EQ(f[F::n], 4096u);
      EXPECT_EQ(f[F::k], 768u);
      EXPECT_EQ(f[F::batch], 1 + i % 3);
      EXPECT_EQ(f[F::trans_a], uint64_t{CUBLAS_OP_T});
      EXPECT_EQ(f[F::type_a], uint64_t{CUDA_R_16BF});
      EXPECT_EQ(f[F::compute_type], uint64_t{CUBLAS_COMPUTE_32F});
      EXPECT_EQ(f[F::epilogue], uint64_t{CUBLASLT_EPILOGUE_GELU_BIAS});
      fields[copies].emplace_back(f.begin(), f.begin() + F::kCount);
    }
    reader->for_each_record([&](const trace::Record& r) {
      EXPECT_FALSE(r.kind == trace::RecordKind::Warning &&
                   r.fields[trace::fields::Warning::code] == uint64_t(WarningCode::LtCopyMismatch));
      return true;
    });
  }
  EXPECT_EQ(fields[0], fields[1]);
}

}  // namespace
}  // namespace lockstep::collectors
