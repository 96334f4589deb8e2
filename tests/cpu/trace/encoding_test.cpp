#include <gtest/gtest.h>

#include <random>

#include "../../fuzz/sample_traces.h"
#include "trace/encoding.h"
#include "trace/varint.h"

namespace lockstep::trace {
namespace {

TEST(Varint, EdgeValuesRoundTripAndCapAtNineBytes) {
  const uint64_t values[] = {0,
                             1,
                             127,
                             128,
                             16383,
                             16384,
                             (uint64_t{1} << 56) - 1,
                             uint64_t{1} << 56,
                             UINT64_MAX - 1,
                             UINT64_MAX};
  for (uint64_t value : values) {
    uint8_t bytes[16];
    uint8_t* end = put_varint(bytes, value);
    EXPECT_LE(end - bytes, kMaxVarintBytes);
    const uint8_t* in = bytes;
    uint64_t back = 0;
    ASSERT_TRUE(get_varint(in, end, back));
    EXPECT_EQ(back, value);
    EXPECT_EQ(in, end);
    // Every cut-off prefix is refused.
    for (uint8_t* cut = bytes; cut < end; ++cut) {
      const uint8_t* p = bytes;
      EXPECT_FALSE(get_varint(p, cut, back)) << value;
    }
  }
  uint8_t bytes[16];
  EXPECT_EQ(put_varint(bytes, UINT64_MAX) - bytes, 9);
  EXPECT_EQ(put_varint(bytes, 127) - bytes, 1);
  for (int64_t v : {int64_t{0}, int64_t{-1}, int64_t{1}, INT64_MIN, INT64_MAX})
    EXPECT_EQ(unzigzag(zigzag(v)), v);
}

TEST(Encoding, RandomRecordSequencesRoundTrip) {
  std::mt19937_64 rng(7);
  for (int round = 0; round < 50; ++round) {
    std::vector<Record> records;
    uint64_t seq = rng() % 1000;
    for (int i = 0; i < 200; ++i) {
      const auto& kinds = record_kinds();
      Record record = testing::random_record(kinds[rng() % kinds.size()].kind, rng, nullptr);
      // Mostly increasing seq, sometimes gaps and jumps back (several threads' records).
      seq = rng() % 10 ? seq + 1 : rng() >> (rng() % 64);
      record.seq = seq;
      record.step = rng() % 10 ? record.step : static_cast<uint32_t>(rng());
      record.name = static_cast<StringId>(rng() % 5 ? rng() % 30 : rng());
      if (rng() % 7 == 0 && !records.empty()) {  // repeat the previous record of a kind
        record = records[rng() % records.size()];
        record.seq = ++seq;
      }
      records.push_back(record);
    }
    std::vector<uint8_t> block(1 << 20);
    RecordEncoder encoder;
    uint8_t* out = block.data();
    for (const Record& record : records) {
      uint8_t* before = out;
      out = encoder.encode(record, record.thread, out);
      ASSERT_LE(static_cast<size_t>(out - before), RecordEncoder::max_encoded_size(record));
    }
    RecordDecoder decoder;
    const uint8_t* in = block.data();
    Record back;
    std::string error;
    for (const Record& record : records) {
      ASSERT_TRUE(decoder.decode(in, out, back, &error)) << error;
      ASSERT_EQ(back, record) << "round " << round;
    }
    EXPECT_EQ(in, out);
    EXPECT_FALSE(decoder.decode(in, out, back, &error));
  }
}

TEST(Encoding, TrailingFieldsOfANewerWriterAreSkipped) {
  // Memset (3 fields) with a mask naming field 0 and a 4th field this reader does not know.
  const uint8_t bytes[] = {static_cast<uint8_t>(RecordKind::Memset), 0x09, 7, 99};
  RecordDecoder decoder;
  const uint8_t* in = bytes;
  Record record;
  std::string error;
  ASSERT_TRUE(decoder.decode(in, bytes + sizeof(bytes), record, &error)) << error;
  EXPECT_EQ(in, bytes + sizeof(bytes));
  EXPECT_EQ(record.kind, RecordKind::Memset);
  EXPECT_EQ(record.seq, 1u);
  EXPECT_EQ(record.fields[fields::Memset::value], 7u);
  EXPECT_EQ(record.fields[3], 0u);
  // An unknown kind is refused, not guessed at.
  const uint8_t unknown[] = {0x3f, 0x00};  // far past the newest kind
  in = unknown;
  EXPECT_FALSE(decoder.decode(in, unknown + sizeof(unknown), record, &error));
  EXPECT_NE(error.find("unknown record kind"), std::string::npos);
}

// A training loop's kernel launches: seq +1, one stream and step, 40 distinct kernels (small name
// ids) each with its own small grid/block, scalar-argument digest, MiB-sized buffers and
// allocations (the caching allocator hands out the same blocks every iteration); fingerprints
// are random. `catalog_drift`: the share of launches whose grid, digest, sizes and allocations
// are redrawn (0 = a steady loop, 1 = nothing repeats but the name).
double kernel_bytes_per_record(double catalog_drift) {
  std::mt19937_64 rng(3);
  struct Kernel {
    Record record;
  };
  auto draw = [&](Record& record) {
    record.fields[fields::Kernel::grid_x] = 1 + rng() % 4096;
    record.fields[fields::Kernel::block_x] = 128 << (rng() % 3);
    record.fields[fields::Kernel::args_digest] = rng();
    for (auto& buffer : record.buffers) {
      buffer.bytes = (1 + rng() % 64) << 20;
      buffer.alloc_ordinal = 1 + rng() % 200;
      buffer.alloc_offset = (rng() % 4096) * 512;
    }
  };
  std::vector<Record> catalog(40);
  for (size_t k = 0; k < catalog.size(); ++k) {
    Record& record = catalog[k];
    record.kind = RecordKind::Kernel;
    record.stream = 1, record.step = 5, record.thread = 1;
    record.name = static_cast<StringId>(1 + k);
    record.fields[fields::Kernel::grid_y] = record.fields[fields::Kernel::grid_z] = 1;
    record.fields[fields::Kernel::block_y] = record.fields[fields::Kernel::block_z] = 1;
    record.fields[fields::Kernel::launch_api] = 1;
    for (int b = 0; b < 2; ++b) {
      BufferFingerprint buffer;
      buffer.role = b ? Role::Out : Role::In;
      buffer.dtype = DType::BF16;
      buffer.flags = kFingerprintValid;
      buffer.label = 50 + b;
      record.buffers.push_back(buffer);
    }
    draw(record);
  }
  RecordEncoder encoder;
  std::vector<uint8_t> block(1 << 20);
  uint8_t* out = block.data();
  const int n = 8000;  // about one 256 KiB block
  for (int i = 0; i < n; ++i) {
    Record record = catalog[rng() % catalog.size()];
    if (std::uniform_real_distribution<double>(0, 1)(rng) < catalog_drift) draw(record);
    record.seq = 1000 + i;
    for (auto& buffer : record.buffers) buffer.fingerprint = rng();
    out = encoder.encode(record, 1, out);
  }
  return static_cast<double>(out - block.data()) / n;
}

TEST(Encoding, KernelWithTwoFingerprintsIsSmall) {
  const double steady = kernel_bytes_per_record(0.0);
  const double drifting = kernel_bytes_per_record(0.2);
  const double random = kernel_bytes_per_record(1.0);
  RecordProperty("bytes_per_kernel_record_steady", std::to_string(steady));
  RecordProperty("bytes_per_kernel_record_random", std::to_string(random));
  std::printf("kernel + 2 fingerprints: %.1f B steady, %.1f B with 20%% drift, %.1f B all random\n",
              steady, drifting, random);
  EXPECT_LE(steady, 48.0);
  EXPECT_LE(drifting, 48.0);
  EXPECT_GE(steady, 18.0);  // the two fingerprints alone are 16 bytes: anything less is a bug
}

// Found by the fuzzer (CI, 2026-11-30): a step delta near INT64_MAX overflowed the signed sum
// (UBSan) before the range check. It is corruption: decoding stops with "step out of range".
// The overflow itself only shows under UBSan: the fuzz test replays this input
// (tests/fuzz/regressions/step-delta-overflow.bin) before it fuzzes.
TEST(Encoding, HugeStepDeltaIsCorruptionNotOverflow) {
  const std::vector<uint8_t> bytes = {
      0x01, 0xce, 0x30, 0x2f, 0x09, 0x01, 0x05, 0x83, 0x03, 0x07, 0x04, 0x03, 0xc4, 0xdb, 0x85,
      0x1d, 0x86, 0xe1, 0xd2, 0xa4, 0xb3, 0xbc, 0x9d, 0x9c, 0x82, 0x7f, 0x04, 0x10, 0x06, 0xdc,
      0xce, 0xff, 0x01, 0x35, 0x2f, 0x11, 0xff, 0xff, 0x01, 0x38, 0x2f, 0x09, 0x01, 0x05, 0x03,
      0x03, 0x07, 0x04, 0x03, 0xc4, 0xdb, 0x85, 0x1d, 0x86, 0xe1, 0xd2, 0xa4, 0xb3, 0xbc, 0x9d,
      0x9c, 0x82, 0x7f, 0x04, 0x10, 0x06, 0xdc, 0x81, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
      0xff, 0xbc, 0xa7, 0xf4, 0x99, 0x7f, 0x13, 0x08, 0x03, 0x01, 0xb6};
  RecordDecoder decoder;
  Record record;
  const uint8_t* in = bytes.data();
  std::string error;
  int decoded = 0;
  while (decoded < 100 && decoder.decode(in, bytes.data() + bytes.size(), record, &error))
    ++decoded;
  EXPECT_EQ(error, "step out of range") << decoded << " records decoded first";
}

}  // namespace
}  // namespace lockstep::trace
