// Every environment variable lockstep reads, in one place. The shim reads them; `lockstep run`
// sets them. README.md's configuration table is written from this list.
#pragma once

namespace lockstep::env {

inline constexpr const char* kDir = "LOCKSTEP_DIR";                 // trace directory
inline constexpr const char* kLevel = "LOCKSTEP_LEVEL";             // off|metrics|broad|full
inline constexpr const char* kSteps = "LOCKSTEP_STEPS";             // A-B: fingerprint window
inline constexpr const char* kKernels = "LOCKSTEP_KERNELS";         // regex filter on names
inline constexpr const char* kMaxRegion = "LOCKSTEP_MAX_REGION";    // bytes cap per pointer region
inline constexpr const char* kMetricBytes = "LOCKSTEP_METRIC_BYTES";  // D2H copies <= this: metric
inline constexpr const char* kStepOn = "LOCKSTEP_STEP_ON";          // step pattern
inline constexpr const char* kDebug = "LOCKSTEP_DEBUG";             // 1: log to stderr; 2: + phase times
inline constexpr const char* kRunId = "LOCKSTEP_RUN_ID";            // shared by a run's processes
inline constexpr const char* kOverwrite = "LOCKSTEP_OVERWRITE";     // 1: reuse a non-empty dir
inline constexpr const char* kFailHard = "LOCKSTEP_FAIL_HARD";      // 1: abort instead of untraced
inline constexpr const char* kMemory = "LOCKSTEP_MEMORY";           // writer memory budget, bytes
inline constexpr const char* kHashMemory = "LOCKSTEP_HASH_MEMORY";  // hash engine device memory
inline constexpr const char* kValidate = "LOCKSTEP_VALIDATE";       // 1: CUPTI coverage check
inline constexpr const char* kMergeHashes = "LOCKSTEP_MERGE_HASHES";  // 1, adjacent, 0
inline constexpr const char* kReuseDigests = "LOCKSTEP_REUSE_DIGESTS";  // 0: hash every input again
inline constexpr const char* kSkipUnwritten = "LOCKSTEP_SKIP_UNWRITTEN";  // 1: fresh inputs unhashed
inline constexpr const char* kLearnReadOnly = "LOCKSTEP_LEARN_READONLY";  // 0: hash every kernel output
inline constexpr const char* kRecallFills = "LOCKSTEP_RECALL_FILLS";  // 0: hash every fill's output

// Rank discovery, first hit wins.
inline constexpr const char* kRankVars[] = {"RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID",
                                            "PMI_RANK"};
inline constexpr const char* kWorldSizeVars[] = {"WORLD_SIZE", "OMPI_COMM_WORLD_SIZE",
                                                 "SLURM_NTASKS", "PMI_SIZE"};
inline constexpr const char* kLocalRankVars[] = {"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK",
                                                 "SLURM_LOCALID", "MPI_LOCALRANKID"};

}  // namespace lockstep::env
