#include "tools/integrity.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "tools/run_set.h"
#include "trace/block_frame.h"
#include "trace/format.h"

namespace lockstep::tools {
namespace {

const char* file_kind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  return "not a regular file";
}

// An fd closed on every path out.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

int open_regular(const std::string& path, uint64_t* size) {
  int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) throw InputError(fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    const char* kind = file_kind(st.st_mode);
    ::close(fd);
    throw InputError(
        fmt::format("{}: {}, not a trace file (only regular files are read)", path, kind));
  }
  *size = static_cast<uint64_t>(st.st_size);
  return fd;
}

size_t read_at(int fd, uint64_t offset, void* out, size_t bytes) {
  size_t done = 0;
  while (done < bytes) {
    ssize_t got = ::pread(fd, static_cast<char*>(out) + done, bytes - done,
                          static_cast<off_t>(offset + done));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    done += static_cast<size_t>(got);
  }
  return done;
}

// The file front to back through one buffer: a few large reads instead of two per block (a run
// of thousands of rank files has millions of blocks).
class SequentialReader {
 public:
  // The buffer is the thread's, reused from file to file: no fresh pages for every file.
  SequentialReader(int fd, uint64_t size) : fd_(fd), size_(size) {
    thread_local std::vector<uint8_t> buffer;
    buffer_ = &buffer;
  }
  // The `bytes` at `offset` (at or after the previous call's), or nullptr when the file ends
  // (or shrank) before them. Valid until the next call.
  const uint8_t* view(uint64_t offset, size_t bytes) {
    if (offset >= start_ && offset + bytes <= start_ + filled_)
      return buffer_->data() + (offset - start_);
    const size_t want = static_cast<size_t>(
        std::min<uint64_t>(std::max<size_t>(bytes, kChunk), size_ - std::min(offset, size_)));
    if (want < bytes) return nullptr;
    if (buffer_->size() < want) buffer_->resize(want);
    start_ = offset;
    filled_ = read_at(fd_, offset, buffer_->data(), want);
    return filled_ >= bytes ? buffer_->data() : nullptr;
  }

 private:
  static constexpr size_t kChunk = 4u << 20;
  int fd_;
  uint64_t size_;
  std::vector<uint8_t>* buffer_;
  uint64_t start_ = 0;
  size_t filled_ = 0;
};

}  // namespace

void require_regular_file(const std::string& path) {
  uint64_t size = 0;
  Fd fd{open_regular(path, &size)};
}

FileIntegrity check_file(const std::string& path) {
  FileIntegrity out;
  out.path = path;
  Fd fd{open_regular(path, &out.size)};
  ::posix_fadvise(fd.fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  trace::FileHeader file{};
  if (read_at(fd.fd, 0, &file, sizeof(file)) != sizeof(file) ||
      std::memcmp(file.magic, trace::kFileMagic, sizeof(file.magic)) != 0)
    throw trace::TraceError(path + ": not a lockstep trace (no complete file header)");
  uint64_t offset = sizeof(file) + uint64_t{file.json_bytes};
  if (offset > out.size) throw trace::TraceError(path + ": trace cut off inside its JSON header");
  SequentialReader reader(fd.fd, out.size);
  auto corrupt = [&](uint64_t at, const char* what) {
    out.corrupt_offset = at;
    out.corruption = fmt::format("{}: {} at offset {}", path, what, at);
  };
  while (offset < out.size) {
    trace::BlockHeader header{};
    const uint8_t* at =
        out.size - offset < sizeof(header) ? nullptr : reader.view(offset, sizeof(header));
    if (!at) {
      out.truncated = true, out.truncation_offset = offset;
      break;
    }
    std::memcpy(&header, at, sizeof(header));
    if (const char* problem = trace::header_problem(header)) {
      corrupt(offset, problem);
      break;
    }
    const uint64_t end = offset + sizeof(header) + header.payload_bytes;
    if (end > out.size) {
      out.truncated = true, out.truncation_offset = offset;
      break;
    }
    const uint8_t* payload = reader.view(offset + sizeof(header), header.payload_bytes);
    if (!payload) {
      out.truncated = true, out.truncation_offset = offset;  // the file shrank while we read it
      break;
    }
    if (trace::block_checksum(header, payload, header.payload_bytes) != header.checksum) {
      corrupt(offset, trace::kChecksumMismatch);
      break;
    }
    if (out.end_block) {  // the writer writes nothing after its end record
      corrupt(offset, "block after the end record");
      out.end_block = false;
      break;
    }
    if (header.type == static_cast<uint8_t>(trace::BlockType::End)) out.end_block = true;
    offset = end;
  }
  return out;
}

std::optional<trace::TraceEnd> end_of(trace::TraceReader& reader) {
  reader.blocks();
  return reader.end();
}

int64_t last_complete_step(trace::TraceReader& reader) {
  std::vector<trace::StepSummary> summaries = reader.step_summaries();
  for (auto it = summaries.rbegin(); it != summaries.rend(); ++it) {
    uint64_t kept = 0;
    reader.for_each_record(it->step, it->step, [&](const trace::Record& r) {
      // Warning records are the writer's, outside every step's summary.
      if (r.step == it->step && r.kind != trace::RecordKind::Warning) ++kept;
      return kept < it->record_count;  // enough seen: the step is complete
    });
    if (kept >= it->record_count) return it->step;
  }
  return -1;
}

}  // namespace lockstep::tools
