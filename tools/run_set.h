// A run on disk: the directory `lockstep run` wrote (one .lstrace file per process), or a single
// trace file. Finds each file's rank and the world size from the JSON headers and checks that
// the set is complete and of one run (the manifest's run id, every header's run id). Every file
// is checked block by block first (integrity.h): a corrupt block stops the command, naming file
// and offset, unless the user asked to salvage (then the valid prefix before it is read).
#pragma once

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tools/integrity.h"
#include "trace/reader.h"

namespace lockstep::tools {

// Bad input the user must fix: one line, "PATH: problem". Exit code 2.
struct InputError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct RankFile {
  int rank = 0;
  std::string path;
  nlohmann::json header;
  FileIntegrity integrity;
  std::string read_path;  // what to open: `path`, or a copy of its prefix before a corrupt block
  bool salvaged = false;
  std::unique_ptr<trace::TraceReader> open() const { return trace::TraceReader::open(read_path); }
};

struct OpenOptions {
  bool salvage = false;          // --salvage: read the prefix before a corrupt block
  bool corrupt_is_error = true;  // false: verify reports corruption itself
};

struct RunSet {
  std::string path;
  int world_size = 0;
  std::vector<RankFile> files;        // sorted by rank
  std::vector<int> missing_ranks;     // ranks of the world size with no file
  std::vector<std::string> warnings;  // e.g. files without a rank in their header
  std::string run_id;                 // the manifest's (else the headers'); empty if none says
  std::shared_ptr<void> salvage_dir;  // holds the salvaged copies while the RunSet lives

  const RankFile* find(int rank) const;
  // Throws InputError naming the first missing rank.
  void require_complete() const;
};

// Throws InputError (no traces, two files for one rank, disagreeing world sizes, an absurd world
// size or rank, files of two runs, a file that is not a regular file, a corrupt block unless
// salvaging) or trace::TraceError (a file that is not a trace or is of a newer format version).
RunSet open_run_set(const std::string& path, const OpenOptions& options = {});

// Header accessors tolerant to absent keys.
int header_int(const nlohmann::json& header, const char* key, int fallback);
std::string header_string(const nlohmann::json& header, const char* key);

}  // namespace lockstep::tools
