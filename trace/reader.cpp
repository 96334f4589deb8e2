// TraceReader implementation: pread over the file, one block in memory at a time.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <map>
#include <span>
#include <unordered_map>

#include <xxhash.h>

#include "trace/block_frame.h"
#include "trace/bounded_json.h"
#include "trace/encoding.h"
#include "trace/reader.h"
#include "trace/step_index.h"
#include "trace/varint.h"

namespace lockstep::trace {
namespace {

// A block's entry in the block list, from its header or from its entry in the step index (the
// same fields under the same names).
template <typename Fields>
BlockInfo block_info(uint64_t offset, const Fields& f) {
  BlockInfo info;
  info.offset = offset;
  info.type = static_cast<BlockType>(f.type);
  info.payload_bytes = f.payload_bytes;
  info.record_count = f.record_count;
  info.min_step = f.min_step;
  info.max_step = f.max_step;
  info.first_seq = f.first_seq;
  return info;
}

constexpr uint32_t kMaxJsonBytes = 16u << 20;
// Records one step may claim in its summaries: far above any job (a million kernels a step for
// a million steps is 2^40), and low enough that summing a file's partial summaries cannot wrap.
constexpr uint64_t kMaxStepRecords = uint64_t{1} << 40;

// What a file that is not a regular file is, for the one-line refusal; nullptr for a regular
// file. A directory keeps its own wording (tools suggest a run directory instead).
const char* irregular_kind(mode_t mode) {
  if (S_ISREG(mode)) return nullptr;
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISDIR(mode)) return "a directory";
  return "neither a file nor a directory";
}

class FileReader final : public TraceReader {
 public:
  explicit FileReader(std::string path) : path_(std::move(path)) {
    static std::atomic<uint64_t> readers{0};
    id_ = ++readers;
  }
  ~FileReader() override {
    if (fd_ >= 0) ::close(fd_);
  }

  void open_and_validate() {
    // Only regular files, and never a blocking open: a FIFO would hold open() until a writer
    // came, a device could do anything. stat first, then open without blocking and check again
    // what was opened (the name may have been swapped in between).
    struct stat st {};
    if (::stat(path_.c_str(), &st) != 0) fail(std::string("cannot open: ") + std::strerror(errno));
    refuse_irregular(st.st_mode);
    fd_ = ::open(path_.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd_ < 0) fail(std::string("cannot open: ") + std::strerror(errno));
    if (::fstat(fd_, &st) != 0) fail(std::string("cannot stat: ") + std::strerror(errno));
    refuse_irregular(st.st_mode);
    size_ = static_cast<uint64_t>(st.st_size);
    if (size_ == 0) fail("empty file, not a lockstep trace");

    FileHeader file{};
    // One read for the file header and (usually) the JSON header after it.
    load_near(0, std::min<uint64_t>(size_, kNearHead));
    const size_t got = read_cached(0, &file, std::min<uint64_t>(size_, sizeof(file)));
    if (got < sizeof(kFileMagic) || std::memcmp(file.magic, kFileMagic, sizeof(kFileMagic)) != 0)
      fail("not a lockstep trace (no LOCKSTEP magic at offset 0)");
    if (got < sizeof(file))
      fail("trace cut off inside its file header (" + std::to_string(size_) + " bytes)");
    version_ = file.format_version;
    if (version_ > kFormatVersion)
      fail("trace format v" + std::to_string(version_) + " is newer than this lockstep reads (v" +
           std::to_string(kFormatVersion) + ")");
    if (version_ < kOldestFormatVersion)
      fail("bad trace format version " + std::to_string(version_) + " at offset 8");
    if (file.json_bytes > kMaxJsonBytes) fail("JSON header length out of range at offset 12");
    if (sizeof(file) + uint64_t{file.json_bytes} > size_)
      fail("trace cut off inside its JSON header (offset 24)");
    std::string json(file.json_bytes, '\0');
    if (read_cached(sizeof(file), json.data(), json.size()) != json.size())
      fail("cannot read the JSON header at offset 24");
    forget_near();
    if (XXH64(json.data(), json.size(), 0) != file.json_checksum)
      fail("JSON header checksum mismatch at offset 24 (corrupt)");
    std::string problem;
    std::optional<nlohmann::json> parsed = parse_bounded_json(json, &problem);
    if (!parsed) fail("bad JSON header at offset 24: " + problem);
    header_ = std::move(*parsed);
    if (!header_.is_object()) fail("JSON header at offset 24 is not an object");
    check_rank_keys();
    data_start_ = sizeof(file) + file.json_bytes;
  }

  const std::string& path() const override { return path_; }
  uint32_t format_version() const override { return version_; }
  const nlohmann::json& header() const override { return header_; }
  bool truncated() const override { return truncated_; }
  uint64_t truncation_offset() const override { return truncation_offset_; }

  const std::vector<BlockInfo>& blocks() override {
    if (scanned_) return blocks_;
    blocks_.clear();  // a scan that threw before starts over
    if (read_index()) {
      scanned_ = true;
      return blocks_;
    }
    uint64_t offset = data_start_;
    while (offset < size_) {
      if (size_ - offset < sizeof(BlockHeader)) {
        mark_truncated(offset);
        break;
      }
      BlockHeader header{};
      if (read_at(offset, &header, sizeof(header)) != sizeof(header)) {
        mark_truncated(offset);
        break;
      }
      if (const char* problem = header_problem(header)) fail_at(offset, problem);
      const uint64_t end = offset + sizeof(header) + header.payload_bytes;
      if (end > size_) {
        mark_truncated(offset);  // a sound header whose payload was cut off: the tail of a kill
        break;
      }
      check_block_bounds(offset, header);
      if (header.type >= static_cast<uint8_t>(BlockType::Records) &&
          header.type <= kLastBlockType) {
        blocks_.push_back(block_info(offset, header));
      }  // else a block type from a newer writer: skipped
      offset = end;
      if (header.type == static_cast<uint8_t>(BlockType::End) && offset < size_)
        fail_at(offset, "data after the end-of-trace block (corrupt)");
    }
    scanned_ = true;
    return blocks_;
  }

  bool indexed() override {
    blocks();
    return indexed_;
  }

  const std::optional<TraceEnd>& end() override {
    if (end_loaded_) return end_;
    const std::vector<BlockInfo>& list = blocks();
    if (!list.empty() && list.back().type == BlockType::End) end_ = load_end(list.back());
    end_loaded_ = true;
    return end_;
  }

  std::vector<StepSummary> step_summaries() override {
    if (indexed()) {
      std::vector<StepSummary> out;
      out.reserve(index_summaries_.size());
      for (const IndexSummaryEntry& entry : index_summaries_) {
        StepSummary summary;
        summary.step = entry.step;
        summary.record_count = entry.record_count;
        summary.digest = entry.digest;
        const uint64_t job_step = entry.job_step;  // a packed field: no reference to it
        if (entry.numbered) summary.job_step = job_step;
        out.push_back(summary);
      }
      return out;
    }
    return summaries_from_blocks();
  }

  // What the Summary blocks say, merged per step (with an index: what verify_all checks the
  // index's summaries against).
  std::vector<StepSummary> summaries_from_blocks() {
    std::map<uint32_t, StepSummary> merged;
    for (const BlockInfo& block : blocks()) {
      if (block.type != BlockType::Summary) continue;
      decode_block(block, [&](const Record& record) {
        merge_summary(merged, block, record);
        return true;
      });
    }
    std::vector<StepSummary> out;
    out.reserve(merged.size());
    for (auto& [step, summary] : merged) out.push_back(summary);
    return out;
  }

  // One StepSummary record of a Summary block into the per-step totals.
  void merge_summary(std::map<uint32_t, StepSummary>& merged, const BlockInfo& block,
                     const Record& record) const {
    if (record.kind != RecordKind::StepSummary)
      fail_at(block.offset, "summary block holds a non-summary record");
    const uint64_t wide_step = record.fields[fields::StepSummary::summarized_step];
    if (wide_step > UINT32_MAX) fail_at(block.offset, "summary step out of range");
    const auto step = static_cast<uint32_t>(wide_step);
    const uint64_t count = record.fields[fields::StepSummary::record_count];
    StepSummary& summary = merged[step];  // partial summaries of one step add up
    summary.step = step;
    if (count > kMaxStepRecords - summary.record_count)
      fail_at(block.offset, "summary record count out of range for step " + std::to_string(step));
    summary.record_count += count;
    summary.digest += record.fields[fields::StepSummary::digest];
    if (record.fields[fields::StepSummary::numbered] != 0)
      summary.job_step = record.fields[fields::StepSummary::job_step];
  }

  void for_each_record(uint32_t first_step, uint32_t last_step,
                       const std::function<bool(const Record&)>& callback) override {
    const std::vector<BlockInfo>& list = blocks();
    auto wanted = [&](const BlockInfo& block) {
      return block.type == BlockType::Records && block.max_step >= first_step &&
             block.min_step <= last_step;
    };
    auto first = std::find_if(list.begin(), list.end(), wanted);
    auto last = std::find_if(list.rbegin(), list.rend(), wanted);
    if (first == list.end()) return;
    // One large read only where the blocks wanted are most of the span (no window of one step
    // reads a file's worth of other steps' blocks between two of its own).
    const uint64_t span_end = last->offset + sizeof(BlockHeader) + last->payload_bytes;
    uint64_t wanted_bytes = 0;
    for (auto it = first; it != list.end() && it->offset < span_end; ++it)
      if (wanted(*it)) wanted_bytes += sizeof(BlockHeader) + it->payload_bytes;
    const bool dense = span_end > first->offset && 2 * wanted_bytes >= span_end - first->offset;
    Span span(*this, first->offset, dense ? span_end : first->offset);
    for (const BlockInfo& block : list) {
      if (block.type != BlockType::Records) continue;
      if (block.max_step < first_step || block.min_step > last_step) continue;
      bool more = true;
      decode_block(block, [&](const Record& record) {
        if (record.step < first_step || record.step > last_step) return true;
        more = callback(record);
        return more;
      });
      if (!more) return;
    }
  }

  void verify_all(const std::function<void(const Record&)>& records) override {
    // The Summary blocks' totals so far: an Index block (after every Summary block it covers)
    // must say the same.
    std::map<uint32_t, StepSummary> summaries;
    const std::vector<BlockInfo>& list = blocks();
    Span span(*this, data_start_, size_);
    for (size_t i = 0; i < list.size(); ++i) {
      const BlockInfo& block = list[i];
      if (block.type == BlockType::Strings) {
        load_strings_block(block);
      } else if (block.type == BlockType::End) {
        (void)end();
      } else if (block.type == BlockType::Index) {
        check_index_block(block, std::span(list.data(), i), summaries);
      } else {
        decode_block(block, [&](const Record& record) {
          if ((block.type == BlockType::Summary) != (record.kind == RecordKind::StepSummary) ||
              (block.type == BlockType::Scopes) != (record.kind == RecordKind::Scope))
            fail_at(block.offset, "record kind does not belong in this block type");
          if (block.type == BlockType::Summary) merge_summary(summaries, block, record);
          if (records && block.type == BlockType::Records) records(record);
          return true;
        });
      }
    }
  }

  std::vector<std::string_view> scope_path(ScopeId id) override {
    std::vector<std::string_view> path;
    for (; id != 0; id = scope_entry(id).parent) path.push_back(string(scope_entry(id).name));
    std::reverse(path.begin(), path.end());
    return path;
  }

  ScopeId scope_parent(ScopeId id) override { return id == 0 ? 0 : scope_entry(id).parent; }

  std::string_view string(StringId id) override {
    if (id == 0) return {};
    if (!strings_loaded_) {
      for (const BlockInfo& block : blocks())
        if (block.type == BlockType::Strings) load_strings_block(block);
      strings_loaded_ = true;
    }
    auto it = strings_.find(id);
    if (it == strings_.end()) fail("string id " + std::to_string(id) + " is not defined");
    return it->second;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const { throw TraceError(path_ + ": " + what); }

  struct ScopeEntry {
    ScopeId parent = 0;
    StringId name = 0;
  };
  // Every Scopes block, read once. A parent must be an earlier (smaller) id: the writer interns
  // parents first, and a path walk then always ends.
  const ScopeEntry& scope_entry(ScopeId id) {
    if (!scopes_loaded_) {
      for (const BlockInfo& block : blocks()) {
        if (block.type != BlockType::Scopes) continue;
        decode_block(block, [&](const Record& record) {
          const uint64_t scope = record.fields[fields::Scope::scope_id];
          const uint64_t parent = record.fields[fields::Scope::parent];
          if (record.kind != RecordKind::Scope || scope == 0 || scope > UINT32_MAX ||
              parent >= scope)
            fail_at(block.offset, "corrupt scope definition");
          scopes_.try_emplace(static_cast<ScopeId>(scope),
                              ScopeEntry{static_cast<ScopeId>(parent), record.name});
          return true;
        });
      }
      scopes_loaded_ = true;
    }
    auto it = scopes_.find(id);
    if (it == scopes_.end()) fail("scope id " + std::to_string(id) + " is not defined");
    return it->second;
  }

  void refuse_irregular(mode_t mode) const {
    const char* kind = irregular_kind(mode);
    if (!kind) return;
    if (S_ISDIR(mode)) fail("is a directory, not a lockstep trace");
    fail(std::string("not a regular file (") + kind + ")");
  }

  // rank, world_size and local_rank, when present and not null: integers with
  // 0 <= rank < world_size <= kMaxWorldSize, 0 <= local_rank < world_size. A tool sizes tables
  // by them, so they are bounded here, before anyone uses them.
  void check_rank_keys() const {
    auto integer = [&](const char* key) -> std::optional<int64_t> {
      auto it = header_.find(key);
      if (it == header_.end() || it->is_null()) return std::nullopt;
      std::string shown = it->dump(-1, ' ', true, nlohmann::json::error_handler_t::replace);
      if (shown.size() > 40) shown = shown.substr(0, 37) + "...";
      if (!it->is_number_integer())
        fail("JSON header key \"" + std::string(key) + "\" is not an integer: " + shown);
      if (it->is_number_unsigned() && it->get<uint64_t>() > uint64_t{INT64_MAX})
        fail("JSON header key \"" + std::string(key) + "\" is out of range: " + shown);
      return it->get<int64_t>();
    };
    auto out_of_range = [&](const char* key, int64_t value, const std::string& allowed) {
      fail("JSON header key \"" + std::string(key) +
           "\" is out of range: " + std::to_string(value) + " (" + allowed + ")");
    };
    const auto world = integer("world_size");
    const auto rank = integer("rank");
    const auto local = integer("local_rank");
    if (world && (*world < 1 || *world > kMaxWorldSize))
      out_of_range("world_size", *world, "1.." + std::to_string(kMaxWorldSize));
    const int64_t limit = world ? *world : kMaxWorldSize;
    const std::string allowed = world ? "0..world_size-1 = 0.." + std::to_string(limit - 1)
                                      : "0.." + std::to_string(limit - 1);
    if (rank && (*rank < 0 || *rank >= limit)) out_of_range("rank", *rank, allowed);
    if (local && (*local < 0 || *local >= limit)) out_of_range("local_rank", *local, allowed);
  }
  [[noreturn]] void fail_at(uint64_t offset, const std::string& what) const {
    throw TraceError(path_ + ": " + what + " at offset " + std::to_string(offset));
  }

  // Numbers a block header claims, bounded before anything trusts them (format.h).
  void check_block_bounds(uint64_t offset, const BlockHeader& header) const {
    if (header.min_step > header.max_step)
      fail_at(offset, "corrupt block header (min step " + std::to_string(header.min_step) +
                          " > max step " + std::to_string(header.max_step) + ")");
    // Each record takes at least one byte, each string definition two (id and length).
    const uint64_t least = header.type == static_cast<uint8_t>(BlockType::Strings)
                               ? uint64_t{header.record_count} * 2
                               : uint64_t{header.record_count};
    if (least > header.payload_bytes)
      fail_at(offset, "corrupt block header (" + std::to_string(header.record_count) +
                          " records cannot fit in " + std::to_string(header.payload_bytes) +
                          " bytes)");
    if (header.type == static_cast<uint8_t>(BlockType::End) &&
        (header.payload_bytes < sizeof(EndPayload) || header.payload_bytes > kMaxEndPayload ||
         header.record_count != 0))
      fail_at(offset, "corrupt end-of-trace block header");
  }

  // The step index (step_index.h), found from the file's last 16 bytes: fills blocks_ (every
  // block, the Index and End blocks last), the End block and the summaries. False, leaving
  // nothing set, when the file does not end with an End block that points at an index whose
  // header and checksum hold: the caller then walks the blocks, which reports whatever is wrong
  // in its usual words. An index whose checksum holds but whose entries do not is corruption.
  bool read_index() {
    EndIndexTrailer trailer{};
    if (size_ < data_start_ + 2 * sizeof(BlockHeader) + sizeof(EndPayload) + sizeof(trailer))
      return false;
    // One read for the trailer and the End block, one for the index before it.
    load_near(size_ - std::min<uint64_t>(size_ - data_start_, kNearTail), size_);
    struct Forget {
      FileReader* reader;
      ~Forget() { reader->forget_near(); }
    } forget{this};
    if (read_cached(size_ - sizeof(trailer), &trailer, sizeof(trailer)) != sizeof(trailer) ||
        trailer.magic != kIndexTrailerMagic)
      return false;
    if (trailer.end_block_bytes < sizeof(BlockHeader) + sizeof(EndPayload) + sizeof(trailer) ||
        trailer.end_block_bytes > sizeof(BlockHeader) + kMaxEndPayload ||
        trailer.end_block_bytes > size_ - data_start_)
      return false;
    const uint64_t end_offset = size_ - trailer.end_block_bytes;
    std::vector<uint8_t> end_payload;
    BlockHeader end_header{};
    if (!read_sound_block(end_offset, BlockType::End, end_header, end_payload) ||
        end_offset + sizeof(BlockHeader) + end_header.payload_bytes != size_)
      return false;
    std::memcpy(&trailer, end_payload.data() + end_payload.size() - sizeof(trailer),
                sizeof(trailer));  // the checksummed copy (the same bytes)
    const uint64_t index_offset = trailer.index_offset;
    if (index_offset < data_start_ || index_offset > end_offset - sizeof(BlockHeader))
      return false;
    // The index fills the bytes up to the End block: one read of exactly them.
    if (index_offset < near_start_ &&
        end_offset - index_offset <= sizeof(BlockHeader) + kMaxBlockPayload)
      load_near(index_offset, size_);
    std::vector<uint8_t> index_payload;
    BlockHeader index_header{};
    if (!read_sound_block(index_offset, BlockType::Index, index_header, index_payload) ||
        index_offset + sizeof(BlockHeader) + index_header.payload_bytes != end_offset)
      return false;
    std::vector<IndexBlockEntry> entries;
    std::string error;
    if (!decode_step_index(index_payload.data(), index_payload.size(), data_start_, index_offset,
                           entries, index_summaries_, &error))
      fail_at(index_offset, "corrupt step index (" + error + ")");
    blocks_.reserve(entries.size() + 2);
    for (const IndexBlockEntry& e : entries) {
      if (e.type > kLastBlockType) continue;  // a block type from a newer writer: skipped
      blocks_.push_back(block_info(e.offset, e));
    }
    blocks_.push_back(block_info(index_offset, index_header));
    blocks_.push_back(block_info(end_offset, end_header));
    end_ = parse_end(end_offset, end_payload);
    end_loaded_ = true;
    indexed_ = true;
    return true;
  }

  // Reads the block at `offset` when its header is sound (magic, header check, bounds, of type
  // `type`) and its checksum holds; false otherwise.
  bool read_sound_block(uint64_t offset, BlockType type, BlockHeader& header,
                        std::vector<uint8_t>& payload) {
    if (read_cached(offset, &header, sizeof(header)) != sizeof(header) ||
        header_problem(header) != nullptr || header.type != static_cast<uint8_t>(type) ||
        offset + sizeof(header) + header.payload_bytes > size_)
      return false;
    try {
      check_block_bounds(offset, header);
    } catch (const TraceError&) {
      return false;
    }
    payload.resize(header.payload_bytes);
    return read_cached(offset + sizeof(header), payload.data(), payload.size()) == payload.size() &&
           block_checksum(header, payload.data(), payload.size()) == header.checksum;
  }

  // verify_all's check of an Index block: its checksum, its entries against the blocks before
  // it (each of which verify_all reads, checking its header against the listed one) and its
  // summaries against the Summary blocks' totals.
  void check_index_block(const BlockInfo& block, std::span<const BlockInfo> before,
                         const std::map<uint32_t, StepSummary>& from_blocks) {
    std::vector<uint8_t> payload;
    load_payload(block, payload);
    std::vector<IndexBlockEntry> entries;
    std::vector<IndexSummaryEntry> summaries;
    std::string error;
    if (!decode_step_index(payload.data(), payload.size(), data_start_, block.offset, entries,
                           summaries, &error))
      fail_at(block.offset, "corrupt step index (" + error + ")");
    size_t known = 0;
    for (const IndexBlockEntry& e : entries) {
      if (e.type > kLastBlockType) continue;  // not listed by blocks() either
      const bool same = known < before.size() && before[known].offset == e.offset &&
                        static_cast<uint8_t>(before[known].type) == e.type &&
                        before[known].payload_bytes == e.payload_bytes &&
                        before[known].record_count == e.record_count &&
                        before[known].min_step == e.min_step &&
                        before[known].max_step == e.max_step &&
                        before[known].first_seq == e.first_seq;
      if (!same)
        fail_at(block.offset, "corrupt step index (block at offset " + std::to_string(e.offset) +
                                  " differs from its entry)");
      ++known;
    }
    if (known != before.size())
      fail_at(block.offset, "corrupt step index (it lists " + std::to_string(known) + " of the " +
                                std::to_string(before.size()) + " blocks before it)");
    bool same = from_blocks.size() == summaries.size();
    auto it = from_blocks.begin();
    for (size_t i = 0; same && i < summaries.size(); ++i, ++it) {
      const StepSummary& b = it->second;
      same = b.step == summaries[i].step && b.record_count == summaries[i].record_count &&
             b.digest == summaries[i].digest &&
             b.job_step.has_value() == (summaries[i].numbered == 1) &&
             (!summaries[i].numbered || *b.job_step == summaries[i].job_step);
    }
    if (!same) fail_at(block.offset, "corrupt step index (its summaries differ from the file's)");
  }

  TraceEnd load_end(const BlockInfo& block) {
    std::vector<uint8_t> payload;
    load_payload(block, payload);
    return parse_end(block.offset, payload);
  }

  TraceEnd parse_end(uint64_t offset, const std::vector<uint8_t>& payload) {
    BlockInfo block;
    block.offset = offset;
    EndPayload fixed{};
    std::memcpy(&fixed, payload.data(), sizeof(fixed));  // payload_bytes >= sizeof: checked
    if (fixed.reason_bytes > kMaxEndReason || sizeof(fixed) + fixed.reason_bytes > payload.size() ||
        fixed.clean > 1)
      fail_at(block.offset, "corrupt end-of-trace block");
    TraceEnd end;
    end.records = fixed.records;
    end.dropped = fixed.dropped;
    end.steps = fixed.steps;
    end.last_step = fixed.last_step;
    end.write_errors = fixed.write_errors;
    end.clean = fixed.clean == 1;
    end.reason.assign(reinterpret_cast<const char*>(payload.data()) + sizeof(fixed),
                      fixed.reason_bytes);
    for (char c : end.reason)
      if (c < 0x20 || c >= 0x7f) fail_at(block.offset, "corrupt end-of-trace block (reason)");
    return end;
  }

  void mark_truncated(uint64_t offset) {
    truncated_ = true;
    truncation_offset_ = offset;
  }

  // The few reads of opening a file (its headers; its trailer, End block and index) come from
  // one read of the bytes around them: a diff of thousands of rank files opens each several
  // times (issue #34). Held only while opening.
  static constexpr uint64_t kNearHead = 4096, kNearTail = 4096;
  void load_near(uint64_t from, uint64_t to) {
    near_.resize(static_cast<size_t>(to - from));
    near_.resize(read_at(from, near_.data(), near_.size()));
    near_start_ = from;
  }
  void forget_near() {
    near_.clear();
    near_.shrink_to_fit();
  }
  size_t read_cached(uint64_t offset, void* out, size_t bytes) const {
    if (offset >= near_start_ && offset - near_start_ <= near_.size() &&
        bytes <= near_.size() - (offset - near_start_)) {
      if (bytes) std::memcpy(out, near_.data() + (offset - near_start_), bytes);
      return bytes;
    }
    return read_at(offset, out, bytes);
  }

  size_t read_at(uint64_t offset, void* out, size_t bytes) const {
    size_t done = 0;
    while (done < bytes) {
      ssize_t got = ::pread(fd_, static_cast<char*>(out) + done, bytes - done,
                            static_cast<off_t>(offset + done));
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) break;
      done += static_cast<size_t>(got);
    }
    return done;
  }

  // Reads a block's payload into `payload` and checks its checksum.
  // Header and payload in one read (the size is known from blocks()). The header read must be
  // the one listed: with a step index, blocks() took it from the index, not from the file.
  void load_payload(const BlockInfo& block, std::vector<uint8_t>& payload) {
    BlockHeader header{};
    payload.resize(block.payload_bytes);
    if (const uint8_t* at = from_span(block.offset, sizeof(header) + payload.size())) {
      std::memcpy(&header, at, sizeof(header));
      if (!payload.empty()) std::memcpy(payload.data(), at + sizeof(header), payload.size());
    } else {
      read_block(block, header, payload);
    }
    check_loaded(block, header, payload);
  }

  // Blocks read in file order (verify_all, for_each_record) come from one large read of the
  // span they lie in, kSpanChunk at a time, instead of a pread each: a run of thousands of rank
  // files has millions of blocks (issue #34). Nested spans (a callback reading strings) keep the
  // outer one's end.
  struct Span {
    Span(FileReader& reader, uint64_t start, uint64_t end)
        : reader(reader), saved_start(reader.span_start_), saved_end(reader.span_end_) {
      if (saved_end <= saved_start) reader.span_start_ = start, reader.span_end_ = end;
    }
    ~Span() { reader.span_start_ = saved_start, reader.span_end_ = saved_end; }
    FileReader& reader;
    uint64_t saved_start, saved_end;
  };
  static constexpr size_t kSpanChunk = 4u << 20;
  // The thread's buffer, shared by its readers one after another (owner: the reader's id).
  struct SpanBuffer {
    uint64_t owner = 0, start = 0;
    size_t filled = 0;
    std::vector<uint8_t> bytes;
  };

  // The `bytes` at `offset` from the span buffer, read now if need be; nullptr when they are
  // outside the span or the file ends before them (the caller then reads them itself, and says
  // what is wrong).
  const uint8_t* from_span(uint64_t offset, size_t bytes) {
    if (offset < span_start_ || offset >= span_end_ || bytes > span_end_ - offset) return nullptr;
    thread_local SpanBuffer buffer;
    if (buffer.owner == id_ && offset >= buffer.start && offset - buffer.start <= buffer.filled &&
        bytes <= buffer.filled - (offset - buffer.start))
      return buffer.bytes.data() + (offset - buffer.start);
    const size_t want = static_cast<size_t>(
        std::max<uint64_t>(bytes, std::min<uint64_t>(kSpanChunk, span_end_ - offset)));
    if (buffer.bytes.size() < want) buffer.bytes.resize(want);
    buffer.owner = id_;
    buffer.start = offset;
    buffer.filled = read_at(offset, buffer.bytes.data(), want);
    return buffer.filled >= bytes ? buffer.bytes.data() : nullptr;
  }

  void read_block(const BlockInfo& block, BlockHeader& header, std::vector<uint8_t>& payload) {
    iovec parts[2] = {{&header, sizeof(header)}, {payload.data(), payload.size()}};
    const size_t want = sizeof(header) + payload.size();
    size_t done = 0;
    while (done < want) {  // short reads: go on from where the last one stopped
      size_t skip = done;
      iovec rest[2];
      int count = 0;
      for (const iovec& part : parts) {
        if (skip >= part.iov_len) {
          skip -= part.iov_len;
          continue;
        }
        rest[count++] = {static_cast<char*>(part.iov_base) + skip, part.iov_len - skip};
        skip = 0;
      }
      const ssize_t got = ::preadv(fd_, rest, count, static_cast<off_t>(block.offset + done));
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) fail_at(block.offset, "block cannot be read (file shrank?)");
      done += static_cast<size_t>(got);
    }
  }

  // The header read must be the one listed and the checksum must hold.
  void check_loaded(const BlockInfo& block, const BlockHeader& header,
                    const std::vector<uint8_t>& payload) const {
    if (header.magic != kBlockMagic || header.type != static_cast<uint8_t>(block.type) ||
        header.payload_bytes != block.payload_bytes || header.record_count != block.record_count ||
        header.min_step != block.min_step || header.max_step != block.max_step) {
      // Said as a walk would say it when the header itself is bad (blocks() from the index
      // did not look at it); else the index and the file disagree.
      if (const char* problem = header_problem(header)) fail_at(block.offset, problem);
      check_block_bounds(block.offset, header);
      fail_at(block.offset, indexed_ ? "block header differs from the step index (corrupt)"
                                     : "block header changed while reading (file rewritten?)");
    }
    if (block_checksum(header, payload.data(), payload.size()) != header.checksum)
      fail_at(block.offset, kChecksumMismatch);
  }

  // What decoding one block needs. Callbacks may call back into the reader (string(), another
  // for_each_record), so every block being decoded has its own; spares are kept for reuse.
  struct DecodeWork {
    std::vector<uint8_t> payload;
    RecordDecoder decoder;
    Record record;
  };

  template <class Visit>
  void decode_block(const BlockInfo& block, Visit&& visit) {
    std::unique_ptr<DecodeWork> work;
    if (spare_work_.empty()) {
      work = std::make_unique<DecodeWork>();
    } else {
      work = std::move(spare_work_.back());
      spare_work_.pop_back();
    }
    struct GiveBack {
      FileReader* reader;
      std::unique_ptr<DecodeWork>& work;
      ~GiveBack() { reader->spare_work_.push_back(std::move(work)); }
    } give_back{this, work};
    load_payload(block, work->payload);
    const uint8_t* begin = work->payload.data();
    const uint8_t* in = begin;
    const uint8_t* end = begin + work->payload.size();
    work->decoder.reset();
    std::string error;
    for (uint32_t i = 0; i < block.record_count; ++i) {
      const uint8_t* at = in;
      if (!work->decoder.decode(in, end, work->record, &error))
        fail_at(block.offset + sizeof(BlockHeader) + (at - begin), "corrupt record: " + error);
      if (!visit(work->record)) return;
    }
    if (in != end)
      fail_at(block.offset + sizeof(BlockHeader) + (in - begin),
              "corrupt block: bytes after its last record");
  }

  void load_strings_block(const BlockInfo& block) {
    std::vector<uint8_t> payload;
    load_payload(block, payload);
    const uint8_t* begin = payload.data();
    const uint8_t* in = begin;
    const uint8_t* end = begin + payload.size();
    for (uint32_t i = 0; i < block.record_count; ++i) {
      const uint8_t* at = in;
      uint64_t id, length;
      if (!get_varint(in, end, id) || !get_varint(in, end, length) || id == 0 || id > UINT32_MAX ||
          length > static_cast<uint64_t>(end - in))
        fail_at(block.offset + sizeof(BlockHeader) + (at - begin), "corrupt string definition");
      if (length > kMaxStringBytes)  // no writer makes one: text a tool would print in full
        fail_at(block.offset + sizeof(BlockHeader) + (at - begin),
                "corrupt string definition (" + std::to_string(length) +
                    " bytes, over the format's " + std::to_string(kMaxStringBytes) + ")");
      strings_.try_emplace(static_cast<StringId>(id), reinterpret_cast<const char*>(in), length);
      in += length;
    }
    if (in != end)
      fail_at(block.offset + sizeof(BlockHeader) + (in - begin),
              "corrupt strings block: bytes after its last string");
  }

  std::string path_;
  uint64_t id_ = 0;  // this reader among the process's, for the thread's span buffer
  uint64_t span_start_ = 0, span_end_ = 0;  // the span being read in file order (Span)
  std::vector<uint8_t> near_;                // bytes read once while opening (load_near)
  uint64_t near_start_ = 0;
  int fd_ = -1;
  uint64_t size_ = 0;
  uint32_t version_ = 0;
  nlohmann::json header_;
  uint64_t data_start_ = 0;
  bool scanned_ = false, truncated_ = false, strings_loaded_ = false, end_loaded_ = false;
  bool scopes_loaded_ = false;
  bool indexed_ = false;  // blocks_, end_ and index_summaries_ came from the step index
  std::vector<IndexSummaryEntry> index_summaries_;
  std::unordered_map<ScopeId, ScopeEntry> scopes_;
  std::optional<TraceEnd> end_;
  uint64_t truncation_offset_ = 0;
  std::vector<BlockInfo> blocks_;
  std::unordered_map<StringId, std::string> strings_;
  std::vector<std::unique_ptr<DecodeWork>> spare_work_;
};

}  // namespace

std::unique_ptr<TraceReader> TraceReader::open(const std::string& path) {
  auto reader = std::make_unique<FileReader>(path);
  reader->open_and_validate();
  return reader;
}

}  // namespace lockstep::trace
