#include <gtest/gtest.h>

#include <map>
#include <random>

#include <nlohmann/json.hpp>

#include "sample_traces.h"
#include "test_util.h"
#include "trace/header.h"

namespace lockstep::trace {
namespace {

using testing::TempDir;

TEST(RoundTrip, EveryKindEveryFieldBuffersPayloadAndStrings) {
  TempDir dir;
  WriterOptions options;
  options.path = dir.file("t.lstrace");
  options.block_bytes = 8192;  // many blocks, so delta state resets are exercised
  nlohmann::json extra = {{"gpu", {{"name", "H200"}, {"uuid", "GPU-1234"}}},
                          {"nccl_version", "2.27.3"}};
  std::string error;
  auto writer = TraceWriter::open(options, build_trace_header(extra), &error);
  ASSERT_TRUE(writer) << error;

  std::mt19937_64 rng(42);
  std::vector<Record> written;
  std::map<StringId, std::string> texts;
  const std::string long_name = "void cutlass::Kernel<" + std::string(1500, 'x') + ">";
  uint64_t seq = 0;
  for (int round = 0; round < 300; ++round) {
    for (const RecordKindInfo& info : record_kinds()) {
      if (writers_own_kind(info.kind)) continue;  // StepSummary, Scope
      Record record = testing::random_record(info.kind, rng, writer.get());
      record.seq = ++seq;
      record.step = round / 100;
      const std::string name = round % 50 == 0 ? long_name : "op_" + std::to_string(rng() % 30);
      record.name = writer->intern(name);
      texts[record.name] = name;
      for (auto& buffer : record.buffers) texts[buffer.label] = "";  // filled from the writer below
      ASSERT_TRUE(writer->append(record));
      written.push_back(record);
    }
  }
  writer->close();
  EXPECT_EQ(writer->stats().appended, written.size());
  EXPECT_EQ(writer->stats().dropped, 0u);
  EXPECT_EQ(writer->stats().write_errors, 0u);

  auto reader = TraceReader::open(options.path);
  EXPECT_EQ(reader->format_version(), kFormatVersion);
  EXPECT_EQ(reader->header()["gpu"]["uuid"], "GPU-1234");
  EXPECT_EQ(reader->header()["nccl_version"], "2.27.3");
  EXPECT_EQ(reader->header()["format_version"], kFormatVersion);
  EXPECT_TRUE(reader->header().contains("start_time"));
  EXPECT_TRUE(reader->header()["command_line"].is_array());
  auto records = testing::read_all_records(*reader);
  ASSERT_EQ(records.size(), written.size());
  for (size_t i = 0; i < records.size(); ++i) ASSERT_EQ(records[i], written[i]) << "record " << i;
  for (const Record& record : records) {
    EXPECT_EQ(reader->string(record.name), texts[record.name]);
    for (const auto& buffer : record.buffers) {
      auto label = reader->string(buffer.label);
      EXPECT_TRUE(label == "A" || label == "B" || label == "D" || label == "A_scale" ||
                  label == "send" || label == "recv" || label == "arg3" || label == "arg0")
          << label;
    }
  }
  EXPECT_FALSE(reader->truncated());
  reader->verify_all();
  EXPECT_THROW(reader->string(999999), TraceError);
  EXPECT_EQ(reader->string(0), "");

  // Every kind came back.
  std::map<RecordKind, int> kinds;
  for (const Record& record : records) ++kinds[record.kind];
  EXPECT_EQ(kinds.size(), record_kinds().size() - 2);  // not StepSummary, Scope

  // Step filtering reads only blocks meeting the range and passes only records in it.
  size_t in_step_1 = 0;
  reader->for_each_record(1, 1, [&](const Record& record) {
    EXPECT_EQ(record.step, 1u);
    ++in_step_1;
    return true;
  });
  EXPECT_EQ(in_step_1, 100 * (record_kinds().size() - 2));

  // Early stop.
  size_t seen = 0;
  reader->for_each_record([&](const Record&) { return ++seen < 5; });
  EXPECT_EQ(seen, 5u);

  // Block index: the records blocks cover steps 0..2 and their first_seq is their smallest seq.
  uint32_t max_step = 0;
  for (const BlockInfo& block : reader->blocks()) {
    if (block.type == BlockType::Records) max_step = std::max(max_step, block.max_step);
    EXPECT_LE(block.payload_bytes, options.block_bytes);
  }
  EXPECT_EQ(max_step, 2u);
}

TEST(RoundTrip, StepSummariesCountRecordsPerStep) {
  TempDir dir;
  WriterOptions options;
  options.path = dir.file("s.lstrace");
  std::string error;
  auto writer = TraceWriter::open(options, nlohmann::json::object(), &error);
  ASSERT_TRUE(writer) << error;
  std::mt19937_64 rng(1);
  uint64_t seq = 0;
  for (uint32_t step = 0; step < 5; ++step) {
    for (uint32_t i = 0; i < 10 + step; ++i) {
      Record record = testing::random_record(RecordKind::Kernel, rng, writer.get());
      record.seq = ++seq;
      record.step = step;
      writer->append(record);
    }
    if (step != 3) writer->end_step(step);  // step 3 is summarized at close
  }
  writer->end_step(7);  // a step without records still gets a summary
  writer->close();
  auto reader = TraceReader::open(options.path);
  auto summaries = reader->step_summaries();
  ASSERT_EQ(summaries.size(), 6u);
  for (uint32_t step = 0; step < 5; ++step) {
    EXPECT_EQ(summaries[step].step, step);
    EXPECT_EQ(summaries[step].record_count, 10 + step);
    EXPECT_NE(summaries[step].digest, 0u);
  }
  EXPECT_EQ(summaries[5].step, 7u);
  EXPECT_EQ(summaries[5].record_count, 0u);
  // The digest is the sum of the records' content hashes, recomputed from the text of strings.
  std::map<uint32_t, uint64_t> digests;
  reader->for_each_record([&](const Record& record) {
    std::vector<std::string_view> labels;
    for (const auto& buffer : record.buffers) labels.push_back(reader->string(buffer.label));
    digests[record.step] += record_content_hash(record, reader->string(record.name), labels);
    return true;
  });
  for (uint32_t step = 0; step < 5; ++step) EXPECT_EQ(summaries[step].digest, digests[step]);
}

// The diff pairs two runs' steps by the job's numbers; it reads them from the summaries alone.
TEST(RoundTrip, StepSummariesCarryTheJobsNumberFromTheStepsNumberedMarker) {
  TempDir dir;
  WriterOptions options;
  options.path = dir.file("n.lstrace");
  std::string error;
  auto writer = TraceWriter::open(options, nlohmann::json::object(), &error);
  ASSERT_TRUE(writer) << error;
  uint64_t seq = 0;
  auto marker = [&](uint32_t step, std::optional<uint64_t> number) {
    Record record;
    record.kind = RecordKind::StepMarker;
    record.seq = ++seq;
    record.step = step;
    record.name = writer->intern("step");
    record.fields[fields::StepMarker::new_step] = step;
    if (number) {
      record.fields[fields::StepMarker::job_step] = *number;
      record.fields[fields::StepMarker::numbered] = 1;
    }
    writer->append(record);
  };
  // Step 0: set-up, no marker. Step 1 starts with "step 4", step 2 with "step 0" (a number
  // may be 0), step 3 with an unnumbered marker; step 4 is summarized at close.
  writer->end_step(0);
  marker(1, 4);
  writer->end_step(1);
  marker(2, 0);
  writer->end_step(2);
  marker(3, std::nullopt);
  writer->end_step(3);
  marker(4, 9);
  writer->close();
  auto summaries = TraceReader::open(options.path)->step_summaries();
  ASSERT_EQ(summaries.size(), 5u);
  EXPECT_EQ(summaries[0].job_step, std::nullopt);
  EXPECT_EQ(summaries[1].job_step, std::optional<uint64_t>(4));
  EXPECT_EQ(summaries[2].job_step, std::optional<uint64_t>(0));
  EXPECT_EQ(summaries[3].job_step, std::nullopt);
  EXPECT_EQ(summaries[4].job_step, std::optional<uint64_t>(9));
}

TEST(RoundTrip, HeaderFromEnvironment) {
  ::setenv("RANK", "3", 1);
  ::setenv("WORLD_SIZE", "8", 1);
  ::setenv("LOCAL_RANK", "x", 1);  // not a number: ignored
  auto header = build_trace_header({{"config", {{"level", "full"}}}});
  ::unsetenv("RANK");
  ::unsetenv("WORLD_SIZE");
  ::unsetenv("LOCAL_RANK");
  EXPECT_EQ(header["rank"], 3);
  EXPECT_EQ(header["world_size"], 8);
  EXPECT_TRUE(header["local_rank"].is_null());
  EXPECT_EQ(header["pid"], static_cast<int64_t>(::getpid()));
  EXPECT_EQ(header["config"]["level"], "full");
  EXPECT_FALSE(header["host"].get<std::string>().empty());
  const std::string time = header["start_time"];
  EXPECT_EQ(time.size(), 24u) << time;
  EXPECT_EQ(time.back(), 'Z');
  EXPECT_FALSE(header["command_line"].empty());
}

}  // namespace
}  // namespace lockstep::trace
