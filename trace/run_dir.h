// One directory per run: a manifest.json written once by the first process, and one trace file
// per process (rank-00003.lstrace, or host-<host>-pid-<pid>.lstrace without a rank).
// Many processes of one run share the directory; a process of another run is refused unless
// overwrite is asked for.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "trace/header.h"
#include "trace/writer.h"

namespace lockstep::trace {

struct RunDirOptions {
  std::string dir;         // LOCKSTEP_DIR
  std::string run_id;      // empty: run_id_from_env()
  bool overwrite = false;  // LOCKSTEP_OVERWRITE=1: replace another run's traces
};

// LOCKSTEP_RUN_ID, else the launcher's job identity (TORCHELASTIC_RUN_ID, SLURM job.step),
// else "host:<host>:ppid:<ppid>" (the processes one launcher started on one host).
std::string run_id_from_env();

// Creates the directory if needed and checks or writes its manifest. Returns false and sets
// *error (one line) when the directory belongs to another run or cannot be used.
bool prepare_run_dir(const RunDirOptions& options, std::string* error);

// File names for this process: rank-00003.lstrace when a rank is known, else the host/pid name.
std::string rank_trace_name(int rank);
std::string host_pid_trace_name(const std::string& host, long pid);

// prepare_run_dir, then TraceWriter::open on this process's name (O_EXCL); if that name is
// taken, on the host/pid name. writer_options.path is ignored. The file's JSON header is
// `header` plus "run_id": the run's id, as in the manifest.
std::unique_ptr<TraceWriter> open_run_writer(const RunDirOptions& options,
                                             WriterOptions writer_options,
                                             const nlohmann::json& header, std::string* error);

// The manifest of a run directory, or nullopt (absent or unreadable).
std::optional<nlohmann::json> read_manifest(const std::string& dir);

// Trace files of a run directory: rank files in rank order, then the others by name.
struct TraceFileEntry {
  std::string path;
  std::optional<int> rank;  // from the file name
};
std::vector<TraceFileEntry> list_trace_files(const std::string& dir);

}  // namespace lockstep::trace
