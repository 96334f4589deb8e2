// Issue #34 at the CLI: a run of more rank files than the process may hold open diffs and
// verifies (each worker opens a rank's files and closes them), and the step index each file
// ends with is checked like any block: a damaged one is named in one line, exit 2.
#include <cstring>

#include "cli_harness.h"
#include "trace/block_frame.h"
#include "trace/reader.h"

namespace {

using lockstep::trace::BlockHeader;
using lockstep::trace::BlockType;

synth::Spec many(int world) {
  synth::Spec spec;
  spec.world_size = world;
  spec.steps = 3;
  spec.ops_per_step = 4;
  spec.writer_memory = 1u << 20;  // hundreds of writers at once in this process
  return spec;
}

// The offset of the file's Index block.
uint64_t index_offset(const fs::path& file) {
  for (const auto& block : lockstep::trace::TraceReader::open(file)->blocks())
    if (block.type == BlockType::Index) return block.offset;
  ADD_FAILURE() << file << " has no step index";
  return 0;
}

std::vector<uint8_t> bytes_of(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void put_bytes(const fs::path& file, const std::vector<uint8_t>& bytes) {
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

TEST_F(Cli, ARunOfMoreRankFilesThanTheOpenFileLimitStillDiffsAndVerifies) {
  // 2 x 150 rank files under a limit of 40 descriptors.
  const int world = 150;
  synth::Spec planted = many(world);
  planted.plants.push_back({synth::Plant::Output, 137, 1, 2});
  const std::string a = write("a", many(world)), b = write("b", many(world)),
                    p = write("p", planted);
  const std::string limit = "ulimit -n 40;";
  Result same = lockstep("diff " + pair(a, b), limit);
  EXPECT_EQ(same.code, 0) << same.out << same.err;
  EXPECT_EQ(same.err.find("Too many open files"), std::string::npos) << same.err;
  Result differs = lockstep("diff --threads 64 " + pair(a, p), limit);
  EXPECT_EQ(differs.code, 1) << differs.out << differs.err;
  EXPECT_NE(differs.out.find("rank 137, step 1"), std::string::npos) << differs.out;
  Result verify = lockstep("verify " + a, limit);
  EXPECT_EQ(verify.code, 0) << verify.out << verify.err;
  EXPECT_NE(verify.out.find("CERTIFIED COMPLETE: 150 ranks"), std::string::npos) << verify.out;
}

TEST_F(Cli, AFlippedByteInAStepIndexIsNamedInOneLineWithExitTwo) {
  const std::string a = write("a", many(2)), b = write("b", many(2));
  const fs::path victim = fs::path(b) / "rank-00001.lstrace";
  const uint64_t at = index_offset(victim);
  ASSERT_NE(at, 0u);
  std::vector<uint8_t> bytes = bytes_of(victim);
  bytes[at + sizeof(BlockHeader) + 12] ^= 0x04;
  put_bytes(victim, bytes);
  const std::string where =
      victim.string() + ": block checksum mismatch (corrupt data) at offset " + std::to_string(at);
  for (const std::string& command : {"diff " + pair(a, b), "verify " + b}) {
    Result r = lockstep(command);
    EXPECT_EQ(r.code, 2) << command << ": " << r.out;
    EXPECT_NE(r.err.find(where), std::string::npos) << command << ": " << r.err;
    EXPECT_EQ(line_count(r.err), 1) << command << ": " << r.err;
  }
}

TEST_F(Cli, AStepIndexThatDoesNotCoverItsFileIsRefusedInOneLine) {
  const std::string a = write("a", many(2)), b = write("b", many(2));
  const fs::path victim = fs::path(b) / "rank-00000.lstrace";
  const uint64_t at = index_offset(victim);
  ASSERT_NE(at, 0u);
  // Its block count one less, sealed again: every checksum holds, the index is wrong.
  std::vector<uint8_t> bytes = bytes_of(victim);
  BlockHeader header{};
  std::memcpy(&header, bytes.data() + at, sizeof(header));
  uint8_t* payload = bytes.data() + at + sizeof(header);
  uint32_t blocks = 0;
  std::memcpy(&blocks, payload, sizeof(blocks));
  --blocks;
  std::memcpy(payload, &blocks, sizeof(blocks));
  lockstep::trace::seal_block_header(header, payload, header.payload_bytes);
  std::memcpy(bytes.data() + at, &header, sizeof(header));
  put_bytes(victim, bytes);
  for (const std::string& command : {"diff " + pair(a, b), "verify " + b, "stats " + b}) {
    Result r = lockstep(command);
    EXPECT_EQ(r.code, 2) << command << ": " << r.out;
    EXPECT_NE(r.err.find(victim.string() + ": corrupt step index"), std::string::npos)
        << command << ": " << r.err;
    EXPECT_EQ(line_count(r.err), 1) << command << ": " << r.err;
  }
}

}  // namespace
