// Issue #32, case by case, through the built binary: a verdict covers only what was compared.
// A cut-off, unfinished, corrupt or foreign trace never yields IDENTICAL or CERTIFIED; absurd
// header numbers, FIFOs and mixed run directories are refused in one line without hanging.
#include <sys/stat.h>

#include <climits>
#include <cstddef>

#include <cstring>

#include "cli_harness.h"
#include "trace/block_frame.h"
#include "trace/reader.h"

namespace {

// Record blocks that span several steps, as the shim writes them in a fast job.
synth::Spec spanning(int world = 1) {
  synth::Spec spec = small(world);
  spec.steps = 8;
  spec.ops_per_step = 48;
  spec.flush_every_step = false;
  spec.block_bytes = 4096;
  return spec;
}

std::vector<lockstep::trace::BlockInfo> blocks_of(const fs::path& file) {
  return lockstep::trace::TraceReader::open(file)->blocks();
}

// A copy of run `from` in `to` whose file `name` keeps only its first `bytes`.
void copy_cut(const fs::path& from, const fs::path& to, const std::string& name, uint64_t bytes) {
  fs::remove_all(to);
  fs::copy(from, to);
  fs::resize_file(to / name, bytes);
}

void flip_byte(const fs::path& file, uint64_t offset) {
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(static_cast<std::streamoff>(offset));
  char c = 0;
  f.get(c);
  f.seekp(static_cast<std::streamoff>(offset));
  f.put(static_cast<char>(c ^ 0x20));
}

// Case 1: the 116 random truncations gave exit 0 108 times.
TEST_F(Cli, ACutOffTraceIsNeverIdentical) {
  synth::Spec planted = spanning();
  planted.plants.push_back({synth::Plant::Output, 0, 3, 0});
  std::string a = write("a", spanning()), b = write("b", planted);
  const std::string name = "rank-00000.lstrace";
  ASSERT_GT(blocks_of(fs::path(b) / name).size(), 4u);
  bool some_record_block_spans_steps = false;
  for (const auto& block : blocks_of(fs::path(b) / name))
    some_record_block_spans_steps |=
        block.type == lockstep::trace::BlockType::Records && block.max_step > block.min_step;
  ASSERT_TRUE(some_record_block_spans_steps) << "the case needs multi-step blocks";
  const uint64_t size = fs::file_size(fs::path(b) / name);
  int divergent = 0, incomplete = 0, cuts = 0;
  for (uint64_t bytes = 1; bytes < size; bytes += std::max<uint64_t>(1, size / 97), ++cuts) {
    copy_cut(b, path("cut"), name, bytes);
    Result r = lockstep("diff " + pair(path("cut"), a));
    ASSERT_NE(r.code, 0) << "cut at " << bytes << " of " << size << ": " << r.out;
    if (r.code == 1) {
      ++divergent;
      EXPECT_NE(r.out.find("rank 0, step 3"), std::string::npos) << r.out;
    } else {
      ++incomplete;
      EXPECT_EQ(r.code, 2) << r.out << r.err;
    }
  }
  // Cuts after step 3's records still find the divergence: the complete steps of a cut-off
  // file are counted record by record, not given up because their blocks span several steps.
  EXPECT_GT(divergent, 0) << cuts << " cuts";
  EXPECT_GT(incomplete, 0) << cuts << " cuts";
}

TEST_F(Cli, ACutOffTraceSaysWhatWasComparedAndWhatWasNot) {
  std::string a = write("a", spanning()), b = write("b", spanning());
  const std::string name = "rank-00000.lstrace";
  std::vector<lockstep::trace::BlockInfo> blocks = blocks_of(fs::path(b) / name);
  copy_cut(b, path("cut"), name, blocks[blocks.size() / 2].offset + 50);  // inside a block
  Result r = lockstep("diff " + pair(a, path("cut")));
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_NE(r.out.find("INCOMPLETE"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("compared steps 0-"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("not compared"), std::string::npos) << r.out;
  Result j = lockstep("diff --json " + pair(a, path("cut")));
  EXPECT_EQ(j.code, 2);
  json report = j.parsed();
  EXPECT_EQ(report["verdict"], "incomplete");
  EXPECT_EQ(report["compared"]["first_step"], 0);
  EXPECT_LT(report["compared"]["last_step"].get<int>(), 7);
  EXPECT_EQ(report["compared"]["trace_last_step"], 7);
  ASSERT_FALSE(report["not_compared"].empty());
  EXPECT_NE(report["not_compared"][0].get<std::string>().find("cut off"), std::string::npos);
}

TEST_F(Cli, StepsOutsideTheTraceAreAnError) {
  std::string a = write("a", small()), b = write("b", small());
  Result r = lockstep("diff --steps 100-200 " + pair(a, b));
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_EQ(line_count(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("--steps 100-200"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("0-5"), std::string::npos) << "names the steps the runs hold: " << r.err;
  EXPECT_EQ(lockstep("diff --steps 100- " + pair(a, b)).code, 2);
}

// Case 2: cut at a block boundary, header only, killed before its end record.
TEST_F(Cli, VerifyCertifiesOnlyATraceWithItsEndRecordAndAllItsBlocks) {
  std::string b = write("b", spanning());
  const std::string name = "rank-00000.lstrace";
  std::vector<lockstep::trace::BlockInfo> blocks = blocks_of(fs::path(b) / name);
  struct Cut {
    const char* what;
    uint64_t bytes;
  } cuts[] = {{"at a block boundary", blocks[blocks.size() / 2].offset},
              {"header only", blocks.front().offset},
              {"without its last block", blocks.back().offset}};
  for (const Cut& cut : cuts) {
    copy_cut(b, path("cut"), name, cut.bytes);
    Result v = lockstep("verify " + path("cut").string());
    EXPECT_EQ(v.code, 2) << cut.what << ": " << v.out;
    EXPECT_EQ(v.out.find("CERTIFIED COMPLETE"), std::string::npos) << cut.what << ": " << v.out;
    EXPECT_NE(v.err.find("no end record"), std::string::npos) << cut.what << ": " << v.err;
  }
  copy_cut(b, path("cut"), name, blocks[blocks.size() / 2].offset);
  EXPECT_NE(lockstep("verify " + path("cut").string()).err.find("readable prefix up to step"),
            std::string::npos);
  Result whole = lockstep("verify " + b);
  EXPECT_EQ(whole.code, 0) << whole.out << whole.err;
  EXPECT_NE(whole.out.find("CERTIFIED COMPLETE"), std::string::npos) << whole.out;
}

// A file whose every checksum holds but whose records are not what its end record and its step
// summaries count (a records block lost or written twice: a writer's bug, found by fuzzing the
// CLI) is not certified, verify says which counts disagree, and a diff is INCOMPLETE.
TEST_F(Cli, VerifyCountsTheRecordsAgainstTheEndRecordAndTheSummaries) {
  std::string b = write("b", spanning());
  const fs::path file = fs::path(b) / "rank-00000.lstrace";
  std::vector<lockstep::trace::BlockInfo> blocks = blocks_of(file);
  const lockstep::trace::BlockInfo* records = nullptr;
  for (const auto& block : blocks)
    if (block.type == lockstep::trace::BlockType::Records && records == nullptr) records = &block;
  ASSERT_NE(records, nullptr);
  const std::string bytes = slurp(file);
  const size_t at = records->offset;
  const size_t length = sizeof(lockstep::trace::BlockHeader) + records->payload_bytes;
  struct Edit {
    const char* what;
    std::string content;
  } edits[] = {{"a records block lost", bytes.substr(0, at) + bytes.substr(at + length)},
               {"a records block twice", bytes.substr(0, at + length) + bytes.substr(at)}};
  for (const Edit& edit : edits) {
    fs::remove_all(path("edited"));
    fs::copy(b, path("edited"));
    std::ofstream(path("edited") / file.filename(), std::ios::binary | std::ios::trunc)
        << edit.content;
    Result v = lockstep("verify " + path("edited").string());
    EXPECT_EQ(v.code, 2) << edit.what << ": " << v.out << v.err;
    EXPECT_EQ(v.out.find("CERTIFIED COMPLETE"), std::string::npos) << edit.what << ": " << v.out;
    // How many steps the block held depends on when the writer's thread cut its blocks: one
    // step ("its summary says") or several ("their summaries say").
    EXPECT_NE(v.err.find("whose records are not as many as"), std::string::npos)
        << edit.what << ": " << v.err;
  }
  // The end record's count one off, the block sealed again (block_frame.h): nothing else moved.
  const lockstep::trace::BlockInfo& end = blocks.back();
  ASSERT_EQ(end.type, lockstep::trace::BlockType::End);
  std::string edited = bytes;
  auto* header = reinterpret_cast<lockstep::trace::BlockHeader*>(edited.data() + end.offset);
  auto* payload = reinterpret_cast<uint8_t*>(edited.data() + end.offset + sizeof(*header));
  lockstep::trace::EndPayload fixed;
  std::memcpy(&fixed, payload, sizeof fixed);
  fixed.records += 1;
  std::memcpy(payload, &fixed, sizeof fixed);
  lockstep::trace::seal_block_header(*header, payload, header->payload_bytes);
  fs::remove_all(path("edited"));
  fs::copy(b, path("edited"));
  std::ofstream(path("edited") / file.filename(), std::ios::binary | std::ios::trunc) << edited;
  Result v = lockstep("verify " + path("edited").string());
  EXPECT_EQ(v.code, 2) << v.out << v.err;
  EXPECT_NE(v.err.find(std::to_string(fixed.records - 1) + " records present, its end record says " +
                       std::to_string(fixed.records)),
            std::string::npos)
      << v.err;
  // The diff compares summaries first, which the edit left alone: never IDENTICAL either.
  Result d = lockstep("diff " + pair(b, path("edited").string()));
  EXPECT_EQ(d.code, 2) << d.out;
  EXPECT_NE(d.out.find(std::to_string(fixed.records - 1) + " records in its blocks, its end record "
                                                           "says " +
                       std::to_string(fixed.records)),
            std::string::npos)
      << d.out;
}

// Case 3: "world_size": 2147483647 grew verify to 24 GB; 1000000 printed 999,999 lines.
TEST_F(Cli, AbsurdHeaderNumbersAreRefusedBeforeTheyAreUsed) {
  synth::Spec huge = small(1);
  huge.header_world_size = INT_MAX;
  std::string h = write("h", huge), a = write("a", small(1));
  // 1 GB of address space and 20 s are far more than a refusal needs.
  const std::string limits = "ulimit -v 1000000; timeout 20";
  for (const std::string& command :
       {"verify " + h, "stats " + h, "show " + h, "diff " + pair(a, h)}) {
    Result r = lockstep(command, limits);
    EXPECT_EQ(r.code, 2) << command << ": " << r.out;
    EXPECT_EQ(line_count(r.err), 1) << command << ": " << r.err;
    EXPECT_NE(r.err.find("world_size"), std::string::npos) << command << ": " << r.err;
  }
  synth::Spec wide = small(1);
  wide.header_world_size = 1000000;
  std::string w = write("w", wide);
  Result v = lockstep("verify " + w, limits);
  EXPECT_EQ(v.code, 2);
  EXPECT_LE(line_count(v.err), 3) << "one line for the missing ranks, not one each";
  EXPECT_NE(v.err.find("999999 ranks"), std::string::npos) << v.err;
}

// Case 4: one flipped byte in a records block of a step whose summaries match.
TEST_F(Cli, ACorruptBlockIsNamedByEveryCommandUnlessSalvaging) {
  std::string a = write("a", small()), b = write("b", small());
  fs::path victim = fs::path(b) / "rank-00001.lstrace";
  uint64_t offset = 0;
  for (const auto& block : blocks_of(victim))
    if (block.type == lockstep::trace::BlockType::Records && block.min_step == 2 &&
        block.max_step == 2)
      offset = block.offset;
  ASSERT_NE(offset, 0u);
  flip_byte(victim, offset + sizeof(lockstep::trace::BlockHeader) + 10);
  const std::string where = victim.string() +
                            ": block checksum mismatch (corrupt data) at offset " +
                            std::to_string(offset);
  for (const std::string& command : {"stats " + b, "show " + b, "verify " + b, "diff " + pair(a, b),
                                     "export " + b + " --perfetto " + path("x.json").string()}) {
    Result r = lockstep(command);
    EXPECT_EQ(r.code, 2) << command << ": " << r.out;
    EXPECT_NE(r.err.find(where), std::string::npos) << command << ": " << r.err;
  }
  Result stats = lockstep("stats --salvage " + b);
  EXPECT_EQ(stats.code, 0) << stats.err;
  EXPECT_NE(stats.out.find("salvaged: " + where), std::string::npos) << stats.out;
  Result diff = lockstep("diff --salvage " + pair(a, b));
  EXPECT_EQ(diff.code, 2) << "the salvaged prefix leaves steps uncompared: " << diff.out;
  EXPECT_NE(diff.out.find("salvaged"), std::string::npos) << diff.out;
  EXPECT_NE(diff.out.find("compared steps 0-1"), std::string::npos) << diff.out;
}

// A flipped byte in a block's header (its record count): every command names the same problem in
// the same words, whether it walks the file itself (verify, diff) or reads it (stats, show).
TEST_F(Cli, ACorruptBlockHeaderIsNamedInTheSameWordsByEveryCommand) {
  std::string a = write("a", small()), b = write("b", small());
  fs::path victim = fs::path(b) / "rank-00000.lstrace";
  uint64_t offset = 0;
  for (const auto& block : blocks_of(victim))
    if (block.type == lockstep::trace::BlockType::Records && block.min_step == 1) offset = block.offset;
  ASSERT_NE(offset, 0u);
  flip_byte(victim, offset + offsetof(lockstep::trace::BlockHeader, record_count));
  const std::string where = victim.string() +
                            ": corrupt block header (header check mismatch) at offset " +
                            std::to_string(offset);
  for (const std::string& command : {"stats " + b, "show " + b, "verify " + b, "diff " + pair(a, b)}) {
    Result r = lockstep(command);
    EXPECT_EQ(r.code, 2) << command << ": " << r.out;
    EXPECT_NE(r.err.find(where), std::string::npos) << command << ": " << r.err;
  }
}

// Case 5: verify of a FIFO named x.lstrace hung forever.
TEST_F(Cli, AFifoIsRefusedWithoutBlocking) {
  fs::create_directories(path("fifo"));
  ASSERT_EQ(mkfifo(path("fifo/x.lstrace").c_str(), 0600), 0);
  for (const std::string& target : {path("fifo").string(), path("fifo/x.lstrace").string()}) {
    Result r = lockstep("verify " + target, "timeout 20");
    EXPECT_EQ(r.code, 2) << target << ": " << r.out << r.err;
    EXPECT_NE(r.err.find("FIFO"), std::string::npos) << r.err;
    EXPECT_EQ(line_count(r.err), 1) << r.err;
  }
}

TEST_F(Cli, ADirectoryMixingTwoRunsIsRefusedNamingBothIds) {
  std::string one = write("run-one", small()), two = write("run-two", small());
  fs::copy_file(fs::path(two) / "rank-00001.lstrace", fs::path(one) / "rank-00001.lstrace",
                fs::copy_options::overwrite_existing);
  for (const std::string& command : {"verify " + one, "stats " + one, "diff " + pair(one, two)}) {
    Result r = lockstep(command);
    EXPECT_EQ(r.code, 2) << command << ": " << r.out;
    EXPECT_EQ(line_count(r.err), 1) << command << ": " << r.err;
    EXPECT_NE(r.err.find("run id run-two"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("run id run-one"), std::string::npos) << r.err;
  }
  // Without a manifest the headers must still agree with each other.
  fs::remove(fs::path(one) / "manifest.json");
  EXPECT_EQ(lockstep("verify " + one).code, 2);
}

TEST_F(Cli, AFileWhoseHeaderNamesAnotherRunThanTheManifestIsRefused) {
  synth::Spec foreign = small(1);
  foreign.header_run_id = "someone-else";
  std::string f = write("f", foreign);
  Result r = lockstep("stats " + f);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.err.find("someone-else"), std::string::npos) << r.err;
}

TEST_F(Cli, ATraceWithoutItsEndRecordIsIncompleteNotIdentical) {
  std::string a = write("a", small()), b = write("b", small());
  fs::path victim = fs::path(b) / "rank-00000.lstrace";
  fs::resize_file(victim, blocks_of(victim).back().offset);  // no end record
  Result r = lockstep("diff " + pair(a, b));
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("no end record"), std::string::npos) << r.out;
}

}  // namespace
