// What `lockstep hunt` decides between its runs, apart from running them: which step stage 1's
// broad diff says diverged first, which window of steps stage 2 fingerprints, and whether a
// window's full-level diff is the answer or the window must start earlier. Pure functions of
// diff results, so that they are tested without running jobs.
//
// The earliest diverging bit can come long before the first visible difference (issue #35:
// weights differed after step 0 while bf16 losses matched until step 4). A window whose first
// divergence is a receiver of a difference made before it (Divergence::made_before_step) has
// not found the writer: the window's start moves halfway toward the trace's first step (4-4,
// then 2-4, 1-4, 0-4), and its end stays at the diverging step. Halving bounds the number of
// windows by log2 of the distance to the first step wherever the writer is, where widening one
// step at a time would take as many windows as steps; each window costs two full-level runs,
// which fingerprint only the window. State records make the usual case quick: at broad they
// date the divergence to the step whose state first differs, whose writer is in that step.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "tools/diff/result.h"

namespace lockstep::tools {

// Steps first..last, inclusive: a LOCKSTEP_STEPS window.
struct StepWindow {
  uint32_t first = 0, last = 0;
  std::string text() const;  // "2-4", "4-4": as LOCKSTEP_STEPS takes it
  bool operator==(const StepWindow&) const = default;
};

// What stage 1 (two runs at broad) says.
struct BroadFinding {
  uint32_t trace_first_step = 0;       // the first step the runs hold
  uint32_t diverging_step = 0;         // S: the earliest step where anything differs
  std::optional<uint32_t> state_step;  // the earliest step whose state differs, if any
  // L: the last step known identical (S - 1), none when S is the trace's first step.
  std::optional<uint32_t> identical_through;
  std::string what;  // what differs first at S: "state 'blocks.0.wte.weight'", "metric", ...
};
// nullopt when nothing differs.
std::optional<BroadFinding> broad_finding(const DiffResult& broad);

// Stage 2's first window: [S - margin, S], not before the trace's first step.
StepWindow first_window(const BroadFinding& finding, uint32_t margin);

// An op's step as hunt prints it: the job's number where the diff paired by number, with the
// trace step (which LOCKSTEP_STEPS and hunt's windows count) after it; else the trace step.
std::string step_label(const Divergence& d);

// How a window's pair of full runs is diffed: `--steps` and `--align` for the diff. The window
// counts trace steps (LOCKSTEP_STEPS counts the shim's steps), but under number alignment the
// diff's --steps are the job's numbers: a job that numbers its steps from 0 after a set-up step
// has each number one below its trace step, and a window of trace steps given as numbers
// compared the step after the one fingerprinted. So the window's ends go through the broad
// runs' pairing; a window that starts in the set-up phase, before any number, is compared by
// trace step (ordinal: the runs are two of one command).
struct WindowDiff {
  std::string steps;  // "4-5"
  std::string align;  // "number" or "ordinal"
};
WindowDiff window_diff(const StepAlignment& broad_alignment, const StepWindow& window);

// A window that starts earlier: halfway from the window's start toward the trace's first step
// (never past it), ending where it ended. Call only when window.first > trace_first_step.
StepWindow earlier_window(const StepWindow& window, uint32_t trace_first_step);

// What one window's full-level diff says.
enum class WindowOutcome {
  Identical,   // no divergence (the nondeterminism did not recur in this pair of runs)
  Origin,      // the culprit is an op whose inputs all matched and whose output differed
  Structural,  // the culprit is a structural divergence (the runs did different work)
  MadeBefore,  // the first divergence received a difference made before the window
  NoCulprit,   // divergent, but no op in the window made the difference (untraced work,
               // bytes no traced op wrote, only metrics or state differ)
};
const char* window_outcome_name(WindowOutcome outcome);  // "origin", "made-before", ...

struct WindowVerdict {
  WindowOutcome outcome = WindowOutcome::Identical;
  std::string why;                 // one line: "first divergence is a receiver of ..."
  std::optional<StepWindow> next;  // MadeBefore: the window to try next
};
// A MadeBefore window moves earlier even when an origin follows in it: an op after the first
// place the runs parted is not where they parted. `full` is the diff of `window`'s runs.
WindowVerdict judge_window(const DiffResult& full, const StepWindow& window,
                           uint32_t trace_first_step);

}  // namespace lockstep::tools
