#include "tools/run_set.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>

#include <fmt/format.h>

#include "tools/open_files.h"
#include "tools/parallel_for.h"
#include "trace/format.h"
#include "trace/run_dir.h"

namespace lockstep::tools {

namespace fs = std::filesystem;

int header_int(const nlohmann::json& header, const char* key, int fallback) {
  auto it = header.find(key);
  if (it == header.end() || !it->is_number_integer()) return fallback;
  if (it->is_number_unsigned() ? it->get<uint64_t>() > INT32_MAX
                               : (it->get<int64_t>() > INT32_MAX || it->get<int64_t>() < INT32_MIN))
    return fallback;
  return it->get<int>();
}

std::string header_string(const nlohmann::json& header, const char* key) {
  auto it = header.find(key);
  if (it == header.end()) return {};
  return it->is_string() ? it->get<std::string>() : it->dump();
}

const RankFile* RunSet::find(int rank) const {
  for (const RankFile& f : files)
    if (f.rank == rank) return &f;
  return nullptr;
}

void RunSet::require_complete() const {
  if (!missing_ranks.empty())
    throw InputError(fmt::format("{}: rank {} of world size {} has no trace file ({} missing)",
                                 path, missing_ranks.front(), world_size, missing_ranks.size()));
}

namespace {

// A header number a command sizes or loops by: absent (nullopt), or in [low, high]; anything
// else is refused with one line before it is used.
std::optional<int64_t> bounded_header_number(const nlohmann::json& header, const char* key,
                                             int64_t low, int64_t high, const std::string& file) {
  auto it = header.find(key);
  if (it == header.end() || it->is_null()) return std::nullopt;
  bool ok =
      it->is_number_integer() && !(it->is_number_unsigned() && it->get<uint64_t>() > INT64_MAX);
  int64_t value = ok ? it->get<int64_t>() : 0;
  if (!ok || value < low || value > high)
    throw InputError(fmt::format("{}: \"{}\": {} in its header is out of range ({}-{})", file, key,
                                 it->dump(), low, high));
  return value;
}

// What the workers learn of one file: its integrity and, when it has no corrupt block (the file
// then read as it is), its JSON header or why it has none (thrown where the serial walk over
// the files would have opened it, so the first problem reported stays the same).
struct Checked {
  FileIntegrity integrity;
  std::optional<nlohmann::json> header;
  std::exception_ptr header_error;
};

// check_file on every path, several at once (it reads each file through once), and the header
// of each sound file (thousands of rank files: not one after another).
std::vector<Checked> check_files(const std::vector<std::string>& paths) {
  std::vector<Checked> out(paths.size());
  parallel_for(
      paths.size(), open_file_workers(0, 1),
      [&](size_t i) {
        out[i].integrity = check_file(paths[i]);
        if (out[i].integrity.corrupt_offset) return;  // maybe salvaged: opened later
        try {
          out[i].header = trace::TraceReader::open(paths[i])->header();
        } catch (...) {
          out[i].header_error = std::current_exception();
        }
      },
      OnFailure::Continue);
  return out;
}

// A temporary directory removed when the last RunSet holding it goes.
std::shared_ptr<void> make_salvage_dir() {
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/lockstep-salvage-XXXXXX";
  if (!::mkdtemp(pattern.data()))
    throw InputError(pattern + ": cannot create a directory for the salvaged prefixes");
  return std::shared_ptr<void>(new std::string(pattern), [](void* p) {
    auto* dir = static_cast<std::string*>(p);
    std::error_code ec;
    fs::remove_all(*dir, ec);
    delete dir;
  });
}

// Copies the first `bytes` of `from` (the blocks before the corrupt one) to `to`.
void copy_prefix(const std::string& from, const std::string& to, uint64_t bytes) {
  std::ifstream in(from, std::ios::binary);
  std::ofstream out(to, std::ios::binary | std::ios::trunc);
  std::vector<char> buffer(1 << 20);
  while (bytes > 0 && in) {
    size_t chunk = static_cast<size_t>(std::min<uint64_t>(bytes, buffer.size()));
    in.read(buffer.data(), static_cast<std::streamsize>(chunk));
    out.write(buffer.data(), in.gcount());
    bytes -= static_cast<uint64_t>(in.gcount());
  }
  if (bytes > 0 || !out.flush()) throw InputError(to + ": cannot write the salvaged prefix");
}

}  // namespace

RunSet open_run_set(const std::string& path, const OpenOptions& options) {
  RunSet run;
  run.path = path;
  std::error_code ec;
  fs::file_status status = fs::status(path, ec);
  if (ec || !fs::exists(status)) throw InputError(path + ": no such file or directory");
  std::vector<std::string> paths;
  bool directory = fs::is_directory(status);
  if (directory) {
    for (const fs::directory_entry& entry : fs::directory_iterator(path, ec))
      if (entry.path().extension() == trace::kTraceFileSuffix) paths.push_back(entry.path());
    if (ec) throw InputError(path + ": cannot list: " + ec.message());
    if (paths.empty())
      throw InputError(
          fmt::format("{}: no trace files (*{}) in this directory", path, trace::kTraceFileSuffix));
  } else {
    paths.push_back(path);
  }
  std::sort(paths.begin(), paths.end());
  std::vector<Checked> checked = check_files(paths);

  // One run: the manifest's id, and every header that carries one agrees with it.
  std::string id_source;
  const fs::path manifest_path = fs::path(path) / trace::kManifestName;
  if (directory && fs::exists(fs::symlink_status(manifest_path, ec)))
    require_regular_file(manifest_path);  // a FIFO would block the manifest's reader
  if (directory)
    if (std::optional<nlohmann::json> manifest = trace::read_manifest(path))
      if (auto it = manifest->find("run_id"); it != manifest->end() && it->is_string()) {
        run.run_id = it->get<std::string>();
        id_source = manifest_path.string();
      }

  std::vector<RankFile> unranked;
  std::map<int, std::string> world_sizes;  // size -> a file that says so
  for (size_t i = 0; i < paths.size(); ++i) {
    const std::string& file = paths[i];
    RankFile rf;
    rf.path = rf.read_path = file;
    rf.integrity = std::move(checked[i].integrity);
    if (rf.integrity.corrupt_offset) {
      if (options.salvage) {
        if (!run.salvage_dir) run.salvage_dir = make_salvage_dir();
        rf.read_path = (fs::path(*static_cast<std::string*>(run.salvage_dir.get())) /
                        fmt::format("{}-{}", i, fs::path(file).filename().string()))
                           .string();
        copy_prefix(file, rf.read_path, *rf.integrity.corrupt_offset);
        rf.salvaged = true;
      } else if (options.corrupt_is_error) {
        throw InputError(rf.integrity.corruption + " (--salvage reads the valid prefix before it)");
      }
    }
    if (checked[i].header_error) std::rethrow_exception(checked[i].header_error);
    rf.header = checked[i].header && !rf.salvaged
                    ? std::move(*checked[i].header)
                    : trace::TraceReader::open(rf.read_path)->header();
    std::optional<int64_t> rank =
        bounded_header_number(rf.header, "rank", 0, trace::kMaxWorldSize - 1, file);
    std::optional<int64_t> world =
        bounded_header_number(rf.header, "world_size", 1, trace::kMaxWorldSize, file);
    rf.rank = rank ? static_cast<int>(*rank) : -1;
    if (world) world_sizes.emplace(static_cast<int>(*world), file);
    if (auto it = rf.header.find("run_id"); it != rf.header.end() && it->is_string()) {
      const std::string id = it->get<std::string>();
      if (run.run_id.empty()) {
        run.run_id = id;
        id_source = file;
      } else if (id != run.run_id) {
        throw InputError(fmt::format("{}: mixes two runs: {} has run id {}, but {} has run id {}",
                                     path, file, id, id_source, run.run_id));
      }
    }
    if (rf.rank < 0)
      unranked.push_back(std::move(rf));
    else
      run.files.push_back(std::move(rf));
  }
  if (world_sizes.size() > 1) {
    auto first = world_sizes.begin(), second = std::next(first);
    throw InputError(fmt::format("{}: world size {} in its header, but {} says {}", second->second,
                                 second->first, first->second, first->first));
  }
  // Files named by host and pid (no rank in the environment): ranks in file name order.
  if (!unranked.empty()) {
    if (!run.files.empty())
      throw InputError(
          fmt::format("{}: has no rank in its header while other files do", unranked.front().path));
    for (size_t i = 0; i < unranked.size(); ++i) unranked[i].rank = static_cast<int>(i);
    run.files = std::move(unranked);
    if (run.files.size() > 1)
      run.warnings.push_back(
          fmt::format("{}: files carry no rank; ranks assigned in file name order", path));
  }
  std::sort(run.files.begin(), run.files.end(),
            [](const RankFile& x, const RankFile& y) { return x.rank < y.rank; });
  for (size_t i = 1; i < run.files.size(); ++i)
    if (run.files[i].rank == run.files[i - 1].rank)
      throw InputError(fmt::format("{}: rank {} again (also in {})", run.files[i].path,
                                   run.files[i].rank, run.files[i - 1].path));
  run.world_size =
      world_sizes.empty() ? static_cast<int>(run.files.size()) : world_sizes.begin()->first;
  for (const RankFile& f : run.files)
    if (f.rank >= run.world_size)
      throw InputError(
          fmt::format("{}: rank {} but world size {}", f.path, f.rank, run.world_size));
  for (int r = 0; r < run.world_size; ++r)
    if (!run.find(r)) run.missing_ranks.push_back(r);
  return run;
}

}  // namespace lockstep::tools
