#include "tools/diff/file_input.h"

#include <algorithm>
#include <map>

namespace lockstep::tools {

std::vector<StepInfo> FileRankInput::steps() {
  std::map<uint32_t, StepInfo> by_step;
  // Record blocks give the steps present and an estimate of their size...
  for (const trace::BlockInfo& block : reader_->blocks()) {
    if (block.type != trace::BlockType::Records || block.max_step < block.min_step) continue;
    uint64_t span = static_cast<uint64_t>(block.max_step) - block.min_step + 1;
    if (span > 4096) {  // not a real step range; only mark its ends
      by_step[block.min_step].step = block.min_step;
      by_step[block.max_step].step = block.max_step;
      continue;
    }
    for (uint64_t s = block.min_step; s <= block.max_step; ++s) {
      StepInfo& info = by_step[static_cast<uint32_t>(s)];
      info.step = static_cast<uint32_t>(s);
      info.record_count += (block.record_count + span - 1) / span;
    }
  }
  // ...and the summaries give the exact count and the digest of every finished step.
  for (const trace::StepSummary& summary : reader_->step_summaries()) {
    StepInfo& info = by_step[summary.step];
    info.step = summary.step;
    info.record_count = summary.record_count;
    info.has_summary = true;
    info.digest = summary.digest;
  }
  std::vector<StepInfo> steps;
  steps.reserve(by_step.size());
  for (auto& [step, info] : by_step) steps.push_back(info);
  return steps;
}

std::vector<std::string> FileRankInput::warnings() {
  if (!reader_->truncated()) return {};
  return {reader_->path() + ": cut off at offset " + std::to_string(reader_->truncation_offset()) +
          "; using the valid prefix"};
}

std::optional<int64_t> FileRankInput::complete_through() {
  if (!reader_->truncated()) return std::nullopt;
  // The last summarized step whose records all made it into the valid prefix (block headers
  // say how many records of each single-step block survived). Steps before it are complete:
  // the writer flushes every step before it summarizes the next.
  std::map<uint32_t, uint64_t> kept;
  std::map<uint32_t, bool> spanned;  // covered by a multi-step block: unknown
  for (const trace::BlockInfo& block : reader_->blocks()) {
    if (block.type != trace::BlockType::Records) continue;
    if (block.min_step == block.max_step) kept[block.min_step] += block.record_count;
    else
      for (uint64_t s = block.min_step; s <= block.max_step && s - block.min_step < 4096; ++s)
        spanned[static_cast<uint32_t>(s)] = true;
  }
  std::vector<trace::StepSummary> summaries = reader_->step_summaries();
  std::sort(summaries.begin(), summaries.end(),
            [](const auto& x, const auto& y) { return x.step > y.step; });
  for (const trace::StepSummary& summary : summaries)
    if (!spanned.count(summary.step) && kept[summary.step] >= summary.record_count)
      return summary.step;
  return -1;
}

void FileRankInput::load(uint32_t first, uint32_t last, StringPool& pool, OpTable& out) {
  auto lookup = [this](trace::StringId id) { return reader_->string(id); };
  reader_->for_each_record(first, last, [&](const trace::Record& record) {
    if (record.step < first || record.step > last) return true;
    out.add_with(record, translator_.translate(record.name, pool, lookup),
                 [&](size_t, trace::StringId label) { return translator_.translate(label, pool, lookup); });
    return true;
  });
}

}  // namespace lockstep::tools
