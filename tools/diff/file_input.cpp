#include "tools/diff/file_input.h"

#include <algorithm>
#include <iterator>

#include "trace/header.h"

namespace lockstep::tools {

std::vector<StepInfo> FileRankInput::steps() {
  // The summaries give the exact count and the digest of every finished step...
  std::vector<StepInfo> steps;
  for (const trace::StepSummary& summary : reader_->step_summaries()) {
    if (!steps.empty() && steps.back().step == summary.step) continue;  // merged already
    StepInfo& info = steps.emplace_back();
    info.step = summary.step;
    info.record_count = summary.record_count;
    info.has_summary = true;
    info.digest = summary.digest;
    info.job_step = summary.job_step;
  }
  // ...and record blocks give the steps without one (a cut-off tail, a killed writer) and an
  // estimate of their size. Flat vectors, not a map: a diff of thousands of ranks does this for
  // every rank file three times.
  auto summarized = [&](uint32_t s) {
    auto it = std::lower_bound(steps.begin(), steps.end(), s,
                               [](const StepInfo& x, uint32_t step) { return x.step < step; });
    return it != steps.end() && it->step == s;
  };
  std::vector<StepInfo> unsummarized;
  for (const trace::BlockInfo& block : reader_->blocks()) {
    if (block.type != trace::BlockType::Records || block.max_step < block.min_step) continue;
    uint64_t span = static_cast<uint64_t>(block.max_step) - block.min_step + 1;
    if (span > 4096) {  // not a real step range; only mark its ends
      for (uint32_t s : {block.min_step, block.max_step})
        if (!summarized(s)) unsummarized.push_back({s, 0});
      continue;
    }
    for (uint64_t s = block.min_step; s <= block.max_step; ++s)
      if (!summarized(static_cast<uint32_t>(s)))
        unsummarized.push_back({static_cast<uint32_t>(s), (block.record_count + span - 1) / span});
  }
  if (unsummarized.empty()) return steps;
  std::stable_sort(unsummarized.begin(), unsummarized.end(),
                   [](const StepInfo& x, const StepInfo& y) { return x.step < y.step; });
  std::vector<StepInfo> merged;  // a step's estimates from several blocks add up
  for (const StepInfo& info : unsummarized) {
    if (!merged.empty() && merged.back().step == info.step)
      merged.back().record_count += info.record_count;
    else
      merged.push_back(info);
  }
  std::vector<StepInfo> all;
  all.reserve(steps.size() + merged.size());
  std::merge(steps.begin(), steps.end(), merged.begin(), merged.end(), std::back_inserter(all),
             [](const StepInfo& x, const StepInfo& y) { return x.step < y.step; });
  return all;
}

std::optional<uint32_t> FileRankInput::fingerprint_first_step() {
  return trace::fingerprint_first_step(reader_->header());
}

std::vector<std::string> FileRankInput::warnings() {
  if (!reader_->truncated()) return {};
  return {reader_->path() + ": cut off at offset " + std::to_string(reader_->truncation_offset()) +
          "; using the valid prefix"};
}

bool FileRankInput::whole() {
  if (!end_) end_ = end_of(*reader_);
  if (salvaged_ || reader_->truncated()) return false;
  if (integrity_ && !integrity_->whole()) return false;
  return end_->has_value();
}

std::optional<int64_t> FileRankInput::complete_through() {
  if (whole()) return std::nullopt;
  // Records of a step may sit in blocks that also hold the next steps, so the steps that
  // survived are counted record by record against their summaries.
  if (!complete_) complete_ = last_complete_step(*reader_);
  return complete_;
}

std::vector<std::string> FileRankInput::incomplete() {
  std::vector<std::string> reasons;
  const std::string& path = integrity_ ? integrity_->path : reader_->path();
  std::string prefix;
  if (!whole()) {
    int64_t through = *complete_through();
    prefix = through < 0 ? std::string(": no complete step")
                         : ": readable prefix up to step " + std::to_string(through);
  }
  if (salvaged_)
    reasons.push_back(integrity_->corruption + ", salvaged the prefix before it" + prefix);
  else if (reader_->truncated() || (integrity_ && integrity_->truncated))
    reasons.push_back(path + ": cut off at offset " +
                      std::to_string(integrity_ && integrity_->truncated
                                         ? integrity_->truncation_offset
                                         : reader_->truncation_offset()) +
                      prefix);
  else if (!end_->has_value())
    reasons.push_back(path + ": no end record (the writer did not finish)" + prefix);
  if (const std::optional<trace::TraceEnd>& end = *end_) {
    // The records its blocks hold against what the end record counts, from the block headers
    // (read for steps() already): a records block lost or written twice with valid checksums
    // left the summaries, which a diff compares first, as they were (found by fuzzing the CLI).
    uint64_t in_blocks = 0;
    for (const trace::BlockInfo& block : reader_->blocks())
      if (block.type == trace::BlockType::Records) in_blocks += block.record_count;
    if (whole() && in_blocks != end->records)
      reasons.push_back(path + ": " + std::to_string(in_blocks) +
                        " records in its blocks, its end record says " +
                        std::to_string(end->records));
    if (end->dropped)
      reasons.push_back(path + ": " + std::to_string(end->dropped) +
                        " records dropped by the writer");
    if (end->write_errors)
      reasons.push_back(path + ": " + std::to_string(end->write_errors) + " failed writes");
    if (!end->clean)
      reasons.push_back(path + ": the writer did not finish cleanly" +
                        (end->reason.empty() ? std::string() : " (" + end->reason + ")"));
  }
  return reasons;
}

void FileRankInput::load(uint32_t first, uint32_t last, StringPool& pool, OpTable& out) {
  auto lookup = [this](trace::StringId id) { return reader_->string(id); };
  auto path_of = [this](trace::ScopeId id) { return reader_->scope_path(id); };
  reader_->for_each_record(first, last, [&](const trace::Record& record) {
    if (record.step < first || record.step > last) return true;
    out.add_with(
        record, translator_.translate(record.name, pool, lookup),
        [&](size_t, trace::StringId label) { return translator_.translate(label, pool, lookup); },
        scopes_.translate(record.scope, pool, path_of));
    return true;
  });
}

}  // namespace lockstep::tools
