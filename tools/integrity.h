// What can be trusted in one trace file before any command reads it: that it is a regular file
// (a FIFO or device would block or never end), where its blocks stop being sound (a corrupt
// block, a cut-off tail), whether the writer finished it (its end record), and for an unfinished
// file the last step whose records all survived. A verdict (diff, check, verify) covers only
// what this says is there.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "trace/reader.h"

namespace lockstep::tools {

// Throws InputError unless `path` is a regular file. Opens it with O_NONBLOCK, so a FIFO with
// no writer is refused at once instead of hanging the command.
void require_regular_file(const std::string& path);

struct FileIntegrity {
  std::string path;
  uint64_t size = 0;
  bool truncated = false;  // a cut-off tail (a partial block at the end)
  uint64_t truncation_offset = 0;
  std::optional<uint64_t> corrupt_offset;  // the first block that fails its checks
  std::string corruption;                  // "FILE: problem at offset N"
  bool end_block = false;                  // an End block is present (and is the last block)
  // A finished, unbroken file: its end record is there and nothing before it is cut or corrupt.
  bool whole() const { return end_block && !truncated && !corrupt_offset; }
};

// Walks every block header and checks every block's checksum (one sequential read, no
// decoding). Throws trace::TraceError only for a file whose header is not a trace's.
FileIntegrity check_file(const std::string& path);

// The end record of an opened file, nullopt when the writer did not finish.
std::optional<trace::TraceEnd> end_of(trace::TraceReader& reader);

// For a file that is not whole: the last step that has a summary and whose records all made it
// into the readable prefix, counted by decoding the record blocks of that step (blocks span
// several steps, so block headers alone cannot tell). -1: no such step.
int64_t last_complete_step(trace::TraceReader& reader);

}  // namespace lockstep::tools
