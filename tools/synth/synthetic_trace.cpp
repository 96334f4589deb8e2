#include "tools/synth/synthetic_trace.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <map>
#include <tuple>
#include <memory>
#include <optional>

#include <fmt/format.h>

#include "trace/header.h"
#include "trace/record.h"
#include "trace/run_dir.h"
#include "trace/writer.h"

namespace lockstep::tools::synth {

namespace {

using trace::Record;
using trace::RecordKind;
namespace fields = trace::fields;

uint64_t mix(uint64_t x, uint64_t y) {
  uint64_t h = x ^ (y + 0x9e3779b97f4a7c15ull + (x << 6) + (x >> 2));
  h ^= h >> 31;
  h *= 0xbf58476d1ce4e5b9ull;
  return h ^ (h >> 29);
}

const Plant* find_plant(const Spec& spec, Plant::Kind kind, int rank, uint32_t step,
                        uint32_t index) {
  for (const Plant& p : spec.plants)
    if (p.kind == kind && p.rank == rank && p.step == step && p.index == index) return &p;
  return nullptr;
}

class RankWriter {
 public:
  RankWriter(std::unique_ptr<trace::TraceWriter> writer, const Spec& spec, int rank)
      : writer_(std::move(writer)), spec_(spec), rank_(rank) {}

  trace::TraceWriter& writer() { return *writer_; }

  // The scratch record, cleared, as the next record of the rank (its seq), for step and stream.
  Record& fresh(RecordKind kind, uint32_t step, uint32_t stream) {
    Record& r = scratch_;
    r.clear();
    r.kind = kind;
    r.seq = ++seq_;
    r.step = step;
    r.stream = stream;
    return r;
  }

  // The scope of the next ops (Spec::scopes): a path of names, outermost first; {} for none.
  void set_scope(const std::vector<std::string>& path) {
    scope_ = 0;
    for (const std::string& name : path) scope_ = writer_->intern_scope(scope_, writer_->intern(name));
  }

  // weights_in / weights_out: the weight tensor's region before and after the op (arg2), for
  // the kernel that reads and updates it; null for any other op. `out_before`: the output
  // region's fingerprint before the op, as an input of the same label (a kernel reading and
  // writing its parameters in place); none when absent.
  void op(RecordKind kind, uint32_t step, uint32_t stream, const std::string& name, uint64_t in_fp,
          uint64_t out_fp, bool fingerprinted, uint64_t algo = 3,
          const uint64_t* weights_in = nullptr, const uint64_t* weights_out = nullptr,
          std::optional<uint64_t> out_before = std::nullopt) {
    Record& r = fresh(kind, step, stream);
    r.name = writer_->intern(name);
    r.scope = scope_;
    const char* in_label = "arg0";
    const char* out_label = "arg1";
    if (kind == RecordKind::Kernel) {
      r.fields[fields::Kernel::grid_x] = 120;
      r.fields[fields::Kernel::block_x] = 256;
      r.fields[fields::Kernel::args_digest] = 0x1234;
    } else if (kind == RecordKind::Gemm) {
      r.fields[fields::Gemm::m] = r.fields[fields::Gemm::n] = r.fields[fields::Gemm::k] = 1024;
      r.fields[fields::Gemm::algo] = algo;
      in_label = "A", out_label = "D";
    } else if (kind == RecordKind::Collective) {
      r.fields[fields::Collective::comm_id] = 0;
      r.fields[fields::Collective::comm_seq] = collectives_++;
      r.fields[fields::Collective::count] = 1 << 20;
      r.fields[fields::Collective::nranks] = spec_.world_size;
      r.fields[fields::Collective::comm_rank] = rank_;
      r.fields[fields::Collective::root_or_peer] = UINT64_MAX;
      r.fields[fields::Collective::nccl_algo] = spec_.nccl_algo;
      r.fields[fields::Collective::nccl_proto] = spec_.nccl_proto;
      r.fields[fields::Collective::nccl_channels] = spec_.nccl_channels;
      in_label = "send", out_label = "recv";
    }
    uint8_t flags = fingerprinted ? (trace::kFingerprintValid | trace::kExtentExact) : 0;
    trace::BufferFingerprint in{trace::Role::In, trace::DType::BF16,
                                flags,           writer_->intern(in_label),
                                1 << 21,         fingerprinted ? in_fp : 0};
    trace::BufferFingerprint out{
        trace::Role::Out, trace::DType::BF16,        flags, writer_->intern(out_label),
        1 << 21,          fingerprinted ? out_fp : 0};
    r.buffers.push_back(in);
    if (weights_in)
      r.buffers.push_back({trace::Role::In, trace::DType::BF16, flags, writer_->intern("arg2"),
                           1 << 20, fingerprinted ? *weights_in : 0});
    if (out_before) {
      trace::BufferFingerprint before = out;
      before.role = trace::Role::In;
      before.fingerprint = fingerprinted ? *out_before : 0;
      r.buffers.push_back(before);
    }
    r.buffers.push_back(out);
    if (weights_out)
      r.buffers.push_back({trace::Role::Out, trace::DType::BF16, flags, writer_->intern("arg2"),
                           1 << 20, fingerprinted ? *weights_out : 0});
    if (spec_.flagged_inputs && kind == RecordKind::Kernel && fingerprinted) {
      const uint8_t read_only = trace::kFingerprintValid | trace::kLearnedReadOnly;
      r.buffers.push_back(
          {trace::Role::In, trace::DType::Bytes, read_only, writer_->intern("arg1"), 4096, 0x5eed});
      r.buffers.push_back({trace::Role::In, trace::DType::Bytes, trace::kNotWrittenSinceAlloc,
                           writer_->intern("arg2"), 4096, 0});
    }
    writer_->append(r);
    if (spec_.stacks && kind == RecordKind::Kernel) stack(r.seq, step, stream, name);
    if (spec_.replay && kind == RecordKind::Kernel && spec_.replay->step == step &&
        spec_.replay->stream == stream && spec_.replay->name == name &&
        ++replay_seen_ == spec_.replay->occurrence)
      replay(r.seq, step, stream, name);
  }

  // The Replay record of the kernel launch `op_seq` (Spec::replay).
  void replay(uint64_t op_seq, uint32_t step, uint32_t stream, const std::string& kernel) {
    Record& r = fresh(RecordKind::Replay, step, stream);
    r.name = writer_->intern(kernel);
    r.fields[fields::Replay::op_seq] = op_seq;
    r.fields[fields::Replay::replays] = spec_.replays;
    r.fields[fields::Replay::regions] = 2;
    r.fields[fields::Replay::region_bytes] = 2 << 20;
    if (!spec_.replay_refused.empty()) {
      r.fields[fields::Replay::outcome] = 1;
      r.payload.assign(spec_.replay_refused.begin(), spec_.replay_refused.end());
      writer_->append(r);
      return;
    }
    for (uint32_t pass = 0; pass <= spec_.replays; ++pass) {
      for (uint32_t i = 0; i < 2; ++i) {
        // arg0 is an input the kernel only reads; arg1 its output, other in differing replays.
        const bool other = i == 1 && pass >= 1 && pass <= spec_.replay_differing;
        r.buffers.push_back({trace::Role::Out, trace::DType::Bytes, trace::kFingerprintValid,
                             writer_->intern(fmt::format("arg{}", i)), 1 << 20,
                             mix(op_seq * 2 + i, other ? pass : 0)});
      }
    }
    writer_->append(r);
  }

  // The Stack record of the kernel launch `op_seq` (LOCKSTEP_STACKS naming every kernel): a
  // Python line per kernel name, under a training loop, and one native frame.
  void stack(uint64_t op_seq, uint32_t step, uint32_t stream, const std::string& kernel) {
    Record& r = fresh(RecordKind::Stack, step, stream);
    const std::string line =
        fmt::format("/job/model.py:{} in Block.forward", 10 + std::hash<std::string>{}(kernel) % 90);
    r.name = writer_->intern(line);
    r.fields[fields::Stack::op_seq] = op_seq;
    r.fields[fields::Stack::python_frames] = 3;
    r.fields[fields::Stack::native_frames] = 1;
    const std::string text = "py " + line +
                             "\npy /usr/lib/python3/dist-packages/torch/nn/modules/module.py:1750 "
                             "in Module._call_impl\npy /job/train.py:88 in main\nnative "
                             "at::native::launch_kernel+0x1c (libtorch_cuda.so)\n";
    r.payload.assign(text.begin(), text.end());
    writer_->append(r);
  }

  // The shim's State record: one output buffer, the tensor's fingerprint.
  void state(uint32_t step, uint64_t fp, bool fingerprinted) {
    Record& r = fresh(RecordKind::State, step, 1);
    r.name = writer_->intern("blocks.0.wte.weight");
    r.fields[fields::State::bytes] = 1 << 20;
    r.fields[fields::State::state_kind] = 0;  // a parameter
    const uint8_t flags = fingerprinted ? (trace::kFingerprintValid | trace::kExtentExact) : 0;
    r.buffers.push_back({trace::Role::Out, trace::DType::BF16, flags, writer_->intern("tensor"),
                         1 << 20, fingerprinted ? fp : 0});
    writer_->append(r);
  }

  // The job's numbered step marker: trace step `step` is the job's step `job_step`.
  void step_marker(uint32_t step, uint64_t job_step) {
    Record& r = fresh(RecordKind::StepMarker, step, 0);
    r.name = writer_->intern(fmt::format("step {}", job_step));
    r.fields[fields::StepMarker::new_step] = step;
    r.fields[fields::StepMarker::marker_source] = 1;
    r.fields[fields::StepMarker::job_step] = job_step;
    r.fields[fields::StepMarker::numbered] = 1;
    writer_->append(r);
  }

  // A host-to-device copy (set-up, a checkpoint's restore) on stream 1.
  void host_copy(uint32_t step, uint64_t dst_fp, bool fingerprinted) {
    Record& r = fresh(RecordKind::Memcpy, step, 1);
    r.name = writer_->intern("cudaMemcpyAsync");
    r.fields[fields::Memcpy::direction] = 1;
    r.fields[fields::Memcpy::bytes] = 1 << 20;
    r.fields[fields::Memcpy::is_async] = 1;
    const uint8_t flags = fingerprinted ? (trace::kFingerprintValid | trace::kExtentExact) : 0;
    r.buffers.push_back({trace::Role::Out, trace::DType::Bytes, flags, writer_->intern("dst"),
                         1 << 20, fingerprinted ? dst_fp : 0});
    writer_->append(r);
  }

  void metric(uint32_t step, float value) {
    Record& r = fresh(RecordKind::Metric, step, 1);
    r.name = writer_->intern("cudaMemcpyAsync");
    r.fields[fields::Metric::bytes] = 4;
    r.fields[fields::Metric::dtype_hint] = static_cast<uint64_t>(trace::DType::F32);
    r.payload.resize(4);
    std::memcpy(r.payload.data(), &value, 4);
    writer_->append(r);
  }

 private:
  std::unique_ptr<trace::TraceWriter> writer_;
  const Spec& spec_;
  Record scratch_;
  trace::ScopeId scope_ = 0;
  uint64_t seq_ = 0;
  uint32_t replay_seen_ = 0;  // launches of Spec::replay's kernel on its stream in its step
  uint64_t collectives_ = 0;  // comm_seq: collectives on communicator 0 so far
  int rank_ = 0;
};

}  // namespace

std::string write_run(const std::string& dir, const Spec& spec, const std::string& run_id) {
  std::string error;
  if (!trace::prepare_run_dir({dir, run_id, true}, &error)) return error;
  std::vector<std::unique_ptr<RankWriter>> writers(spec.world_size);
  for (int rank = 0; rank < spec.world_size; ++rank) {
    if (spec.only_rank && *spec.only_rank != rank) continue;
    // The window as the shim records it (trace::kConfigKey), so that the diff knows it.
    nlohmann::json config = trace::config_window_json(spec.fp_first_step, spec.fp_last_step);
    config["level"] = spec.level;
    config["synthetic"] = true;
    nlohmann::json header = trace::build_trace_header({{trace::kConfigKey, config}});
    header["rank"] = rank;
    header["world_size"] = spec.header_world_size.value_or(spec.world_size);
    header["run_id"] = spec.header_run_id.value_or(run_id);
    // What the shim records of the GPU (collectors/tracer_lifecycle.cpp), made up per rank.
    header["gpu"] = {{"ordinal", rank % 8},
                     {"name", "Synthetic GPU"},
                     {"uuid", fmt::format("5e7e0000-0000-0000-0000-{:012x}", rank)},
                     {"pci_bus_id", fmt::format("0000:{:02x}:00.0", 0x18 + rank)}};
    trace::WriterOptions options;
    options.path = dir + "/" + trace::rank_trace_name(rank);
    options.memory_budget = spec.writer_memory;
    if (spec.block_bytes) options.block_bytes = spec.block_bytes;
    if (!spec.header_extra.empty()) header.update(nlohmann::json::parse(spec.header_extra));
    auto writer = trace::TraceWriter::open(options, header, &error);
    if (!writer) return error.empty() ? options.path + ": cannot open" : error;
    writers[rank] = std::make_unique<RankWriter>(std::move(writer), spec, rank);
  }
  std::vector<uint64_t> state(spec.world_size), weights(spec.world_size);
  for (int rank = 0; rank < spec.world_size; ++rank) {
    state[rank] = mix(42, rank);
    weights[rank] = mix(7, rank);
  }
  // Numbered: trace step 0 is set-up (or the restore prologue), the job's step n is trace step
  // n - resume_at + 1 (steps skipped by the loop leave no trace step).
  uint32_t next_trace_step = 1;
  if (spec.numbered) {
    const bool fingerprinted = spec.level == "full";
    for (int rank = 0; rank < spec.world_size; ++rank) {
      if (RankWriter* w = writers[rank].get()) {
        w->host_copy(0, mix(7, rank), fingerprinted);  // the model's initial weights
        if (spec.resume_at > 0)
          w->host_copy(0, mix(8, spec.resume_at) ^ (spec.restore_differs ? 1 : 0),
                       fingerprinted);  // the checkpoint
        w->writer().end_step(0);
        if (spec.flush_every_step) w->writer().flush();
      }
    }
  }
  for (uint32_t job_step = 0; job_step < spec.steps; ++job_step) {
    const bool skipped = std::find(spec.skip_steps.begin(), spec.skip_steps.end(), job_step) !=
                         spec.skip_steps.end();
    // Steps before a resume ran in another process: their values flow, nothing is written.
    const bool silent = spec.numbered && (job_step < spec.resume_at || skipped);
    if (spec.numbered && job_step == spec.resume_at && spec.restore_differs)
      for (uint64_t& s : state) s ^= 1;
    const uint32_t step = !spec.numbered ? job_step : silent ? 0 : next_trace_step++;
    const bool window = step >= spec.fp_first_step && step <= spec.fp_last_step;
    const bool all = spec.level == "full" && window;
    const bool broad = (spec.level == "full" || spec.level == "broad") && window;
    for (int rank = 0; rank < spec.world_size; ++rank) {
      RankWriter* w = silent ? nullptr : writers[rank].get();
      if (w && spec.numbered) w->step_marker(step, job_step);
      uint64_t& s = state[rank];
      for (uint32_t i = 0; i < spec.ops_per_step; ++i) {
        uint32_t stream = 1 + i % spec.streams;
        if (find_plant(spec, Plant::Insert, rank, job_step, i) && w)
          w->op(RecordKind::Kernel, step, stream, "planted_extra_kernel", s, s, all);
        if (find_plant(spec, Plant::Delete, rank, job_step, i)) continue;
        bool gemm = i % 4 == 3;
        uint64_t out = mix(s, job_step * 1000 + i);
        uint64_t algo = 3;
        if (gemm && find_plant(spec, Plant::GemmAlgo, rank, job_step, i)) algo = 7, out ^= 0x55;
        if (find_plant(spec, Plant::Output, rank, job_step, i)) out ^= 1;
        const bool embedding = spec.weights && i == 0 && !gemm;
        uint64_t weights_in = weights[rank];
        if (embedding) {
          if (job_step >= spec.weights_feed_from) out = mix(out, weights_in);
          weights[rank] = mix(weights_in, job_step);
          if (find_plant(spec, Plant::Weights, rank, job_step, 0)) weights[rank] ^= 1;
        }
        if (w && spec.scopes)
          w->set_scope({"Model (forward)", fmt::format("layers.{} (forward)", i / 2)});
        if (w) {
          if (gemm)
            w->op(RecordKind::Gemm, step, stream, "cublasLtMatmul", s, out, broad, algo);
          else
            w->op(RecordKind::Kernel, step, stream,
                  fmt::format("void layer{}_forward<__nv_bfloat16, 128>(Params)", i % 16), s, out,
                  all, 3, embedding ? &weights_in : nullptr, embedding ? &weights[rank] : nullptr);
        }
        s = out;
      }
    }
    uint64_t reduced = 0;
    for (int rank = 0; rank < spec.world_size; ++rank) reduced = mix(reduced, state[rank]);
    for (int rank = 0; rank < spec.world_size; ++rank) {
      uint64_t before = state[rank];
      uint64_t received = reduced;
      if (find_plant(spec, Plant::Received, rank, job_step, 0)) received ^= 1;
      state[rank] = mix(received, job_step);
      const uint64_t params = mix(received, 0xa11);  // the parameters before the update
      if (find_plant(spec, Plant::Replica, rank, job_step, 0)) state[rank] ^= 1;
      if (RankWriter* w = silent ? nullptr : writers[rank].get()) {
        if (spec.scopes) w->set_scope({"layers.0 (backward)"});
        w->op(RecordKind::Collective, step, spec.streams + 1, "ncclAllReduce", before, received,
              broad);
        if (spec.scopes) w->set_scope({"optimizer.step"});
        if (spec.replica_update)
          w->op(RecordKind::Kernel, step, 1, "void adam_update<float>(AdamParams)", received,
                state[rank], all, 3, nullptr, nullptr, params);
        else
          w->op(RecordKind::Kernel, step, 1, "void adam_update<float>(AdamParams)", received,
                state[rank], all);
        if (spec.scopes) w->set_scope({});
        if (spec.state) w->state(step, mix(weights[rank], state[rank]), broad);
        if (spec.metrics) {
          float loss =
              4.0f / (1.0f + job_step) + static_cast<float>(state[rank] % 1000) * 1e-6f;
          if (find_plant(spec, Plant::Metric, rank, job_step, 0)) loss += 1e-3f;
          w->metric(step, loss);
        }
        w->writer().end_step(step);
        // One block per step, as a slow job's pace gives (cut-off tests rely on it); without
        // it, blocks span several steps as the shim's do in a fast job.
        if (spec.flush_every_step) w->writer().flush();
      }
    }
  }
  for (auto& w : writers)
    if (w) w->writer().close();
  return {};
}

}  // namespace lockstep::tools::synth
