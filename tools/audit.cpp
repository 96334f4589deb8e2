#include "tools/audit.h"

#include <algorithm>
#include <map>
#include <tuple>

#include <fmt/format.h>

namespace lockstep::tools {
namespace {

// Members of one class (equal fingerprints) of an operation that must agree, and what a
// disagreement among classes says: the largest class, when it alone is largest and holds more
// than one rank, is the majority; everyone else is a suspect.
template <class Entry>
struct Classes {
  std::map<uint64_t, std::vector<const Entry*>> by_value;

  void add(uint64_t value, const Entry* e) { by_value[value].push_back(e); }

  // Fills the finding's agreeing / suspects / values from the classes `disagreeing`.
  static void judge(const std::vector<std::pair<uint64_t, std::vector<const Entry*>>>& disagreeing,
                    AuditFinding& f) {
    size_t largest = 0, ties = 0;
    for (const auto& [value, members] : disagreeing) {
      if (members.size() > largest) {
        largest = members.size();
        ties = 1;
      } else if (members.size() == largest) {
        ++ties;
      }
    }
    f.majority = ties == 1 && largest > 1;
    for (const auto& [value, members] : disagreeing) {
      const bool agreed = f.majority && members.size() == largest;
      for (const Entry* e : members) {
        if (agreed) {
          f.agreeing.push_back(e->rank);
          f.agreed = value;
        } else {
          f.suspects.push_back(e->rank);
          f.values.emplace_back(e->rank, value);
        }
      }
    }
    std::sort(f.agreeing.begin(), f.agreeing.end());
    std::sort(f.suspects.begin(), f.suspects.end());
    std::sort(f.values.begin(), f.values.end());
  }
};

// Is this class a whole communicator instance, or several: comm_rank 0..nranks-1 the same
// number of times each?
bool whole_instances(const std::vector<const AuditCollective*>& members) {
  const uint64_t n = members.front()->nranks;
  if (n == 0 || members.size() % n != 0) return false;
  std::vector<size_t> seen(n, 0);
  for (const AuditCollective* c : members) {
    if (c->nranks != n || c->comm_rank >= n) return false;
    ++seen[c->comm_rank];
  }
  return std::all_of(seen.begin(), seen.end(),
                     [&](size_t k) { return k == members.size() / n; });
}

std::string op_text(const AuditOp& op) {
  return fmt::format("{} {} #{} stream {}", trace::record_kind_name(op.kind), op.name,
                     op.occurrence, op.stream);
}

}  // namespace

bool receives_the_same_bytes(std::string_view f) {
  // ReduceScatter and AllToAll give each rank its own part, Reduce only the root a result,
  // Send/Recv are point to point.
  return f.find("AllReduce") != std::string_view::npos ||
         f.find("AllGather") != std::string_view::npos ||
         f.find("Broadcast") != std::string_view::npos || f.find("Bcast") != std::string_view::npos;
}

std::vector<AuditFinding> audit_collectives(const std::vector<AuditCollective>& collectives,
                                            uint64_t* checked) {
  // One operation: communicator id and sequence, and what every rank's copy must share for the
  // receive buffers to be comparable at all.
  using Key = std::tuple<uint64_t, uint64_t, std::string, uint64_t, uint64_t>;
  std::map<Key, std::vector<const AuditCollective*>> ops;
  for (const AuditCollective& c : collectives) {
    if (!c.has_recv || !receives_the_same_bytes(c.name)) continue;
    ops[{c.comm_id, c.comm_seq, c.name, c.nranks, c.recv_bytes}].push_back(&c);
  }
  if (checked) *checked = ops.size();
  std::vector<AuditFinding> findings;
  for (const auto& [key, members] : ops) {
    if (members.size() < 2) continue;
    Classes<AuditCollective> classes;
    for (const AuditCollective* c : members) classes.add(c->recv, c);
    if (classes.by_value.size() == 1) continue;
    // Several instances of one id (groups of other ranks) each agree within themselves: a class
    // that is a whole instance is consistent. An unknown size makes one instance of all.
    const bool one_instance = members.front()->nranks == 0 ||
                              members.size() <= members.front()->nranks;
    std::vector<std::pair<uint64_t, std::vector<const AuditCollective*>>> disagreeing;
    for (const auto& [value, group] : classes.by_value)
      if (one_instance || !whole_instances(group)) disagreeing.emplace_back(value, group);
    if (disagreeing.empty()) continue;
    AuditFinding f;
    f.rule = AuditFinding::Rule::Collective;
    const auto& [comm_id, comm_seq, name, nranks, bytes] = key;
    f.op = fmt::format("collective {} comm {} #{}", name, comm_id, comm_seq);
    f.buffer = "recv";
    f.bytes = bytes;
    f.step = UINT32_MAX;
    for (const AuditCollective* c : members) f.step = std::min(f.step, c->step);
    Classes<AuditCollective>::judge(disagreeing, f);
    findings.push_back(std::move(f));
  }
  std::stable_sort(findings.begin(), findings.end(),
                   [](const AuditFinding& x, const AuditFinding& y) { return x.step < y.step; });
  return findings;
}

void number_occurrences(std::vector<AuditOp>& ops) {
  std::sort(ops.begin(), ops.end(),
            [](const AuditOp& x, const AuditOp& y) { return x.seq < y.seq; });
  std::map<std::tuple<uint32_t, trace::RecordKind, std::string>, uint32_t> seen;
  for (AuditOp& op : ops) op.occurrence = ++seen[{op.stream, op.kind, op.name}];
}

std::vector<AuditFinding> audit_replicas(const std::vector<std::vector<AuditOp>>& ranks,
                                         uint64_t* checked) {
  using Key = std::tuple<uint32_t, trace::RecordKind, std::string, uint32_t>;
  std::map<Key, std::vector<const AuditOp*>> aligned;
  for (const std::vector<AuditOp>& ops : ranks)
    for (const AuditOp& op : ops) {
      if (op.kind != trace::RecordKind::Kernel && op.kind != trace::RecordKind::Gemm &&
          op.kind != trace::RecordKind::Memcpy && op.kind != trace::RecordKind::Memset)
        continue;  // collectives have their own rule; the rest have no outputs to agree on
      aligned[{op.stream, op.kind, op.name, op.occurrence}].push_back(&op);
    }
  std::vector<AuditFinding> findings;
  uint64_t compared = 0;
  for (const auto& [key, copies] : aligned) {
    if (copies.size() < 2) continue;
    // Replicas of one op: the same fields, buffer shapes and input fingerprints (all taken).
    std::map<std::vector<uint64_t>, std::vector<const AuditOp*>> replicas;
    for (const AuditOp* op : copies) {
      std::vector<uint64_t> signature = op->fields;
      size_t inputs = 0;
      bool usable = true;
      for (const AuditBuffer& b : op->buffers) {
        signature.push_back(std::hash<std::string>()(b.label) ^ static_cast<uint64_t>(b.role));
        signature.push_back(b.bytes);
        if (b.role != trace::Role::In) continue;
        usable = usable && b.valid;
        signature.push_back(b.fingerprint);
        ++inputs;
      }
      if (!usable || (inputs == 0 && op->kind != trace::RecordKind::Memset)) continue;
      replicas[signature].push_back(op);
    }
    const bool guessed = trace::kind_diff(std::get<1>(key)).guessed_regions();
    for (const auto& [signature, group] : replicas) {
      if (group.size() < 2) continue;
      const AuditOp& first = *group.front();
      bool counted = false;
      for (size_t i = 0; i < first.buffers.size(); ++i) {
        const AuditBuffer& out = first.buffers[i];
        if (out.role != trace::Role::Out) continue;
        // A guessed region runs to the end of its allocation: only one that was the same
        // before the op (its same-label input, equal on every replica here) says the op wrote
        // different bytes.
        if (guessed && std::none_of(first.buffers.begin(), first.buffers.end(),
                                    [&](const AuditBuffer& b) {
                                      return b.role == trace::Role::In && b.label == out.label;
                                    }))
          continue;
        Classes<AuditOp> classes;
        for (const AuditOp* op : group)
          if (op->buffers[i].valid) classes.add(op->buffers[i].fingerprint, op);
        if (!counted && !classes.by_value.empty()) ++compared, counted = true;
        if (classes.by_value.size() < 2) continue;
        AuditFinding f;
        f.rule = AuditFinding::Rule::Replica;
        f.op = op_text(first);
        f.step = first.step;
        f.buffer = out.label;
        f.bytes = out.bytes;
        std::vector<std::pair<uint64_t, std::vector<const AuditOp*>>> all(
            classes.by_value.begin(), classes.by_value.end());
        Classes<AuditOp>::judge(all, f);
        findings.push_back(std::move(f));
        break;  // one finding per op: its first differing output
      }
    }
  }
  if (checked) *checked = compared;
  return findings;
}

}  // namespace lockstep::tools
