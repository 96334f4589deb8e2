#include "tools/facts.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <filesystem>
#include <optional>
#include <set>
#include <thread>

#include "tools/open_files.h"
#include "trace/reader.h"
#include "trace/writer.h"

namespace lockstep::tools {
namespace {

// What decoding a file's records tells: counted record by record, then put into its RankFacts.
struct RecordTally {
  RankFacts counts;  // records, by_kind, buffers, fingerprints_dropped, warnings
  std::set<uint32_t> steps;
  std::map<trace::StringId, uint64_t> kernel_ids;
  uint64_t writer_dropped = 0, shim_dropped = 0;

  void add(const trace::Record& r, trace::TraceReader& reader) {
    ++counts.records;
    ++counts.by_kind[std::string(trace::record_kind_name(r.kind))];
    if (r.kind != trace::RecordKind::Warning && r.kind != trace::RecordKind::StepSummary)
      steps.insert(r.step);
    if (r.kind == trace::RecordKind::Kernel || r.kind == trace::RecordKind::Gemm) ++kernel_ids[r.name];
    if (r.kind == trace::RecordKind::Warning) {
      const uint64_t code = r.fields[trace::fields::Warning::code];
      const uint64_t count = r.fields[trace::fields::Warning::count];
      const trace::WarningSource source = trace::warning_source(r.seq);
      counts.warnings.push_back({source, code, count, std::string(reader.string(r.name))});
      // The writer and the shim both use code 1 (warning_codes.def): only the writer's is
      // records dropped; the shim's is fingerprints dropped.
      const trace::WarningInfo* info = trace::find_warning(source, code);
      const std::string_view what = info ? info->identifier : std::string_view();
      if (source == trace::WarningSource::Writer && what == "RecordsDropped")
        writer_dropped += count;
      else if (what == "RecordsDropped")
        shim_dropped = std::max(shim_dropped, count);
      else if (what == "FingerprintsDropped")
        counts.fingerprints_dropped += count;
    }
    for (const trace::BufferFingerprint& b : r.buffers) {
      ++counts.buffers;
      if (b.flags & trace::kFingerprintValid) {
        ++counts.buffers_fingerprinted;
        counts.bytes_fingerprinted += b.bytes;
      }
    }
  }

  void into(RankFacts& facts, trace::TraceReader& reader) {
    facts.records = counts.records;
    facts.by_kind = std::move(counts.by_kind);
    facts.buffers = counts.buffers;
    facts.buffers_fingerprinted = counts.buffers_fingerprinted;
    facts.bytes_fingerprinted = counts.bytes_fingerprinted;
    facts.fingerprints_dropped = counts.fingerprints_dropped;
    facts.warnings = std::move(counts.warnings);
    facts.dropped_records = std::max(writer_dropped, shim_dropped);
    for (auto& [id, count] : kernel_ids) facts.kernels[std::string(reader.string(id))] += count;
    facts.record_steps.assign(steps.begin(), steps.end());
  }
};

RankFacts scan_rank(const RankFile& file, const ScanOptions& options) {
  RankFacts facts;
  facts.rank = file.rank;
  facts.path = file.path;
  std::error_code ec;
  facts.file_bytes = std::filesystem::file_size(file.path, ec);
  std::unique_ptr<trace::TraceReader> reader = file.open();
  // Verifying and decoding: the records are counted as verify_all checks them (one decode, not
  // two); a file that fails the check is counted again below, as far as it decodes.
  std::optional<RecordTally> verified;
  if (options.verify) {
    try {
      if (options.decode) {
        RecordTally tally;
        reader->verify_all([&](const trace::Record& r) { tally.add(r, *reader); });
        verified = std::move(tally);
      } else {
        reader->verify_all();
      }
    } catch (const trace::TraceError& e) {
      facts.corruption = e.what();
    }
  }
  const std::vector<trace::BlockInfo>* blocks = nullptr;
  try {
    blocks = &reader->blocks();
  } catch (const trace::TraceError& e) {
    if (facts.corruption.empty()) facts.corruption = e.what();
    return facts;
  }
  facts.blocks = blocks->size();
  facts.truncated = reader->truncated();
  facts.truncation_offset = reader->truncation_offset();
  for (const trace::StepSummary& s : reader->step_summaries())
    facts.summary_steps.push_back(s.step);
  std::sort(facts.summary_steps.begin(), facts.summary_steps.end());
  facts.summary_steps.erase(std::unique(facts.summary_steps.begin(), facts.summary_steps.end()),
                            facts.summary_steps.end());
  if (!options.decode) {
    std::set<uint32_t> steps;
    for (const trace::BlockInfo& b : *blocks) {
      if (b.type != trace::BlockType::Records) continue;
      facts.records += b.record_count;
      if (b.max_step >= b.min_step && b.max_step - b.min_step < 4096)
        for (uint64_t s = b.min_step; s <= b.max_step; ++s) steps.insert(static_cast<uint32_t>(s));
    }
    facts.record_steps.assign(steps.begin(), steps.end());
    return facts;
  }
  RecordTally tally;
  if (verified) {
    tally = std::move(*verified);
  } else {
    try {
      reader->for_each_record([&](const trace::Record& r) {
        tally.add(r, *reader);
        return true;
      });
    } catch (const trace::TraceError& e) {
      if (facts.corruption.empty()) facts.corruption = e.what();
    }
  }
  tally.into(facts, *reader);
  return facts;
}

}  // namespace

std::vector<RankFacts> scan_run(const RunSet& run, const ScanOptions& options) {
  std::vector<RankFacts> facts(run.files.size());
  if (run.files.empty()) return facts;
  std::vector<std::exception_ptr> errors(run.files.size());
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t i = next++; i < run.files.size(); i = next++) {
      try {
        facts[i] = scan_rank(run.files[i], options);
      } catch (...) {
        errors[i] = std::current_exception();
      }
    }
  };
  size_t threads = std::clamp<size_t>(open_file_workers(0, 1), 1, run.files.size());
  std::vector<std::thread> pool;
  for (size_t t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (std::thread& t : pool) t.join();
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
  return facts;
}

}  // namespace lockstep::tools
