// A RankInput over one trace file, through TraceReader.
#pragma once

#include <memory>
#include <optional>

#include "tools/diff/engine.h"
#include "tools/integrity.h"
#include "trace/reader.h"

namespace lockstep::tools {

class FileRankInput : public RankInput {
 public:
  // integrity: what run_set found checking the file (nullopt: not checked, trusted as whole
  // unless cut off). salvaged: the reader holds the prefix before a corrupt block.
  explicit FileRankInput(std::unique_ptr<trace::TraceReader> reader,
                         std::optional<FileIntegrity> integrity = std::nullopt,
                         bool salvaged = false)
      : reader_(std::move(reader)), integrity_(std::move(integrity)), salvaged_(salvaged) {}
  std::vector<StepInfo> steps() override;
  void load(uint32_t first, uint32_t last, StringPool& pool, OpTable& out) override;
  std::vector<std::string> warnings() override;
  std::optional<int64_t> complete_through() override;
  std::vector<std::string> incomplete() override;
  std::optional<uint32_t> fingerprint_first_step() override;
  trace::TraceReader& reader() { return *reader_; }

 private:
  bool whole();

  std::unique_ptr<trace::TraceReader> reader_;
  std::optional<FileIntegrity> integrity_;
  bool salvaged_ = false;
  std::optional<std::optional<trace::TraceEnd>> end_;
  std::optional<int64_t> complete_;  // last_complete_step, once counted
  StringTranslator translator_;      // into the one pool this input is used with
  ScopeTranslator scopes_;           // the same for scope paths
};

}  // namespace lockstep::tools
