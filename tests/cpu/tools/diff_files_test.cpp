// The diff engine on trace files written by TraceWriter: for many randomly planted divergences
// (kind, rank, step, op), the culprit must be exactly the planted op.
#include <unistd.h>

#include <filesystem>
#include <random>

#include <gtest/gtest.h>

#include "tools/diff/engine.h"
#include "tools/diff/file_input.h"
#include "tools/synth/synthetic_trace.h"

namespace lockstep::tools {
namespace {

namespace fs = std::filesystem;

DiffResult diff_dirs(const std::string& a, const std::string& b, int world) {
  std::vector<RankPair> pairs;
  for (int r = 0; r < world; ++r) {
    auto opener = [](std::string path) {
      return [path] {
        return std::unique_ptr<RankInput>(
            std::make_unique<FileRankInput>(trace::TraceReader::open(path)));
      };
    };
    char name[32];
    std::snprintf(name, sizeof(name), "/rank-%05d.lstrace", r);
    pairs.push_back({r, opener(a + name), opener(b + name)});
  }
  DiffOptions options;
  options.window_records = 40;  // several windows per run
  return diff_ranks(pairs, options);
}

TEST(DiffFiles, RandomPlantsAreFoundExactly) {
  char pattern[] = "/tmp/lockstep-diff-files-XXXXXX";
  ASSERT_NE(mkdtemp(pattern), nullptr);
  fs::path tmp = pattern;
  synth::Spec base;
  base.world_size = 4;
  base.steps = 5;
  base.ops_per_step = 8;
  std::string a = tmp / "a";
  ASSERT_EQ(synth::write_run(a, base), "");
  std::mt19937 random(12345);
  for (int iteration = 0; iteration < 40; ++iteration) {
    synth::Plant plant;
    plant.kind = static_cast<synth::Plant::Kind>(random() % 5);
    plant.rank = static_cast<int>(random() % base.world_size);
    plant.step = static_cast<uint32_t>(random() % base.steps);
    plant.index = static_cast<uint32_t>(random() % base.ops_per_step);
    if (plant.kind == synth::Plant::GemmAlgo) plant.index = 3 + 4 * (plant.index % 2);
    if (plant.kind == synth::Plant::Metric) plant.index = 0;  // the loss of the step
    synth::Spec spec = base;
    spec.plants = {plant};
    std::string b = tmp / ("b" + std::to_string(iteration));
    ASSERT_EQ(synth::write_run(b, spec), "");
    SCOPED_TRACE(testing::Message() << "plant kind " << plant.kind << " rank " << plant.rank
                                    << " step " << plant.step << " index " << plant.index);
    DiffResult result = diff_dirs(a, b, base.world_size);
    ASSERT_TRUE(result.divergent);
    if (plant.kind == synth::Plant::Metric) {
      ASSERT_TRUE(result.metric);
      EXPECT_EQ(result.metric->rank, plant.rank);
      EXPECT_EQ(result.metric->step, plant.step);
      EXPECT_FALSE(result.culprit);
      continue;
    }
    ASSERT_TRUE(result.culprit);
    const Divergence& c = *result.culprit;
    EXPECT_EQ(c.rank, plant.rank);
    EXPECT_EQ(c.step, plant.step);
    EXPECT_EQ(c.stream, 1 + plant.index % 2);
    bool gemm = plant.index % 4 == 3;
    switch (plant.kind) {
      case synth::Plant::Output:
        EXPECT_EQ(c.classification, Classification::Origin);
        EXPECT_EQ(c.kind, gemm ? "gemm" : "kernel");
        ASSERT_TRUE(c.buffer);
        EXPECT_EQ(c.buffer->role, "out");
        break;
      case synth::Plant::Insert:
        EXPECT_EQ(c.structural, StructuralKind::Inserted);
        EXPECT_EQ(c.name, "planted_extra_kernel");
        break;
      case synth::Plant::Delete:
        EXPECT_EQ(c.structural, StructuralKind::Deleted);
        EXPECT_EQ(c.kind, gemm ? "gemm" : "kernel");
        break;
      case synth::Plant::GemmAlgo:
        EXPECT_EQ(c.structural, StructuralKind::Fields);
        EXPECT_NE(c.detail.find("algorithm 3 vs 7"), std::string::npos) << c.detail;
        break;
      default:
        break;
    }
    // Every other rank that diverged did so as a receiver (through the all-reduce).
    for (const Divergence& d : result.first_by_epoch)
      if (d.rank != plant.rank) EXPECT_EQ(d.classification, Classification::Receiver) << d.rank;
    if (plant.step > 0) EXPECT_GT(result.steps_skipped, 0u) << "earlier steps skipped by summaries";
    fs::remove_all(b);
  }
  if (!::testing::Test::HasFailure()) fs::remove_all(tmp);
}

}  // namespace
}  // namespace lockstep::tools
