#include "trace/run_dir.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "common/env.h"
#include "trace/bounded_json.h"
#include "trace/format.h"

namespace lockstep::trace {
namespace fs = std::filesystem;
namespace {

const char* getenv_nonempty(const char* name) {
  const char* value = std::getenv(name);
  return value && *value ? value : nullptr;
}

bool is_trace_name(const std::string& name) {
  const std::string suffix = kTraceFileSuffix;
  return name.size() > suffix.size() &&
         name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::optional<int> rank_of_name(const std::string& name) {
  // rank-NNNNN.lstrace
  const std::string prefix = "rank-";
  const std::string suffix = kTraceFileSuffix;
  if (name.size() <= prefix.size() + suffix.size() || name.rfind(prefix, 0) != 0 ||
      !is_trace_name(name))
    return std::nullopt;
  const std::string digits =
      name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
  if (digits.empty() || digits.size() > 9 ||
      !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return std::nullopt;
  return std::stoi(digits);
}

// Holds an flock on DIR/.lockstep.lock while the manifest is checked and written, so that the
// processes of one run starting together see one manifest. Best effort: some parallel file
// systems refuse flock; the manifest is still created with link(), which is atomic.
class DirLock {
 public:
  explicit DirLock(const std::string& dir) {
    fd_ = ::open((dir + "/.lockstep.lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ >= 0) {
      while (::flock(fd_, LOCK_EX) != 0 && errno == EINTR) {}
    }
  }
  ~DirLock() {
    if (fd_ >= 0) ::close(fd_);  // releases the lock
  }

 private:
  int fd_ = -1;
};

bool write_file(const std::string& path, const std::string& text) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return false;
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  const bool ok = done == text.size() && ::fsync(fd) == 0;
  ::close(fd);
  return ok;
}

nlohmann::json make_manifest(const std::string& run_id) {
  return {{"run_id", run_id},
          {"format_version", kFormatVersion},
          {"lockstep_version", lockstep_version()},
          {"start_time", iso8601_now()},
          {"command_line", command_line()},
          {"created_by", {{"host", host_name()}, {"pid", static_cast<int64_t>(::getpid())}}}};
}

std::string refusal(const std::string& dir, const std::string& what) {
  return std::string(env::kDir) + " " + dir + " " + what + "; use a new directory or " +
         env::kOverwrite + "=1";
}

}  // namespace

std::string run_id_from_env() {
  if (const char* id = getenv_nonempty(env::kRunId)) return id;
  if (const char* id = getenv_nonempty("TORCHELASTIC_RUN_ID"))
    return std::string("torchelastic:") + id;
  if (const char* job = getenv_nonempty("SLURM_JOB_ID")) {
    const char* step = getenv_nonempty("SLURM_STEP_ID");
    return std::string("slurm:") + job + "." + (step ? step : "0");
  }
  return "host:" + host_name() + ":ppid:" + std::to_string(::getppid());
}

std::optional<nlohmann::json> read_manifest(const std::string& dir) {
  // A regular file of a manifest's size only (the shim reads it at start-up, gather too).
  constexpr uint64_t kMaxManifestBytes = 1u << 20;
  std::optional<nlohmann::json> manifest =
      read_bounded_json((fs::path(dir) / kManifestName).string(), kMaxManifestBytes, nullptr);
  if (!manifest || !manifest->is_object()) return std::nullopt;
  return manifest;
}

bool prepare_run_dir(const RunDirOptions& options, std::string* error) {
  auto set_error = [&](const std::string& text) {
    if (error) *error = text;
    return false;
  };
  if (options.dir.empty()) return set_error(std::string(env::kDir) + " is empty");
  const std::string run_id = options.run_id.empty() ? run_id_from_env() : options.run_id;
  std::error_code ec;
  fs::create_directories(options.dir, ec);
  if (!fs::is_directory(options.dir, ec))
    return set_error(std::string(env::kDir) + " " + options.dir +
                     " cannot be created: " + (ec ? ec.message() : "not a directory"));

  DirLock lock(options.dir);
  const std::string manifest_path = options.dir + "/" + kManifestName;
  if (auto manifest = read_manifest(options.dir)) {
    const auto theirs = manifest->value("run_id", std::string());
    if (theirs == run_id) return true;
    if (!options.overwrite)
      return set_error(
          refusal(options.dir, "holds a trace of another run (run id " + theirs + ")"));
  } else if (fs::exists(manifest_path, ec)) {
    if (!options.overwrite)
      return set_error(refusal(options.dir, "holds an unreadable manifest.json"));
  } else if (!options.overwrite) {
    // No manifest: refuse a directory that already holds traces (a run of an older lockstep or
    // a manifest lost); other files (a user's notes) do not matter.
    for (const auto& entry : fs::directory_iterator(options.dir, ec))
      if (is_trace_name(entry.path().filename().string()))
        return set_error(refusal(options.dir, "holds traces without a manifest.json"));
  }

  if (options.overwrite) {
    // Another run's traces go; nothing else in the directory is touched.
    if (auto manifest = read_manifest(options.dir);
        !manifest || manifest->value("run_id", "") != run_id) {
      for (const auto& entry : fs::directory_iterator(options.dir, ec))
        if (is_trace_name(entry.path().filename().string())) fs::remove(entry.path(), ec);
    }
  }

  const std::string temp =
      options.dir + "/.manifest." + host_name() + "." + std::to_string(::getpid()) + ".tmp";
  if (!write_file(temp, make_manifest(run_id).dump(2) + "\n")) {
    ::unlink(temp.c_str());
    return set_error(std::string(env::kDir) + " " + options.dir +
                     " is not writable: " + std::strerror(errno));
  }
  if (options.overwrite) {
    if (auto manifest = read_manifest(options.dir);
        !manifest || manifest->value("run_id", "") != run_id)
      ::rename(temp.c_str(), manifest_path.c_str());
    ::unlink(temp.c_str());
    return true;
  }
  // link() fails with EEXIST when another process of some run won the race: check theirs.
  const int linked = ::link(temp.c_str(), manifest_path.c_str());
  const int link_errno = errno;
  ::unlink(temp.c_str());
  if (linked == 0) return true;
  if (link_errno != EEXIST)
    return set_error(std::string(env::kDir) + " " + options.dir + ": cannot write " +
                     kManifestName + ": " + std::strerror(link_errno));
  auto manifest = read_manifest(options.dir);
  const auto theirs = manifest ? manifest->value("run_id", std::string()) : std::string("?");
  if (theirs == run_id) return true;
  return set_error(refusal(options.dir, "holds a trace of another run (run id " + theirs + ")"));
}

std::string rank_trace_name(int rank) {
  char name[64];
  std::snprintf(name, sizeof(name), "rank-%05d%s", rank, kTraceFileSuffix);
  return name;
}

std::string host_pid_trace_name(const std::string& host, long pid) {
  std::string safe = host;
  for (char& c : safe)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' || c == '_')) c = '_';
  return "host-" + safe + "-pid-" + std::to_string(pid) + kTraceFileSuffix;
}

std::unique_ptr<TraceWriter> open_run_writer(const RunDirOptions& options,
                                             WriterOptions writer_options,
                                             const nlohmann::json& header, std::string* error) {
  if (!prepare_run_dir(options, error)) return nullptr;
  // Every file names its run, so that files copied out of their directory still say which run
  // they belong to (a diff of two files from one run is then recognisable).
  nlohmann::json with_run_id = header;
  with_run_id["run_id"] = options.run_id.empty() ? run_id_from_env() : options.run_id;
  std::vector<std::string> names;
  if (auto rank = rank_from_env().rank) names.push_back(rank_trace_name(*rank));
  const std::string fallback = host_pid_trace_name(host_name(), static_cast<long>(::getpid()));
  names.push_back(fallback);
  for (int i = 2; i <= 9; ++i)
    names.push_back(fallback.substr(0, fallback.size() - std::strlen(kTraceFileSuffix)) + "-" +
                    std::to_string(i) + kTraceFileSuffix);
  std::string last_error;
  for (const std::string& name : names) {
    writer_options.path = options.dir + "/" + name;
    errno = 0;
    if (auto writer = TraceWriter::open(writer_options, with_run_id, &last_error)) return writer;
    if (errno != EEXIST) break;  // only a name collision is worth another name
  }
  if (error) *error = last_error;
  return nullptr;
}

std::vector<TraceFileEntry> list_trace_files(const std::string& dir) {
  std::vector<TraceFileEntry> files;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (!is_trace_name(name) || !entry.is_regular_file(ec)) continue;
    files.push_back({entry.path().string(), rank_of_name(name)});
  }
  std::sort(files.begin(), files.end(), [](const TraceFileEntry& a, const TraceFileEntry& b) {
    if (a.rank.has_value() != b.rank.has_value()) return a.rank.has_value();
    if (a.rank && *a.rank != *b.rank) return *a.rank < *b.rank;
    return a.path < b.path;
  });
  return files;
}

}  // namespace lockstep::trace
