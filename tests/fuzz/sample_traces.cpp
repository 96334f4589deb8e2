#include "sample_traces.h"

#include <thread>

#include <nlohmann/json.hpp>

#include "trace/reader.h"

namespace lockstep::trace::testing {
namespace {

uint64_t random_value(std::mt19937_64& rng) {
  switch (rng() % 5) {
    case 0:
      return 0;
    case 1:
      return rng() % 128;
    case 2:
      return rng() % 100000;
    case 3:
      return rng() >> (rng() % 64);
    default:
      return rng();
  }
}

const char* kLabels[] = {"A", "B", "D", "A_scale", "send", "recv", "arg3", "arg0"};

}  // namespace

Record random_record(RecordKind kind, std::mt19937_64& rng, TraceWriter* writer) {
  Record record;
  record.kind = kind;
  record.stream = static_cast<uint32_t>(rng() % 4);
  record.step = static_cast<uint32_t>(rng() % 3);
  record.thread = static_cast<uint32_t>(1 + rng() % 3);
  // No scope, a module's forward, or a block inside it: defined when there is a writer.
  const int depth = static_cast<int>(rng() % 3);
  if (!writer) {
    record.scope = static_cast<ScopeId>(depth);
  } else if (depth > 0) {
    record.scope = writer->intern_scope(0, writer->intern("blocks.0 (forward)"));
    if (depth > 1)
      record.scope = writer->intern_scope(record.scope, writer->intern("blocks.0.mlp (forward)"));
  }
  const int count = field_count(kind);
  for (int i = 0; i < count; ++i) record.fields[i] = random_value(rng);
  if (writer) record.name = writer->intern("kernel_" + std::to_string(rng() % 20));
  const int buffers = kind == RecordKind::StepMarker ? 0 : static_cast<int>(rng() % 6);
  for (int i = 0; i < buffers; ++i) {
    BufferFingerprint b;
    b.role = rng() % 2 ? Role::Out : Role::In;
    b.dtype = static_cast<DType>(rng() % 20);
    b.flags = static_cast<uint8_t>(rng() % 16);
    b.label = writer ? writer->intern(kLabels[rng() % 8]) : static_cast<StringId>(rng() % 8);
    b.bytes = random_value(rng);
    b.fingerprint = rng();
    b.alloc_ordinal = static_cast<uint32_t>(rng() % 1000);
    b.alloc_offset = random_value(rng);
    record.buffers.push_back(b);
  }
  if (kind == RecordKind::Metric) {
    record.payload.resize(1 + rng() % 16);
    for (auto& byte : record.payload) byte = static_cast<uint8_t>(rng());
  }
  return record;
}

bool write_sample_trace(const std::string& path, int variant, std::string* error) {
  WriterOptions options;
  options.path = path;
  options.block_bytes = 4096;  // several blocks even for small traces
  nlohmann::json header = {{"sample_variant", variant}, {"rank", 0}};
  auto writer = TraceWriter::open(options, header, error);
  if (!writer) return false;
  std::mt19937_64 rng(1234 + variant);
  uint64_t seq = 0;
  auto append_some = [&](int n, uint32_t step) {
    for (int i = 0; i < n; ++i) {
      const auto& kinds = record_kinds();
      auto kind = kinds[rng() % (kinds.size() - 1)].kind;  // every kind but StepSummary
      if (variant == 0) kind = RecordKind::Kernel;
      Record record = random_record(kind, rng, writer.get());
      record.seq = ++seq;
      record.step = step;
      writer->append(record);
    }
  };
  switch (variant) {
    case 0:  // kernels only, one step
      append_some(60, 0);
      break;
    case 1:  // every kind, several steps with summaries
      for (uint32_t step = 0; step < 4; ++step) append_some(40, step), writer->end_step(step);
      break;
    case 2: {  // several threads
      std::vector<std::thread> threads;
      for (int t = 0; t < 3; ++t) {
        threads.emplace_back([&writer, t] {
          std::mt19937_64 local(t);
          for (int i = 0; i < 50; ++i) {
            Record record = random_record(RecordKind::Gemm, local, writer.get());
            record.seq = static_cast<uint64_t>(t) * 1000 + i + 1;
            record.thread = 0;
            writer->append(record);
          }
        });
      }
      for (auto& thread : threads) thread.join();
      break;
    }
    case 3: {  // a long kernel name, metrics with payloads
      Record record = random_record(RecordKind::Metric, rng, writer.get());
      record.name = writer->intern(std::string(3000, 'T') + "<float, 128>");
      for (int i = 0; i < 20; ++i) record.seq = ++seq, writer->append(record);
      break;
    }
    case 4:  // header and nothing else
      break;
    default:  // small steps, many summaries
      for (uint32_t step = 0; step < 12; ++step) append_some(3, step), writer->end_step(step);
      break;
  }
  writer->close();
  return true;
}

size_t read_everything(const std::string& path) {
  auto reader = TraceReader::open(path);
  size_t records = 0;
  (void)reader->header().dump();
  (void)reader->blocks();
  (void)reader->step_summaries();
  reader->for_each_record([&](const Record& record) {
    ++records;
    (void)reader->string(record.name);
    for (const auto& buffer : record.buffers) (void)reader->string(buffer.label);
    return true;
  });
  reader->for_each_record(1, 2, [&](const Record&) { return true; });
  (void)reader->end();
  reader->verify_all();
  return records;
}

}  // namespace lockstep::trace::testing
