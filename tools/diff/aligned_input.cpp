#include "tools/diff/aligned_input.h"

#include <algorithm>
#include <unordered_map>

namespace lockstep::tools {

AlignedRankInput::AlignedRankInput(std::unique_ptr<RankInput> inner,
                                   const StepAlignment& alignment, bool side_b)
    : inner_(std::move(inner)), pairs_before_range_(alignment.pairs_before_range) {
  for (const StepPairing& p : alignment.pairs) {
    const uint32_t step = side_b ? p.b : p.a;
    key_of_[step] = p.a;
    step_of_[p.a] = {step, step};
  }
  if (const std::optional<SetupSpans>& setup = alignment.setup) {
    const StepSpan& span = side_b ? setup->b : setup->a;
    for (uint32_t step = span.first; step <= span.last && step >= span.first; ++step)
      key_of_[step] = setup->key;
    step_of_[setup->key] = {span.first, span.last};
    setup_key_ = setup->key;
  }
}

std::vector<StepInfo> AlignedRankInput::steps() {
  std::vector<StepInfo> out;
  for (StepInfo info : inner_->steps()) {
    auto it = key_of_.find(info.step);
    if (it == key_of_.end()) continue;
    info.step = it->second;
    if (!out.empty() && out.back().step == info.step) {
      // Another step of the set-up phase: one summary for the phase (a step's digest is a sum
      // of its records' hashes, so the phase's is the sum of its steps').
      StepInfo& phase = out.back();
      phase.record_count += info.record_count;
      phase.digest += info.digest;
      phase.has_summary = phase.has_summary && info.has_summary;
      continue;
    }
    out.push_back(info);
  }
  return out;
}

void AlignedRankInput::load(uint32_t first, uint32_t last, StringPool& pool, OpTable& out) {
  auto from = step_of_.lower_bound(first), to = step_of_.upper_bound(last);
  if (from == to) return;
  // Keys and trace steps rise together (the job's numbers increase), so the keys of a window
  // are one range of trace steps, maybe with unpaired steps inside it: dropped below.
  uint32_t low = from->second.first, high = std::prev(to)->second.second;
  const size_t before = out.size();
  inner_->load(low, high, pool, out);
  std::vector<Op>& ops = out.ops();
  auto kept = std::remove_if(ops.begin() + static_cast<std::ptrdiff_t>(before), ops.end(),
                             [&](Op& op) {
                               auto it = key_of_.find(op.step);
                               if (it == key_of_.end()) return true;
                               op.step = it->second;
                               return false;
                             });
  ops.erase(kept, ops.end());
}

std::optional<int64_t> AlignedRankInput::complete_through() {
  std::optional<int64_t> through = inner_->complete_through();
  if (!through) return std::nullopt;
  int64_t key = -1;
  for (const auto& [step, k] : key_of_)
    if (static_cast<int64_t>(step) <= *through) key = std::max<int64_t>(key, k);
  return key;
}

std::optional<uint32_t> AlignedRankInput::fingerprint_first_step() {
  std::optional<uint32_t> first = inner_->fingerprint_first_step();
  if (!first) return std::nullopt;
  std::optional<uint32_t> key;
  for (const auto& [step, k] : key_of_)
    if (step >= *first) key = std::min(key.value_or(UINT32_MAX), k);
  // Past every paired step: a window that starts after all of them.
  if (!key) return step_of_.empty() ? *first : step_of_.rbegin()->first + 1;
  return key;
}

void align_collective_sequences(const OpTable& a, OpTable& b) {
  auto key = [](uint32_t step, uint64_t comm) { return std::pair(step, comm); };
  struct PairHash {
    size_t operator()(const std::pair<uint32_t, uint64_t>& k) const {
      return std::hash<uint64_t>()(k.second * 0x9e3779b97f4a7c15ull ^ k.first);
    }
  };
  using Firsts = std::unordered_map<std::pair<uint32_t, uint64_t>, uint64_t, PairHash>;
  auto firsts = [&](const OpTable& table) {
    Firsts out;
    for (const Op& op : table.ops()) {
      if (op.kind != trace::RecordKind::Collective) continue;
      const uint64_t comm = table.field(op, trace::fields::Collective::comm_id);
      const uint64_t seq = table.field(op, trace::fields::Collective::comm_seq);
      auto [it, fresh] = out.try_emplace(key(op.step, comm), seq);
      if (!fresh) it->second = std::min(it->second, seq);
    }
    return out;
  };
  const Firsts in_a = firsts(a), in_b = firsts(b);
  for (const Op& op : b.ops()) {
    if (op.kind != trace::RecordKind::Collective) continue;
    const uint64_t comm = b.field(op, trace::fields::Collective::comm_id);
    auto ia = in_a.find(key(op.step, comm));
    if (ia == in_a.end()) continue;  // only in B: an inserted op, whatever its number
    const uint64_t first_b = in_b.at(key(op.step, comm));
    const uint64_t seq = b.field(op, trace::fields::Collective::comm_seq);
    b.set_field(op, trace::fields::Collective::comm_seq, seq - first_b + ia->second);
  }
}

}  // namespace lockstep::tools
