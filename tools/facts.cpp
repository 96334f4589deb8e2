#include "tools/facts.h"

#include <algorithm>
#include <array>
#include <filesystem>
#include <optional>
#include <set>
#include <unordered_map>

#include "tools/open_files.h"
#include "tools/parallel_for.h"
#include "trace/reader.h"
#include "trace/writer.h"

namespace lockstep::tools {
namespace {

// What decoding a file's records tells: counted record by record, then put into its RankFacts.
// Verify decodes every record of a run (97 M at issue #34's scale), so the per-record work is
// flat: kinds by their number, steps by the last one seen (records come in step order), names by
// id; the strings and sets are built once per file in into().
struct RecordTally {
  RankFacts counts;  // records, buffers, fingerprints_dropped, warnings
  std::array<uint64_t, 256> kinds{};
  std::vector<uint32_t> steps;  // in file order, runs of one step collapsed; sorted in into()
  size_t compact_at = 4096;
  // Launches by name id: a file's ids are small and dense (the writer interns from 1), so a
  // table indexed by id, with a map for any id past it.
  static constexpr trace::StringId kDenseIds = 1u << 16;
  std::vector<uint64_t> kernel_ids;
  std::unordered_map<trace::StringId, uint64_t> sparse_kernel_ids;
  uint64_t writer_dropped = 0, shim_dropped = 0;
  // Records per step, every kind (what a step's summary counts): the current run of one step,
  // added to the table when the step changes.
  std::unordered_map<uint32_t, uint64_t> step_records;
  uint32_t run_step = 0;
  uint64_t run_records = 0;

  void add(const trace::Record& r, trace::TraceReader& reader) {
    ++counts.records;
    if (r.step != run_step) {
      if (run_records) step_records[run_step] += run_records;
      run_step = r.step;
      run_records = 0;
    }
    ++run_records;
    ++kinds[static_cast<uint8_t>(r.kind)];
    if (r.kind != trace::RecordKind::Warning && r.kind != trace::RecordKind::StepSummary &&
        (steps.empty() || steps.back() != r.step)) {
      steps.push_back(r.step);
      if (steps.size() >= compact_at) {  // steps that alternate: kept to the distinct ones
        sort_steps();
        compact_at = std::max(compact_at, 2 * steps.size());
      }
    }
    if (r.kind == trace::RecordKind::Kernel || r.kind == trace::RecordKind::Gemm) {
      if (r.name >= kDenseIds) {
        ++sparse_kernel_ids[r.name];
      } else {
        if (r.name >= kernel_ids.size()) kernel_ids.resize(std::max<size_t>(64, 2 * r.name + 1));
        ++kernel_ids[r.name];
      }
    }
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
    if (run_records) step_records[run_step] += run_records;
    run_records = 0;
    // Each summarized step's records against its summary (the reader merges a step's summaries).
    for (const trace::StepSummary& s : reader.step_summaries()) {
      auto it = step_records.find(s.step);
      const uint64_t present = it == step_records.end() ? 0 : it->second;
      if (present == s.record_count) continue;
      if (facts.steps_miscounted++ == 0)
        facts.first_miscount = "step " + std::to_string(s.step) + ": " +
                               std::to_string(present) + " records, its summary says " +
                               std::to_string(s.record_count);
    }
    for (size_t kind = 0; kind < kinds.size(); ++kind)
      if (kinds[kind])
        facts.by_kind[std::string(trace::record_kind_name(static_cast<trace::RecordKind>(kind)))] +=
            kinds[kind];
    facts.buffers = counts.buffers;
    facts.buffers_fingerprinted = counts.buffers_fingerprinted;
    facts.bytes_fingerprinted = counts.bytes_fingerprinted;
    facts.fingerprints_dropped = counts.fingerprints_dropped;
    facts.warnings = std::move(counts.warnings);
    facts.dropped_records = std::max(writer_dropped, shim_dropped);
    for (size_t id = 0; id < kernel_ids.size(); ++id)
      if (kernel_ids[id])
        facts.kernels[std::string(reader.string(static_cast<trace::StringId>(id)))] +=
            kernel_ids[id];
    for (auto& [id, count] : sparse_kernel_ids)
      facts.kernels[std::string(reader.string(id))] += count;
    sort_steps();
    facts.record_steps = std::move(steps);
  }

  void sort_steps() {
    std::sort(steps.begin(), steps.end());
    steps.erase(std::unique(steps.begin(), steps.end()), steps.end());
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
  parallel_for(
      run.files.size(), open_file_workers(0, 1),
      [&](size_t i) { facts[i] = scan_rank(run.files[i], options); }, OnFailure::Continue);
  return facts;
}

}  // namespace lockstep::tools
