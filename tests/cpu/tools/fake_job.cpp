// A stand-in for a traced training job, for the tests of `lockstep run/check/hunt`: like a
// launcher it starts FAKE_JOB_WORLD rank processes (RANK/WORLD_SIZE set), and each writes its
// trace the way the shim would (LOCKSTEP_DIR, LOCKSTEP_RUN_ID, LOCKSTEP_LEVEL, LOCKSTEP_STEPS).
// Like a real job it prints: a line on stdout that looks like JSON, and one on stderr.
//   FAKE_JOB_PLANT=kind:rank:step:index  plant a divergence (kind: output|insert|delete|metric|
//                                        weights: the step's first kernel writes other weights),
//                                        or a fault of one rank (received: its all-reduce result)
//   FAKE_JOB_WEIGHTS_FEED_FROM=n         a weight tensor that feeds the values from step n on
//                                        (synth::Spec::weights: bf16 hides it until then)
//   FAKE_JOB_STATE=1                     a State record per rank and step (as the shim's hook)
//   FAKE_JOB_TOGGLE=path                 plant it only every other run (the file flips)
//   FAKE_JOB_EXPECT_PRELOAD=text         exit 3 unless LD_PRELOAD contains text
//   LOCKSTEP_REPLAY=op                   a Replay record after that kernel launch, as the shim
//                                        writes one (LOCKSTEP_REPLAYS relaunches, 16 by default)
//   FAKE_JOB_REPLAY_DIFFERING=k          ... k of them differing from the job's launch
//   FAKE_JOB_REPLAY_REFUSED=why          ... refused, with that reason
//   FAKE_JOB_EXIT=n                      exit code;  FAKE_JOB_SIGNAL=n: kill itself with n
//   FAKE_JOB_NUMBERED=1                  number its steps (trace step 0 is set-up); then it
//                                        follows `lockstep check --resume-at`'s contract:
//                                        LOCKSTEP_RESUME_AT=K and LOCKSTEP_CHECKPOINT=FILE (or
//                                        arguments --checkpoint FILE): no FILE, it runs straight
//                                        and writes FILE; FILE there, it resumes at step K
//   FAKE_JOB_NO_CHECKPOINT=1             ... but never writes FILE
//   FAKE_JOB_RESTORE_DIFFERS=1           ... and its restore loads another state
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include <sys/wait.h>
#include <unistd.h>

#include "common/op_spec.h"
#include "tools/launch.h"
#include "tools/synth/synthetic_trace.h"

namespace synth = lockstep::tools::synth;

static std::string env_or(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v ? v : fallback;
}

int main(int argc, char** argv) {
  std::string expect = env_or("FAKE_JOB_EXPECT_PRELOAD", "");
  if (!expect.empty() && env_or("LD_PRELOAD", "").find(expect) == std::string::npos) return 3;
  int exit_code = std::atoi(env_or("FAKE_JOB_EXIT", "0").c_str());
  if (int sig = std::atoi(env_or("FAKE_JOB_SIGNAL", "0").c_str())) raise(sig);
  std::printf("{\"fake_job\": \"training\", \"loss\": 4.0}\n");
  std::fprintf(stderr, "fake_job: a warning on stderr\n");
  std::fflush(stdout);
  std::string dir = env_or("LOCKSTEP_DIR", "");
  if (dir.empty()) return exit_code;

  synth::Spec spec;
  spec.world_size = std::atoi(env_or("FAKE_JOB_WORLD", "2").c_str());
  spec.steps = std::atoi(env_or("FAKE_JOB_STEPS", "6").c_str());
  spec.level = env_or("LOCKSTEP_LEVEL", "full");
  spec.state = env_or("FAKE_JOB_STATE", "0") == "1";
  spec.stacks = !env_or("LOCKSTEP_STACKS", "").empty();  // every kernel's, as a broad regex would
  // Module scopes, as the PyTorch hooks give them when LOCKSTEP_SCOPES asks (hunt sets it).
  spec.scopes = env_or("LOCKSTEP_SCOPES", "0") == "1";
  if (std::string feed = env_or("FAKE_JOB_WEIGHTS_FEED_FROM", ""); !feed.empty()) {
    spec.weights = true;
    spec.weights_feed_from = static_cast<uint32_t>(std::atoi(feed.c_str()));
  }
  if (std::string op = env_or("LOCKSTEP_REPLAY", ""); !op.empty()) {
    spec.replay = lockstep::settings::parse_op_spec(op);
    if (!spec.replay) return 4;
    spec.replays = static_cast<uint32_t>(std::atoi(env_or("LOCKSTEP_REPLAYS", "16").c_str()));
    spec.replay_differing =
        static_cast<uint32_t>(std::atoi(env_or("FAKE_JOB_REPLAY_DIFFERING", "0").c_str()));
    spec.replay_refused = env_or("FAKE_JOB_REPLAY_REFUSED", "");
  }
  if (std::string steps = env_or("LOCKSTEP_STEPS", ""); !steps.empty())
    lockstep::tools::parse_step_range(steps, "LOCKSTEP_STEPS", spec.fp_first_step,
                                      spec.fp_last_step);
  bool plant = true;
  if (std::string toggle = env_or("FAKE_JOB_TOGGLE", ""); !toggle.empty()) {
    plant = std::filesystem::exists(toggle);
    if (plant)
      std::filesystem::remove(toggle);
    else
      std::fclose(std::fopen(toggle.c_str(), "w"));
  }
  if (std::string p = env_or("FAKE_JOB_PLANT", ""); plant && !p.empty()) {
    char kind[32];
    synth::Plant plant_spec;
    if (std::sscanf(p.c_str(), "%31[a-z]:%d:%u:%u", kind, &plant_spec.rank, &plant_spec.step,
                    &plant_spec.index) != 4)
      return 4;
    std::string k = kind;
    plant_spec.kind = k == "insert"     ? synth::Plant::Insert
                      : k == "delete"   ? synth::Plant::Delete
                      : k == "metric"   ? synth::Plant::Metric
                      : k == "weights"  ? synth::Plant::Weights
                      : k == "received" ? synth::Plant::Received
                                        : synth::Plant::Output;
    spec.plants.push_back(plant_spec);
  }
  std::string checkpoint;
  if (env_or("FAKE_JOB_NUMBERED", "0") == "1") {
    spec.numbered = true;
    checkpoint = env_or("LOCKSTEP_CHECKPOINT", "");
    if (argc == 3 && std::string(argv[1]) == "--checkpoint") checkpoint = argv[2];
    const int resume_at = std::atoi(env_or("LOCKSTEP_RESUME_AT", "0").c_str());
    if (!checkpoint.empty() && resume_at > 0 && std::filesystem::exists(checkpoint)) {
      spec.resume_at = static_cast<uint32_t>(resume_at);
      spec.restore_differs = env_or("FAKE_JOB_RESTORE_DIFFERS", "0") == "1";
      checkpoint.clear();  // resumed: nothing to save
    } else if (resume_at == 0 || env_or("FAKE_JOB_NO_CHECKPOINT", "0") == "1") {
      checkpoint.clear();
    }
  }
  std::string run_id = env_or("LOCKSTEP_RUN_ID", "fake");
  for (int rank = 0; rank < spec.world_size; ++rank) {
    if (fork() == 0) {
      spec.only_rank = rank;
      std::string error = synth::write_run(dir, spec, run_id);
      if (!error.empty()) std::fprintf(stderr, "fake_job rank %d: %s\n", rank, error.c_str());
      _exit(error.empty() ? 0 : 5);
    }
  }
  int status, failed = 0;
  while (wait(&status) > 0) failed += !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  if (!checkpoint.empty()) std::fclose(std::fopen(checkpoint.c_str(), "w"));
  return failed ? 6 : exit_code;
}
