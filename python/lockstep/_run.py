"""A traced run opened for reading: lockstep.open(dir) -> Run. Records come from the C++ reader
(lockstep._core), a window of steps at a time, so a long trace is never held whole."""

from lockstep import _steps
from lockstep._native import core
from lockstep._pandas import frame, pandas

# Records decoded per call into the C++ reader while iterating (a step is never split).
_WINDOW_RECORDS = 1 << 16


def open(path, salvage=False):  # noqa: A001 (lockstep.open, as the CLI's commands take DIR)
    """Opens a run: a trace directory (or one .lstrace file), checked as every CLI command
    checks it (each block's checksum, one run id, one file per rank). Raises lockstep.InputError
    or lockstep.TraceError with the CLI's one-line message; salvage=True reads the valid prefix
    of a file with a corrupt block instead (as --salvage)."""
    return Run(core().open_run(str(path), salvage))


class Run:
    """One run: its ranks' trace files. Made by lockstep.open()."""

    def __init__(self, native):
        self._run = native

    path = property(lambda self: self._run.path)
    run_id = property(lambda self: self._run.run_id, doc="The manifest's run id")
    world_size = property(lambda self: self._run.world_size)
    ranks = property(lambda self: list(self._run.ranks), doc="Ranks that have a file")
    missing_ranks = property(lambda self: list(self._run.missing_ranks))
    warnings = property(lambda self: list(self._run.warnings))

    def __repr__(self):
        return (f"<lockstep.Run {self.path!r} run id {self.run_id!r}, "
                f"{len(self.ranks)} of {self.world_size} ranks>")

    def file(self, rank=0):
        """The rank's trace file, opened (lockstep._core.TraceFile: path, header, whole,
        salvaged, end(), step_summaries()); not kept, so that a run of many ranks never holds
        a file open per rank."""
        return self._run.file(rank)

    def header(self, rank=0):
        """The rank's JSON header as a dict: rank, world size, GPU, versions, configuration."""
        return self.file(rank).header

    def step_summaries(self, rank=0):
        """[(step, record count, digest)] of the rank's finished steps."""
        return self.file(rank).step_summaries()

    def verify(self):
        """True when `lockstep verify` certifies the run complete."""
        return core().verify(self.path) == 0

    def records(self, rank=None, steps=None, kinds=None):
        """Yields the records (lockstep._core.Record: rank, step, seq, stream, thread, kind,
        name, fields, buffers, payload, metric) of one rank or every rank (in rank order), in
        process order, optionally only those of some steps (an int, (first, last), a range or
        'A-B') and kinds ('kernel', 'gemm', 'collective', 'memcpy', 'memset', 'metric', 'step',
        'graph', 'warning', 'state', ...: lockstep.record_kinds())."""
        first, last = _steps.window(steps)
        kinds = None if kinds is None else ([kinds] if isinstance(kinds, str) else list(kinds))
        for r in self.ranks if rank is None else [rank]:
            trace = self.file(r)
            for lo, hi in trace.windows(_WINDOW_RECORDS):
                lo, hi = max(lo, first), min(hi, last)
                if lo <= hi:
                    yield from trace.records(lo, hi, kinds)

    def dataframe(self, rank=None, steps=None, kinds=None, fields=False):
        """A pandas DataFrame of records(), one row each: rank, step, seq, stream, thread, kind,
        name, buffers (how many), fingerprinted (how many have a value), metric (a Metric's
        value as the CLI prints it); with fields=True also one column per field of the kinds
        present (empty where a record's kind lacks it)."""
        pandas()  # fails before any decoding when pandas is missing
        base = ["rank", "step", "seq", "stream", "thread", "kind", "name", "buffers",
                "fingerprinted", "metric"]
        rows, extra = [], {}
        for rec in self.records(rank, steps, kinds):
            row = (rec.rank, rec.step, rec.seq, rec.stream, rec.thread, rec.kind, rec.name,
                   len(rec.buffers), sum(b.fingerprint is not None for b in rec.buffers),
                   rec.metric)
            if fields:
                values = rec.fields
                for name in values:
                    extra.setdefault(name, None)
                row = (row, values)
            rows.append(row)
        if not fields:
            return frame(rows, base)
        names = list(extra)
        return frame([row + tuple(values.get(n) for n in names) for row, values in rows],
                     base + names, {n: "UInt64" for n in names})

    def buffers_dataframe(self, rank=None, steps=None, kinds=None):
        """A pandas DataFrame with one row per fingerprinted buffer: the record's rank, step,
        seq, kind and name, then role ('in'/'out'), label, dtype, bytes, fingerprint (UInt64,
        empty when not hashed), flags (as `lockstep show` names them)."""
        pandas()  # fails before any decoding when pandas is missing
        rows = [(rec.rank, rec.step, rec.seq, rec.kind, rec.name, b.role, b.label, b.dtype,
                 b.bytes, b.fingerprint, " ".join(b.flag_names))
                for rec in self.records(rank, steps, kinds) for b in rec.buffers]
        return frame(rows, ["rank", "step", "seq", "kind", "name", "role", "label", "dtype",
                            "bytes", "fingerprint", "flags"], {"fingerprint": "UInt64"})


def record_kinds():
    """{kind name: [field names]} of every record kind (trace/record_kinds.def)."""
    return {name: list(fields) for name, fields in core().record_kinds()}
