// A RankInput over records held in memory: the diff's unit tests use it, no files involved.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "tools/diff/engine.h"

namespace lockstep::tools {

class MemoryRankInput : public RankInput {
 public:
  // strings[id] is the text of StringId id (strings[0] should be "").
  MemoryRankInput(std::vector<trace::Record> records, std::vector<std::string> strings,
                  std::vector<StepInfo> steps)
      : records_(std::move(records)), strings_(std::move(strings)), steps_(std::move(steps)) {}

  std::vector<StepInfo> steps() override { return steps_; }

  void load(uint32_t first, uint32_t last, StringPool& pool, OpTable& out) override {
    ++loads;
    std::vector<uint32_t> labels;
    for (const trace::Record& r : records_) {
      if (r.step < first || r.step > last) continue;
      auto lookup = [&](trace::StringId id) { return std::string_view(strings_.at(id)); };
      labels.clear();
      for (const trace::BufferFingerprint& b : r.buffers)
        labels.push_back(translator_.translate(b.label, pool, lookup));
      const uint32_t scope =
          r.scope == 0 ? 0 : pool.intern(join_scope(std::vector<std::string_view>(
                                 scopes.at(r.scope).begin(), scopes.at(r.scope).end())));
      out.add(r, translator_.translate(r.name, pool, lookup), labels, scope);
    }
  }

  std::optional<uint32_t> fingerprint_first_step() override { return fingerprint_first; }

  int loads = 0;                              // how many windows were read
  std::map<trace::ScopeId, std::vector<std::string>> scopes;  // a scope id's path, as a file's
  std::optional<uint32_t> fingerprint_first;  // as the trace header's LOCKSTEP_STEPS would say

 private:
  std::vector<trace::Record> records_;
  std::vector<std::string> strings_;
  std::vector<StepInfo> steps_;
  StringTranslator translator_;
};

}  // namespace lockstep::tools
