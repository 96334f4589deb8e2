// The one-run audit's rules (`lockstep audit DIR`, issue #31): what must agree across the ranks
// of a single run, on in-memory values only (tools/commands/audit.cpp reads the traces).
//
// Collectives: an all-reduce, all-gather or broadcast leaves the same bytes in the receive
// buffer of every rank of its communicator, so their recv fingerprints must be equal. The ranks
// of one operation are those with the same communicator id and sequence number; several
// communicators can share an id (groups created one per set of ranks: the k-th creation on each
// process), so a fingerprint shared by a whole instance (comm_rank 0..nranks-1, once each) is
// consistent, and only ranks in a class that is not a whole instance are suspects: the minority
// in a disagreeing group, or every rank of it when no value has a majority (two ranks).
//
// Replicas (traces at level full): ops that stand at the same place on several ranks (step,
// stream, kind, name, occurrence, equal fields and buffer shapes) and whose inputs were all equal
// on those ranks must have equal outputs there: the data-parallel replicas after their gradient
// all-reduce (the optimizer's update). Guessed regions (a kernel's pointer to the end of its
// allocation) are compared only where the same-label input region was equal too: the bytes
// were the same before the op and differ after it, so the op itself computed differently.
//
// A rank whose output differs while its inputs agree is a suspected hardware or silent data
// corruption fault: nothing in the job's code can make replicas of one op disagree.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "trace/record.h"

namespace lockstep::tools {

// One rank's collective, as the collectives rule needs it.
struct AuditCollective {
  int rank = 0;
  uint32_t step = 0;
  uint64_t seq = 0;
  std::string name;  // the NCCL function
  uint64_t comm_id = 0, comm_seq = 0, nranks = 0, comm_rank = 0;
  uint64_t recv_bytes = 0;
  bool has_recv = false;  // a recv fingerprint was taken
  uint64_t recv = 0;
};

// Does the rule apply to this NCCL function (every rank receives the same bytes)?
bool receives_the_same_bytes(std::string_view nccl_function);

// One rank's op, as the replicas rule needs it (names and labels as text: several files).
struct AuditBuffer {
  trace::Role role = trace::Role::In;
  std::string label;
  uint64_t bytes = 0;
  bool valid = false;
  uint64_t fingerprint = 0;
};
struct AuditOp {
  int rank = 0;
  uint32_t step = 0;
  uint64_t seq = 0;
  uint32_t stream = 0;
  trace::RecordKind kind = trace::RecordKind::Kernel;
  std::string name;
  uint32_t occurrence = 0;        // of (kind, name) on the stream in the step, from 1
  std::vector<uint64_t> fields;   // the kind's fields, volatile ones zeroed
  std::vector<AuditBuffer> buffers;
};
// The ops of one rank's step in seq order, with their occurrences numbered.
void number_occurrences(std::vector<AuditOp>& ops);

struct AuditFinding {
  enum class Rule { Collective, Replica };
  Rule rule = Rule::Collective;
  std::vector<int> suspects;  // ranks whose output differs (all of a disagreement with no majority)
  std::vector<int> agreeing;  // ranks that agree with each other (the majority)
  bool majority = false;      // true: the suspects differ from a majority; false: none stands out
  uint32_t step = 0;
  std::string op;             // "collective ncclAllReduce comm 1 #12", "kernel adam #1 stream 1"
  std::string buffer;         // the output that differs: "recv", "D", "arg1"
  uint64_t bytes = 0;
  uint64_t agreed = 0;        // the majority's fingerprint (majority only)
  std::vector<std::pair<int, uint64_t>> values;  // each suspect's fingerprint
};

// Checks the collectives of a run (every rank, any order).
std::vector<AuditFinding> audit_collectives(const std::vector<AuditCollective>& collectives,
                                            uint64_t* checked = nullptr);

// Checks one step: ops[r] holds one rank's ops of that step (number_occurrences done).
// `checked`: the replica groups (an op on two ranks or more) with an output compared.
std::vector<AuditFinding> audit_replicas(const std::vector<std::vector<AuditOp>>& ranks,
                                         uint64_t* checked = nullptr);

}  // namespace lockstep::tools
