// What the reader and the shim take from outside is bounded before use: only regular files are
// opened (never blocking), header and block numbers are checked against sane maxima and the
// file, and rank variables from the environment are parsed strictly.
#include <gtest/gtest.h>

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <future>
#include <memory>

#include <nlohmann/json.hpp>

#include "common/env.h"
#include "sample_traces.h"
#include "test_util.h"
#include "trace/block_frame.h"
#include "trace/encoding.h"
#include "trace/header.h"
#include "trace/varint.h"

namespace lockstep::trace {
namespace {

using Clock = std::chrono::steady_clock;

std::string open_error(const std::string& path) {
  try {
    testing::read_everything(path);
  } catch (const TraceError& error) {
    return error.what();
  }
  return {};
}

void expect_one_line_error(const std::string& path, const std::string& needle) {
  const std::string message = open_error(path);
  EXPECT_EQ(message.rfind(path + ": ", 0), 0u) << message;
  EXPECT_NE(message.find(needle), std::string::npos) << message;
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
}

TEST(InputBounds, AFifoIsRefusedWithoutHanging) {
  testing::TempDir dir;
  const std::string fifo = dir.file("x.lstrace");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  auto opened = std::async(std::launch::async, [&] { return open_error(fifo); });
  if (opened.wait_for(std::chrono::seconds(5)) != std::future_status::ready) {
    // The reader is stuck in open(): give it a writer so that the test itself ends.
    const int unblock = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
    opened.wait();
    if (unblock >= 0) ::close(unblock);
    FAIL() << "opening a FIFO blocked";
  }
  const std::string message = opened.get();
  EXPECT_EQ(message, fifo + ": not a regular file (a FIFO)");
}

TEST(InputBounds, DevicesAndSocketsAreRefused) {
  expect_one_line_error("/dev/null", "not a regular file (a character device)");
  testing::TempDir dir;
  const std::string socket_path = dir.file("s.lstrace");
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  ASSERT_LT(socket_path.size(), sizeof(address.sun_path));
  std::strcpy(address.sun_path, socket_path.c_str());
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  expect_one_line_error(socket_path, "not a regular file (a socket)");
  ::close(fd);
}

std::string write_with_header(const testing::TempDir& dir, const nlohmann::json& header) {
  static int serial = 0;
  const std::string path = dir.file("h" + std::to_string(++serial) + ".lstrace");
  WriterOptions options;
  options.path = path;
  std::string error;
  auto writer = TraceWriter::open(options, header, &error);
  EXPECT_TRUE(writer) << error;
  if (writer) writer->close();
  return path;
}

TEST(InputBounds, HugeWorldSizeIsRefusedFast) {
  testing::TempDir dir;
  const std::string path = write_with_header(dir, {{"rank", 0}, {"world_size", 2147483647}});
  const auto start = Clock::now();
  expect_one_line_error(path, "JSON header key \"world_size\" is out of range: 2147483647 (1.." +
                                  std::to_string(kMaxWorldSize) + ")");
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(1));
}

TEST(InputBounds, RankKeysMustBeIntegersWithinTheWorld) {
  testing::TempDir dir;
  const nlohmann::json null;
  struct Case {
    nlohmann::json rank, world_size, local_rank;
    const char* error;  // nullptr: accepted
  };
  const Case cases[] = {
      {3, 4, 1, nullptr},
      {null, null, null, nullptr},
      {0, null, null, nullptr},
      {kMaxWorldSize - 1, kMaxWorldSize, 0, nullptr},
      {"3", 4, 0, "key \"rank\" is not an integer: \"3\""},
      {1.5, 4, 0, "key \"rank\" is not an integer: 1.5"},
      {-1, 4, 0, "key \"rank\" is out of range: -1 (0..world_size-1 = 0..3)"},
      {4, 4, 0, "key \"rank\" is out of range: 4"},
      {0, 4, 4294967296ull, "key \"local_rank\" is out of range: 4294967296"},
      {0, 0, 0, "key \"world_size\" is out of range: 0"},
      {0, 18446744073709551615ull, 0, "key \"world_size\" is out of range: 18446744073709551615"},
      {kMaxWorldSize, null, null, "key \"rank\" is out of range"},
      {0, nlohmann::json::array({1}), 0, "key \"world_size\" is not an integer: [1]"},
  };
  for (const Case& c : cases) {
    const std::string path = write_with_header(
        dir, {{"rank", c.rank}, {"world_size", c.world_size}, {"local_rank", c.local_rank}});
    SCOPED_TRACE(path + " rank " + c.rank.dump() + " world " + c.world_size.dump());
    if (c.error) {
      expect_one_line_error(path, c.error);
    } else {
      EXPECT_EQ(open_error(path), "");
    }
  }
}

// Rewrites the block at `index` after `change` edits its header, resealing it so that only the
// bounds checks can object.
void patch_block(const std::string& path, size_t index, void (*change)(BlockHeader&)) {
  const BlockInfo info = TraceReader::open(path)->blocks().at(index);
  auto bytes = testing::read_bytes(path);
  BlockHeader header;
  std::memcpy(&header, bytes.data() + info.offset, sizeof(header));
  change(header);
  seal_block_header(header, bytes.data() + info.offset + sizeof(header), header.payload_bytes);
  std::memcpy(bytes.data() + info.offset, &header, sizeof(header));
  testing::write_bytes(path, bytes);
}

TEST(InputBounds, BlockRecordCountsBeyondThePayloadAreCorruption) {
  testing::TempDir dir;
  const std::string path = dir.file("count.lstrace");
  std::string error;
  ASSERT_TRUE(testing::write_sample_trace(path, 0, &error)) << error;
  patch_block(path, 1, [](BlockHeader& h) { h.record_count = h.payload_bytes + 1; });
  expect_one_line_error(path, "records cannot fit in");
}

TEST(InputBounds, MinStepAfterMaxStepIsCorruption) {
  testing::TempDir dir;
  const std::string path = dir.file("steps.lstrace");
  std::string error;
  ASSERT_TRUE(testing::write_sample_trace(path, 1, &error)) << error;
  patch_block(path, 1, [](BlockHeader& h) { h.min_step = h.max_step + 1; });
  expect_one_line_error(path, "min step");
}

TEST(InputBounds, SummaryCountsThatCouldWrapAreCorruption) {
  testing::TempDir dir;
  const std::string path = dir.file("summary.lstrace");
  std::string error;
  ASSERT_TRUE(testing::write_sample_trace(path, 4, &error)) << error;  // header and End only
  auto bytes = testing::read_bytes(path);
  bytes.resize(TraceReader::open(path)->blocks().back().offset);  // End off: blocks may follow
  // One Summary block: two partial summaries of step 7 that add up past any real step.
  Record summary;
  summary.kind = RecordKind::StepSummary;
  summary.step = 7;
  summary.fields[fields::StepSummary::summarized_step] = 7;
  summary.fields[fields::StepSummary::record_count] = UINT64_MAX / 2 + 2;
  std::vector<uint8_t> payload(2 * RecordEncoder::max_encoded_size(summary));
  auto encoder = std::make_unique<RecordEncoder>();
  uint8_t* out = encoder->encode(summary, 0, payload.data());
  out = encoder->encode(summary, 0, out);
  payload.resize(out - payload.data());
  BlockHeader header{};
  header.type = static_cast<uint8_t>(BlockType::Summary);
  header.payload_bytes = static_cast<uint32_t>(payload.size());
  header.record_count = 2;
  header.min_step = header.max_step = 7;
  seal_block_header(header, payload.data(), payload.size());
  const auto* raw = reinterpret_cast<const uint8_t*>(&header);
  bytes.insert(bytes.end(), raw, raw + sizeof(header));
  bytes.insert(bytes.end(), payload.begin(), payload.end());
  testing::write_bytes(path, bytes);
  expect_one_line_error(path, "summary record count out of range for step 7");
}

// A trace (header, no End) whose one Strings block defines string 1 with `length` bytes.
std::string write_one_string(const testing::TempDir& dir, const std::string& name,
                             uint64_t length) {
  const std::string path = dir.file(name);
  std::string error;
  EXPECT_TRUE(testing::write_sample_trace(path, 4, &error)) << error;  // header and End only
  auto bytes = testing::read_bytes(path);
  bytes.resize(TraceReader::open(path)->blocks().back().offset);  // End off: blocks may follow
  std::vector<uint8_t> payload(2 * 10 + length);
  uint8_t* out = put_varint(put_varint(payload.data(), 1), length);
  std::memset(out, 'k', length);
  payload.resize(out + length - payload.data());
  BlockHeader header{};
  header.type = static_cast<uint8_t>(BlockType::Strings);
  header.payload_bytes = static_cast<uint32_t>(payload.size());
  header.record_count = 1;
  seal_block_header(header, payload.data(), payload.size());
  const auto* raw = reinterpret_cast<const uint8_t*>(&header);
  bytes.insert(bytes.end(), raw, raw + sizeof(header));
  bytes.insert(bytes.end(), payload.begin(), payload.end());
  testing::write_bytes(path, bytes);
  return path;
}

// The writer cuts text at kMaxStringBytes (StringTable::kMaxText): a longer definition is no
// writer's, and a tool would print it in full wherever a name is asked for in full.
TEST(InputBounds, AStringLongerThanAnyWriterMakesIsCorruption) {
  testing::TempDir dir;
  const std::string longest = write_one_string(dir, "longest.lstrace", kMaxStringBytes);
  EXPECT_EQ(open_error(longest), "");
  EXPECT_EQ(TraceReader::open(longest)->string(1).size(), kMaxStringBytes);
  expect_one_line_error(write_one_string(dir, "longer.lstrace", kMaxStringBytes + 1),
                        "corrupt string definition (1048577 bytes, over the format's 1048576)");
}

// Clears every rank variable for the test, then sets the given ones.
class RankEnv {
 public:
  RankEnv(std::initializer_list<std::pair<const char*, const char*>> values) {
    for (const auto* list :
         {&env::kRankVars, &env::kWorldSizeVars, &env::kLocalRankVars, &env::kLocalWorldSizeVars})
      for (const char* name : *list)
        scoped_.push_back(std::make_unique<testing::ScopedEnv>(name, nullptr));
    for (const auto& [name, value] : values)
      scoped_.push_back(std::make_unique<testing::ScopedEnv>(name, value));
  }

 private:
  std::vector<std::unique_ptr<testing::ScopedEnv>> scoped_;
};

TEST(RankFromEnv, GoodValuesAreTakenWithoutProblems) {
  RankEnv env{{"RANK", "3"}, {"WORLD_SIZE", "8"}, {"LOCAL_RANK", "03"}};
  const RankInfo info = rank_from_env();
  EXPECT_EQ(info.rank, 3);
  EXPECT_EQ(info.world_size, 8);
  EXPECT_EQ(info.local_rank, 3);
  EXPECT_TRUE(info.problems.empty());
}

TEST(RankFromEnv, BadValuesAreNotTakenAndEachIsNamedOnce) {
  struct Case {
    const char* rank;
    const char* world_size;
    const char* problem;  // the one line expected
  };
  const Case cases[] = {
      {"abc", "4", "RANK=abc is not a rank: expected decimal digits 0..3 (below the world size 4)"},
      {"-1", "4", "RANK=-1 is not a rank"},
      {" 3", "4", "RANK= 3 is not a rank"},
      {"+3", "4", "RANK=+3 is not a rank"},
      {"4294967296", "4", "RANK=4294967296 is not a rank"},
      {"4", "4", "RANK=4 is not a rank: expected decimal digits 0..3"},
      {"0x1", "4", "RANK=0x1 is not a rank"},
      {"0", "2147483647",
       "WORLD_SIZE=2147483647 is not a world size: expected decimal digits 1..1048576"},
      {"0", "0", "WORLD_SIZE=0 is not a world size"},
  };
  for (const Case& c : cases) {
    RankEnv env{{"RANK", c.rank}, {"WORLD_SIZE", c.world_size}};
    const RankInfo info = rank_from_env();
    SCOPED_TRACE(std::string("RANK=") + c.rank + " WORLD_SIZE=" + c.world_size);
    ASSERT_EQ(info.problems.size(), 1u);
    EXPECT_EQ(info.problems[0].rfind(c.problem, 0), 0u) << info.problems[0];
    EXPECT_EQ(info.problems[0].find('\n'), std::string::npos);
    const bool world_bad = std::string(c.problem).rfind("WORLD_SIZE", 0) == 0;
    EXPECT_EQ(info.world_size.has_value(), !world_bad);
    EXPECT_EQ(info.rank.has_value(), world_bad) << "a bad rank is not taken";
  }
}

TEST(RankFromEnv, TheFirstSetVariableDecidesEvenWhenItIsBad) {
  // Falling through to another launcher's variable would pick a rank the user did not set.
  RankEnv env{{"RANK", "two"}, {"OMPI_COMM_WORLD_RANK", "2"}, {"LOCAL_RANK", "x\n1"}};
  const RankInfo info = rank_from_env();
  EXPECT_FALSE(info.rank);
  EXPECT_FALSE(info.local_rank);
  ASSERT_EQ(info.problems.size(), 2u);
  EXPECT_EQ(info.problems[1].rfind("LOCAL_RANK=x?1 is not a local rank", 0), 0u)
      << info.problems[1];
  // And the header records no rank rather than a wrong one.
  EXPECT_TRUE(build_trace_header()["rank"].is_null());
}

}  // namespace
}  // namespace lockstep::trace
