// TraceWriter::stage / commit_staged / retract and the name resolver (writer.h): the hot path that
// builds a record in its staging slot instead of copying it (a kernel launch at broad,
// collectors/kernels.cpp), takes it back when the launch failed, and leaves its name to the
// thread that encodes it.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include <nlohmann/json.hpp>

#include "test_util.h"
#include "trace/header.h"

namespace lockstep::trace {
namespace {

using testing::TempDir;

// Each test runs with the lock-free commit (writer.cpp, top: where membarrier works) and with
// every commit under the lock.
class Staging : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    options_.path = dir_.file("t.lstrace");
    options_.lock_free_commit = GetParam();
    std::string error;
    writer_ = TraceWriter::open(options_, build_trace_header({}), &error);
    ASSERT_TRUE(writer_) << error;
  }
  // A kernel record with `seq`, built in the staging slot and committed.
  TraceWriter::Staged stage_kernel(uint64_t seq, StringId name) {
    Record* slot = writer_->stage();
    EXPECT_NE(slot, nullptr);
    if (slot == nullptr) return {};
    slot->kind = RecordKind::Kernel;
    slot->seq = seq, slot->stream = 1, slot->step = 0, slot->thread = 1, slot->scope = 0;
    slot->name = name;
    slot->clear_fields();
    slot->fields[fields::Kernel::grid_x] = seq;
    return writer_->commit_staged();
  }
  Record appended(uint64_t seq, StringId name) {
    Record r;
    r.kind = RecordKind::Kernel;
    r.seq = seq, r.stream = 1, r.thread = 1, r.name = name;
    r.fields[fields::Kernel::grid_x] = seq;
    return r;
  }
  std::vector<Record> read_back() {
    writer_->close();
    auto reader = TraceReader::open(options_.path);
    reader_names_.clear();
    auto records = testing::read_all_records(*reader);
    for (const Record& r : records) reader_names_.emplace_back(reader->string(r.name));
    return records;
  }
  static std::vector<uint64_t> seqs(const std::vector<Record>& records) {
    std::vector<uint64_t> out;
    for (const Record& r : records) out.push_back(r.seq);
    return out;
  }

  TempDir dir_;
  WriterOptions options_;
  std::unique_ptr<TraceWriter> writer_;
  std::vector<std::string> reader_names_;
};

TEST_P(Staging, StagedRecordsAreWrittenInOrderWithAppendedOnes) {
  const StringId k = writer_->intern("k");
  ASSERT_TRUE(writer_->append(appended(1, k)));
  stage_kernel(2, k);
  ASSERT_TRUE(writer_->append(appended(3, k)));
  for (uint64_t seq = 4; seq < 1000; ++seq) stage_kernel(seq, k);  // several batches
  const auto records = read_back();
  ASSERT_EQ(records.size(), 999u);
  for (size_t i = 0; i < records.size(); ++i) {
    EXPECT_EQ(records[i].seq, i + 1);
    EXPECT_EQ(records[i].fields[fields::Kernel::grid_x], i + 1);  // the slot's own fields
  }
  EXPECT_EQ(writer_->stats().appended, 999u);
}

TEST_P(Staging, ARetractedRecordIsNotWritten) {
  const StringId k = writer_->intern("k");
  stage_kernel(1, k);
  const auto failed = stage_kernel(2, k);
  stage_kernel(3, k);
  EXPECT_TRUE(writer_->retract(failed));
  EXPECT_EQ(seqs(read_back()), (std::vector<uint64_t>{1, 3}));
}

TEST_P(Staging, ARecordAlreadyWrittenCannotBeRetracted) {
  const StringId k = writer_->intern("k");
  const auto ticket = stage_kernel(1, k);
  writer_->flush();  // encoded and written
  stage_kernel(2, k);
  EXPECT_FALSE(writer_->retract(ticket));
  EXPECT_EQ(seqs(read_back()), (std::vector<uint64_t>{1, 2}));
}

TEST_P(Staging, ARetractOfAnotherRecordInAReusedSlotTakesNothing) {
  const StringId k = writer_->intern("k");
  const auto ticket = stage_kernel(1, k);
  writer_->flush();         // the batch is drained and goes back to the spares
  stage_kernel(2, k);       // a later slot of the same batch (or slot 0 of a reused one)
  stage_kernel(3, k);
  EXPECT_FALSE(writer_->retract(ticket));
  EXPECT_EQ(seqs(read_back()), (std::vector<uint64_t>{1, 2, 3}));
}

TEST_P(Staging, ARecordWhoseBatchADrainTookWhileItWasBuiltIsWrittenOnce) {
  const StringId k = writer_->intern("k");
  ASSERT_TRUE(writer_->append(appended(1, k)));
  Record* slot = writer_->stage();
  ASSERT_NE(slot, nullptr);
  writer_->flush();  // a drain reads the batch holding record 1, while the slot is being built
  slot->kind = RecordKind::Kernel;
  slot->seq = 2, slot->stream = 1, slot->thread = 1, slot->name = k;
  slot->clear_fields();
  slot->fields[fields::Kernel::grid_x] = 2;
  const auto ticket = writer_->commit_staged();
  stage_kernel(3, k);
  const auto records = read_back();
  EXPECT_EQ(seqs(records), (std::vector<uint64_t>{1, 2, 3}));
  ASSERT_EQ(records.size(), 3u);
  EXPECT_EQ(records[1].fields[fields::Kernel::grid_x], 2u);
  EXPECT_NE(ticket.batch, nullptr);
}

TEST_P(Staging, DeferredNamesComeFromTheResolverOnTheEncodingThread) {
  const StringId named = writer_->intern("named");
  std::atomic<std::thread::id> resolved_on{};
  writer_->set_name_resolver([&](Record& r) {
    resolved_on = std::this_thread::get_id();
    return writer_->intern("kernel_" + std::to_string(r.fields[fields::Kernel::grid_x]));
  });
  stage_kernel(1, kDeferredName);
  stage_kernel(2, named);
  ASSERT_TRUE(writer_->append(appended(3, kDeferredName)));
  writer_->flush();
  EXPECT_NE(resolved_on.load(), std::this_thread::get_id());  // the background thread
  read_back();
  EXPECT_EQ(reader_names_, (std::vector<std::string>{"kernel_1", "named", "kernel_3"}));
}

TEST_P(Staging, ADeferredNameWithoutAResolverIsEmpty) {
  stage_kernel(1, kDeferredName);
  read_back();
  EXPECT_EQ(reader_names_, (std::vector<std::string>{""}));
}

TEST_P(Staging, AClosedWriterStagesNothing) {
  writer_->close();
  EXPECT_EQ(writer_->stage(), nullptr);
  EXPECT_TRUE(writer_->retract({}));  // the null ticket
}

TEST_P(Staging, ACommitAfterCloseIsDroppedAndCounted) {
  const StringId k = writer_->intern("k");
  Record* slot = writer_->stage();
  ASSERT_NE(slot, nullptr);
  std::thread([&] { writer_->close(); }).join();
  slot->kind = RecordKind::Kernel;
  slot->seq = 1, slot->name = k;
  const auto ticket = writer_->commit_staged();
  EXPECT_EQ(ticket.batch, nullptr);
  EXPECT_EQ(writer_->stats().dropped, 1u);
}

TEST_P(Staging, ADrainReadsTheCommittedRecordsAndLeavesTheBatchFilling) {
  const StringId k = writer_->intern("k");
  std::vector<TraceWriter::Staged> tickets;
  for (uint64_t seq = 1; seq <= 10; ++seq) tickets.push_back(stage_kernel(seq, k));
  writer_->flush();
  EXPECT_EQ(writer_->stats().appended, 10u);
  for (uint64_t seq = 11; seq <= 300; ++seq) tickets.push_back(stage_kernel(seq, k));
  EXPECT_EQ(tickets[10].batch, tickets[0].batch);  // the same batch kept filling after the drain
  EXPECT_FALSE(writer_->retract(tickets[9]));      // drained: too late
  EXPECT_TRUE(writer_->retract(tickets[10]));      // committed after the drain: not yet
  std::vector<uint64_t> expected;
  for (uint64_t seq = 1; seq <= 300; ++seq)
    if (seq != 11) expected.push_back(seq);
  EXPECT_EQ(seqs(read_back()), expected);
}

TEST_P(Staging, EveryCommitRacingCloseIsWrittenOrCountedDropped) {
  const StringId k = writer_->intern("k");
  std::atomic<bool> started{false};
  uint64_t committed = 0, refused_at_commit = 0;
  std::thread job([&] {
    for (uint64_t seq = 1;; ++seq) {
      Record* slot = writer_->stage();
      if (slot == nullptr) break;  // closed: nothing staged, nothing to count
      slot->kind = RecordKind::Kernel;
      slot->seq = seq, slot->stream = 1, slot->thread = 1, slot->name = k;
      slot->clear_fields();
      const auto ticket = writer_->commit_staged();
      ++committed;
      refused_at_commit += ticket.batch == nullptr;
      if (seq == 2000) started = true;
    }
  });
  while (!started) std::this_thread::yield();
  writer_->close();
  job.join();
  const WriterStats stats = writer_->stats();
  auto reader = TraceReader::open(options_.path);
  ASSERT_TRUE(reader);
  std::vector<Record> records;  // the job's (a drop adds the writer's own Warning record)
  for (Record& r : testing::read_all_records(*reader))
    if (r.kind == RecordKind::Kernel) records.push_back(std::move(r));
  EXPECT_EQ(records.size() + stats.dropped, committed);
  EXPECT_EQ(stats.dropped, refused_at_commit);  // a null ticket is exactly a dropped record
  for (size_t i = 0; i < records.size(); ++i) ASSERT_EQ(records[i].seq, i + 1);  // no hole
}

// The launch's way in: the caller keeps this thread's slot (ThreadSlot) and passes it by value.
// A slot another writer filled (the parent's, in a forked child; a closed writer's) must never
// stage into that writer's buffer: this writer finds the thread's own.
TEST_P(Staging, ASlotOfAnotherWriterStagesIntoThisWritersOwnBuffer) {
  WriterOptions other_options = options_;
  other_options.path = dir_.file("other.lstrace");
  std::string error;
  auto other = TraceWriter::open(other_options, build_trace_header({}), &error);
  ASSERT_TRUE(other) << error;
  const TraceWriter::ThreadSlot others = other->thread_slot();
  ASSERT_EQ(others.writer, other->uid());
  ASSERT_NE(others.writer, writer_->uid());
  const TraceWriter::ThreadSlot own = writer_->thread_slot();
  const StringId k = writer_->intern("k");
  for (uint64_t seq = 1; seq <= 300; ++seq) {  // past a batch: its full and next ones too
    const TraceWriter::ThreadSlot slot = seq % 2 == 1 ? others : own;
    Record* record = writer_->stage(slot);
    ASSERT_NE(record, nullptr);
    record->kind = RecordKind::Kernel;
    record->seq = seq, record->stream = 1, record->step = 0, record->thread = 1;
    record->scope = 0, record->name = k;
    record->clear_fields();
    record->fields[fields::Kernel::grid_x] = seq;
    EXPECT_NE(writer_->commit_staged(slot).batch, nullptr);
  }
  other->close();
  auto other_reader = TraceReader::open(other_options.path);
  EXPECT_TRUE(testing::read_all_records(*other_reader).empty());
  const auto records = read_back();
  ASSERT_EQ(records.size(), 300u);
  for (size_t i = 0; i < records.size(); ++i) {
    EXPECT_EQ(records[i].seq, i + 1);
    EXPECT_EQ(records[i].fields[fields::Kernel::grid_x], i + 1);
  }
}

INSTANTIATE_TEST_SUITE_P(Commit, Staging, ::testing::Values(true, false),
                         [](const auto& info) { return info.param ? "LockFree" : "Locked"; });

}  // namespace
}  // namespace lockstep::trace
