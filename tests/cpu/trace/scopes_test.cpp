// Scopes in the format: interned once per file, defined in Scopes blocks before the records that
// carry their ids, read back as paths; version-1 files (no scopes) still read.
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "test_util.h"
#include "trace/format.h"

namespace lockstep::trace {
namespace {

using testing::TempDir;

std::unique_ptr<TraceWriter> open_writer(const std::string& path, size_t block_bytes = 8192) {
  WriterOptions options;
  options.path = path;
  options.block_bytes = block_bytes;
  std::string error;
  auto writer = TraceWriter::open(options, nlohmann::json::object(), &error);
  EXPECT_TRUE(writer) << error;
  return writer;
}

Record kernel(TraceWriter& writer, uint64_t seq, ScopeId scope) {
  Record record;
  record.kind = RecordKind::Kernel;
  record.seq = seq;
  record.name = writer.intern("gemm_kernel");
  record.scope = scope;
  return record;
}

TEST(Scopes, TheSameParentAndNameGiveTheSameIdAndAnotherParentAnother) {
  TempDir dir;
  auto writer = open_writer(dir.file("t.lstrace"));
  const StringId mlp = writer->intern("blocks.1.mlp (forward)");
  const ScopeId block = writer->intern_scope(0, writer->intern("blocks.1 (forward)"));
  const ScopeId inside = writer->intern_scope(block, mlp);
  EXPECT_NE(block, 0u);
  EXPECT_GT(inside, block);
  EXPECT_EQ(writer->intern_scope(block, mlp), inside);
  EXPECT_NE(writer->intern_scope(0, mlp), inside);  // the same name at the outermost level
  writer->close();
}

TEST(Scopes, EveryRecordsScopeReadsBackAsItsPathOfNames) {
  TempDir dir;
  const std::string path = dir.file("t.lstrace");
  auto writer = open_writer(path, 4096);  // many blocks: definitions must precede each use
  const ScopeId model = writer->intern_scope(0, writer->intern("GPT (forward)"));
  const ScopeId mlp = writer->intern_scope(model, writer->intern("blocks.1.mlp (forward)"));
  const ScopeId backward = writer->intern_scope(0, writer->intern("blocks.1.mlp (backward)"));
  const ScopeId cycle[] = {0, model, mlp, backward};
  for (uint64_t seq = 1; seq <= 2000; ++seq)
    ASSERT_TRUE(writer->append(kernel(*writer, seq, cycle[seq % 4])));
  writer->close();

  auto reader = TraceReader::open(path);
  EXPECT_EQ(reader->format_version(), 2u);
  reader->verify_all();
  std::vector<Record> records = testing::read_all_records(*reader);
  ASSERT_EQ(records.size(), 2000u);
  for (const Record& record : records) EXPECT_EQ(record.scope, cycle[record.seq % 4]);
  EXPECT_TRUE(reader->scope_path(0).empty());
  EXPECT_EQ(reader->scope_path(model), std::vector<std::string_view>{"GPT (forward)"});
  EXPECT_EQ(reader->scope_path(mlp),
            (std::vector<std::string_view>{"GPT (forward)", "blocks.1.mlp (forward)"}));
  EXPECT_EQ(reader->scope_path(backward), std::vector<std::string_view>{"blocks.1.mlp (backward)"});
  EXPECT_EQ(reader->scope_parent(mlp), model);
  EXPECT_THROW(reader->scope_path(999), TraceError);
}

// Each scope is written once, in a Scopes block of its own type (old readers skip it), before
// the first Records block whose records carry it, however many records and threads use it.
TEST(Scopes, DefinitionsAreWrittenOnceAndBeforeTheRecordsThatUseThem) {
  TempDir dir;
  const std::string path = dir.file("t.lstrace");
  auto writer = open_writer(path, 4096);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&writer, t] {
      for (int i = 0; i < 3000; ++i) {
        const ScopeId outer =
            writer->intern_scope(0, writer->intern("layer " + std::to_string(i % 7)));
        const ScopeId inner = writer->intern_scope(outer, writer->intern(t % 2 ? "attn" : "mlp"));
        writer->append(kernel(*writer, static_cast<uint64_t>(t) * 10000 + i + 1, inner));
      }
    });
  }
  for (auto& thread : threads) thread.join();
  writer->close();

  auto reader = TraceReader::open(path);
  size_t scope_blocks = 0, scope_records = 0, records_before_scopes = 0;
  for (const BlockInfo& block : reader->blocks()) {
    if (block.type == BlockType::Scopes) ++scope_blocks, scope_records += block.record_count;
    if (block.type == BlockType::Records && scope_blocks == 0) ++records_before_scopes;
  }
  EXPECT_GE(scope_blocks, 1u);
  EXPECT_EQ(scope_records, 7u + 7u * 2u);  // 7 layers, each with mlp and attn
  EXPECT_EQ(records_before_scopes, 0u);
  reader->verify_all();
  // Reading records block by block, every id met is already defined by the blocks before it.
  size_t checked = 0;
  reader->for_each_record([&](const Record& record) {
    const auto path = reader->scope_path(record.scope);
    EXPECT_EQ(path.size(), 2u);
    ++checked;
    return true;
  });
  EXPECT_EQ(checked, 12000u);
}

TEST(Scopes, TheJobCannotAppendTheWritersOwnScopeRecords) {
  TempDir dir;
  auto writer = open_writer(dir.file("t.lstrace"));
  Record scope;
  scope.kind = RecordKind::Scope;
  EXPECT_FALSE(writer->append(scope));
  writer->close();
}

// A version-1 file (written before scopes) reads, every record in no scope; a file claiming a
// version above the reader's is refused in one line.
TEST(Scopes, AVersionOneFileStillReadsAndANewerVersionIsRefused) {
  TempDir dir;
  const std::string path = dir.file("t.lstrace");
  {
    auto writer = open_writer(path);
    writer->append(kernel(*writer, 1, 0));
    writer->close();
  }
  std::vector<uint8_t> bytes = testing::read_bytes(path);
  for (uint32_t version : {1u, 3u}) {
    std::memcpy(bytes.data() + offsetof(FileHeader, format_version), &version, 4);
    const std::string copy = dir.file("v" + std::to_string(version) + ".lstrace");
    testing::write_bytes(copy, bytes);
    if (version == 1) {
      auto reader = TraceReader::open(copy);
      std::vector<Record> records = testing::read_all_records(*reader);
      ASSERT_EQ(records.size(), 1u);
      EXPECT_EQ(records[0].scope, 0u);
    } else {
      try {
        TraceReader::open(copy);
        ADD_FAILURE() << "a newer version was read";
      } catch (const TraceError& error) {
        EXPECT_NE(std::string(error.what()).find("trace format v3 is newer"), std::string::npos)
            << error.what();
      }
    }
  }
}

}  // namespace
}  // namespace lockstep::trace
