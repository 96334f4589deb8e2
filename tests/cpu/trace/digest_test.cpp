#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <thread>

#include <nlohmann/json.hpp>

#include "sample_traces.h"
#include "test_util.h"

namespace lockstep::trace {
namespace {

// A "run": records with string texts, fed to a writer in some order from some threads.
struct TextRecord {
  Record record;  // name and labels are indexes into kTexts until interned
};
const char* kTexts[] = {"gemm_kernel", "softmax", "A", "B", "D", "send", "recv", "arg3"};

std::vector<Record> make_run(uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<Record> records;
  // Every kind a job's records can have: StepSummary and Scope records are the writer's own (it
  // refuses them from the job).
  std::vector<RecordKind> kinds;
  for (const auto& info : record_kinds())
    if (!writers_own_kind(info.kind)) kinds.push_back(info.kind);
  for (int i = 0; i < 3000; ++i) {
    Record record = testing::random_record(kinds[rng() % kinds.size()], rng, nullptr);
    record.step = i / 1000;
    record.name = static_cast<StringId>(rng() % 2);  // index into kTexts
    for (auto& buffer : record.buffers) buffer.label = 2 + rng() % 6;
    records.push_back(record);
  }
  return records;
}

// Writes the run: `threads` threads, records shuffled by `order_seed`, strings interned in a
// shuffled order (so ids differ), seq/thread/scope/allocation ordinals scrambled (scope ids are
// per file, interned in thread order). Returns summaries.
std::vector<StepSummary> write_run(const std::string& path, std::vector<Record> records,
                                   int threads, uint64_t order_seed) {
  WriterOptions options;
  options.path = path;
  options.block_bytes = 4096;
  std::string error;
  auto writer = TraceWriter::open(options, nlohmann::json::object(), &error);
  EXPECT_TRUE(writer) << error;
  std::mt19937_64 rng(order_seed);
  std::vector<int> text_order(std::size(kTexts));
  for (size_t i = 0; i < text_order.size(); ++i) text_order[i] = static_cast<int>(i);
  std::shuffle(text_order.begin(), text_order.end(), rng);
  std::vector<StringId> ids(std::size(kTexts));
  writer->intern("padding_" + std::to_string(order_seed));  // shifts every id
  for (int index : text_order) ids[index] = writer->intern(kTexts[index]);
  std::shuffle(records.begin(), records.end(), rng);
  uint64_t seq = 0;
  for (Record& record : records) {
    record.name = ids[record.name];
    for (auto& buffer : record.buffers) {
      buffer.label = ids[buffer.label];
      buffer.alloc_ordinal = static_cast<uint32_t>(rng());
    }
    record.seq = ++seq;
    record.thread = 0;
    record.scope = static_cast<ScopeId>(rng() % 8);
  }
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      for (size_t i = t; i < records.size(); i += threads) writer->append(records[i]);
    });
  }
  for (auto& thread : pool) thread.join();
  writer->end_step(0);
  writer->close();
  return TraceReader::open(path)->step_summaries();
}

TEST(Digest, SameRecordsDifferentInterleavingsGiveEqualSummaries) {
  testing::TempDir dir;
  const auto run = make_run(5);
  const auto a = write_run(dir.file("a.lstrace"), run, 1, 11);
  const auto b = write_run(dir.file("b.lstrace"), run, 4, 22);
  const auto c = write_run(dir.file("c.lstrace"), run, 7, 33);
  ASSERT_EQ(a.size(), 3u);
  ASSERT_EQ(b.size(), a.size());
  ASSERT_EQ(c.size(), a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].step, b[i].step);
    EXPECT_EQ(a[i].record_count, 1000u);
    EXPECT_EQ(a[i].record_count, b[i].record_count);
    EXPECT_EQ(a[i].digest, b[i].digest) << "step " << a[i].step;
    EXPECT_EQ(a[i].digest, c[i].digest) << "step " << a[i].step;
  }

  // One fingerprint changed in step 1: only step 1's digest moves.
  auto changed = run;
  auto it = std::find_if(changed.begin() + 1000, changed.end(),
                         [](const Record& r) { return !r.buffers.empty(); });
  ASSERT_NE(it, changed.end());
  it->buffers[0].fingerprint ^= 1;
  const auto d = write_run(dir.file("d.lstrace"), changed, 3, 44);
  EXPECT_EQ(d[0].digest, a[0].digest);
  EXPECT_NE(d[1].digest, a[1].digest);
  EXPECT_EQ(d[2].digest, a[2].digest);

  // A changed label text (same id positions) moves the digest too: text is hashed, not ids.
  auto relabeled = run;
  auto with_buffer = std::find_if(relabeled.begin(), relabeled.begin() + 1000,
                                  [](const Record& r) { return !r.buffers.empty(); });
  with_buffer->buffers[0].label = with_buffer->buffers[0].label == 2 ? 3 : 2;
  const auto e = write_run(dir.file("e.lstrace"), relabeled, 2, 55);
  EXPECT_NE(e[0].digest, a[0].digest);
}

TEST(Digest, ContentHashIgnoresSeqThreadIdsAndOrdinals) {
  std::mt19937_64 rng(9);
  Record record = testing::random_record(RecordKind::Gemm, rng, nullptr);
  record.buffers.resize(2);
  const std::vector<std::string_view> labels = {"A", "B"};
  const uint64_t base = record_content_hash(record, "gemm", labels);
  Record other = record;
  other.seq += 17, other.thread += 3, other.name += 5;
  other.buffers[0].alloc_ordinal += 9, other.buffers[1].label += 2;
  EXPECT_EQ(record_content_hash(other, "gemm", labels), base);
  other.stream += 1;
  EXPECT_NE(record_content_hash(other, "gemm", labels), base);
  EXPECT_NE(record_content_hash(record, "gemm2", labels), base);
  EXPECT_NE(record_content_hash(record, "gemm", {"B", "A"}), base);
  other = record;
  other.fields[fields::Gemm::k] += 1;
  EXPECT_NE(record_content_hash(other, "gemm", labels), base);
}

}  // namespace
}  // namespace lockstep::trace
