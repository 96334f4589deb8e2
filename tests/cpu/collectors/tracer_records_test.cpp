// What each traced call records (collectors/tracer.cpp and the event handlers): launches by
// level, collectives, metrics, steps, GEMMs, graphs, kernel names, arguments and attribution.
#include <sys/wait.h>
#include <unistd.h>

#include "tests/cpu/collectors/runtime_harness.h"

namespace lockstep::collectors {
namespace {

// ---- scenarios ----------------------------------------------------------------------------------
// Launch hooks skip building events below broad: launches_traced() follows the level.
TEST_F(RuntimeTest, LaunchesAreTracedFromBroadUp) {
  for (const auto& [level, traced] : std::vector<std::pair<std::string, bool>>{
           {"off", false}, {"metrics", false}, {"broad", true}, {"full", true}, {"bogus", false}}) {
    ChildResult child = run_child(env(level), [] { std::_Exit(launches_traced() ? 10 : 11); });
    ASSERT_TRUE(WIFEXITED(child.status)) << level;
    EXPECT_EQ(WEXITSTATUS(child.status), traced ? 10 : 11) << level << ": " << child.stderr_text;
  }
}

// Tracer::intern_literal caches ids by the text's address in 32 slots: every one of 40 literals
// (slots shared) gets the id intern() gives its text, and the same again on a second round.
TEST_F(RuntimeTest, InternedLiteralsGetTheIdOfTheirText) {
  ChildResult child = run_child(env("broad"), [] {
    Tracer* tracer = Tracer::get();
    if (tracer == nullptr) std::_Exit(20);
    static const char* const kTexts[] = {
        "l00", "l01", "l02", "l03", "l04", "l05", "l06", "l07", "l08", "l09", "l10", "l11", "l12",
        "l13", "l14", "l15", "l16", "l17", "l18", "l19", "l20", "l21", "l22", "l23", "l24", "l25",
        "l26", "l27", "l28", "l29", "l30", "l31", "l32", "l33", "l34", "l35", "l36", "l37", "l38",
        "l39"};
    for (int round = 0; round < 2; ++round)
      for (const char* text : kTexts)
        if (tracer->intern_literal(text) != tracer->intern(text) || tracer->intern(text) == 0)
          std::_Exit(21);
    std::_Exit(10);
  });
  ASSERT_TRUE(WIFEXITED(child.status));
  EXPECT_EQ(WEXITSTATUS(child.status), 10) << child.stderr_text;
}

TEST_F(RuntimeTest, CollectivesMetricsStepsAndGemmsReachTheTrace) {
  static float loss_on_host = 1.5f;  // what the D2H copy "wrote"
  ChildResult child = run_child(env("full"), [] {
    const CUdeviceptr base = 0x7f0000000000;
    on_alloc(base, 1 << 20);
    auto* world = reinterpret_cast<ncclComm_t>(0xc0);
    NcclCommCreated created;
    created.api = "ncclCommInitRank";
    created.comm = world;
    created.nranks = 4;
    created.rank = 1;
    nccl_comm_created(created);

    // A grouped all-gather: outputs complete after the outermost group end.
    nccl_group_start();
    NcclCall call;
    call.op = NcclOp::AllGather;
    call.api = "ncclAllGather";
    call.send = reinterpret_cast<void*>(base + 4096);
    call.recv = reinterpret_cast<void*>(base + 8192);
    call.count = 8;
    call.datatype = ncclFloat32;
    call.comm = world;
    uint64_t token = nccl_begin(call);
    EXPECT_NE(token, 0u);
    nccl_end(token, ncclSuccess);
    nccl_group_end(ncclSuccess);

    // loss.item(): a 4-byte synchronous device-to-host copy -> Metric, and (auto) a step.
    MemoryOp copy;
    copy.api = "cudaMemcpy";
    copy.direction = 2;
    copy.src = reinterpret_cast<void*>(base);
    copy.dst = &loss_on_host;
    copy.bytes = 4;
    memory_op_end(memory_op_begin(copy), 0);

    marker_range_push("forward");
    marker_range_push("step");  // the first marker: step 2, metrics stop ending steps
    memory_op_end(memory_op_begin(copy), 0);

    // An FP8 cuBLASLt GEMM with block scales and amax.
    static FakeAttributes desc, a, b, d;
    desc.set<int32_t>(CUBLASLT_MATMUL_DESC_TRANSA, CUBLAS_OP_T);
    desc.set<int32_t>(CUBLASLT_MATMUL_DESC_COMPUTE_TYPE, CUBLAS_COMPUTE_32F);
    desc.set<int32_t>(CUBLASLT_MATMUL_DESC_A_SCALE_MODE, CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F);
    desc.set<int32_t>(CUBLASLT_MATMUL_DESC_B_SCALE_MODE,
                      CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F);
    desc.set<const void*>(CUBLASLT_MATMUL_DESC_A_SCALE_POINTER,
                          reinterpret_cast<void*>(base + 0x10000));
    desc.set<const void*>(CUBLASLT_MATMUL_DESC_B_SCALE_POINTER,
                          reinterpret_cast<void*>(base + 0x20000));
    desc.set<const void*>(CUBLASLT_MATMUL_DESC_AMAX_D_POINTER,
                          reinterpret_cast<void*>(base + 0x30000));
    a = layout(CUDA_R_8F_E4M3, 512, 256, 512);  // stored K x M (transa = T): M=256, K=512
    b = layout(CUDA_R_8F_E4M3, 512, 384, 512);  // K x N
    d = layout(CUDA_R_16BF, 256, 384, 256);
    LtMatmul mm =
        fake_lt(&desc, base + 0x40000, &a, base + 0x80000, &b, 0, nullptr, base + 0xc0000, &d);
    mm.workspace_bytes = 1 << 20;
    lt_matmul_end(lt_matmul_begin(mm), 0);

    // A strided-batched bf16 GEMM with C and D in one layout (as PyTorch calls it): the shared
    // layout is read once, and a real (not complex) type's imaginary plane never.
    static FakeAttributes desc2, a2, b2, cd2;
    desc2.set<int32_t>(CUBLASLT_MATMUL_DESC_COMPUTE_TYPE, CUBLAS_COMPUTE_32F);
    desc2.set<int32_t>(CUBLASLT_MATMUL_DESC_A_SCALE_MODE, CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F);
    auto batched = [](FakeAttributes l, int64_t stride) {
      l.set<int32_t>(CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, 2);
      l.set<int64_t>(CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, stride);
      return l;
    };
    a2 = batched(layout(CUDA_R_16BF, 64, 32, 64), 4096);   // M x K
    b2 = batched(layout(CUDA_R_16BF, 32, 16, 32), 1024);   // K x N
    cd2 = batched(layout(CUDA_R_16BF, 64, 16, 64), 2048);  // M x N
    LtMatmul mm2;
    mm2.desc = reinterpret_cast<cublasLtMatmulDesc_t>(&desc2);
    mm2.A = reinterpret_cast<void*>(base + 0x100000);
    mm2.a_layout = reinterpret_cast<cublasLtMatrixLayout_t>(&a2);
    mm2.B = reinterpret_cast<void*>(base + 0x110000);
    mm2.b_layout = reinterpret_cast<cublasLtMatrixLayout_t>(&b2);
    mm2.C = mm2.D = reinterpret_cast<void*>(base + 0x120000);
    mm2.c_layout = mm2.d_layout = reinterpret_cast<cublasLtMatrixLayout_t>(&cd2);
    lt_call_reading(mm2, 3 * 8);  // A, B, C=D: 7 attributes each, + the batch stride

    // cublasGemmEx calling cublasLtMatmul inside: one record.
    uint64_t outer = cublas_gemm_begin(small_gemm_ex(base));
    lt_matmul_end(lt_matmul_begin(mm), 0);
    cublas_gemm_end(outer, 0);

    lockstep_mark("phase");
  });
  auto reader = only_trace(child);
  ASSERT_TRUE(reader);
  EXPECT_EQ(reader->header()["rank"], 0);

  std::vector<trace::Record> records;
  reader->for_each_record([&](const trace::Record& r) {
    records.push_back(r);
    return true;
  });
  std::map<trace::RecordKind, int> kinds;
  for (const auto& r : records) ++kinds[r.kind];
  EXPECT_EQ(kinds[trace::RecordKind::Collective], 1);
  EXPECT_EQ(kinds[trace::RecordKind::Metric], 2);
  EXPECT_EQ(kinds[trace::RecordKind::StepMarker], 3);  // metric, "step", lockstep_mark
  EXPECT_EQ(kinds[trace::RecordKind::Gemm], 3);

  for (const auto& r : records) {
    const std::string name(reader->string(r.name));
    if (r.kind == trace::RecordKind::Collective) {
      using F = trace::fields::Collective;
      EXPECT_EQ(name, "ncclAllGather");
      EXPECT_EQ(r.fields[F::comm_id], 1u);
      EXPECT_EQ(r.fields[F::comm_seq], 1u);
      EXPECT_EQ(r.fields[F::nranks], 4u);
      EXPECT_EQ(r.fields[F::comm_rank], 1u);
      const auto* send = find_buffer(*reader, r, "send");
      const auto* recv = find_buffer(*reader, r, "recv");
      ASSERT_TRUE(send && recv);
      EXPECT_EQ(send->bytes, 32u);
      EXPECT_EQ(recv->bytes, 128u);
      EXPECT_EQ(send->alloc_ordinal, 1u);
      EXPECT_EQ(send->alloc_offset, 4096u);
      EXPECT_EQ(recv->role, trace::Role::Out);
      // No GPU here: both were planned and could not be taken.
      EXPECT_TRUE(send->flags & trace::kFingerprintDropped);
      EXPECT_TRUE(recv->flags & trace::kFingerprintDropped);
      EXPECT_FALSE(recv->flags & trace::kFingerprintValid);
    } else if (r.kind == trace::RecordKind::Metric) {
      ASSERT_EQ(r.payload.size(), 4u);
      float value = 0;
      std::memcpy(&value, r.payload.data(), 4);
      EXPECT_EQ(value, 1.5f);
    } else if (r.kind == trace::RecordKind::Gemm && name == "cublasLtMatmul" &&
               r.fields[trace::fields::Gemm::m] == 64) {
      using F = trace::fields::Gemm;
      EXPECT_EQ(r.fields[F::n], 16u);
      EXPECT_EQ(r.fields[F::k], 32u);
      EXPECT_EQ(r.fields[F::batch], 2u);
      // No A scale pointer: no scale, and its mode is not read.
      EXPECT_EQ(r.fields[F::scale_mode_a], CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F);
      EXPECT_EQ(find_buffer(*reader, r, "A_scale"), nullptr);
      EXPECT_EQ(find_buffer(*reader, r, "A")->bytes, 2u * (4096 + 64 * 32));
      EXPECT_EQ(find_buffer(*reader, r, "B")->bytes, 2u * (1024 + 32 * 16));
      EXPECT_EQ(find_buffer(*reader, r, "D")->bytes, 2u * (2048 + 64 * 16));
      ASSERT_NE(find_buffer(*reader, r, "C"), nullptr);
      EXPECT_EQ(find_buffer(*reader, r, "C")->bytes, 2u * (2048 + 64 * 16));
    } else if (r.kind == trace::RecordKind::Gemm && name == "cublasLtMatmul") {
      using F = trace::fields::Gemm;
      EXPECT_EQ(r.fields[F::m], 256u);
      EXPECT_EQ(r.fields[F::n], 384u);
      EXPECT_EQ(r.fields[F::k], 512u);
      EXPECT_EQ(r.fields[F::algo], UINT64_MAX);
      EXPECT_EQ(r.fields[F::workspace_bytes], 1u << 20);
      EXPECT_EQ(r.fields[F::scale_mode_a], CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F);
      EXPECT_EQ(find_buffer(*reader, r, "A")->bytes, 512u * 256);
      EXPECT_EQ(find_buffer(*reader, r, "D")->bytes, 2u * 256 * 384);
      EXPECT_EQ(find_buffer(*reader, r, "A_scale")->bytes, 4u * 256 * 4);      // M x ceil(K/128)
      EXPECT_EQ(find_buffer(*reader, r, "B_scale")->bytes, 4u * (4 * 2 + 4));  // 3 x 4 blocks
      EXPECT_EQ(find_buffer(*reader, r, "D_amax")->bytes, 4u);
      EXPECT_EQ(find_buffer(*reader, r, "D_amax")->role, trace::Role::Out);
      EXPECT_EQ(find_buffer(*reader, r, "C"), nullptr);
    } else if (r.kind == trace::RecordKind::Gemm) {
      EXPECT_EQ(name, "cublasGemmEx");
      EXPECT_EQ(find_buffer(*reader, r, "D")->bytes, 4u * 16 * 8);
    }
  }
  // Steps 0, 1 (ended by the metric and the marker) and 2 (by lockstep_mark) were summarized.
  auto summaries = reader->step_summaries();
  ASSERT_GE(summaries.size(), 3u);
  EXPECT_EQ(summaries[0].step, 0u);
  EXPECT_EQ(summaries[2].step, 2u);
}

// Below full a GEMM is recorded by identity: the same fields as at full (shape, types, trans,
// scale modes), no operand buffers, and only the layout attributes those fields need (type for
// B and C; type, rows, cols and batch count for A and D): each read is a library call.
TEST_F(RuntimeTest, BroadGemmsAreTheirIdentityAndReadOnlyWhatItNeeds) {
  ChildResult child = run_child(env("broad"), [] {
    const CUdeviceptr base = 0x7f0000000000;
    on_alloc(base, 1 << 22);
    static FakeAttributes desc, a, b, c, d;
    desc.set<int32_t>(CUBLASLT_MATMUL_DESC_TRANSA, CUBLAS_OP_T);
    desc.set<int32_t>(CUBLASLT_MATMUL_DESC_COMPUTE_TYPE, CUBLAS_COMPUTE_32F);
    desc.set<int32_t>(CUBLASLT_MATMUL_DESC_A_SCALE_MODE, CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F);
    desc.set<const void*>(CUBLASLT_MATMUL_DESC_A_SCALE_POINTER,
                          reinterpret_cast<void*>(base + 0x10000));
    desc.set<const void*>(CUBLASLT_MATMUL_DESC_AMAX_D_POINTER,
                          reinterpret_cast<void*>(base + 0x30000));
    a = layout(CUDA_R_8F_E4M3, 512, 256, 512);  // stored K x M (transa = T): M=256, K=512
    a.set<int32_t>(CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, 1);
    b = layout(CUDA_R_8F_E4M3, 512, 384, 512);
    c = layout(CUDA_R_16BF, 256, 384, 256);
    d = layout(CUDA_R_16BF, 256, 384, 256);
    d.set<int32_t>(CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, 3);
    const LtMatmul mm = fake_lt(&desc, base + 0x40000, &a, base + 0x80000, &b, base + 0xc0000, &c,
                                base + 0x100000, &d);
    lt_call_reading(mm, 4 + 1 + 1 + 4);  // A shape, B type, C type, D shape
    cublas_gemm_end(cublas_gemm_begin(small_gemm_ex(base)), 0);
  });
  auto reader = only_trace(child);
  ASSERT_TRUE(reader);
  int gemms = 0;
  reader->for_each_record([&](const trace::Record& r) {
    if (r.kind != trace::RecordKind::Gemm) return true;
    ++gemms;
    using F = trace::fields::Gemm;
    EXPECT_TRUE(r.buffers.empty()) << reader->string(r.name);
    if (reader->string(r.name) == "cublasLtMatmul") {
      EXPECT_EQ(r.fields[F::m], 256u);
      EXPECT_EQ(r.fields[F::n], 384u);
      EXPECT_EQ(r.fields[F::k], 512u);
      EXPECT_EQ(r.fields[F::batch], 3u);
      EXPECT_EQ(r.fields[F::trans_a], uint64_t{CUBLAS_OP_T});
      EXPECT_EQ(r.fields[F::type_a], uint64_t{CUDA_R_8F_E4M3});
      EXPECT_EQ(r.fields[F::type_b], uint64_t{CUDA_R_8F_E4M3});
      EXPECT_EQ(r.fields[F::type_c], uint64_t{CUDA_R_16BF});
      EXPECT_EQ(r.fields[F::type_d], uint64_t{CUDA_R_16BF});
      EXPECT_EQ(r.fields[F::compute_type], uint64_t{CUBLAS_COMPUTE_32F});
      EXPECT_EQ(r.fields[F::scale_mode_a], CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F);
      EXPECT_EQ(r.fields[F::scale_mode_b], CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F);
    } else {
      EXPECT_EQ(reader->string(r.name), "cublasGemmEx");
      EXPECT_EQ(r.fields[F::m], 16u);
      EXPECT_EQ(r.fields[F::k], 4u);
    }
    return true;
  });
  EXPECT_EQ(gemms, 2);
}

// A layout whose bytes were seen before is not read again (PyTorch makes new layouts for every
// GEMM, with the same bytes step after step); one with other bytes is. Every 16th hit of an
// entry is read all the same: bytes that match while the attributes do not turn the cache off
// (a Warning record at exit), and from then on every GEMM reads the library.
TEST_F(RuntimeTest, LayoutsSeenBeforeAreKnownByTheirBytesAndCheckedEverySixteenth) {
  ChildResult child = run_child(env("broad"), [] {
    const CUdeviceptr base = 0x7f0000000000;
    on_alloc(base, 1 << 22);
    static FakeAttributes desc, a, b, c, d;
    desc.set<int32_t>(CUBLASLT_MATMUL_DESC_COMPUTE_TYPE, CUBLAS_COMPUTE_32F);
    a = layout(CUDA_R_16BF, 64, 32, 64);
    b = layout(CUDA_R_16BF, 32, 16, 32);
    c = layout(CUDA_R_16BF, 64, 16, 64);
    d = layout(CUDA_R_16BF, 64, 16, 64);
    d.set<int32_t>(CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, 2);
    const LtMatmul mm = fake_lt(&desc, base + 0x40000, &a, base + 0x80000, &b, base + 0xc0000, &c,
                                base + 0x100000, &d);
    lt_call_reading(mm, 4 + 1 + 1 + 4);                     // 1: every layout read
    lt_call_reading(mm, 0);                                 // 2: all four known by their bytes
    d.set<int32_t>(CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, 3);  // new bytes: D read again
    lt_call_reading(mm, 4);                                 // 3 (batch 3)
    // Attributes changed behind equal bytes (what the cache cannot see): the next GEMMs carry
    // the old batch count until D's entry is checked on its 16th hit (GEMM 19), which finds it
    // and turns the cache off. A, B and C are checked on their 16th hit (GEMM 17): unchanged.
    d.values[CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT] = {5, 0, 0, 0};
    for (int gemm = 4; gemm <= 18; ++gemm) lt_call_reading(mm, gemm == 17 ? 4 + 1 + 1 : 0);
    lt_call_reading(mm, 4 + 1);          // 19: D checked and changed; C, after it, read
    lt_call_reading(mm, 4 + 1 + 1 + 4);  // 20: off, everything read
  });
  auto reader = only_trace(child);
  ASSERT_TRUE(reader);
  std::vector<uint64_t> batches;
  uint64_t mismatches = 0;
  reader->for_each_record([&](const trace::Record& r) {
    if (r.kind == trace::RecordKind::Gemm) batches.push_back(r.fields[trace::fields::Gemm::batch]);
    if (r.kind == trace::RecordKind::Warning &&
        r.fields[trace::fields::Warning::code] == uint64_t(WarningCode::LtCacheMismatch))
      mismatches += r.fields[trace::fields::Warning::count];
    return true;
  });
  std::vector<uint64_t> expected = {2, 2, 3};
  expected.resize(18, 3);  // GEMMs 4-18: D known by its bytes (the stale count)
  expected.push_back(5);   // 19: read again, found changed
  expected.push_back(5);   // 20
  EXPECT_EQ(batches, expected);
  EXPECT_EQ(mismatches, 1u);
}

TEST_F(RuntimeTest, MetricsLevelKeepsOnlyMetricsAndSteps) {
  static double grad_norm = 0.25;
  ChildResult child = run_child(env("metrics"), [] {
    on_alloc(0x100000, 4096);
    MemoryOp copy;
    copy.api = "cudaMemcpyAsync";
    copy.src = reinterpret_cast<void*>(0x100010);
    copy.direction = 4;  // cudaMemcpyDefault: inferred from the allocation map
    copy.dst = &grad_norm;
    copy.bytes = 8;
    memory_op_end(memory_op_begin(copy), 0);
    MemoryOp big = copy;
    big.bytes = 4096;  // larger than LOCKSTEP_METRIC_BYTES: not a metric, and not recorded here
    big.dst = std::malloc(4096);
    memory_op_end(memory_op_begin(big), 0);
    NcclCall call;
    call.api = "ncclAllReduce";
    call.comm = reinterpret_cast<ncclComm_t>(0x5);
    EXPECT_EQ(nccl_begin(call), 0u);
  });
  auto reader = only_trace(child);
  ASSERT_TRUE(reader);
  std::vector<trace::RecordKind> kinds;
  reader->for_each_record([&](const trace::Record& r) {
    kinds.push_back(r.kind);
    if (r.kind == trace::RecordKind::Metric) {
      double value = 0;
      EXPECT_EQ(r.payload.size(), 8u);
      std::memcpy(&value, r.payload.data(), 8);
      EXPECT_EQ(value, 0.25);
    }
    return true;
  });
  EXPECT_EQ(kinds, (std::vector<trace::RecordKind>{trace::RecordKind::Metric,
                                                   trace::RecordKind::StepMarker}));
}

struct KernelArgs {
  float* p;
  int n;
  float s;
};
void launch(KernelArgs args, bool extra_form, LaunchApi api = LaunchApi::DriverLaunch) {
  KernelLaunch l;
  l.api = api;
  l.handle_kind = FunctionHandle::DriverFunction;
  l.handle = reinterpret_cast<const void*>(0x1234);
  l.grid[0] = 7;
  void* params[] = {&args.p, &args.n, &args.s};
  uint8_t buffer[16];
  std::memcpy(buffer, &args.p, 8);
  std::memcpy(buffer + 8, &args.n, 4);
  std::memcpy(buffer + 12, &args.s, 4);
  size_t size = sizeof(buffer);
  void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, buffer, CU_LAUNCH_PARAM_BUFFER_SIZE, &size,
                   CU_LAUNCH_PARAM_END};
  if (extra_form)
    l.extra = extra;
  else
    l.kernel_params = params;
  kernel_launch_end(kernel_launch_begin(l), CUDA_SUCCESS);
}

// A graph: kernel nodes walked once at instantiation (child graphs included, memsets skipped),
// then every replay is a GraphLaunch with the nodes' regions (each once, graph-owned memory
// never) and one Kernel record per kernel node, in node order.
TEST_F(RuntimeTest, GraphReplaysRecordTheirNodesAndRegions) {
  ChildResult child = run_child(
      env("full"),
      [] {
        on_alloc(kGraphBase, 1 << 20);
        capture_begins();  // the capture-begin hook's, as in a job
        on_stream_alloc(kGraphOwned, 4096, kCapturingStream, false);  // a graph memory node's
        const void* exec = reinterpret_cast<const void*>(0x8000);
        graph_instantiated(kGraph, exec);
        const CUstream stream = reinterpret_cast<CUstream>(0x10);
        for (int replay = 0; replay < 2; ++replay)
          graph_launch_end(graph_launch_begin(exec, stream, false), CUDA_SUCCESS);
        graph_launch_end(graph_launch_begin(exec, stream, false), CUDA_ERROR_LAUNCH_FAILED);
        on_free(kGraphBase);  // freed since instantiation: never read again
        graph_launch_end(graph_launch_begin(exec, stream, false), CUDA_SUCCESS);
      },
      &fake_resolver_with_driver);
  auto reader = only_trace(child);
  ASSERT_TRUE(reader);
  std::vector<trace::Record> records;
  reader->for_each_record([&](const trace::Record& r) {
    if (r.kind == trace::RecordKind::GraphLaunch || r.kind == trace::RecordKind::Kernel)
      records.push_back(r);
    return true;
  });
  std::sort(records.begin(), records.end(), [](auto& a, auto& b) { return a.seq < b.seq; });
  // Three successful replays (the failed launch records nothing): graph, then its 3 nodes.
  ASSERT_EQ(records.size(), 12u);
  EXPECT_EQ(records[8].kind, trace::RecordKind::GraphLaunch);
  EXPECT_EQ(records[8].fields[trace::fields::GraphLaunch::replay_index], 4u);
  EXPECT_TRUE(records[8].buffers.empty()) << "a freed region was planned";
  using G = trace::fields::GraphLaunch;
  using K = trace::fields::Kernel;
  for (int replay = 0; replay < 2; ++replay) {
    const trace::Record& g = records[replay * 4];
    ASSERT_EQ(g.kind, trace::RecordKind::GraphLaunch);
    EXPECT_EQ(g.fields[G::node_count], 3u);
    EXPECT_EQ(g.fields[G::replay_index], static_cast<uint64_t>(replay + 1));
    // One region (kernels 1 and 5 share it; kernel 4's memory belongs to the graph), before
    // and after: dropped here (no GPU, no hash engine), so planned but without a value.
    ASSERT_EQ(g.buffers.size(), 2u);
    for (const auto& b : g.buffers) {
      EXPECT_EQ(reader->string(b.label), "n0.arg0");
      EXPECT_EQ(b.bytes, (1u << 20) - 256u);
      EXPECT_TRUE(b.flags & trace::kFingerprintDropped);
    }
    EXPECT_EQ(g.buffers[0].role, trace::Role::In);
    EXPECT_EQ(g.buffers[1].role, trace::Role::Out);
    const uint64_t grids[] = {11, 14, 15};  // node order: 1, then the child's 4, then 5
    for (int n = 0; n < 3; ++n) {
      const trace::Record& k = records[replay * 4 + 1 + n];
      ASSERT_EQ(k.kind, trace::RecordKind::Kernel);
      EXPECT_EQ(reader->string(k.name), "kernel(float*, int, float)");
      EXPECT_EQ(k.fields[K::grid_x], grids[n]);
      EXPECT_EQ(k.fields[K::launch_api], static_cast<uint64_t>(LaunchApi::GraphNode));
      EXPECT_TRUE(k.buffers.empty());
    }
  }
}

// A graph's replays carry the id of the capture that made it. The driver hands a destroyed
// graph's handle out again: a graph captured later at the same handle is that later capture's,
// not the first one's (which another run, whose handles differ, would not give it).
TEST_F(RuntimeTest, AGraphCapturedAtAReusedHandleCarriesItsOwnCapturesId) {
  ChildResult child = run_child(
      env("broad"),
      [] {
        capture_begins();
        fake_capture_graph = reinterpret_cast<CUgraph>(0x7000);  // not kGraph: no nodes to walk
        const CUstream stream = reinterpret_cast<CUstream>(0x10);
        const void* execs[] = {reinterpret_cast<const void*>(0x8000),
                               reinterpret_cast<const void*>(0x9000)};
        const cuuint64_t captures[] = {42, 43};
        for (int i = 0; i < 2; ++i) {
          fake_capture_id = captures[i];
          launch_function(reinterpret_cast<CUfunction>(0x1234), kCapturingStream, nullptr, 2);
          graph_instantiated(fake_capture_graph, execs[i]);
        }
        for (const void* exec : execs)
          graph_launch_end(graph_launch_begin(exec, stream, false), CUDA_SUCCESS);
      },
      &fake_resolver_with_driver);
  auto reader = only_trace(child);
  ASSERT_TRUE(reader) << child.stderr_text;
  const auto graphs = records_of_kind(*reader, trace::RecordKind::GraphLaunch);
  ASSERT_EQ(graphs.size(), 2u);
  EXPECT_EQ(graphs[0].fields[trace::fields::GraphLaunch::graph_id], 42u);
  EXPECT_EQ(graphs[1].fields[trace::fields::GraphLaunch::graph_id], 43u);
}

// At broad a launch is recorded by identity: no argument decoding, no regions.
TEST_F(RuntimeTest, BroadKernelRecordsCarryNoArguments) {
  ChildResult child = run_child(
      env("broad"),
      [] {
        const CUdeviceptr base = 0x7f0000000000;
        on_alloc(base, 1 << 20);
        launch({reinterpret_cast<float*>(base + 64), 5, 2.f}, false);
        launch({reinterpret_cast<float*>(base + 64), 6, 2.f}, false);
      },
      &fake_resolver_with_driver);
  auto reader = only_trace(child);
  ASSERT_TRUE(reader);
  const std::vector<trace::Record> kernels = records_of_kind(*reader, trace::RecordKind::Kernel);
  ASSERT_EQ(kernels.size(), 2u);
  for (const auto& k : kernels) {
    EXPECT_TRUE(k.buffers.empty());
    EXPECT_EQ(k.fields[trace::fields::Kernel::args_digest], 0u);
    EXPECT_EQ(reader->string(k.name), "kernel(float*, int, float)");
  }
}

// At broad a launch of the job's own takes a path of its own (a per-thread record, no call
// stack: kernels.cpp). Its records must be what the general path writes: one per launch however
// the runtime reaches the driver, none for a failed launch, the library's launches attributed to
// it, and a launch after any of these recorded again.
TEST_F(RuntimeTest, BroadLaunchesAreOneRecordEachWhateverTheirNesting) {
  ChildResult child = run_child(
      env("broad"),
      [] {
        auto launch_shape = [](unsigned grid, LaunchApi api, CUstream stream) {
          KernelLaunch l;
          l.api = api;
          l.handle_kind = FunctionHandle::DriverFunction;
          l.handle = reinterpret_cast<const void*>(0x1234);
          l.grid[0] = grid, l.grid[1] = 2, l.grid[2] = 3;
          l.block[0] = 128, l.block[1] = 4, l.block[2] = 1;
          l.cluster[0] = 2, l.cluster[1] = 1, l.cluster[2] = 1;
          l.smem_bytes = 4096;
          l.stream = stream;
          return l;
        };
        const auto* stream_b = reinterpret_cast<CUstream>(0xb0b);
        auto once = [&](unsigned grid, int result = CUDA_SUCCESS, CUstream stream = nullptr) {
          kernel_launch_end(
              kernel_launch_begin(launch_shape(grid, LaunchApi::DriverLaunch, stream)), result);
        };
        once(1);
        // A runtime launch that reaches the driver: one record, the runtime's.
        const uint64_t outer =
            kernel_launch_begin(launch_shape(2, LaunchApi::RuntimeLaunch, nullptr));
        once(99);
        kernel_launch_end(outer, CUDA_SUCCESS);
        once(98, CUDA_ERROR_INVALID_VALUE);  // failed: no record
        // Inside a cuBLAS call: the GEMM's (no Kernel record, counted).
        CublasGemm gemm;
        gemm.api = "cublasSgemm_v2";
        gemm.m = gemm.n = gemm.k = 2, gemm.lda = gemm.ldb = gemm.ldc = 2;
        const uint64_t g = cublas_gemm_begin(gemm);
        once(97);
        cublas_gemm_end(g, 0);
        // Inside an NCCL group a kernel not named nccl* is the job's (the general path).
        nccl_group_start();
        once(3);
        nccl_group_end(ncclSuccess);
        once(4, CUDA_SUCCESS, const_cast<CUstream>(stream_b));
        once(5);
      },
      &fake_resolver_with_driver);
  auto reader = only_trace(child);
  ASSERT_TRUE(reader);
  std::vector<trace::Record> kernels;
  uint64_t nested = 0, last_seq = 0;
  reader->for_each_record([&](const trace::Record& r) {
    EXPECT_GT(r.seq, last_seq);
    last_seq = r.seq;
    if (r.kind == trace::RecordKind::Kernel) kernels.push_back(r);
    if (r.kind == trace::RecordKind::Warning &&
        r.fields[trace::fields::Warning::code] == uint64_t(WarningCode::NestedKernels))
      nested = r.fields[trace::fields::Warning::count];
    return true;
  });
  using F = trace::fields::Kernel;
  std::vector<uint64_t> grids, apis, streams;
  for (const auto& k : kernels) {
    grids.push_back(k.fields[F::grid_x]);
    apis.push_back(k.fields[F::launch_api]);
    streams.push_back(k.stream);
    EXPECT_EQ(reader->string(k.name), "kernel(float*, int, float)");
    EXPECT_TRUE(k.buffers.empty());
    EXPECT_EQ(k.fields[F::grid_y], 2u);
    EXPECT_EQ(k.fields[F::grid_z], 3u);
    EXPECT_EQ(k.fields[F::block_x], 128u);
    EXPECT_EQ(k.fields[F::block_y], 4u);
    EXPECT_EQ(k.fields[F::smem_bytes], 4096u);
    EXPECT_EQ(k.fields[F::cluster_x], 2u);
    EXPECT_EQ(k.fields[F::args_digest], 0u);
    EXPECT_EQ(k.thread, kernels[0].thread);
  }
  EXPECT_EQ(grids, (std::vector<uint64_t>{1, 2, 3, 4, 5}));
  const auto driver = uint64_t(LaunchApi::DriverLaunch),
             runtime = uint64_t(LaunchApi::RuntimeLaunch);
  EXPECT_EQ(apis, (std::vector<uint64_t>{driver, runtime, driver, driver, driver}));
  ASSERT_EQ(streams.size(), 5u);
  EXPECT_NE(streams[3], streams[0]);  // stream_b has an ordinal of its own
  EXPECT_EQ(streams[4], streams[0]);
  EXPECT_EQ(nested, 1u);
}

// A broad launch's record is staged with its shape packed into narrower fields (kernels.cpp,
// namespace packed) and unpacked on the writer's thread: every field reads back as launched, at
// the largest values the packed widths hold, and past them (such a launch is recorded unpacked,
// on the launching thread).
TEST_F(RuntimeTest, ABroadLaunchReadsBackExactlyAtAndPastItsPackedWidths) {
  struct Shape {
    unsigned grid[3], block[3], cluster[3];
    size_t smem;
    LaunchApi api;
  };
  static const Shape kShapes[] = {
      {{0xffffffffu, 0xffff, 0xffff}, {0xffff, 0xffff, 0xffff}, {0xff, 0xff, 0xff}, 0xffffffffu,
       LaunchApi::DriverLaunchEx},
      {{7, 0x10000, 1}, {32, 1, 1}, {0, 0, 0}, 0, LaunchApi::DriverLaunch},
      {{7, 1, 1}, {32, 1, 0x10000}, {0, 0, 0}, 0, LaunchApi::DriverLaunch},
      {{7, 1, 1}, {32, 1, 1}, {1, 1, 0x100}, 0, LaunchApi::DriverLaunch},
      {{7, 1, 1}, {32, 1, 1}, {0, 0, 0}, size_t{1} << 32, LaunchApi::DriverLaunch},
      {{1, 2, 3}, {4, 5, 6}, {7, 8, 9}, 10, LaunchApi::RuntimeLaunch},
  };
  ChildResult child = run_child(
      env("broad"),
      [] {
        for (const Shape& shape : kShapes) {
          KernelLaunch l;
          l.api = shape.api;
          l.handle_kind = FunctionHandle::DriverFunction;
          l.handle = reinterpret_cast<const void*>(0x1234);
          for (int i = 0; i < 3; ++i)
            l.grid[i] = shape.grid[i], l.block[i] = shape.block[i],
            l.cluster[i] = shape.cluster[i];
          l.smem_bytes = shape.smem;
          kernel_launch_end(kernel_launch_begin(l), CUDA_SUCCESS);
        }
      },
      &fake_resolver_with_driver);
  auto reader = only_trace(child);
  ASSERT_TRUE(reader);
  const std::vector<trace::Record> kernels = records_of_kind(*reader, trace::RecordKind::Kernel);
  ASSERT_EQ(kernels.size(), std::size(kShapes));
  using F = trace::fields::Kernel;
  for (size_t k = 0; k < kernels.size(); ++k) {
    SCOPED_TRACE(k);
    const trace::Record& r = kernels[k];
    const Shape& shape = kShapes[k];
    EXPECT_EQ(reader->string(r.name), "kernel(float*, int, float)");
    const uint64_t got[] = {r.fields[F::grid_x],    r.fields[F::grid_y],    r.fields[F::grid_z],
                            r.fields[F::block_x],   r.fields[F::block_y],   r.fields[F::block_z],
                            r.fields[F::cluster_x], r.fields[F::cluster_y], r.fields[F::cluster_z],
                            r.fields[F::smem_bytes], r.fields[F::launch_api]};
    const uint64_t want[] = {shape.grid[0],    shape.grid[1],    shape.grid[2],
                             shape.block[0],   shape.block[1],   shape.block[2],
                             shape.cluster[0], shape.cluster[1], shape.cluster[2],
                             shape.smem,       uint64_t(shape.api)};
    EXPECT_EQ(std::vector<uint64_t>(std::begin(got), std::end(got)),
              std::vector<uint64_t>(std::begin(want), std::end(want)));
    EXPECT_EQ(r.fields[F::capture_id], 0u);
    EXPECT_EQ(r.fields[F::outer_api], 0u);
    EXPECT_EQ(r.fields[F::args_digest], 0u);
  }
}

// Below full a kernel record's capture state is a label only, and the driver's capture query is
// skipped until some capture has begun (no stream can capture before): a launch on a capturing
// stream reads as uncaptured then. At full, where a wrong answer would put hash launches into
// the job's graph, the query always runs.
// Before the process's first capture begin no stream can be capturing: no level asks the driver
// (the fake one answers "capturing" for kCapturingStream, which a job could not have made so).
TEST_F(RuntimeTest, CaptureStateIsQueriedOnlyOnceACaptureBegan) {
  for (const char* level : {"broad", "full"}) {
    SCOPED_TRACE(level);
    std::filesystem::remove_all(dir_);
    ChildResult child = run_child(
        env(level),
        [] {
          auto launch_captured = [] {
            KernelLaunch l;
            l.api = LaunchApi::DriverLaunch;
            l.handle_kind = FunctionHandle::DriverFunction;
            l.handle = reinterpret_cast<const void*>(0x1234);
            l.stream = kCapturingStream;
            kernel_launch_end(kernel_launch_begin(l), CUDA_SUCCESS);
          };
          launch_captured();
          capture_begins();
          launch_captured();
        },
        &fake_resolver_with_driver);
    auto reader = only_trace(child);
    ASSERT_TRUE(reader);
    std::vector<uint64_t> capture_ids;
    reader->for_each_record([&](const trace::Record& r) {
      if (r.kind == trace::RecordKind::Kernel)
        capture_ids.push_back(r.fields[trace::fields::Kernel::capture_id]);
      return true;
    });
    EXPECT_EQ(capture_ids, (std::vector<uint64_t>{0, 42}));
  }
}

// The C API's answer (the PyTorch state hook asks it before asking torch): 0 until a capture
// begins anywhere in the process, then 1.
TEST_F(RuntimeTest, TheCApiSaysWhetherACaptureHasBegun) {
  ChildResult child = run_child(env("broad"), [] {
    const int before = lockstep_capture_begun();
    capture_begins();
    std::_Exit(before * 10 + lockstep_capture_begun());
  });
  ASSERT_TRUE(WIFEXITED(child.status)) << child.stderr_text;
  EXPECT_EQ(WEXITSTATUS(child.status), 1);
}

TEST_F(RuntimeTest, KernelLaunchesNamesArgumentsAndAttribution) {
  auto vars = env("full");
  vars["LOCKSTEP_MAX_REGION"] = "4K";
  ChildResult child = run_child(
      vars,
      [] {
        const CUdeviceptr base = 0x7f0000000000;
        on_alloc(base, 1 << 20);
        auto* p = reinterpret_cast<float*>(base + 64);
        launch({p, 5, 2.f}, false);                                     // 1
        launch({reinterpret_cast<float*>(base + 128), 5, 2.f}, false);  // 2: same scalars
        launch({p, 6, 2.f}, false);                                     // 3: other n
        launch({p, 5, 2.f}, true);                                      // 4: extra form
        // A runtime launch that reaches the driver: one record (5).
        KernelLaunch outer;
        outer.api = LaunchApi::RuntimeLaunch;
        outer.handle_kind = FunctionHandle::DriverFunction;
        outer.handle = reinterpret_cast<const void*>(0x1234);
        uint64_t token = kernel_launch_begin(outer);
        launch({p, 5, 2.f}, false);
        kernel_launch_end(token, CUDA_SUCCESS);
        // A kernel inside a cuBLAS call: attributed to the GEMM, no Kernel record.
        CublasGemm gemm;
        gemm.api = "cublasSgemm_v2";
        gemm.m = gemm.n = gemm.k = 2, gemm.lda = gemm.ldb = gemm.ldc = 2;
        uint64_t g = cublas_gemm_begin(gemm);
        launch({p, 5, 2.f}, false);
        cublas_gemm_end(g, 0);
      },
      &fake_resolver_with_driver);
  auto reader = only_trace(child);
  ASSERT_TRUE(reader);
  std::vector<trace::Record> kernels;
  uint64_t nested = 0;
  reader->for_each_record([&](const trace::Record& r) {
    if (r.kind == trace::RecordKind::Kernel) kernels.push_back(r);
    if (r.kind == trace::RecordKind::Warning && r.fields[trace::fields::Warning::code] == 5)
      nested = r.fields[trace::fields::Warning::count];
    return true;
  });
  std::sort(kernels.begin(), kernels.end(), [](auto& a, auto& b) { return a.seq < b.seq; });
  ASSERT_EQ(kernels.size(), 5u);
  EXPECT_EQ(nested, 1u);
  using F = trace::fields::Kernel;
  EXPECT_EQ(reader->string(kernels[0].name), "kernel(float*, int, float)");
  EXPECT_EQ(kernels[0].fields[F::grid_x], 7u);
  EXPECT_EQ(kernels[0].fields[F::args_digest], kernels[1].fields[F::args_digest])
      << "addresses must not enter the digest";
  EXPECT_NE(kernels[0].fields[F::args_digest], kernels[2].fields[F::args_digest]);
  EXPECT_EQ(kernels[0].fields[F::args_digest], kernels[3].fields[F::args_digest])
      << "both launch forms decode alike";
  EXPECT_EQ(kernels[4].fields[F::launch_api], static_cast<uint64_t>(LaunchApi::RuntimeLaunch));
  // arg0 before (In) and after (Out): allocation 1, offset 64, cut at LOCKSTEP_MAX_REGION.
  ASSERT_EQ(kernels[0].buffers.size(), 2u);
  for (const auto& b : kernels[0].buffers) {
    EXPECT_EQ(reader->string(b.label), "arg0");
    EXPECT_EQ(b.alloc_ordinal, 1u);
    EXPECT_EQ(b.alloc_offset, 64u);
    EXPECT_EQ(b.bytes, 4096u);
    EXPECT_TRUE(b.flags & trace::kExtentClamped);
    EXPECT_TRUE(b.flags & trace::kFingerprintDropped);  // no GPU, no engine
  }
  EXPECT_EQ(kernels[0].buffers[0].role, trace::Role::In);
  EXPECT_EQ(kernels[0].buffers[1].role, trace::Role::Out);
  EXPECT_EQ(kernels[1].buffers[0].alloc_offset, 128u);
}

// A classic cuBLAS GEMM at broad is staged in the writer's slot (gemm.cpp): one Gemm record with
// its identity, ordered before what follows it, the kernels and cuBLASLt call it makes its own;
// one that failed leaves no record.
TEST_F(RuntimeTest, AClassicGemmAtBroadIsOneRecordAndAFailedOneNone) {
  ChildResult child = run_child(
      env("broad"),
      [] {
        auto gemm_launching_a_kernel = [](int status, int m) {
          CublasGemm gemm = small_gemm_ex(0x7f0000000000);
          gemm.m = m;
          const uint64_t token = cublas_gemm_begin(gemm);
          launch_function(reinterpret_cast<CUfunction>(0x1234), nullptr, nullptr, 7);
          cublas_gemm_end(token, status);
        };
        gemm_launching_a_kernel(CUBLAS_STATUS_EXECUTION_FAILED, 32);
        gemm_launching_a_kernel(0, 16);
        launch_function(reinterpret_cast<CUfunction>(0x1234), nullptr, nullptr, 9);
      },
      &fake_resolver_with_driver);
  auto reader = only_trace(child);
  ASSERT_TRUE(reader) << child.stderr_text;
  const auto gemms = records_of_kind(*reader, trace::RecordKind::Gemm);
  ASSERT_EQ(gemms.size(), 1u);
  using G = trace::fields::Gemm;
  EXPECT_EQ(reader->string(gemms[0].name), "cublasGemmEx");
  EXPECT_EQ(gemms[0].fields[G::m], 16u);
  EXPECT_EQ(gemms[0].fields[G::n], 8u);
  EXPECT_EQ(gemms[0].fields[G::k], 4u);
  EXPECT_TRUE(gemms[0].buffers.empty());
  const auto kernels = records_of_kind(*reader, trace::RecordKind::Kernel);
  ASSERT_EQ(kernels.size(), 1u);  // the job's own, after the GEMMs
  EXPECT_EQ(kernels[0].fields[trace::fields::Kernel::grid_x], 9u);
  EXPECT_GT(kernels[0].seq, gemms[0].seq);
}

// Copies and sets at broad are staged in the writer's slot (memory_ops.cpp) as launches are: each
// is one record with its fields and its buffer's place (allocation ordinal + offset), in call
// order with the launches around it, its kind's fields cleared of the slot's last record; one
// that failed leaves none. A copy to the host of a few bytes is still a Metric with its payload.
TEST_F(RuntimeTest, CopiesAndSetsAtBroadAreOneRecordEachInOrderAndAFailedOneNone) {
  ChildResult child = run_child(
      env("broad"),
      [] {
        const CUdeviceptr base = 0x7f0000000000;
        on_alloc(base, 1 << 20);
        static float on_host[64] = {1.5f};
        MemoryOp set;
        set.api = "cudaMemsetAsync";
        set.is_set = true, set.is_async = true;
        set.dst = reinterpret_cast<void*>(base + 256);
        set.bytes = 1024;
        set.set_value = 7;
        MemoryOp to_device;
        to_device.api = "cudaMemcpyAsync";
        to_device.is_async = true;
        to_device.direction = 1;
        to_device.dst = reinterpret_cast<void*>(base + 4096);
        to_device.src = on_host;
        to_device.bytes = sizeof on_host;
        MemoryOp metric;
        metric.api = "cudaMemcpy";
        metric.direction = 2;
        metric.src = reinterpret_cast<void*>(base);
        metric.dst = on_host;
        metric.bytes = 4;
        launch_function(reinterpret_cast<CUfunction>(0x1234), nullptr, nullptr, 3);  // a launch's
        memory_op_end(memory_op_begin(set), 0);                                      // fields
        memory_op_end(memory_op_begin(to_device), 1);  // failed: no record
        memory_op_end(memory_op_begin(to_device), 0);
        launch_function(reinterpret_cast<CUfunction>(0x1234), nullptr, nullptr, 5);
        memory_op_end(memory_op_begin(metric), 0);
        set.bytes = 16, set.set_value = 0, set.is_async = false;  // zeros, not the last one's
        memory_op_end(memory_op_begin(set), 0);
      },
      &fake_resolver_with_driver);
  auto reader = only_trace(child);
  ASSERT_TRUE(reader) << child.stderr_text;
  std::vector<trace::Record> all;
  reader->for_each_record([&](const trace::Record& r) {
    if (r.kind != trace::RecordKind::StepMarker) all.push_back(r);
    return true;
  });
  std::sort(all.begin(), all.end(), [](auto& a, auto& b) { return a.seq < b.seq; });
  using K = trace::RecordKind;
  std::vector<K> kinds;
  for (const auto& r : all) kinds.push_back(r.kind);
  ASSERT_EQ(kinds, (std::vector<K>{K::Kernel, K::Memset, K::Memcpy, K::Kernel, K::Metric,
                                   K::Memset}));
  using S = trace::fields::Memset;
  const trace::Record& set = all[1];
  EXPECT_EQ(reader->string(set.name), "cudaMemsetAsync");
  EXPECT_EQ(set.fields[S::value], 7u);
  EXPECT_EQ(set.fields[S::bytes], 1024u);
  EXPECT_EQ(set.fields[S::is_async], 1u);
  ASSERT_EQ(set.buffers.size(), 1u);
  EXPECT_EQ(reader->string(set.buffers[0].label), "dst");
  EXPECT_EQ(set.buffers[0].role, trace::Role::Out);
  EXPECT_EQ(set.buffers[0].alloc_ordinal, 1u);
  EXPECT_EQ(set.buffers[0].alloc_offset, 256u);
  EXPECT_EQ(set.buffers[0].bytes, 1024u);
  EXPECT_FALSE(set.buffers[0].flags & trace::kFingerprintValid);
  using C = trace::fields::Memcpy;
  const trace::Record& copy = all[2];
  EXPECT_EQ(reader->string(copy.name), "cudaMemcpyAsync");
  EXPECT_EQ(copy.fields[C::direction], 1u);
  EXPECT_EQ(copy.fields[C::bytes], sizeof(float) * 64);
  ASSERT_EQ(copy.buffers.size(), 1u);
  EXPECT_EQ(copy.buffers[0].alloc_offset, 4096u);
  EXPECT_EQ(all[3].fields[trace::fields::Kernel::grid_x], 5u);
  ASSERT_EQ(all[4].payload.size(), 4u);
  float loss = 0;
  std::memcpy(&loss, all[4].payload.data(), 4);
  EXPECT_EQ(loss, 1.5f);
  EXPECT_EQ(all[5].fields[S::bytes], 16u);
  EXPECT_EQ(all[5].fields[S::value], 0u);
  EXPECT_EQ(all[5].fields[S::is_async], 0u);
}

TEST_F(RuntimeTest, KernelFilterKeepsIdentityOnly) {
  auto vars = env("full");
  vars["LOCKSTEP_KERNELS"] = "^gemm";
  ChildResult child = run_child(
      vars,
      [] {
        on_alloc(0x7f0000000000, 4096);
        launch({reinterpret_cast<float*>(0x7f0000000000), 1, 1.f}, false);
      },
      &fake_resolver_with_driver);
  ASSERT_TRUE(WIFEXITED(child.status) && WEXITSTATUS(child.status) == 0) << child.stderr_text;
  auto reader = trace::TraceReader::open(traces().at(0).string());
  int kernels = 0;
  reader->for_each_record([&](const trace::Record& r) {
    if (r.kind != trace::RecordKind::Kernel) return true;
    ++kernels;
    EXPECT_TRUE(r.buffers.empty());  // not selected: its identity, no arguments
    EXPECT_EQ(r.fields[trace::fields::Kernel::args_digest], 0u);
    return true;
  });
  EXPECT_EQ(kernels, 1);
}

}  // namespace
}  // namespace lockstep::collectors
