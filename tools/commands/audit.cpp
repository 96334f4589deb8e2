// `lockstep audit DIR`: one run checked against itself across its ranks (tools/audit.h has the
// rules). Reads every rank's file once for its collectives and, when the run has fingerprinted
// ops besides them (level full), once more a window of steps at a time for the replicas rule.
#include <algorithm>
#include <cstdio>
#include <map>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "tools/audit.h"
#include "tools/commands/commands.h"
#include "tools/diff/file_input.h"
#include "tools/json_text.h"
#include "tools/run_set.h"

namespace lockstep::tools {
namespace {

using nlohmann::json;

struct AuditRequest {
  std::string dir;
  bool json = false;
  bool salvage = false;
};

// Which GPU a rank ran on, from its trace header (trace/header.h, the shim's "gpu" key).
struct GpuIdentity {
  std::string host, uuid, pci_bus_id, name;
  std::optional<int> ordinal;

  std::string text() const {
    std::string out = uuid.empty() ? std::string("GPU of unknown UUID") : "GPU-" + uuid;
    std::vector<std::string> parts;
    if (!name.empty()) parts.push_back(name);
    if (!pci_bus_id.empty()) parts.push_back("PCI " + pci_bus_id);
    if (ordinal) parts.push_back(fmt::format("device {}", *ordinal));
    if (!parts.empty()) out += " (" + fmt::format("{}", fmt::join(parts, ", ")) + ")";
    return out + " on host " + (host.empty() ? "unknown" : host);
  }
  json to_json() const {
    return {{"host", host.empty() ? json(nullptr) : json(host)},
            {"uuid", uuid.empty() ? json(nullptr) : json(uuid)},
            {"pci_bus_id", pci_bus_id.empty() ? json(nullptr) : json(pci_bus_id)},
            {"name", name.empty() ? json(nullptr) : json(name)},
            {"ordinal", ordinal ? json(*ordinal) : json(nullptr)}};
  }
};

GpuIdentity gpu_of(const nlohmann::json& header) {
  GpuIdentity id;
  id.host = header_string(header, "host");
  auto gpu = header.find("gpu");
  if (gpu != header.end() && gpu->is_object()) {
    id.uuid = header_string(*gpu, "uuid");
    id.pci_bus_id = header_string(*gpu, "pci_bus_id");
    id.name = header_string(*gpu, "name");
    auto ordinal = gpu->find("ordinal");
    if (ordinal != gpu->end() && ordinal->is_number_integer()) id.ordinal = ordinal->get<int>();
  }
  return id;
}

// The kind's fields, volatile ones (struct padding, capture ids) zeroed.
std::vector<uint64_t> stable_fields(const trace::Record& r) {
  const int count = trace::field_count(r.kind);
  std::vector<uint64_t> out(r.fields.begin(), r.fields.begin() + count);
  for (int i = 0; i < count; ++i)
    if (trace::kind_diff(r.kind).is_volatile(i)) out[i] = 0;
  return out;
}

struct Scan {
  std::vector<AuditCollective> collectives;
  std::set<uint32_t> steps;
  bool other_fingerprints = false;  // an op besides collectives carries one: replicas apply
};

void scan_rank(const RankFile& file, trace::TraceReader& reader, Scan& scan) {
  reader.for_each_record([&](const trace::Record& r) {
    scan.steps.insert(r.step);
    if (r.kind == trace::RecordKind::Collective) {
      AuditCollective c;
      c.rank = file.rank;
      c.step = r.step;
      c.seq = r.seq;
      c.name = std::string(reader.string(r.name));
      namespace F = trace::fields;
      c.comm_id = r.fields[F::Collective::comm_id];
      c.comm_seq = r.fields[F::Collective::comm_seq];
      c.nranks = r.fields[F::Collective::nranks];
      c.comm_rank = r.fields[F::Collective::comm_rank];
      for (const trace::BufferFingerprint& b : r.buffers)
        if (b.role == trace::Role::Out && (b.flags & trace::kFingerprintValid)) {
          c.has_recv = true;
          c.recv = b.fingerprint;
          c.recv_bytes = b.bytes;
        }
      scan.collectives.push_back(std::move(c));
    } else if (!scan.other_fingerprints) {
      for (const trace::BufferFingerprint& b : r.buffers)
        scan.other_fingerprints |= (b.flags & trace::kFingerprintValid) != 0;
    }
    return true;
  });
}

// Every rank's ops of the steps [first, last], by step.
std::map<uint32_t, std::vector<std::vector<AuditOp>>> load_window(const RunSet& run,
                                                                  uint32_t first, uint32_t last) {
  std::map<uint32_t, std::vector<std::vector<AuditOp>>> by_step;
  for (size_t i = 0; i < run.files.size(); ++i) {
    std::unique_ptr<trace::TraceReader> reader = run.files[i].open();
    reader->for_each_record(first, last, [&](const trace::Record& r) {
      auto& ranks = by_step[r.step];
      ranks.resize(run.files.size());
      AuditOp op;
      op.rank = run.files[i].rank;
      op.step = r.step;
      op.seq = r.seq;
      op.stream = r.stream;
      op.kind = r.kind;
      op.name = std::string(reader->string(r.name));
      op.fields = stable_fields(r);
      for (const trace::BufferFingerprint& b : r.buffers)
        op.buffers.push_back({b.role, std::string(reader->string(b.label)), b.bytes,
                              (b.flags & trace::kFingerprintValid) != 0, b.fingerprint});
      ranks[i].push_back(std::move(op));
      return true;
    });
  }
  for (auto& [step, ranks] : by_step)
    for (std::vector<AuditOp>& ops : ranks) number_occurrences(ops);
  return by_step;
}

std::string ranks_text(const std::vector<int>& ranks) {
  return fmt::format("{}", fmt::join(ranks, ", "));
}

std::string finding_text(const AuditFinding& f, const std::map<int, GpuIdentity>& gpus) {
  std::string out;
  const bool collective = f.rule == AuditFinding::Rule::Collective;
  const char* what = collective ? "received" : "computed";
  const char* from = collective ? "from the same collective" : "from equal inputs";
  if (f.majority)
    out += fmt::format(
        "step {}, {}: rank{} {} {} other bytes in '{}' ({} bytes) than rank{} {} {}: a "
        "suspected hardware fault or silent data corruption\n",
        f.step, f.op, f.suspects.size() == 1 ? "" : "s", ranks_text(f.suspects), what, f.buffer,
        f.bytes, f.agreeing.size() == 1 ? "" : "s", ranks_text(f.agreeing), from);
  else
    out += fmt::format(
        "step {}, {}: ranks {} {} different bytes in '{}' ({} bytes) {} and no value has a "
        "majority: one of them is suspect, the audit cannot tell which\n",
        f.step, f.op, ranks_text(f.suspects), what, f.buffer, f.bytes, from);
  if (f.majority) out += fmt::format("    agreed    {:#018x}\n", f.agreed);
  for (const auto& [rank, value] : f.values) {
    auto gpu = gpus.find(rank);
    out += fmt::format("    rank {:<4} {:#018x}  {}\n", rank, value,
                       gpu != gpus.end() ? gpu->second.text() : "");
  }
  return out;
}

json finding_json(const AuditFinding& f, const std::map<int, GpuIdentity>& gpus) {
  json suspects = json::array();
  for (const auto& [rank, value] : f.values) {
    auto gpu = gpus.find(rank);
    suspects.push_back({{"rank", rank},
                        {"fingerprint", fmt::format("{:#018x}", value)},
                        {"gpu", gpu != gpus.end() ? gpu->second.to_json() : json(nullptr)}});
  }
  return {{"rule", f.rule == AuditFinding::Rule::Collective ? "collective" : "replica"},
          {"step", f.step},
          {"op", f.op},
          {"buffer", f.buffer},
          {"bytes", f.bytes},
          {"majority", f.majority},
          {"agreed", f.majority ? json(fmt::format("{:#018x}", f.agreed)) : json(nullptr)},
          {"agreeing_ranks", f.agreeing},
          {"suspects", suspects}};
}

}  // namespace

int run_audit(const std::string& dir, bool as_json, bool salvage) {
  OpenOptions open_options;
  open_options.salvage = salvage;
  RunSet run = open_run_set(dir, open_options);
  for (const std::string& w : run.warnings) warn(w);
  run.require_complete();
  std::map<int, GpuIdentity> gpus;
  Scan scan;
  // What the audit could not read: a file cut off, without its end record, salvaged, or whose
  // writer dropped records (the diff's rule, FileRankInput::incomplete). Findings stand on what
  // was read; no finding says the run is clean only if every file was read whole.
  std::vector<std::string> unread;
  for (const RankFile& file : run.files) {
    gpus[file.rank] = gpu_of(file.header);
    FileRankInput input(file.open(), file.integrity, file.salvaged);  // one reader for both
    scan_rank(file, input.reader(), scan);
    for (std::string& reason : input.incomplete()) unread.push_back(std::move(reason));
  }
  uint64_t collectives_checked = 0, replicas_checked = 0;
  std::vector<AuditFinding> findings = audit_collectives(scan.collectives, &collectives_checked);
  if (scan.other_fingerprints && run.files.size() > 1) {
    // A window of steps at a time: every rank's ops of a step must be in memory together.
    constexpr uint32_t kWindowSteps = 8;
    std::vector<uint32_t> steps(scan.steps.begin(), scan.steps.end());
    for (size_t i = 0; i < steps.size(); i += kWindowSteps) {
      const uint32_t last = steps[std::min(steps.size(), i + kWindowSteps) - 1];
      for (auto& [step, ranks] : load_window(run, steps[i], last)) {
        uint64_t checked = 0;
        for (AuditFinding& f : audit_replicas(ranks, &checked)) findings.push_back(std::move(f));
        replicas_checked += checked;
      }
    }
  }
  std::stable_sort(findings.begin(), findings.end(),
                   [](const AuditFinding& x, const AuditFinding& y) { return x.step < y.step; });
  const bool suspect = !findings.empty();
  const bool incomplete = !suspect && !unread.empty();
  const char* verdict = suspect ? "suspect" : incomplete ? "incomplete" : "clean";
  if (as_json) {
    json j = {{"schema", "lockstep-audit"},
              {"version", 1},
              {"verdict", verdict},
              {"path", dir},
              {"world_size", run.world_size},
              {"checked", {{"collectives", collectives_checked}, {"replica_ops", replicas_checked}}},
              {"not_read", unread},
              {"findings", json::array()}};
    for (const AuditFinding& f : findings) j["findings"].push_back(finding_json(f, gpus));
    std::fputs((json_text(j, 2) + "\n").c_str(), stdout);
  } else {
    std::string out = fmt::format("lockstep audit: {}\n  {} ({} rank{})\n",
                                  suspect ? "SUSPECT" : incomplete ? "INCOMPLETE" : "CLEAN", dir,
                                  run.files.size(), run.files.size() == 1 ? "" : "s");
    out += fmt::format(
        "  checked {} collective operation{} across ranks, {} op{} across replicas{}\n",
        collectives_checked, collectives_checked == 1 ? "" : "s", replicas_checked,
        replicas_checked == 1 ? "" : "s",
        scan.other_fingerprints ? "" : " (none at this level: level full fingerprints them)");
    if (!unread.empty()) {
      out += fmt::format("  not read whole ({}): {}\n",
                         incomplete ? "no verdict on the rest" : "the findings stand on the rest",
                         unread.front());
      for (size_t i = 1; i < unread.size() && i < 8; ++i) out += "    " + unread[i] + "\n";
      if (unread.size() > 8) out += fmt::format("    ({} more)\n", unread.size() - 8);
    }
    for (size_t i = 0; i < findings.size() && i < 32; ++i)
      out += "\n" + finding_text(findings[i], gpus);
    if (findings.size() > 32) out += fmt::format("\n({} more)\n", findings.size() - 32);
    std::fputs(out.c_str(), stdout);
  }
  std::fflush(stdout);
  return suspect ? 1 : incomplete ? 2 : 0;
}

CommandRunner add_audit_command(CLI::App& app) {
  auto request = std::make_shared<AuditRequest>();
  CLI::App* sub = app.add_subcommand(
      "audit", "Check one run against itself: what every rank must agree on (hardware faults)");
  sub->add_option("DIR", request->dir, "Trace directory of one run")->required();
  sub->add_flag("--json", request->json, "Machine-readable report (schema: tools/README.md)");
  sub->add_flag("--salvage", request->salvage,
                "Read the valid prefix of a file with a corrupt block (else exit 2)");
  sub->footer(R"(Rules: every rank of a communicator receives the same bytes from an all-reduce,
all-gather or broadcast; at level full, ops at the same place on several ranks whose inputs
were all equal there (data-parallel replicas after their gradient all-reduce: the optimizer's
update) compute equal outputs. A rank that differs while its inputs agree is named with its GPU
(UUID, PCI bus id, host) as a suspected hardware fault or silent data corruption.
A file that was not read whole (cut off, no end record, records dropped by the writer) makes a
run without findings INCOMPLETE, never CLEAN.
Exit status: 0 clean, 1 suspect, 2 incomplete or bad input.

Examples:
  lockstep audit runs/a
  lockstep run --audit -o runs/a -- torchrun --nproc-per-node 8 train.py
  lockstep audit runs/a --json | jq '.findings[].suspects[].gpu')");
  return [request] { return run_audit(request->dir, request->json, request->salvage); };
}

}  // namespace lockstep::tools
