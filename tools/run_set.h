// A run on disk: the directory `lockstep run` wrote (one .lstrace file per process), or a single
// trace file. Finds each file's rank and the world size from the JSON headers and checks that
// the set is complete.
#pragma once

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

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
};

struct RunSet {
  std::string path;
  int world_size = 0;
  std::vector<RankFile> files;        // sorted by rank
  std::vector<int> missing_ranks;     // ranks of the world size with no file
  std::vector<std::string> warnings;  // e.g. files without a rank in their header

  const RankFile* find(int rank) const;
  // Throws InputError naming the first missing rank.
  void require_complete() const;
};

// Throws InputError (no traces, two files for one rank, disagreeing world sizes) or
// trace::TraceError (a file that is not a trace or is of a newer format version).
RunSet open_run_set(const std::string& path);

// Header accessors tolerant to absent keys.
int header_int(const nlohmann::json& header, const char* key, int fallback);
std::string header_string(const nlohmann::json& header, const char* key);

}  // namespace lockstep::tools
