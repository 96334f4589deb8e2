"""lockstep.diff(a, b): the CLI's diff (lockstep._core runs tools::run_diff), its result as
objects. Every name follows the diff's versioned JSON report (tools/README.md, "JSON schema"),
whose dict is DiffResult.json; fingerprints are ints here, hex strings there."""

from dataclasses import dataclass, field
from typing import List, Optional, Tuple

from lockstep import _steps
from lockstep._native import core
from lockstep._pandas import frame, pandas


@dataclass(frozen=True)
class DivergentBuffer:
    """An origin's first differing output, a receiver's first differing input."""
    role: str
    label: str
    bytes: int
    dtype: str
    fingerprint_a: int
    fingerprint_b: int


@dataclass(frozen=True)
class Divergence:
    """One op whose two runs differ (tools/README.md, "How diff works")."""
    rank: int
    step: int
    seq_a: Optional[int]  # None where the op is absent from that run
    seq_b: Optional[int]
    stream: int
    kind: str
    name: str
    occurrence: int
    epoch: int
    classification: str  # origin | host_input | receiver | structural | metric | state
    structural_kind: Optional[str]  # inserted | deleted | reordered | fields | buffers
    detail: str
    comm_id: Optional[int] = None
    comm_seq: Optional[int] = None
    received_from: Optional[int] = None
    made_before_step: Optional[int] = None  # a receiver of a difference made before this step
    buffer: Optional[DivergentBuffer] = None
    context_a: List[str] = field(default_factory=list)  # structural: ops around it, run A
    context_b: List[str] = field(default_factory=list)
    step_b: Optional[int] = None  # run B's trace step (another when aligned by number)
    job_step: Optional[int] = None  # the job's own number of the step (aligned by number)
    # The ranges open on the op's thread, outermost first ("GPT (forward)", "blocks.1.mlp
    # (forward)"): module and phase under `lockstep run` (schema 5); () for none.
    scope: Tuple[str, ...] = ()
    name_short: Optional[str] = None  # the kernel's name as text reports show it
    # The culprit's known mechanism of nondeterminism: {"id", "what", "fix"} (tools/README.md,
    # "Why: the mechanism under the culprit"); None elsewhere or when the table has no row.
    mechanism: Optional[dict] = field(default=None, compare=False)

    @classmethod
    def from_json(cls, d):
        collective = d.get("collective") or {}
        b = d.get("buffer")
        context = d.get("context") or {}
        return cls(
            rank=d["rank"], step=d["step"], seq_a=d["seq"]["a"], seq_b=d["seq"]["b"],
            stream=d["stream"], kind=d["kind"], name=d["name"], occurrence=d["occurrence"],
            epoch=d["epoch"], classification=d["classification"],
            structural_kind=d["structural_kind"], detail=d["detail"],
            comm_id=collective.get("comm_id"), comm_seq=collective.get("comm_seq"),
            received_from=d.get("received_from"), made_before_step=d.get("made_before_step"),
            buffer=None if b is None else DivergentBuffer(
                role=b["role"], label=b["label"], bytes=b["bytes"], dtype=b["dtype"],
                fingerprint_a=int(b["fingerprint_a"], 16),
                fingerprint_b=int(b["fingerprint_b"], 16)),
            context_a=[line["op"] for line in context.get("a", [])],
            context_b=[line["op"] for line in context.get("b", [])],
            step_b=d.get("step_b"), job_step=d.get("job_step"),
            scope=tuple(d.get("scope") or ()), name_short=d.get("name_short"),
            mechanism=d.get("mechanism"))

    def _key(self):
        return (self.rank, self.step, self.seq_a, self.seq_b, self.kind, self.name,
                self.classification)


@dataclass(frozen=True)
class MetricDivergence:
    """The earliest Metric record (loss.item()) whose value differs."""
    rank: int
    step: int
    stream: int
    name: str
    occurrence: int
    seq_a: int
    seq_b: int
    dtype_hint: int
    a: str  # decoded, as the CLI prints it
    b: str
    a_bytes: bytes
    b_bytes: bytes
    dtype: Optional[str] = None  # from dtype_hint, or guessed from the size
    a_values: List[Optional[float]] = field(default_factory=list)  # None: NaN or infinite
    b_values: List[Optional[float]] = field(default_factory=list)

    @classmethod
    def from_json(cls, d):
        a, b = d["a"], d["b"]
        return cls(rank=d["rank"], step=d["step"], stream=d["stream"], name=d["name"],
                   occurrence=d["occurrence"], seq_a=d["seq"]["a"], seq_b=d["seq"]["b"],
                   dtype_hint=d["dtype_hint"], a=a["decoded"], b=b["decoded"],
                   a_bytes=bytes.fromhex(a["bytes_hex"]),
                   b_bytes=bytes.fromhex(b["bytes_hex"]),
                   dtype=a.get("dtype"), a_values=a.get("values", []),
                   b_values=b.get("values", []))


@dataclass(frozen=True)
class StateDivergence:
    """The earliest step (then rank) whose state (a parameter, gradient, optimizer state)
    differs: it dates a divergence, the op that wrote the tensor names its origin."""
    rank: int
    step: int
    name: str  # "blocks.0.wte.weight", "...:grad"
    state_kind: str  # parameter | gradient | optimizer | user
    bytes: int
    seq_a: int
    seq_b: int
    fingerprint_a: int
    fingerprint_b: int

    @classmethod
    def from_json(cls, d):
        return cls(rank=d["rank"], step=d["step"], name=d["name"], state_kind=d["state_kind"],
                   bytes=d["bytes"], seq_a=d["seq"]["a"], seq_b=d["seq"]["b"],
                   fingerprint_a=int(d["fingerprint_a"], 16),
                   fingerprint_b=int(d["fingerprint_b"], 16))


class DiffResult:
    """What lockstep.diff found. verdict: 'identical', 'divergent' or 'incomplete' (README,
    "A verdict covers only what was compared"); exit_code: the CLI's (0, 1, 2)."""

    def __init__(self, exit_code, report):
        self.exit_code = exit_code
        self.json = report  # the CLI's --json report, schema tools/README.md
        self.verdict = report["verdict"]
        self.compared = report["compared"]
        self.not_compared = report["not_compared"]
        self.world_size = report["world_size"]
        self.ranks_compared = report["ranks_compared"]
        self.stats = report["stats"]
        self.warnings = report["warnings"]
        self.culprit_rank = report["culprit_rank"]
        self.culprit = _maybe(Divergence, report["culprit"])
        self.first_divergence = _maybe(Divergence, report["first_divergence"])
        self.per_rank = [Divergence.from_json(d) for d in report["per_rank"]]
        self.structural = [Divergence.from_json(d) for d in report["structural"]]
        self.structural_total = report["structural_total"]
        self.metric_divergence = _maybe(MetricDivergence, report["metric_divergence"])
        self.state_divergence = _maybe(StateDivergence, report.get("state_divergence"))
        # How the steps paired (by the job's numbers or by position) and what was left out
        # (tools/README.md, "Steps by the job's number"): dicts as the report has them.
        self.alignment = report.get("alignment")
        self.phases = report.get("phases", [])
        # What differs in the runs' environments, shown before the ops and never a verdict
        # (tools/README.md, "The environment, first"): {"compared", "differences": [...]}.
        self.environment = report.get("environment", {"compared": False, "differences": []})

    identical = property(lambda self: self.verdict == "identical")
    divergent = property(lambda self: self.verdict == "divergent")
    incomplete = property(lambda self: self.verdict == "incomplete")

    def __bool__(self):
        raise TypeError("a DiffResult is not a bool: ask .identical, .divergent or .incomplete")

    def __repr__(self):
        where = f", culprit {self.culprit.kind} {self.culprit.name} rank {self.culprit.rank} " \
                f"step {self.culprit.step}" if self.culprit else ""
        return f"<lockstep.DiffResult {self.verdict}{where}>"

    @property
    def divergences(self):
        """Each rank's first divergence (blame order), then the structural ones not among
        them (by step, rank)."""
        seen = {d._key() for d in self.per_rank}
        return self.per_rank + [d for d in self.structural if d._key() not in seen]

    def dataframe(self):
        """A pandas DataFrame of `divergences`, one row each, with `first` (its rank's first
        divergence) and `culprit` (the culprit itself) columns; fingerprints as UInt64."""
        pandas()  # fails before any decoding when pandas is missing
        firsts = {d._key() for d in self.per_rank}
        culprit = self.culprit._key() if self.culprit else None
        rows = []
        for d in self.divergences:
            b = d.buffer
            rows.append((
                d.rank, d.step, d.classification, d.structural_kind, d.kind, d.name,
                d.occurrence, d.stream, d.seq_a, d.seq_b, d.epoch, d._key() in firsts,
                d._key() == culprit, d.received_from, d.made_before_step, b and b.role, b and b.label,
                b and b.dtype, b and b.bytes, b and b.fingerprint_a, b and b.fingerprint_b,
                d.detail))
        return frame(rows, [
            "rank", "step", "classification", "structural_kind", "kind", "name", "occurrence",
            "stream", "seq_a", "seq_b", "epoch", "first", "culprit", "received_from",
            "made_before_step", "buffer_role", "buffer_label", "buffer_dtype", "buffer_bytes", "fingerprint_a",
            "fingerprint_b", "detail"], {
            "seq_a": "UInt64", "seq_b": "UInt64", "received_from": "Int64",
            "made_before_step": "Int64",
            "buffer_bytes": "UInt64", "fingerprint_a": "UInt64", "fingerprint_b": "UInt64"})


def _maybe(cls, d):
    return None if d is None else cls.from_json(d)


def diff(a, b, rank=None, steps=None, context=3, exhaustive=False, salvage=False, threads=0,
         align="auto"):
    """Compares two runs (directories, or single .lstrace files) as `lockstep diff A B` does,
    without printing; the options are the CLI's (align: 'auto', 'number' or 'ordinal'). Raises
    lockstep.InputError or lockstep.TraceError for bad input (the CLI's exit 2 with one line); an
    incomplete comparison is a result (verdict 'incomplete'), not an error."""
    code, report = core().diff(str(a), str(b), rank, _steps.text(steps), context, exhaustive,
                               salvage, threads, align)
    return DiffResult(code, report)
