#include "tools/replay_verdict.h"

#include <algorithm>
#include <exception>
#include <memory>
#include <set>

#include <fmt/format.h>

#include "tools/record_text.h"
#include "tools/run_set.h"
#include "trace/reader.h"

namespace lockstep::tools {

ReplayVerdict replay_verdict(const trace::Record& replay,
                             const std::function<std::string(trace::StringId)>& label) {
  using F = trace::fields::Replay;
  ReplayVerdict v;
  v.replays = static_cast<uint32_t>(replay.fields[F::replays]);
  v.regions = static_cast<uint32_t>(replay.fields[F::regions]);
  v.region_bytes = replay.fields[F::region_bytes];
  v.reason.assign(replay.payload.begin(), replay.payload.end());
  if (replay.fields[F::outcome] != 0) {
    v.outcome = ReplayVerdict::Outcome::Refused;
    return v;
  }
  const size_t n = v.regions;
  if (n == 0 || replay.buffers.size() < n) {
    v.outcome = ReplayVerdict::Outcome::Incomplete;
    if (v.reason.empty()) v.reason = "the record holds no digest of the job's own launch";
    return v;
  }
  auto digests = [&](size_t pass, std::vector<uint64_t>* out) {
    out->clear();
    for (size_t i = 0; i < n; ++i) {
      const trace::BufferFingerprint& b = replay.buffers[pass * n + i];
      if (!(b.flags & trace::kFingerprintValid)) return false;
      out->push_back(b.fingerprint);
    }
    return true;
  };
  std::vector<uint64_t> job, other;
  if (!digests(0, &job)) {
    v.outcome = ReplayVerdict::Outcome::Incomplete;
    if (v.reason.empty()) v.reason = "the digests of the job's own launch did not arrive";
    return v;
  }
  std::set<std::vector<uint64_t>> seen{job};
  std::vector<bool> region_differs(n, false);
  const size_t passes = replay.buffers.size() / n;
  for (size_t pass = 1; pass < passes; ++pass) {
    if (!digests(pass, &other)) continue;
    ++v.compared;
    seen.insert(other);
    if (other == job) continue;
    ++v.differing;
    for (size_t i = 0; i < n; ++i) region_differs[i] = region_differs[i] || other[i] != job[i];
  }
  v.distinct = static_cast<uint32_t>(seen.size());
  for (size_t i = 0; i < n; ++i)
    if (region_differs[i]) v.differing_regions.push_back(label(replay.buffers[i].label));
  if (v.differing > 0)
    v.outcome = ReplayVerdict::Outcome::Nondeterministic;
  else if (v.compared == v.replays && v.replays > 0)
    v.outcome = ReplayVerdict::Outcome::Deterministic;
  else
    v.outcome = ReplayVerdict::Outcome::Incomplete;
  return v;
}

ReplayVerdict read_replay_verdict(const std::string& dir, int rank, uint32_t step) {
  ReplayVerdict v;
  v.run = dir;
  try {
    RunSet run = open_run_set(dir, OpenOptions{});
    const RankFile* file = run.find(rank);
    if (file == nullptr) {
      v.reason = fmt::format("the replay run holds no rank {}", rank);
      return v;
    }
    std::unique_ptr<trace::TraceReader> reader = file->open();
    bool found = false;
    for_each_record_in_seq_order(*reader, step, step, [&](const trace::Record& r) {
      if (r.kind != trace::RecordKind::Replay) return true;
      v = replay_verdict(r, [&](trace::StringId id) { return std::string(reader->string(id)); });
      v.run = dir;
      found = true;
      return false;
    });
    if (!found)
      v.reason = fmt::format(
          "the replay run recorded no replay in step {} (the launch was not found there: the "
          "runs' steps or streams differ, or the job ended first)",
          step);
  } catch (const std::exception& e) {
    v.outcome = ReplayVerdict::Outcome::NotFound;
    v.reason = fmt::format("the replay run cannot be read ({})", e.what());
  }
  return v;
}

const char* replay_outcome_name(ReplayVerdict::Outcome outcome) {
  switch (outcome) {
    case ReplayVerdict::Outcome::Nondeterministic:
      return "nondeterministic";
    case ReplayVerdict::Outcome::Deterministic:
      return "deterministic";
    case ReplayVerdict::Outcome::Incomplete:
      return "incomplete";
    case ReplayVerdict::Outcome::Refused:
      return "refused";
    case ReplayVerdict::Outcome::NotFound:
      return "not-found";
  }
  return "not-found";
}

std::string replay_verdict_text(const ReplayVerdict& v) {
  auto joined = [](const std::vector<std::string>& labels) {
    std::string out;
    for (const std::string& l : labels) out += (out.empty() ? "" : ", ") + l;
    return out;
  };
  switch (v.outcome) {
    case ReplayVerdict::Outcome::Nondeterministic: {
      std::string line = fmt::format(
          "nondeterministic on identical inputs: {} of {} replays differ", v.differing, v.compared);
      if (v.compared < v.replays)
        line += fmt::format(" ({} of {} replays could be compared)", v.compared, v.replays);
      if (!v.differing_regions.empty())
        line +=
            fmt::format(" (in {}; {} distinct outputs)", joined(v.differing_regions), v.distinct);
      return line;
    }
    case ReplayVerdict::Outcome::Deterministic:
      return fmt::format(
          "deterministic on identical inputs in {} replays: the difference needs another cause "
          "(an input no traced op wrote, concurrency with another stream, the environment)",
          v.compared);
    case ReplayVerdict::Outcome::Incomplete:
      return fmt::format(
          "replay incomplete: no difference in the {} of {} replays that could be compared, too "
          "few to say{}",
          v.compared, v.replays, v.reason.empty() ? "" : " (" + v.reason + ")");
    case ReplayVerdict::Outcome::Refused:
      return "not replayed: " + v.reason;
    case ReplayVerdict::Outcome::NotFound:
      return "not replayed: " + v.reason;
  }
  return {};
}

nlohmann::json replay_verdict_json(const ReplayVerdict& v) {
  return {{"verdict", replay_outcome_name(v.outcome)},
          {"text", replay_verdict_text(v)},
          {"replays", v.replays},
          {"compared", v.compared},
          {"differing", v.differing},
          {"distinct", v.distinct},
          {"regions", v.regions},
          {"region_bytes", v.region_bytes},
          {"differing_regions", v.differing_regions},
          {"reason", v.reason.empty() ? nlohmann::json(nullptr) : nlohmann::json(v.reason)},
          {"run", v.run}};
}

std::optional<std::string> replay_refusal(const settings::OpSpec& op) {
  if (op.kind == "kernel") return std::nullopt;
  if (op.kind == "gemm")
    return "a GEMM's kernels run inside cuBLAS/cuBLASLt, whose arguments hide its regions (TMA "
           "descriptors): only kernel ops are replayed";
  if (op.kind == "collective")
    return "an NCCL collective: a relaunch would wait for its peers (NCCL kernels are not "
           "replayed)";
  if (op.kind == "graph") return "a CUDA graph launch: graph launches are not replayed";
  return "a " + op.kind + " op: only kernel ops are replayed";
}

}  // namespace lockstep::tools
