// The replay verdict (issue #30): was the culprit kernel nondeterministic on identical inputs?
// Read from the Replay record a run with LOCKSTEP_REPLAY wrote (collectors/replay.h): the
// digests of the job's own launch and of each relaunch from the same snapshot. A replay differs
// when any of its region digests differs from the job's launch; a replay whose digests did not
// all arrive is not compared. `lockstep hunt` (stage 4) and `lockstep replay` print it under the
// culprit, in text and JSON (tools/README.md).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/op_spec.h"
#include "trace/record.h"

namespace lockstep::tools {

struct ReplayVerdict {
  enum class Outcome {
    Nondeterministic,  // a replay's output differs from the job's own launch
    Deterministic,     // every replay asked for was compared, none differs
    Incomplete,        // none differs, but not every replay could be compared
    Refused,           // the shim did not replay it: `reason` says why
    NotFound,          // the replay run holds no Replay record: `reason` says why
  };
  Outcome outcome = Outcome::NotFound;
  uint32_t replays = 0;    // asked for (LOCKSTEP_REPLAYS)
  uint32_t compared = 0;   // replays whose every digest arrived
  uint32_t differing = 0;  // of those, differing from the job's launch
  uint32_t distinct = 0;   // distinct outputs among the job's launch and the compared replays
  uint32_t regions = 0;
  uint64_t region_bytes = 0;
  std::vector<std::string> differing_regions;  // labels ("arg0") of regions any replay changed
  std::string reason;
  std::string run;  // the directory of the replay run
};

// The verdict of one Replay record; `label` turns a buffer label id into its text.
ReplayVerdict replay_verdict(const trace::Record& replay,
                             const std::function<std::string(trace::StringId)>& label);

// The first Replay record in trace step `step` of `rank` in the run at `dir` (a process writes
// at most one), or a NotFound verdict saying why.
ReplayVerdict read_replay_verdict(const std::string& dir, int rank, uint32_t step);

const char* replay_outcome_name(ReplayVerdict::Outcome outcome);  // "nondeterministic", ...
// One line: "nondeterministic on identical inputs: 11 of 16 replays differ (arg0)", ...
std::string replay_verdict_text(const ReplayVerdict& verdict);
nlohmann::json replay_verdict_json(const ReplayVerdict& verdict);

// Why `op` cannot be replayed (a kind other than kernel), or nullopt.
std::optional<std::string> replay_refusal(const settings::OpSpec& op);

}  // namespace lockstep::tools
