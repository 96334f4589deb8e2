// A RankInput over one trace file, through TraceReader.
#pragma once

#include <memory>

#include "tools/diff/engine.h"
#include "trace/reader.h"

namespace lockstep::tools {

class FileRankInput : public RankInput {
 public:
  explicit FileRankInput(std::unique_ptr<trace::TraceReader> reader)
      : reader_(std::move(reader)) {}
  std::vector<StepInfo> steps() override;
  void load(uint32_t first, uint32_t last, StringPool& pool, OpTable& out) override;
  std::vector<std::string> warnings() override;
  std::optional<int64_t> complete_through() override;
  trace::TraceReader& reader() { return *reader_; }

 private:
  std::unique_ptr<trace::TraceReader> reader_;
  StringTranslator translator_;  // into the one pool this input is used with
};

}  // namespace lockstep::tools
