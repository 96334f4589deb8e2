"""lockstep from Python: read traced runs and diff them with the C++ reader and diff, and mark
steps inside a traced job.

    import lockstep
    run = lockstep.open("runs/a")             # a trace directory, checked as the CLI checks it
    for rec in run.records(steps=3, kinds="kernel"):
        print(rec.rank, rec.seq, rec.name, [hex(b.fingerprint or 0) for b in rec.buffers])
    result = lockstep.diff("runs/a", "runs/b")
    result.verdict, result.culprit            # 'divergent', Divergence(rank=0, step=3, ...)
    result.dataframe()                        # pandas, one row per divergence

Inside a job run by `lockstep run`: lockstep.step() ends the current step, lockstep.mark(name)
names the boundary, lockstep.fingerprint(tensor, name) records a State record; all are no-ops
without the shim (lockstep.traced() says). python/README.md has the whole API."""

from lockstep._diff import (DiffResult, Divergence, DivergentBuffer, MetricDivergence,
                            StateDivergence, diff)
from lockstep._errors import Error, InputError, TraceError
from lockstep._run import Run, open, record_kinds  # noqa: A004 (lockstep.open is the API)

# The shim's side (ctypes into the preloaded liblockstep.so): no-ops without the shim.
from lockstep._shim import (GRADIENT, OPTIMIZER_STATE, OTHER, PARAMETER, fingerprint,
                            fingerprint_many, mark, marker, step, traced)

__all__ = ["open", "Run", "diff", "DiffResult", "Divergence", "DivergentBuffer",
           "MetricDivergence", "StateDivergence", "record_kinds", "Error", "InputError", "TraceError", "step",
           "mark", "marker", "traced", "fingerprint", "fingerprint_many", "PARAMETER", "GRADIENT",
           "OPTIMIZER_STATE", "OTHER"]
