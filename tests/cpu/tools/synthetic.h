// Builds synthetic per-rank record sequences for the diff tests: kernels, collectives, GEMMs and
// metrics with chosen fingerprints.
#pragma once

#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "tools/diff/engine.h"
#include "trace/record.h"

namespace lockstep::tools::testing {

using trace::Record;
using trace::RecordKind;
namespace fields = trace::fields;

class SyntheticRank {
 public:
  trace::StringId str(const std::string& text) {
    for (size_t i = 0; i < strings.size(); ++i)
      if (strings[i] == text) return static_cast<trace::StringId>(i);
    strings.push_back(text);
    return static_cast<trace::StringId>(strings.size() - 1);
  }

  trace::BufferFingerprint buffer(trace::Role role, const std::string& label, uint64_t fp,
                                  uint64_t bytes = 4096) {
    trace::BufferFingerprint b;
    b.role = role;
    b.dtype = trace::DType::F32;
    b.flags = trace::kFingerprintValid;
    b.label = str(label);
    b.bytes = bytes;
    b.fingerprint = fp;
    return b;
  }

  Record& kernel(uint32_t step, uint32_t stream, const std::string& name, uint64_t in_fp,
                 uint64_t out_fp) {
    Record r;
    r.kind = RecordKind::Kernel;
    r.step = step, r.stream = stream, r.seq = ++seq, r.name = str(name);
    r.fields[fields::Kernel::grid_x] = 128;
    r.fields[fields::Kernel::block_x] = 256;
    r.buffers = {buffer(trace::Role::In, "arg0", in_fp), buffer(trace::Role::Out, "arg1", out_fp)};
    records.push_back(r);
    return records.back();
  }

  Record& gemm(uint32_t step, uint32_t stream, uint64_t algo, uint64_t a_fp, uint64_t d_fp) {
    Record r;
    r.kind = RecordKind::Gemm;
    r.step = step, r.stream = stream, r.seq = ++seq, r.name = str("cublasLtMatmul");
    r.fields[fields::Gemm::m] = r.fields[fields::Gemm::n] = r.fields[fields::Gemm::k] = 64;
    r.fields[fields::Gemm::algo] = algo;
    r.buffers = {buffer(trace::Role::In, "A", a_fp), buffer(trace::Role::In, "B", 7),
                 buffer(trace::Role::Out, "D", d_fp)};
    records.push_back(r);
    return records.back();
  }

  Record& all_reduce(uint32_t step, uint32_t stream, uint64_t comm_seq, uint64_t in_fp,
                     uint64_t out_fp, uint64_t comm_id = 0) {
    Record r;
    r.kind = RecordKind::Collective;
    r.step = step, r.stream = stream, r.seq = ++seq, r.name = str("ncclAllReduce");
    r.fields[fields::Collective::comm_id] = comm_id;
    r.fields[fields::Collective::comm_seq] = comm_seq;
    r.fields[fields::Collective::count] = 1024;
    r.buffers = {buffer(trace::Role::In, "send", in_fp), buffer(trace::Role::Out, "recv", out_fp)};
    records.push_back(r);
    return records.back();
  }

  // A copy from host memory: its host source fingerprinted on the CPU (trace::kHostSourceLabel)
  // and its device destination.
  Record& host_copy(uint32_t step, uint32_t stream, uint64_t host_fp, uint64_t dst_fp,
                    uint64_t bytes = 4) {
    Record r;
    r.kind = RecordKind::Memcpy;
    r.step = step, r.stream = stream, r.seq = ++seq, r.name = str("cudaMemcpyAsync");
    r.fields[fields::Memcpy::direction] = 1;
    r.fields[fields::Memcpy::bytes] = bytes;
    r.fields[fields::Memcpy::is_async] = 1;
    r.buffers = {buffer(trace::Role::Out, "dst", dst_fp, bytes),
                 buffer(trace::Role::In, std::string(trace::kHostSourceLabel), host_fp, bytes)};
    records.push_back(r);
    return records.back();
  }

  // The marker that starts `step`, numbered `job_step` by the job (none: unnumbered).
  Record& marker(uint32_t step, std::optional<uint64_t> job_step) {
    Record r;
    r.kind = RecordKind::StepMarker;
    r.step = step, r.seq = ++seq, r.name = str("lockstep_step");
    r.fields[fields::StepMarker::new_step] = step;
    r.fields[fields::StepMarker::marker_source] = 2;
    if (job_step) {
      r.fields[fields::StepMarker::job_step] = *job_step;
      r.fields[fields::StepMarker::numbered] = 1;
    }
    records.push_back(r);
    return records.back();
  }

  Record& metric(uint32_t step, float value) {
    Record r;
    r.kind = RecordKind::Metric;
    r.step = step, r.stream = 1, r.seq = ++seq, r.name = str("cudaMemcpyAsync");
    r.fields[fields::Metric::bytes] = 4;
    r.fields[fields::Metric::dtype_hint] = static_cast<uint64_t>(trace::DType::F32);
    r.payload.resize(4);
    std::memcpy(r.payload.data(), &value, 4);
    records.push_back(r);
    return records.back();
  }

  // A State record (the shim's fingerprint of a parameter after the step): one output buffer.
  Record& state(uint32_t step, const std::string& name, uint64_t fp) {
    Record r;
    r.kind = RecordKind::State;
    r.step = step, r.stream = 1, r.seq = ++seq, r.name = str(name);
    r.fields[fields::State::bytes] = 4096;
    r.buffers = {buffer(trace::Role::Out, "tensor", fp)};
    records.push_back(r);
    return records.back();
  }

  // Steps with a summary whose digest is computed from the records' content (not seq/thread).
  std::vector<StepInfo> steps(bool with_summaries = true) const {
    std::map<uint32_t, StepInfo> by_step;
    for (const Record& r : records) {
      StepInfo& s = by_step[r.step];
      s.step = r.step;
      s.has_summary = with_summaries;
      ++s.record_count;
      uint64_t h = static_cast<uint64_t>(r.kind) * 31 + std::hash<std::string>()(strings[r.name]);
      for (uint64_t f : r.fields) h = h * 1099511628211ull + f;
      for (const auto& b : r.buffers) h = h * 1099511628211ull + b.fingerprint + b.bytes;
      for (uint8_t p : r.payload) h = h * 131 + p;
      s.digest += h * 0x9e3779b97f4a7c15ull + r.stream;  // order-independent across threads
      // The writer copies a numbered marker's number into its step's summary.
      if (r.kind == RecordKind::StepMarker && r.fields[fields::StepMarker::numbered])
        s.job_step = r.fields[fields::StepMarker::job_step];
    }
    std::vector<StepInfo> out;
    for (auto& [step, info] : by_step) out.push_back(info);
    return out;
  }

  std::vector<std::string> strings{""};
  std::vector<Record> records;
  uint64_t seq = 0;
};

}  // namespace lockstep::tools::testing
