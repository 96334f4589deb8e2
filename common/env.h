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

}  // namespace lockstep::env
