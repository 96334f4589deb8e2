// The names of the environment variables lockstep reads (env::kDir = "LOCKSTEP_DIR", ...), from
// the one table of settings, settings.def (defaults, parsers and help are in settings.h).
#pragma once

namespace lockstep::env {

#define LOCKSTEP_SETTING(id, name, default_text, kind, flag, help) \
  inline constexpr const char* k##id = name;
#include "common/settings.def"
#undef LOCKSTEP_SETTING

// Rank discovery, first hit wins.
inline constexpr const char* kRankVars[] = {"RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID",
                                            "PMI_RANK"};
inline constexpr const char* kWorldSizeVars[] = {"WORLD_SIZE", "OMPI_COMM_WORLD_SIZE",
                                                 "SLURM_NTASKS", "PMI_SIZE"};
inline constexpr const char* kLocalRankVars[] = {"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK",
                                                 "SLURM_LOCALID", "MPI_LOCALRANKID"};

// Variables that change what a GPU job computes, recorded in the trace header when set (with
// those LOCKSTEP_RECORD_ENV matches) so that `lockstep diff` shows where two runs differ in them.
inline constexpr const char* kNumericsVars[] = {
    "CUBLAS_WORKSPACE_CONFIG",  // cuBLAS's workspace: ":4096:8" makes its GEMMs reproducible
    "CUBLASLT_WORKSPACE_SIZE",  // cuBLASLt's workspace limit (algorithms with split-K need one)
    "NVIDIA_TF32_OVERRIDE",     // 0 forbids TF32 in cuBLAS and cuDNN whatever the job asks
    "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE",  // 1: PyTorch's float32 GEMMs in TF32
    "NCCL_ALGO",
    "NCCL_PROTO",  // the reduction's order across ranks
    "NCCL_MIN_NCHANNELS",
    "NCCL_MAX_NCHANNELS",
    "NCCL_NTHREADS",
    "XLA_FLAGS",                // --xla_gpu_deterministic_ops, autotuning
    "PYTORCH_CUDA_ALLOC_CONF",  // placement: uninitialised memory, expandable segments
    "CUDA_VISIBLE_DEVICES",     // which GPUs (and so which models) the job sees
};
// Launchers' variables for the ranks on one node: the layout of the world across nodes.
inline constexpr const char* kLocalWorldSizeVars[] = {
    "LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE", "SLURM_NTASKS_PER_NODE", "MPI_LOCALNRANKS"};

}  // namespace lockstep::env
