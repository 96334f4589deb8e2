#include "tools/diff/compare.h"

#include <algorithm>
#include <cstring>
#include <span>
#include <unordered_map>

#include <fmt/format.h>

#include "tools/why/gemm_config.h"
#include "tools/why/names.h"
#include "tools/why/nccl_choice.h"
#include "trace/field_format.h"

namespace lockstep::tools {

using trace::RecordKind;
namespace fields = trace::fields;

const char* classification_name(Classification c) {
  switch (c) {
    case Classification::Origin:
      return "origin";
    case Classification::HostInput:
      return "host input";
    case Classification::Structural:
      return "structural";
    case Classification::Receiver:
      return "receiver";
    case Classification::Metric:
      return "metric";
    case Classification::State:
      return "state";
  }
  return "?";
}

std::string state_kind_name(uint64_t state_kind) {
  static constexpr const char* kNames[] = {"parameter", "gradient", "optimizer", "user"};
  if (state_kind < std::size(kNames)) return kNames[state_kind];
  return fmt::format("kind {}", state_kind);
}

const char* structural_kind_name(StructuralKind k) {
  switch (k) {
    case StructuralKind::None:
      return "none";
    case StructuralKind::Inserted:
      return "inserted";
    case StructuralKind::Deleted:
      return "deleted";
    case StructuralKind::Reordered:
      return "reordered";
    case StructuralKind::Fields:
      return "fields";
    case StructuralKind::Buffers:
      return "buffers";
  }
  return "?";
}

std::string host_input_detail(uint64_t step, const std::string& api, uint64_t bytes) {
  return fmt::format(
      "the bytes copied from host memory differ (step {}, {}, {} bytes): the difference entered "
      "from the host",
      step, api, bytes);
}

bool blame_before(const Divergence& x, const Divergence& y) {
  auto key = [](const Divergence& d) {
    return std::tuple(d.step, d.epoch, static_cast<int>(d.classification), d.anchor_seq,
                      d.anchor_sub, d.rank);
  };
  return key(x) < key(y);
}

namespace {

// What a kind means to the diff (ignored, volatile fields, guessed regions, identity, short
// text) is its row of trace/record_kinds.def: trace::kind_diff(kind), read here instead of
// lists of kinds.
using trace::kind_diff;

// Collectives order the ranks against each other (collective epochs, the collective list,
// received_from): that is what a collective is to the blame, not a column of the table.
bool is_collective(RecordKind kind) { return kind == RecordKind::Collective; }

// Ops of one step and stream, in seq order: index ranges into Grouping's order arrays.
using Ids = std::span<const uint32_t>;
struct Group {
  uint32_t step = 0, stream = 0;
  Ids a, b;
};

uint64_t group_key(uint32_t step, uint32_t stream) {
  return (static_cast<uint64_t>(step) << 32) | stream;
}

// Reused from window to window (per thread) so that a diff does not page-fault its way
// through fresh allocations for every window.
struct Grouping {
  std::vector<Group> groups;
  std::unordered_map<uint32_t, std::vector<uint64_t>> collective_seqs_a;  // by step, sorted
  std::unordered_map<uint64_t, uint32_t> index;
  std::vector<uint64_t> keys;  // group id -> key
  std::vector<uint32_t> group_of_a, group_of_b, count_a, count_b, order_a, order_b;

  void build(const OpTable& a, const OpTable& b) {
    index.clear();
    keys.clear();
    for (auto& [step, seqs] : collective_seqs_a) seqs.clear();
    assign(a, group_of_a, true);
    assign(b, group_of_b, false);
    // Groups in (step, stream) order.
    std::vector<uint32_t> rank(keys.size());
    for (uint32_t i = 0; i < rank.size(); ++i) rank[i] = i;
    std::sort(rank.begin(), rank.end(), [&](uint32_t x, uint32_t y) { return keys[x] < keys[y]; });
    std::vector<uint32_t> position(keys.size());
    for (uint32_t i = 0; i < rank.size(); ++i) position[rank[i]] = i;
    for (uint32_t& g : group_of_a)
      if (g != UINT32_MAX) g = position[g];
    for (uint32_t& g : group_of_b)
      if (g != UINT32_MAX) g = position[g];
    std::vector<uint64_t> sorted_keys(keys.size());
    for (uint32_t i = 0; i < rank.size(); ++i) sorted_keys[i] = keys[rank[i]];
    bucket(a, group_of_a, count_a, order_a);
    bucket(b, group_of_b, count_b, order_b);
    groups.resize(keys.size());
    for (uint32_t g = 0; g < keys.size(); ++g) {
      groups[g].step = static_cast<uint32_t>(sorted_keys[g] >> 32);
      groups[g].stream = static_cast<uint32_t>(sorted_keys[g]);
      groups[g].a = Ids(order_a.data() + count_a[g], count_a[g + 1] - count_a[g]);
      groups[g].b = Ids(order_b.data() + count_b[g], count_b[g + 1] - count_b[g]);
    }
    for (auto& [step, seqs] : collective_seqs_a) std::sort(seqs.begin(), seqs.end());
  }

 private:
  void assign(const OpTable& table, std::vector<uint32_t>& group_of, bool side_a) {
    group_of.assign(table.size(), UINT32_MAX);
    uint64_t last_key = UINT64_MAX;
    uint32_t last_group = 0;
    for (uint32_t i = 0; i < table.size(); ++i) {
      const Op& op = table[i];
      if (kind_diff(op.kind).ignored()) continue;
      uint64_t key = group_key(op.step, op.stream);
      if (key != last_key) {
        auto [it, inserted] = index.try_emplace(key, static_cast<uint32_t>(keys.size()));
        if (inserted) keys.push_back(key);
        last_key = key;
        last_group = it->second;
      }
      group_of[i] = last_group;
      if (side_a && is_collective(op.kind)) collective_seqs_a[op.step].push_back(op.seq);
    }
  }

  // Counting sort of op indices by group, then by seq inside each group.
  void bucket(const OpTable& table, const std::vector<uint32_t>& group_of,
              std::vector<uint32_t>& start, std::vector<uint32_t>& order) {
    start.assign(keys.size() + 1, 0);
    for (uint32_t g : group_of)
      if (g != UINT32_MAX) ++start[g + 1];
    for (size_t g = 0; g < keys.size(); ++g) start[g + 1] += start[g];
    order.resize(start.back());
    std::vector<uint32_t> fill(start.begin(), start.end() - 1);
    for (uint32_t i = 0; i < group_of.size(); ++i)
      if (group_of[i] != UINT32_MAX) order[fill[group_of[i]]++] = i;
    auto less = [&](uint32_t x, uint32_t y) { return table[x].seq < table[y].seq; };
    for (size_t g = 0; g < keys.size(); ++g) {
      auto first = order.begin() + start[g], last = order.begin() + start[g + 1];
      if (!std::is_sorted(first, last, less)) std::sort(first, last, less);
    }
  }
};

// Identity of an op inside its group (see compare.h and the identity column of
// record_kinds.def).
struct Identity {
  RecordKind kind;
  uint32_t name;
  uint64_t x, y;  // the identity fields (a collective: comm_id, comm_seq); else occurrence, 0
  bool operator==(const Identity&) const = default;
};
static_assert(trace::kMaxIdentityFields == 2, "Identity holds two identity fields");
struct IdentityHash {
  size_t operator()(const Identity& id) const {
    uint64_t h = (static_cast<uint64_t>(id.kind) << 56) ^ (static_cast<uint64_t>(id.name) << 20);
    h ^= id.x * 0x9e3779b97f4a7c15ull;
    h ^= id.y * 0xc2b2ae3d27d4eb4full;
    return static_cast<size_t>(h ^ (h >> 29));
  }
};

bool same_identity_head(const OpTable& ta, const Op& a, const OpTable& tb, const Op& b) {
  if (a.kind != b.kind || a.name != b.name) return false;
  const trace::KindDiff& diff = kind_diff(a.kind);
  for (int i = 0; i < diff.identity_count; ++i)
    if (ta.field(a, diff.identity[i]) != tb.field(b, diff.identity[i])) return false;
  return true;
}

std::vector<Identity> identities(const OpTable& table, Ids ids) {
  std::vector<Identity> out;
  out.reserve(ids.size());
  std::unordered_map<uint64_t, uint64_t> occurrences;
  for (uint32_t i : ids) {
    const Op& op = table[i];
    const trace::KindDiff& diff = kind_diff(op.kind);
    if (diff.identity_count > 0) {
      uint64_t x = table.field(op, diff.identity[0]);
      uint64_t y = diff.identity_count > 1 ? table.field(op, diff.identity[1]) : 0;
      out.push_back({op.kind, op.name, x, y});
    } else {
      uint64_t k = (static_cast<uint64_t>(op.kind) << 32) | op.name;
      out.push_back({op.kind, op.name, ++occurrences[k], 0});
    }
  }
  return out;
}

// One 64-bit key per op for the sequence alignment: kind and name, and the identity fields (a
// collective: its communicator and position on it).
std::vector<uint64_t> identity_keys(const OpTable& table, Ids ids) {
  static constexpr uint64_t kMix[trace::kMaxIdentityFields] = {0x9e3779b97f4a7c15ull,
                                                               0xc2b2ae3d27d4eb4full};
  std::vector<uint64_t> keys;
  keys.reserve(ids.size());
  for (uint32_t i : ids) {
    const Op& op = table[i];
    uint64_t key = (static_cast<uint64_t>(op.kind) << 32) | op.name;
    const trace::KindDiff& diff = kind_diff(op.kind);
    if (diff.identity_count > 0) {
      for (int f = 0; f < diff.identity_count; ++f)
        key = key * kMix[f] + table.field(op, diff.identity[f]);
      key |= 1ull << 63;
    }
    keys.push_back(key);
  }
  return keys;
}

constexpr int kMaxEdits = 1000;

// Myers' O((N+M)D) shortest edit script. Fills the pairing of the common subsequence; false
// when more than max_edits insertions and deletions would be needed.
bool myers_align(const std::vector<uint64_t>& a, const std::vector<uint64_t>& b, int max_edits,
                 std::vector<int64_t>& match_of_a, std::vector<int64_t>& match_of_b) {
  const int n = static_cast<int>(a.size()), m = static_cast<int>(b.size());
  const int max_d = std::min(n + m, max_edits);
  const int offset = max_d + 1;
  std::vector<int> v(2 * max_d + 3, 0);
  std::vector<std::vector<int>> trace;  // trace[d]: v[-d-1 .. d+1] before round d
  for (int d = 0; d <= max_d; ++d) {
    trace.emplace_back(v.begin() + offset - d - 1, v.begin() + offset + d + 2);
    for (int k = -d; k <= d; k += 2) {
      int x = (k == -d || (k != d && v[offset + k - 1] < v[offset + k + 1]))
                  ? v[offset + k + 1]
                  : v[offset + k - 1] + 1;
      int y = x - k;
      while (x < n && y < m && a[x] == b[y]) ++x, ++y;
      v[offset + k] = x;
      if (x < n || y < m) continue;
      // Walk back through the rounds, pairing the diagonal (equal) runs.
      for (int dd = d; dd > 0; --dd) {
        const std::vector<int>& before = trace[dd];
        auto at = [&](int kk) { return before[kk + dd + 1]; };
        int kk = x - y;
        int prev_k = (kk == -dd || (kk != dd && at(kk - 1) < at(kk + 1))) ? kk + 1 : kk - 1;
        int prev_x = at(prev_k), prev_y = prev_x - prev_k;
        int start_x = prev_k == kk + 1 ? prev_x : prev_x + 1;  // after the edit
        while (x > start_x) --x, --y, match_of_a[x] = y, match_of_b[y] = x;
        x = prev_x, y = prev_y;
      }
      while (x > 0 && y > 0) --x, --y, match_of_a[x] = y, match_of_b[y] = x;
      return true;
    }
  }
  return false;
}

uint32_t occurrence_in_group(const OpTable& table, Ids ids, size_t position) {
  const Op& op = table[ids[position]];
  uint32_t n = 0;
  for (size_t i = 0; i <= position; ++i) {
    const Op& other = table[ids[i]];
    if (other.kind == op.kind && other.name == op.name) ++n;
  }
  return n;
}

// A context line: the op as the text prints it (a kernel's short name, its full name under
// --verbose), not the full name each time: a structural divergence keeps 2 x (2 x --context + 1)
// of these, and a pathological name of a MiB made a divergence's report tens of MiB.
std::string short_text(const OpTable& table, const Op& op, const StringPool& pool) {
  const std::string_view kind = trace::record_kind_name(op.kind);
  std::string text = fmt::format("{} {}", kind, display_name(kind, pool.text(op.name)));
  std::string extra = trace::short_text(op.kind, table.fields(op));
  if (!extra.empty()) text += " " + extra;
  return text;
}

std::vector<ContextLine> context_lines(const OpTable& table, Ids ids, size_t position, bool mark,
                                       int context, const StringPool& pool) {
  std::vector<ContextLine> lines;
  size_t first = position > static_cast<size_t>(context) ? position - context : 0;
  size_t last = std::min(ids.size(), position + context + (mark ? 1 : 0));
  for (size_t i = first; i < last; ++i) {
    const Op& op = table[ids[i]];
    lines.push_back({op.seq, short_text(table, op, pool), mark && i == position});
  }
  return lines;
}

// What differs between two ops of the same identity.
struct PairOutcome {
  enum What { Equal, Fields, Buffers, Value } what = Equal;
  int in_index = -1, out_index = -1;      // first differing input / output buffer (in A)
  int in_index_b = -1, out_index_b = -1;  // the same buffers in B
  bool payload_differs = false;
  std::string detail;
};

PairOutcome compare_pair(const OpTable& ta, const Op& a, const OpTable& tb, const Op& b,
                         const StringPool& pool) {
  PairOutcome outcome;
  auto fa = ta.fields(a), fb = tb.fields(b);
  const bool fields_equal =
      fa.size() == fb.size() && std::memcmp(fa.data(), fb.data(), fa.size_bytes()) == 0;
  if (!fields_equal) {
    const auto* info = trace::find_record_kind(static_cast<uint8_t>(a.kind));
    std::string detail;
    for (size_t i = 0; i < std::max(fa.size(), fb.size()); ++i) {
      uint64_t x = i < fa.size() ? fa[i] : 0, y = i < fb.size() ? fb[i] : 0;
      if (x == y || kind_diff(a.kind).is_volatile(static_cast<int>(i))) continue;
      std::string_view field =
          info && i < info->field_names.size() ? info->field_names[i] : std::string_view("?");
      // Values as show prints them (CUDA_R_16BF, not 14): trace/field_format.h.
      const int f = static_cast<int>(i);
      detail += fmt::format("{}{} {} vs {}", detail.empty() ? "" : ", ", field,
                            trace::field_text(a.kind, f, x), trace::field_text(a.kind, f, y));
    }
    // A GEMM says what differs in the algorithm the library chose (tools/why/gemm_config.h).
    if (!detail.empty() && a.kind == trace::RecordKind::Gemm)
      detail = gemm_fields_difference(pool.text(a.name), fa, fb);
    // A collective that differs in its fields (another count): NCCL's choices too, if they did.
    if (!detail.empty() && a.kind == trace::RecordKind::Collective)
      if (const std::string choice = nccl_choice_difference(fa, fb); !choice.empty())
        detail += "; " + choice;
    if (!detail.empty()) {
      outcome.what = PairOutcome::Fields;
      outcome.detail = std::move(detail);
      return outcome;
    }
  }
  auto ba = ta.buffers(a), bb = tb.buffers(b);
  // Buffers with API extents (GEMM, collective, copy) must agree in number and shape: a
  // difference is structural. Kernel pointer regions are guesses that run to the end of an
  // allocation, so their size follows where the caching allocator placed the tensor: they pair
  // by role and label, and a pair of different sizes cannot be compared (not a divergence).
  thread_local std::vector<std::pair<int, int>> pairs;
  pairs.clear();
  size_t incomparable = 0;
  const bool guessed = kind_diff(a.kind).guessed_regions();
  if (!guessed) {
    if (ba.size() != bb.size()) {
      outcome.what = PairOutcome::Buffers;
      outcome.detail = fmt::format("{} buffers vs {}", ba.size(), bb.size());
      return outcome;
    }
    for (size_t i = 0; i < ba.size(); ++i) {
      const OpBuffer &x = ba[i], &y = bb[i];
      if (x.role != y.role || x.label != y.label || x.dtype != y.dtype || x.bytes != y.bytes) {
        outcome.what = PairOutcome::Buffers;
        outcome.detail = fmt::format("buffer {}: {} '{}' {} {} bytes vs {} '{}' {} {} bytes", i,
                                     x.role == trace::Role::In ? "in" : "out", pool.text(x.label),
                                     trace::dtype_name(x.dtype), x.bytes,
                                     y.role == trace::Role::In ? "in" : "out", pool.text(y.label),
                                     trace::dtype_name(y.dtype), y.bytes);
        return outcome;
      }
      pairs.emplace_back(static_cast<int>(i), static_cast<int>(i));
    }
  } else {
    for (size_t i = 0; i < ba.size(); ++i) {
      const OpBuffer& x = ba[i];
      // Same position first (the common case), else the first of the same role and label.
      int j = -1;
      if (i < bb.size() && bb[i].role == x.role && bb[i].label == x.label) {
        j = static_cast<int>(i);
      } else {
        for (size_t k = 0; k < bb.size(); ++k)
          if (bb[k].role == x.role && bb[k].label == x.label) {
            j = static_cast<int>(k);
            break;
          }
      }
      if (j < 0) continue;  // a pointer that only one run passed twice or outside any allocation
      // An enclosing region's digest (trace::kDigestOfEnclosing) in one run only, or enclosing
      // regions of another size: not the same bytes.
      if (x.bytes != bb[j].bytes || ((x.flags ^ bb[j].flags) & trace::kDigestOfEnclosing) != 0) {
        ++incomparable;
        continue;
      }
      pairs.emplace_back(static_cast<int>(i), j);
    }
  }
  for (auto [i, j] : pairs) {
    const OpBuffer &x = ba[i], &y = bb[j];
    if (!x.has_value() || !y.has_value() || x.fingerprint == y.fingerprint) continue;
    int& slot = x.role == trace::Role::In ? outcome.in_index : outcome.out_index;
    if (slot < 0) {
      slot = i;
      (x.role == trace::Role::In ? outcome.in_index_b : outcome.out_index_b) = j;
    }
  }
  // A kernel whose differing input regions all came out equal overwrote the difference (an
  // output-only tensor holding whatever the allocator left there before the kernel wrote it,
  // or a difference that did not reach its results): nothing to report.
  if (guessed && outcome.in_index >= 0 && outcome.out_index < 0) {
    const bool outputs_compared = std::any_of(pairs.begin(), pairs.end(), [&](auto p) {
      return ba[p.first].role == trace::Role::Out && ba[p.first].has_value() &&
             bb[p.second].has_value();
    });
    if (outputs_compared) outcome.in_index = outcome.in_index_b = -1;
  }
  if (incomparable > 0)
    outcome.detail = fmt::format("{} region{} of another size (allocator placement), not compared",
                                 incomparable, incomparable == 1 ? "" : "s");
  if (a.payload_bytes | b.payload_bytes) {
    auto pa = ta.payload(a), pb = tb.payload(b);
    outcome.payload_differs =
        pa.size() != pb.size() || !std::equal(pa.begin(), pa.end(), pb.begin());
  }
  if (outcome.in_index >= 0 || outcome.out_index >= 0 || outcome.payload_differs) {
    outcome.what = PairOutcome::Value;
    // NCCL's choices are volatile (record_kinds.def says why): next to outputs that differ from
    // equal inputs they are the mechanism, named with both runs' values.
    if (a.kind == RecordKind::Collective && outcome.in_index < 0) {
      const std::string choice = nccl_choice_difference(fa, fb);
      if (!choice.empty())
        outcome.detail += std::string(outcome.detail.empty() ? "" : "; ") + choice;
    }
    // The kernel's scalar argument digest is volatile (record_kinds.def says why), so it never
    // decides; but next to a value difference it is a lead worth naming.
    const size_t args = fields::Kernel::args_digest;
    if (a.kind == RecordKind::Kernel && args < fa.size() && args < fb.size() &&
        fa[args] != fb[args])
      outcome.detail +=
          std::string(outcome.detail.empty() ? "" : "; ") + "scalar argument bytes differ too";
  }
  return outcome;
}

// compare_pair's answer for the common cases, without building a PairOutcome: Equal, or Value
// (same fields and buffer shapes, a fingerprint or the payload differs). Other: anything else
// (fields differ, buffers differ in shape), left to compare_pair.
enum class Quick { Equal, Value, Other };
Quick quick_compare(const OpTable& ta, const Op& a, const OpTable& tb, const Op& b) {
  if (a.field_count != b.field_count || a.buffer_count != b.buffer_count) return Quick::Other;
  auto fa = ta.fields(a), fb = tb.fields(b);
  if (std::memcmp(fa.data(), fb.data(), fa.size_bytes()) != 0) return Quick::Other;
  bool differs = false;
  auto ba = ta.buffers(a), bb = tb.buffers(b);
  for (size_t i = 0; i < ba.size(); ++i) {
    const OpBuffer &x = ba[i], &y = bb[i];
    if (x.role != y.role || x.label != y.label || x.dtype != y.dtype || x.bytes != y.bytes ||
        ((x.flags ^ y.flags) & trace::kDigestOfEnclosing) != 0)
      return Quick::Other;
    differs |= x.fingerprint != y.fingerprint && x.has_value() && y.has_value();
  }
  if (a.payload_bytes | b.payload_bytes) {
    auto pa = ta.payload(a), pb = tb.payload(b);
    differs |= pa.size() != pb.size() || std::memcmp(pa.data(), pb.data(), pa.size()) != 0;
  }
  return differs ? Quick::Value : Quick::Equal;
}

BufferDiff buffer_diff(const OpBuffer& x, const OpBuffer& y, const StringPool& pool) {
  return BufferDiff{x.role == trace::Role::In ? "in" : "out",
                    std::string(pool.text(x.label)),
                    std::string(trace::dtype_name(x.dtype)),
                    x.bytes,
                    x.fingerprint,
                    y.fingerprint};
}

class WindowComparer {
 public:
  WindowComparer(const OpTable& a, const OpTable& b, const StringPool& pool,
                 const CompareOptions& options, RankResult& result)
      : a_(a), b_(b), pool_(pool), options_(options), result_(result) {}

  void run() {
    thread_local Grouping grouping;
    grouping.build(a_, b_);
    collective_seqs_ = &grouping.collective_seqs_a;
    for (const Group& g : grouping.groups) compare_group(g);
  }

 private:
  uint32_t epoch_of(uint32_t step, uint64_t anchor) const {
    auto it = collective_seqs_->find(step);
    if (it == collective_seqs_->end()) return 0;
    return static_cast<uint32_t>(std::lower_bound(it->second.begin(), it->second.end(), anchor) -
                                 it->second.begin());
  }

  Divergence base(const Group& g, const Op& op, const OpTable& table, Ids ids, size_t position) {
    Divergence d;
    d.rank = result_.rank;
    d.step = g.step;
    d.stream = g.stream;
    d.kind = std::string(trace::record_kind_name(op.kind));
    d.name = std::string(pool_.text(op.name));
    d.scope = split_scope(pool_.text(op.scope));
    d.occurrence = occurrence_in_group(table, ids, position);
    d.is_collective = is_collective(op.kind);
    const auto op_fields = table.fields(op);
    d.fields.assign(op_fields.begin(), op_fields.end());
    if (d.is_collective) {
      d.comm_id = table.field(op, fields::Collective::comm_id);
      d.comm_seq = table.field(op, fields::Collective::comm_seq);
    }
    return d;
  }

  bool would_be_first(uint32_t step, uint64_t anchor, uint8_t sub) const {
    return !result_.first || std::tuple(step, anchor, sub) < std::tuple(result_.first->step,
                                                                        result_.first->anchor_seq,
                                                                        result_.first->anchor_sub);
  }

  // Would a receiver at (step, seq) be among the rank's first receivers after its first
  // divergence (RankResult::receivers_after)?
  bool would_follow(uint32_t step, uint64_t seq) const {
    const auto& kept = result_.receivers_after;
    return result_.first && !would_be_first(step, seq, 0) &&
           (kept.size() < options_.receivers_cap ||
            std::tuple(step, seq) < std::tuple(kept.back().step, kept.back().anchor_seq));
  }

  void keep_receiver(Divergence d) {
    auto& kept = result_.receivers_after;
    auto at = std::upper_bound(kept.begin(), kept.end(), d, [](const auto& x, const auto& y) {
      return std::tuple(x.step, x.anchor_seq) < std::tuple(y.step, y.anchor_seq);
    });
    kept.insert(at, std::move(d));
    if (kept.size() > options_.receivers_cap) kept.pop_back();
  }

  // Counted by the caller; kept if it is the rank's first so far or a structural one to list.
  void note(Divergence d) {
    d.epoch = epoch_of(d.step, d.anchor_seq);
    if (would_be_first(d.step, d.anchor_seq, d.anchor_sub)) {
      // A receiver displaced by an earlier divergence is one of the receivers after it.
      if (result_.first && result_.first->classification == Classification::Receiver &&
          options_.receivers_cap > 0)
        keep_receiver(*result_.first);
      result_.first = d;
    }
    if (d.classification == Classification::Structural &&
        result_.structural.size() < options_.structural_cap)
      result_.structural.push_back(std::move(d));
  }

  void structural(const Group& g, StructuralKind kind, size_t pos_a, size_t pos_b, bool in_a,
                  bool in_b, std::string detail) {
    ++result_.divergent_records;
    ++result_.structural_total;
    uint64_t anchor_seq;
    uint8_t anchor_sub = 0;
    if (in_a) {
      anchor_seq = a_[g.a[pos_a]].seq;
    } else {
      // Inserted in B: placed just after the A op that precedes the insertion point.
      anchor_seq = pos_a > 0 ? a_[g.a[pos_a - 1]].seq : (g.a.empty() ? 0 : a_[g.a[0]].seq - 1);
      anchor_sub = 1;
    }
    if (result_.structural.size() >= options_.structural_cap &&
        !would_be_first(g.step, anchor_seq, anchor_sub))
      return;
    const bool a_side = in_a;
    const OpTable& table = a_side ? a_ : b_;
    Ids ids = a_side ? g.a : g.b;
    size_t position = a_side ? pos_a : pos_b;
    Divergence d = base(g, table[ids[position]], table, ids, position);
    d.classification = Classification::Structural;
    d.structural = kind;
    d.detail = std::move(detail);
    if (in_a) d.seq_a = a_[g.a[pos_a]].seq;
    if (in_b) d.seq_b = b_[g.b[pos_b]].seq;
    d.anchor_seq = anchor_seq;
    d.anchor_sub = anchor_sub;
    if (options_.context >= 0) {
      d.context_a = context_lines(a_, g.a, pos_a, in_a, options_.context, pool_);
      d.context_b = context_lines(b_, g.b, pos_b, in_b, options_.context, pool_);
      d.context_before_a = std::min<size_t>(pos_a, options_.context);
      d.context_before_b = std::min<size_t>(pos_b, options_.context);
    }
    note(std::move(d));
  }

  // NCCL's choices differ here (a volatile field: quick_compare sent the pair here)?
  void note_nccl_choice(const Group& g, const Op& x, const Op& y) {
    std::string difference = nccl_choice_difference(a_.fields(x), b_.fields(y));
    if (difference.empty()) return;
    result_.nccl_choices.add({result_.rank, g.step, std::string(pool_.text(x.name)),
                              a_.field(x, fields::Collective::comm_id),
                              a_.field(x, fields::Collective::comm_seq), x.seq, y.seq,
                              std::move(difference)});
  }

  void compare_matched(const Group& g, size_t i, size_t j) {
    const Op& x = a_[g.a[i]];
    const Op& y = b_[g.b[j]];
    ++result_.records_compared;
    switch (quick_compare(a_, x, b_, y)) {
      case Quick::Equal:
        return;
      case Quick::Value:
        // A value difference after the rank's first one, on an op that feeds neither the
        // collective list, the metric nor the state: only counted (what the full path below
        // would do).
        if (x.kind != RecordKind::Collective && x.kind != RecordKind::Metric &&
            x.kind != RecordKind::State && !would_be_first(g.step, x.seq, 0) &&
            !would_follow(g.step, x.seq)) {
          ++result_.divergent_records;
          return;
        }
        break;
      case Quick::Other:
        break;
    }
    if (x.kind == RecordKind::Collective) note_nccl_choice(g, x, y);
    PairOutcome outcome = compare_pair(a_, x, b_, y, pool_);
    if (outcome.what == PairOutcome::Equal) return;
    if (outcome.what == PairOutcome::Fields) {
      structural(g, StructuralKind::Fields, i, j, true, true, outcome.detail);
      return;
    }
    if (outcome.what == PairOutcome::Buffers) {
      structural(g, StructuralKind::Buffers, i, j, true, true, outcome.detail);
      return;
    }
    ++result_.divergent_records;
    auto ba = a_.buffers(x), bb = b_.buffers(y);
    if (x.kind == RecordKind::Collective && result_.collectives.size() < options_.collective_cap)
      result_.collectives.push_back({a_.field(x, fields::Collective::comm_id),
                                     a_.field(x, fields::Collective::comm_seq),
                                     outcome.in_index >= 0, outcome.out_index >= 0});
    if (outcome.payload_differs && x.kind == RecordKind::Metric &&
        (!result_.metric ||
         std::tuple(g.step, x.seq) < std::tuple(result_.metric->step, result_.metric->seq_a))) {
      MetricDivergence m{result_.rank,
                         g.step,
                         g.stream,
                         std::string(pool_.text(x.name)),
                         occurrence_in_group(a_, g.a, i),
                         x.seq,
                         y.seq,
                         a_.field(x, fields::Metric::dtype_hint)};
      auto pa = a_.payload(x), pb = b_.payload(y);
      m.a.assign(pa.begin(), pa.end());
      m.b.assign(pb.begin(), pb.end());
      result_.metric = std::move(m);
    }
    const bool state = x.kind == RecordKind::State && outcome.out_index >= 0;
    if (state && (!result_.state || std::tuple(g.step, x.seq) <
                                        std::tuple(result_.state->step, result_.state->seq_a))) {
      const OpBuffer &fa = ba[outcome.out_index], &fb = bb[outcome.out_index_b];
      result_.state = StateDivergence{result_.rank,
                                      g.step,
                                      std::string(pool_.text(x.name)),
                                      a_.field(x, fields::State::state_kind),
                                      fa.bytes,
                                      x.seq,
                                      y.seq,
                                      fa.fingerprint,
                                      fb.fingerprint};
    }
    // A copy from host memory whose host source differs is where the difference entered.
    const bool host_input = outcome.in_index >= 0 && x.kind == RecordKind::Memcpy &&
                            pool_.text(ba[outcome.in_index].label) == trace::kHostSourceLabel;
    const bool receiver = outcome.in_index >= 0 && !host_input;
    if (!would_be_first(g.step, x.seq, 0)) {
      if (receiver && would_follow(g.step, x.seq)) {
        Divergence d = base(g, x, a_, g.a, i);
        d.seq_a = x.seq;
        d.seq_b = y.seq;
        d.anchor_seq = x.seq;
        d.classification = Classification::Receiver;
        d.buffer = buffer_diff(ba[outcome.in_index], bb[outcome.in_index_b], pool_);
        d.detail = fmt::format("input '{}' already differed", d.buffer->label);
        d.epoch = epoch_of(d.step, d.anchor_seq);
        keep_receiver(std::move(d));
      }
      return;
    }
    // A receiver that would be the rank's first divergence: no traced op before it diverged,
    // so no traced op of the window wrote the differing input. When the window starts after
    // the trace's first step, the difference was most likely made before it; else the bytes
    // were written by no traced op (see RankResult).
    const std::optional<uint32_t> made_before =
        receiver ? options_.window_first_step : std::nullopt;
    // A kernel's guessed region can hold bytes no traced op wrote (scratch, uninitialised
    // memory) that differ between identical runs: counted as unexplained, the earliest kept
    // (checked before building it: noisy traces have many); combine_ranks shows it when the
    // rank diverges anyway.
    const bool unexplained = receiver && kind_diff(x.kind).guessed_regions();
    if (unexplained) {
      ++result_.unexplained;
      if (result_.first_unexplained &&
          std::tuple(result_.first_unexplained->step, result_.first_unexplained->anchor_seq) <
              std::tuple(g.step, x.seq))
        return;
    }
    Divergence d = base(g, x, a_, g.a, i);
    d.seq_a = x.seq;
    d.seq_b = y.seq;
    d.anchor_seq = x.seq;
    const auto fields_b = b_.fields(y);
    d.fields_b.assign(fields_b.begin(), fields_b.end());
    if (host_input) {
      // A copy does not change bytes: what differs on the device came from the host.
      d.classification = Classification::HostInput;
      d.buffer = buffer_diff(ba[outcome.in_index], bb[outcome.in_index_b], pool_);
      d.detail = host_input_detail(g.step, d.name, d.buffer->bytes);
    } else if (receiver) {
      d.classification = Classification::Receiver;
      d.buffer = buffer_diff(ba[outcome.in_index], bb[outcome.in_index_b], pool_);
      d.made_before_step = made_before;
      if (made_before)
        d.detail = fmt::format(
            "receiver of a difference made before step {}: input '{}' already differed, no op "
            "of the window made it differ; start the window earlier",
            *made_before, d.buffer->label);
      else if (unexplained)
        d.detail = fmt::format(
            "input '{}' differed, but no traced op before it did: bytes no "
            "traced op wrote (scratch or uninitialised memory)",
            d.buffer->label);
      else
        d.detail = fmt::format("input '{}' already differed", d.buffer->label);
      if (unexplained) {
        if (!outcome.detail.empty()) d.detail += "; " + outcome.detail;
        d.epoch = epoch_of(d.step, d.anchor_seq);
        result_.first_unexplained = std::move(d);
        return;
      }
    } else if (state) {
      d.classification = Classification::State;
      d.buffer = buffer_diff(ba[outcome.out_index], bb[outcome.out_index_b], pool_);
      d.detail = fmt::format("state '{}' differs after step {}", d.name, d.step);
    } else if (outcome.out_index >= 0) {
      d.classification = Classification::Origin;
      d.buffer = buffer_diff(ba[outcome.out_index], bb[outcome.out_index_b], pool_);
      size_t inputs = std::count_if(ba.begin(), ba.end(), [](const OpBuffer& b) {
        return b.role == trace::Role::In && b.has_value();
      });
      d.detail = fmt::format("all {} input{} matched, output '{}' differs", inputs,
                             inputs == 1 ? "" : "s", d.buffer->label);
    } else {
      d.classification = Classification::Metric;
      d.detail = "payload differs";
    }
    if (!outcome.detail.empty()) d.detail += "; " + outcome.detail;
    note(std::move(d));
  }

  void compare_group(const Group& g) {
    // Fast path: the same ops in the same order (the common case), paired by position.
    bool positional = g.a.size() == g.b.size();
    for (size_t i = 0; positional && i < g.a.size(); ++i)
      positional = same_identity_head(a_, a_[g.a[i]], b_, b_[g.b[i]]);
    if (positional) {
      b_of_.resize(g.a.size());
      for (size_t i = 0; i < b_of_.size(); ++i) b_of_[i] = i;
      pair_thread_races(g, 0, b_of_);
      for (size_t i = 0; i < g.a.size(); ++i) compare_matched(g, i, b_of_[i]);
      return;
    }
    // Slow path: the longest common subsequence of identities (Myers' diff, a bounded number
    // of edits), so that one inserted or deleted op does not shift the pairing of the ops of
    // the same name after it. Beyond the bound, ops pair by identity (occurrence count).
    std::vector<uint64_t> ka = identity_keys(a_, g.a), kb = identity_keys(b_, g.b);
    std::vector<int64_t> match_of_a(ka.size(), -1), match_of_b(kb.size(), -1);
    if (!myers_align(ka, kb, kMaxEdits, match_of_a, match_of_b)) {
      std::fill(match_of_a.begin(), match_of_a.end(), -1);
      std::fill(match_of_b.begin(), match_of_b.end(), -1);
      occurrence_align(g, match_of_a, match_of_b);
    }
    // Stretches paired op for op (A's i.., B's j..): raced ops pair by content there too.
    for (size_t i = 0; i < ka.size();) {
      if (match_of_a[i] < 0) {
        ++i;
        continue;
      }
      size_t end = i + 1;
      while (end < ka.size() && match_of_a[end] == match_of_a[end - 1] + 1) ++end;
      std::vector<size_t> b_of(end - i);
      for (size_t k = 0; k < b_of.size(); ++k) b_of[k] = static_cast<size_t>(match_of_a[i]) + k;
      pair_thread_races(g, i, b_of);
      for (size_t k = 0; k < b_of.size(); ++k) {
        match_of_a[i + k] = static_cast<int64_t>(b_of[k]);
        match_of_b[b_of[k]] = static_cast<int64_t>(i + k);
      }
      i = end;
    }
    // An op only in A and one of the same identity only in B: the same op, moved.
    std::unordered_multimap<uint64_t, size_t> b_only;
    for (size_t j = 0; j < kb.size(); ++j)
      if (match_of_b[j] < 0) b_only.emplace(kb[j], j);
    std::vector<bool> moved_b(kb.size(), false);
    size_t b_after = 0;  // B position after the B op paired with the last paired A op
    for (size_t i = 0; i < ka.size(); ++i) {
      if (match_of_a[i] >= 0) {
        b_after = static_cast<size_t>(match_of_a[i]) + 1;
        compare_matched(g, i, static_cast<size_t>(match_of_a[i]));
        continue;
      }
      auto moved = b_only.find(ka[i]);
      if (moved != b_only.end()) {
        size_t j = moved->second;
        b_only.erase(moved);
        moved_b[j] = true;
        structural(g, StructuralKind::Reordered, i, j, true, true,
                   "at another place on the stream");
        continue;
      }
      structural(g, StructuralKind::Deleted, i, std::min(b_after, kb.size()), true, false,
                 "only in run A");
    }
    size_t a_after = 0;
    for (size_t j = 0; j < kb.size(); ++j) {
      if (match_of_b[j] >= 0) {
        a_after = static_cast<size_t>(match_of_b[j]) + 1;
        continue;
      }
      if (!moved_b[j])
        structural(g, StructuralKind::Inserted, a_after, j, false, true, "only in run B");
    }
  }

  // Back-to-back ops of one identity on one stream that several host threads issued (JAX's
  // transfer threads put a step's input copies on one stream in whichever order they get
  // there): their order is the threads' race, not the program's. Where run B holds the same
  // ops as run A in such a run, contents and all, in another order, they pair by content;
  // otherwise by position, as everywhere (a real difference is never paired away). The stretch
  // is paired op for op, A's positions a0.. with B's b_of[k]; b_of is rewritten where a run of
  // raced ops pairs by content.
  void pair_thread_races(const Group& g, size_t a0, std::vector<size_t>& b_of) const {
    const size_t n = b_of.size();
    auto at = [](const OpTable& t, Ids ids, size_t i) -> const Op& { return t[ids[i]]; };
    for (size_t start = 0; start < n;) {
      size_t end = start + 1;
      while (end < n &&
             same_identity_head(a_, at(a_, g.a, a0 + start), a_, at(a_, g.a, a0 + end)))
        ++end;
      const size_t first = start;
      start = end;
      if (end - first < 2) continue;
      bool several = false;
      for (size_t k = first + 1; k < end && !several; ++k)
        several = at(a_, g.a, a0 + k).thread != at(a_, g.a, a0 + first).thread ||
                  at(b_, g.b, b_of[k]).thread != at(b_, g.b, b_of[first]).thread;
      if (!several) continue;
      std::vector<uint64_t> ka, kb;
      std::vector<size_t> b_positions;
      for (size_t k = first; k < end; ++k) {
        ka.push_back(content_key(a_, at(a_, g.a, a0 + k)));
        kb.push_back(content_key(b_, at(b_, g.b, b_of[k])));
        b_positions.push_back(b_of[k]);
      }
      if (ka == kb) continue;
      std::vector<uint64_t> sa = ka, sb = kb;
      std::sort(sa.begin(), sa.end());
      std::sort(sb.begin(), sb.end());
      if (sa != sb) continue;
      std::vector<bool> taken(kb.size(), false);
      for (size_t i = 0; i < ka.size(); ++i)
        for (size_t j = 0; j < kb.size(); ++j)
          if (!taken[j] && kb[j] == ka[i]) {
            taken[j] = true;
            b_of[first + i] = b_positions[j];
            break;
          }
    }
  }

  // What an op is, apart from when and by whom: its kind, name, fields, buffers and payload.
  static uint64_t content_key(const OpTable& t, const Op& op) {
    uint64_t h = (static_cast<uint64_t>(op.kind) << 32) ^ op.name;
    auto mix = [&h](uint64_t v) { h = (h ^ v) * 0x100000001b3ull + (h >> 29); };
    for (uint64_t f : t.fields(op)) mix(f);
    for (const OpBuffer& b : t.buffers(op)) {
      mix(b.bytes), mix(b.fingerprint), mix(b.label);
      mix((static_cast<uint64_t>(b.role) << 16) | (static_cast<uint64_t>(b.dtype) << 8) | b.flags);
    }
    for (uint8_t byte : t.payload(op)) mix(byte);
    return h;
  }

  void occurrence_align(const Group& g, std::vector<int64_t>& match_of_a,
                        std::vector<int64_t>& match_of_b) const {
    std::vector<Identity> ida = identities(a_, g.a), idb = identities(b_, g.b);
    std::unordered_map<Identity, uint32_t, IdentityHash> b_position;
    b_position.reserve(idb.size());
    for (uint32_t j = 0; j < idb.size(); ++j) b_position.emplace(idb[j], j);
    for (size_t i = 0; i < ida.size(); ++i) {
      auto it = b_position.find(ida[i]);
      if (it == b_position.end()) continue;
      match_of_a[i] = it->second;
      match_of_b[it->second] = static_cast<int64_t>(i);
    }
  }

  const OpTable& a_;
  const OpTable& b_;
  const StringPool& pool_;
  const CompareOptions& options_;
  RankResult& result_;
  const std::unordered_map<uint32_t, std::vector<uint64_t>>* collective_seqs_ = nullptr;
  std::vector<size_t> b_of_;  // the positional path's pairing, reused from group to group
};

}  // namespace

void compare_window(const OpTable& a, const OpTable& b, const StringPool& pool,
                    const CompareOptions& options, RankResult& result) {
  WindowComparer(a, b, pool, options, result).run();
}

}  // namespace lockstep::tools
