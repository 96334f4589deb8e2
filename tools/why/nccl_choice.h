// NCCL's own choices for a collective in words (the Collective record's nccl_algo, nccl_proto and
// nccl_channels, from NCCL's profiler plugin: collectors/nccl_choices.h). The diff names both
// runs' choices where a collective's inputs matched and its outputs differed: "NCCL algorithm
// Ring vs Tree, protocol LL128 vs Simple", as gemm_config.h names a GEMM's algorithm parts.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>

namespace lockstep::tools {

struct NcclChoiceText {
  std::string algo, proto;  // "Ring", "LL128"; "" where that part was not recorded
  uint64_t channels = 0;    // 0: not recorded
};
// One run's choices from its record fields (trace::fields::Collective); nullopt when the record
// has none (an older trace, a job with its own profiler plugin, a one-rank communicator).
std::optional<NcclChoiceText> nccl_choice_of(std::span<const uint64_t> fields);

// "NCCL algorithm Ring vs Tree, protocol LL128 vs Simple, channels 2 vs 4": the parts recorded
// in both runs that differ; "" when none (equal, or not recorded in one of the runs).
std::string nccl_choice_difference(std::span<const uint64_t> a, std::span<const uint64_t> b);

// Collectives whose NCCL choices differed between the runs, whatever their results: reported
// after the environment, never in the verdict (another algorithm can give the same bits). The
// first in (step, rank, seq) order, and how many.
struct NcclChoiceNote {
  int rank = 0;
  uint32_t step = 0;
  std::string name;  // ncclAllReduce
  uint64_t comm_id = 0, comm_seq = 0, seq_a = 0, seq_b = 0;
  std::string difference;  // nccl_choice_difference's words
};
struct NcclChoiceNotes {
  uint64_t total = 0;
  std::optional<NcclChoiceNote> first;
  void add(NcclChoiceNote note);             // counts it; keeps the earliest
  void merge(const NcclChoiceNotes& other);  // another rank's
};

}  // namespace lockstep::tools
