// Records as people read them: fields decoded by trace/field_format.h, warnings as sentences,
// metric payloads by dtype, and `show`'s sequence order over a trace written by two threads.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <thread>

#include <nlohmann/json.hpp>

#include "tools/metric_value.h"
#include "tools/record_text.h"
#include "trace/field_format.h"
#include "trace/writer.h"

namespace lockstep::tools {
namespace {

using trace::RecordKind;
namespace fields = trace::fields;

std::string text(RecordKind kind, int field, uint64_t value, std::string_view name = {},
                 uint64_t seq = 1) {
  return trace::field_text(kind, field, value, {name, seq});
}

TEST(FieldText, GemmEnumsReadAsTheCudaHeadersSpellThem) {
  EXPECT_EQ(text(RecordKind::Gemm, fields::Gemm::type_a, 14), "CUDA_R_16BF");
  EXPECT_EQ(text(RecordKind::Gemm, fields::Gemm::type_d, 28), "CUDA_R_8F_E4M3");
  EXPECT_EQ(text(RecordKind::Gemm, fields::Gemm::compute_type, 68), "CUBLAS_COMPUTE_32F");
  // A typed API (cublasSgemm) records its data type as the compute type.
  EXPECT_EQ(text(RecordKind::Gemm, fields::Gemm::compute_type, 0), "CUDA_R_32F");
  EXPECT_EQ(text(RecordKind::Gemm, fields::Gemm::trans_a, 1), "CUBLAS_OP_T");
  EXPECT_EQ(text(RecordKind::Gemm, fields::Gemm::epilogue, 36), "CUBLASLT_EPILOGUE_GELU_BIAS");
  EXPECT_EQ(text(RecordKind::Gemm, fields::Gemm::type_a, 99), "99") << "unknown: the number";
}

TEST(FieldText, GemmAlgorithmReadsByTheApiThatRecordedIt) {
  const int algo = fields::Gemm::algo;
  EXPECT_EQ(text(RecordKind::Gemm, algo, UINT64_MAX, "cublasLtMatmul"), "heuristic");
  EXPECT_EQ(text(RecordKind::Gemm, algo, UINT64_MAX, "cublasGemmEx"), "CUBLAS_GEMM_DEFAULT");
  EXPECT_EQ(text(RecordKind::Gemm, algo, 99, "cublasGemmEx"), "CUBLAS_GEMM_DEFAULT_TENSOR_OP");
  // collectors/gemm.cpp: id | tile << 16 | stages << 32 | split-k << 48
  const uint64_t code = 66 | 47ull << 16 | 36ull << 32 | 1ull << 48;
  EXPECT_EQ(text(RecordKind::Gemm, algo, code, "cublasLtMatmul"), "id66/tile47/stages36/splitk1");
}

TEST(FieldText, CollectivesShowTheirTypeAndOperatorAndHideNone) {
  EXPECT_EQ(text(RecordKind::Collective, fields::Collective::datatype, 9), "ncclBfloat16");
  EXPECT_EQ(text(RecordKind::Collective, fields::Collective::redop, 4), "ncclAvg");
  EXPECT_FALSE(trace::field_shown(RecordKind::Collective, fields::Collective::redop, UINT64_MAX));
  EXPECT_TRUE(trace::field_shown(RecordKind::Collective, fields::Collective::redop, 0));
  EXPECT_TRUE(trace::field_shown(RecordKind::Collective, fields::Collective::root_or_peer, 0));
  EXPECT_FALSE(trace::field_shown(RecordKind::Kernel, fields::Kernel::capture_id, 0));
}

TEST(FieldText, OtherEnumsReadByName) {
  EXPECT_EQ(text(RecordKind::Memcpy, fields::Memcpy::direction, 2), "cudaMemcpyDeviceToHost");
  EXPECT_EQ(text(RecordKind::StepMarker, fields::StepMarker::marker_source, 2), "Api");
  EXPECT_EQ(text(RecordKind::Kernel, fields::Kernel::launch_api, 8), "GraphNode");
  EXPECT_EQ(text(RecordKind::Kernel, fields::Kernel::outer_api, 2), "gemm");
  EXPECT_EQ(text(RecordKind::State, fields::State::state_kind, 1), "Gradient");
  EXPECT_EQ(text(RecordKind::Metric, fields::Metric::dtype_hint, 10), "bf16");
  EXPECT_EQ(text(RecordKind::Kernel, fields::Kernel::args_digest, 0xab), "0x00000000000000ab");
}

TEST(WarningText, TheWritersCodeOneIsRecordsDroppedAndTheShimsIsFingerprints) {
  EXPECT_EQ(text(RecordKind::Warning, fields::Warning::code, 1, {}, 0), "RecordsDropped");
  EXPECT_EQ(text(RecordKind::Warning, fields::Warning::code, 1, {}, 7), "FingerprintsDropped");
  EXPECT_EQ(trace::warning_text(trace::WarningSource::Writer, 1, 1, ""),
            "1 record was dropped: the trace writer's memory was full or the disk too slow "
            "(LOCKSTEP_MEMORY sets the budget)");
  EXPECT_EQ(trace::warning_text(trace::WarningSource::Shim, 5, 12, "x"),
            "12 kernels launched inside library calls (cuBLAS, NCCL) were recorded as part of "
            "those calls");
  EXPECT_NE(trace::warning_text(trace::WarningSource::Shim, 2, 0, "rank 0 of 1 from NCCL")
                .find(": rank 0 of 1 from NCCL"),
            std::string::npos);
  EXPECT_EQ(trace::warning_text(trace::WarningSource::Shim, 99, 3, "new thing"),
            "new thing (code 99, count 3)");
}

std::vector<uint8_t> floats(std::initializer_list<float> values) {
  std::vector<uint8_t> bytes(values.size() * 4);
  std::memcpy(bytes.data(), std::data(values), bytes.size());
  return bytes;
}

TEST(MetricValue, SeveralFloatsWithoutAHintReadAsF32Elements) {
  MetricValue v = decode_metric(floats({0.5f, -2.0f, 3.0f}), 0);
  EXPECT_EQ(v.dtype, trace::DType::F32);
  EXPECT_TRUE(v.guessed);
  EXPECT_EQ(v.values, (std::vector<double>{0.5, -2.0, 3.0}));
  EXPECT_EQ(format_metric_value(floats({0.5f, -2.0f, 3.0f}), 0),
            "f32 0.5, -2, 3 (0x3f000000 c0000000 40400000)");
  EXPECT_EQ(decode_metric({1, 2, 3}, 0).dtype, trace::DType::Bytes);
  EXPECT_FALSE(decode_metric(floats({1.0f}), 11).guessed) << "dtype_hint 11 is f32";
}

TEST(MetricValue, TheDifferenceNamesTheFirstElementThatDiffers) {
  EXPECT_EQ(metric_difference(floats({2.5f}), floats({2.75f}), 0), "f32 2.5 vs 2.75");
  EXPECT_EQ(metric_difference(floats({1, 2, 3}), floats({1, 2.5f, 3}), 0), "f32 [1 of 3] 2 vs 2.5");
  EXPECT_EQ(metric_difference(floats({1}), floats({1}), 0), "");
}

// Two threads append interleaved seqs; the writer keeps a block per thread, so the file holds
// one thread's records, then the other's. Sequence order puts them back in call order.
TEST(SequenceOrder, RecordsOfTwoThreadsComeBackInCallOrder) {
  const std::filesystem::path path =
      std::filesystem::temp_directory_path() /
      ("lockstep_seq_order_" + std::to_string(getpid()) + ".lstrace");
  {
    trace::WriterOptions options;
    options.path = path.string();
    options.flush_interval_ms = 60000;
    std::string error;
    auto writer = trace::TraceWriter::open(options, nlohmann::json::object(), &error);
    ASSERT_TRUE(writer) << error;
    auto append = [&](uint64_t first) {
      trace::Record r;
      r.kind = RecordKind::Kernel;
      for (uint64_t seq = first; seq <= 6; seq += 2) {
        r.seq = seq;
        r.thread = static_cast<uint32_t>(first);
        writer->append(r);
      }
    };
    std::thread(append, 2).join();
    std::thread(append, 1).join();
    writer->end_step(0);
    writer->close();
  }
  auto reader = trace::TraceReader::open(path.string());
  std::vector<uint64_t> file_order, seq_order;
  reader->for_each_record([&](const trace::Record& r) {
    file_order.push_back(r.seq);
    return true;
  });
  for_each_record_in_seq_order(*reader, 0, UINT32_MAX, [&](const trace::Record& r) {
    seq_order.push_back(r.seq);
    return true;
  });
  std::filesystem::remove(path);
  EXPECT_NE(file_order, (std::vector<uint64_t>{1, 2, 3, 4, 5, 6})) << "the case needs disorder";
  EXPECT_EQ(seq_order, (std::vector<uint64_t>{1, 2, 3, 4, 5, 6}));
}

}  // namespace
}  // namespace lockstep::tools
