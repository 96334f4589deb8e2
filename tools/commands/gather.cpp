// lockstep gather OUT DIR...: one directory from the per-node trace directories of a multi-node
// run, for diff, verify and the rest, which read one directory per run. Everything is checked
// before anything is written: directories of different runs (run ids) and a rank found twice are
// refused, so a gathered directory never mixes two jobs.
#include <cstdio>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "tools/commands/commands.h"
#include "tools/integrity.h"
#include "tools/json_text.h"
#include "tools/run_set.h"
#include "trace/format.h"
#include "trace/reader.h"
#include "trace/run_dir.h"

namespace lockstep::tools {
namespace {

namespace fs = std::filesystem;

struct GatherRequest {
  std::string out;
  std::vector<std::string> dirs;
  bool copy = false;  // never hard-link
};

// A trace file to bring into OUT (or already there).
struct Member {
  std::string path;
  std::string name;  // file name in OUT
  int rank = -1;     // from its header; -1 when it has none (host/pid files)
};

// The run every input must belong to: the first run id seen, and where it was seen.
class RunIdentity {
 public:
  void require(const std::string& id, const std::string& where) {
    if (id_.empty()) {
      id_ = id, source_ = where;
    } else if (id != id_) {
      throw InputError(
          fmt::format("{}: run id {}, but {} has run id {}: not one run", where, id, source_, id_));
    }
  }
  const std::string& id() const { return id_; }

 private:
  std::string id_, source_;
};

std::optional<std::string> manifest_run_id(const std::string& dir) {
  std::optional<nlohmann::json> manifest = trace::read_manifest(dir);
  if (!manifest) {
    std::error_code ec;
    if (fs::exists(fs::path(dir) / trace::kManifestName, ec))
      throw InputError(fmt::format("{}/{}: not a readable manifest", dir, trace::kManifestName));
    return std::nullopt;
  }
  auto it = manifest->find("run_id");
  if (it == manifest->end() || !it->is_string())
    throw InputError(fmt::format("{}/{}: has no run_id", dir, trace::kManifestName));
  return it->get<std::string>();
}

// The trace files of one directory, each header's run id and world size checked.
std::vector<Member> members_of(const std::string& dir, RunIdentity& run,
                               std::optional<int>& world_size, std::string& world_source) {
  if (std::optional<std::string> id = manifest_run_id(dir))
    run.require(*id, (fs::path(dir) / trace::kManifestName).string());
  std::vector<Member> members;
  for (const trace::TraceFileEntry& entry : trace::list_trace_files(dir)) {
    require_regular_file(entry.path);
    std::unique_ptr<trace::TraceReader> reader = trace::TraceReader::open(entry.path);
    const nlohmann::json& header = reader->header();
    const std::string id = header_string(header, "run_id");
    if (id.empty())
      throw InputError(
          fmt::format("{}: no run id in its header (written by an older lockstep): "
                      "gather cannot tell which run it belongs to",
                      entry.path));
    run.require(id, entry.path);
    const int world = header_int(header, "world_size", -1);
    if (world > 0) {
      if (!world_size) {
        world_size = world, world_source = entry.path;
      } else if (*world_size != world) {
        throw InputError(fmt::format("{}: world size {}, but {} says {}", entry.path, world,
                                     world_source, *world_size));
      }
    }
    members.push_back(
        {entry.path, fs::path(entry.path).filename().string(), header_int(header, "rank", -1)});
  }
  return members;
}

bool same_file(const std::string& a, const std::string& b) {
  std::error_code ec;
  return fs::equivalent(a, b, ec) && !ec;
}

// Hard link when allowed and possible (same filesystem: no bytes copied, and a link appears
// whole at once); else a copy under a temporary name renamed into place, so that a copy cut
// short never looks like a trace. Returns true when linked.
bool bring(const std::string& from, const fs::path& to, bool allow_link) {
  std::error_code ec;
  if (allow_link) {
    fs::create_hard_link(from, to, ec);
    if (!ec) return true;
  }
  const fs::path part = to.parent_path() / ("." + to.filename().string() + ".part");
  fs::copy_file(from, part, fs::copy_options::overwrite_existing, ec);
  if (!ec) fs::rename(part, to, ec);
  if (ec) {
    std::error_code ignored;
    fs::remove(part, ignored);
    throw InputError(
        fmt::format("{}: cannot be copied to {}: {}", from, to.string(), ec.message()));
  }
  return false;
}

int run_gather(const GatherRequest& request) {
  RunIdentity run;
  std::optional<int> world_size;
  std::string world_source;
  std::error_code ec;

  // OUT may already hold files of this run (one node wrote there directly): they count.
  const bool out_exists = fs::exists(request.out, ec);
  if (out_exists && !fs::is_directory(request.out, ec))
    throw InputError(request.out + ": exists and is not a directory");
  std::vector<Member> present;
  if (out_exists) present = members_of(request.out, run, world_size, world_source);

  std::vector<Member> incoming;
  std::set<std::string> seen_dirs;
  for (const std::string& dir : request.dirs) {
    if (!fs::is_directory(dir, ec)) throw InputError(dir + ": not a directory");
    if (out_exists && same_file(dir, request.out))
      throw InputError(dir + ": is the output directory");
    const std::string canonical = fs::canonical(dir, ec).string();
    if (!seen_dirs.insert(canonical).second) throw InputError(dir + ": named twice");
    std::vector<Member> found = members_of(dir, run, world_size, world_source);
    if (found.empty())
      throw InputError(
          fmt::format("{}: no trace files (*{}) in this directory", dir, trace::kTraceFileSuffix));
    incoming.insert(incoming.end(), found.begin(), found.end());
  }

  // One file per rank, one file per name, across OUT and every directory. A file already in OUT
  // (the same file: an earlier gather's link) is not brought again.
  std::map<int, const Member*> by_rank;
  std::map<std::string, const Member*> by_name;
  std::vector<const Member*> to_bring;
  for (const Member& m : present) {
    if (m.rank >= 0) by_rank.emplace(m.rank, &m);
    by_name.emplace(m.name, &m);
  }
  for (const Member& m : incoming) {
    auto named = by_name.find(m.name);
    if (named != by_name.end() && same_file(named->second->path, m.path)) continue;
    if (m.rank >= 0) {
      auto [it, fresh] = by_rank.emplace(m.rank, &m);
      if (!fresh)
        throw InputError(
            fmt::format("{}: rank {} again (also in {})", m.path, m.rank, it->second->path));
    }
    if (named != by_name.end())
      throw InputError(
          fmt::format("{}: {} comes also from {}", m.path, m.name, named->second->path));
    by_name.emplace(m.name, &m);
    to_bring.push_back(&m);
  }

  fs::create_directories(request.out, ec);
  if (ec) throw InputError(fmt::format("{}: cannot be created: {}", request.out, ec.message()));
  const fs::path out_manifest = fs::path(request.out) / trace::kManifestName;
  if (!fs::exists(out_manifest, ec)) {
    // The first directory's manifest (they all name this run), so OUT reads as that run; when
    // none has one (lost), one that says the run id the headers agree on.
    std::optional<std::string> from;
    for (const std::string& dir : request.dirs)
      if (fs::exists(fs::path(dir) / trace::kManifestName, ec)) {
        from = (fs::path(dir) / trace::kManifestName).string();
        break;
      }
    if (from) {
      bring(*from, out_manifest, false);
    } else {
      std::FILE* f = std::fopen(out_manifest.c_str(), "w");
      const std::string text = json_text(nlohmann::json{{"run_id", run.id()}}, 2) + "\n";
      if (!f || std::fputs(text.c_str(), f) < 0 || std::fclose(f) != 0)
        throw InputError(out_manifest.string() + ": cannot be written");
    }
  }
  size_t linked = 0;
  for (const Member* m : to_bring)
    if (bring(m->path, fs::path(request.out) / m->name, !request.copy)) ++linked;

  const size_t files = present.size() + to_bring.size();
  fmt::print(
      "{}: {} trace file{} of run {} ({} brought from {} director{}: {} linked, {} copied)\n",
      request.out, files, files == 1 ? "" : "s", run.id(), to_bring.size(), request.dirs.size(),
      request.dirs.size() == 1 ? "y" : "ies", linked, to_bring.size() - linked);
  if (world_size) {
    std::vector<int> missing;
    for (int r = 0; r < *world_size; ++r)
      if (!by_rank.count(r)) missing.push_back(r);
    if (!missing.empty())
      warn(
          fmt::format("{}: {} of {} ranks have no file yet (first: rank {}); gather the other "
                      "nodes' directories too",
                      request.out, missing.size(), *world_size, missing.front()));
  }
  return 0;
}

}  // namespace

CommandRunner add_gather_command(CLI::App& app) {
  auto request = std::make_shared<GatherRequest>();
  CLI::App* sub = app.add_subcommand(
      "gather", "Bring the per-node trace directories of one run into one directory");
  sub->add_option("OUT", request->out,
                  "Directory to gather into (created; may already hold "
                  "files of the same run)")
      ->required();
  sub->add_option("DIR", request->dirs, "Per-node trace directories of the run")->required();
  sub->add_flag("--copy", request->copy,
                "Copy every file (default: hard-link where OUT is on the same filesystem)");
  sub->footer(
      R"(Every rank file and the manifest come into OUT under their own names. Refused before
anything is written: directories (or files) of different runs, a rank found in two places, two
files of one name, a file that is not a trace. A file already in OUT is kept; one that is the
same file (an earlier gather's link) is skipped. Ranks still missing are named in a warning.
Exit status: 0 gathered, 2 refused (one line naming the file and the problem).

One run id on every node: `lockstep run` started on each node gives each node its own (gather
then refuses them). Start it once around a launcher that reaches every node (srun, mpirun), or
preload the shim on each node yourself: it takes LOCKSTEP_RUN_ID, else torchrun's rendezvous id,
else Slurm's job and step, the same on every node.

Examples:
  rsync -a node1:/local/trace/ node1-trace/            # bring a node's directory over first
  lockstep gather runs/a /local/trace node1-trace
  lockstep verify runs/a && lockstep diff runs/a runs/b)");
  return [request] { return run_gather(*request); };
}

}  // namespace lockstep::tools
