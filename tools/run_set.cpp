#include "tools/run_set.h"

#include <algorithm>
#include <filesystem>
#include <map>

#include <fmt/format.h>

#include "trace/format.h"

namespace lockstep::tools {

namespace fs = std::filesystem;

int header_int(const nlohmann::json& header, const char* key, int fallback) {
  auto it = header.find(key);
  if (it == header.end() || !it->is_number_integer()) return fallback;
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

RunSet open_run_set(const std::string& path) {
  RunSet run;
  run.path = path;
  std::error_code ec;
  fs::file_status status = fs::status(path, ec);
  if (ec || !fs::exists(status)) throw InputError(path + ": no such file or directory");
  std::vector<std::string> paths;
  if (fs::is_directory(status)) {
    for (const fs::directory_entry& entry : fs::directory_iterator(path, ec))
      if (entry.path().extension() == trace::kTraceFileSuffix) paths.push_back(entry.path());
    if (ec) throw InputError(path + ": cannot list: " + ec.message());
    if (paths.empty())
      throw InputError(fmt::format("{}: no trace files (*{}) in this directory", path,
                                   trace::kTraceFileSuffix));
  } else {
    paths.push_back(path);
  }
  std::sort(paths.begin(), paths.end());

  std::vector<RankFile> unranked;
  std::map<int, std::string> world_sizes;  // size -> a file that says so
  for (const std::string& file : paths) {
    std::unique_ptr<trace::TraceReader> reader = trace::TraceReader::open(file);
    RankFile rf{header_int(reader->header(), "rank", -1), file, reader->header()};
    int world = header_int(rf.header, "world_size", 0);
    if (world > 0) world_sizes.emplace(world, file);
    if (rf.rank < 0) unranked.push_back(std::move(rf));
    else run.files.push_back(std::move(rf));
  }
  if (world_sizes.size() > 1) {
    auto first = world_sizes.begin(), second = std::next(first);
    throw InputError(fmt::format("{}: world size {} in its header, but {} says {}",
                                 second->second, second->first, first->second, first->first));
  }
  // Files named by host and pid (no rank in the environment): ranks in file name order.
  if (!unranked.empty()) {
    if (!run.files.empty())
      throw InputError(fmt::format("{}: has no rank in its header while other files do",
                                   unranked.front().path));
    for (size_t i = 0; i < unranked.size(); ++i) unranked[i].rank = static_cast<int>(i);
    run.files = std::move(unranked);
    if (run.files.size() > 1)
      run.warnings.push_back(fmt::format(
          "{}: files carry no rank; ranks assigned in file name order", path));
  }
  std::sort(run.files.begin(), run.files.end(),
            [](const RankFile& x, const RankFile& y) { return x.rank < y.rank; });
  for (size_t i = 1; i < run.files.size(); ++i)
    if (run.files[i].rank == run.files[i - 1].rank)
      throw InputError(fmt::format("{}: rank {} again (also in {})", run.files[i].path,
                                   run.files[i].rank, run.files[i - 1].path));
  run.world_size = world_sizes.empty() ? static_cast<int>(run.files.size())
                                       : world_sizes.begin()->first;
  for (const RankFile& f : run.files)
    if (f.rank >= run.world_size)
      throw InputError(fmt::format("{}: rank {} but world size {}", f.path, f.rank,
                                   run.world_size));
  for (int r = 0; r < run.world_size; ++r)
    if (!run.find(r)) run.missing_ranks.push_back(r);
  return run;
}

}  // namespace lockstep::tools
