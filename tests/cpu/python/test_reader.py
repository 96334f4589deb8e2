"""lockstep.open and Run: the sample traces read through the C++ reader, checked against what
the job printed and what the CLI shows."""
import json
import re
import subprocess
import sys

import pytest

pytest.importorskip("lockstep._core", reason="lockstep._core is not built")

import lockstep  # noqa: E402
from lockstep import _run


def test_a_sample_run_opens_with_its_manifests_run_id_and_one_rank(traces):
    run = lockstep.open(traces / "cuda-det-full-1")
    manifest = json.loads((traces / "cuda-det-full-1/manifest.json").read_text())
    assert run.run_id == manifest["run_id"]
    assert (run.world_size, run.ranks, run.missing_ranks) == (1, [0], [])
    assert run.header(0)["run_id"] == manifest["run_id"]
    assert run.verify()


def test_every_record_lockstep_show_prints_comes_once_in_process_order(traces, cli):
    run = lockstep.open(traces / "cuda-atomic-full-1")
    records = list(run.records())
    code, shown, _ = cli("show", traces / "cuda-atomic-full-1")
    assert code == 0
    assert len(records) == len(shown.splitlines()) == run.file(0).end()["records"]
    seqs = [r.seq for r in records]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)


def test_a_record_made_outside_every_range_has_an_empty_scope(traces):
    # The CUDA example pushes no range (format v1 sample traces carry no scopes at all).
    scopes = {r.scope for r in lockstep.open(traces / "cuda-det-full-1").records()}
    assert scopes == {()}


def test_buffers_carry_the_fingerprints_lockstep_show_prints(traces, cli):
    run = lockstep.open(traces / "cuda-atomic-full-1")
    _, shown, _ = cli("show", traces / "cuda-atomic-full-1", "--grep", "planted")
    # "| out arg2 bytes 4B 4e8ce4eaa08cb785 @3+0": role, label, dtype, size, fingerprint
    printed = re.findall(r"\| (in|out) (\S+) (\S+) (\d+)B ([0-9a-f]{16})", shown)
    assert printed
    ours = [(b.role, b.label, b.dtype, str(b.bytes), f"{b.fingerprint:016x}")
            for r in run.records() if "planted" in r.name for b in r.buffers]
    assert ours == printed


def test_metric_payloads_are_the_losses_the_job_printed(traces):
    # The job printed "step N loss L loss_hex H" with H the float32's bits, big-endian.
    printed = re.findall(r"^step (\d+) loss \S+ loss_hex ([0-9a-f]{8})",
                         (traces / "cuda-det-full-1.stdout").read_text(), re.M)
    run = lockstep.open(traces / "cuda-det-full-1")
    traced = [(str(r.step), r.payload[:4][::-1].hex()) for r in run.records(kinds="metric")]
    assert printed and traced == printed


def test_steps_and_kinds_select_the_same_records_as_filtering_all_of_them(traces):
    run = lockstep.open(traces / "cuda-atomic-full-1")
    everything = list(run.records())
    for steps, wanted in ((3, {3}), ((2, 4), {2, 3, 4}), (range(1, 3), {1, 2}),
                          ("5-", {5, 6}), ((4, None), {4, 5, 6})):
        selected = [(r.seq, r.kind) for r in run.records(steps=steps, kinds=["kernel", "gemm"])]
        expected = [(r.seq, r.kind) for r in everything
                    if r.step in wanted and r.kind in ("kernel", "gemm")]
        assert selected == expected and selected, steps


def test_small_windows_read_the_same_records_as_one_window(traces, monkeypatch):
    run = lockstep.open(traces / "cuda-atomic-full-1")
    whole = [(r.seq, r.step) for r in run.records()]
    assert len(run.file(0).windows(5)) > 1
    monkeypatch.setattr(_run, "_WINDOW_RECORDS", 5)
    assert [(r.seq, r.step) for r in run.records()] == whole


def test_a_bad_step_range_or_kind_is_refused_with_one_line(traces):
    run = lockstep.open(traces / "cuda-atomic-full-1")
    with pytest.raises(lockstep.InputError, match="'7-3'"):
        list(run.records(steps="7-3"))
    with pytest.raises(lockstep.InputError, match="'kernels' is not a record kind"):
        list(run.records(kinds="kernels"))


def test_a_cut_off_trace_reads_as_a_prefix_that_is_not_whole(traces, copy_run):
    size = next((traces / "cuda-atomic-full-1").glob("*.lstrace")).stat().st_size
    run = lockstep.open(copy_run("cuda-atomic-full-1", cut=size // 2))
    full = lockstep.open(traces / "cuda-atomic-full-1")
    assert not run.file(0).whole and run.file(0).end() is None
    assert 0 < len(list(run.records())) < len(list(full.records()))
    assert not run.verify()


def test_a_directory_holding_two_runs_is_refused_naming_both_ids(traces, copy_run):
    mixed = copy_run("cuda-det-full-1")
    for f in (traces / "cuda-det-full-2").glob("*.lstrace"):
        (mixed / f.name).write_bytes(f.read_bytes())
    with pytest.raises(lockstep.InputError, match="mixes two runs") as e:
        lockstep.open(mixed)
    assert "\n" not in str(e.value)


def test_a_file_that_is_not_a_trace_raises_trace_error(tmp_path):
    (tmp_path / "x.lstrace").write_bytes(b"not a trace at all" * 10)
    with pytest.raises(lockstep.TraceError, match="x.lstrace"):
        lockstep.open(tmp_path / "x.lstrace")


def test_record_kinds_name_the_fields_records_carry(traces):
    kinds = lockstep.record_kinds()
    for r in lockstep.open(traces / "cuda-atomic-full-1").records():
        assert list(r.fields) == kinds[r.kind]


def test_the_records_dataframe_counts_what_the_records_hold(traces):
    pytest.importorskip("pandas")
    run = lockstep.open(traces / "cuda-atomic-full-1")
    records = list(run.records())
    frame = run.dataframe()
    assert len(frame) == len(records)
    assert frame["kind"].value_counts().to_dict() == {
        k: sum(r.kind == k for r in records) for k in {r.kind for r in records}}
    kernels = run.dataframe(kinds="kernel", fields=True)
    first = next(r for r in records if r.kind == "kernel")
    assert kernels.loc[0, "grid_x"] == first.fields["grid_x"]


def test_the_buffers_dataframe_keeps_every_bit_of_each_fingerprint(traces):
    pd = pytest.importorskip("pandas")
    run = lockstep.open(traces / "cuda-atomic-full-1")
    fingerprints = [b.fingerprint for r in run.records() for b in r.buffers]
    frame = run.buffers_dataframe()
    assert str(frame["fingerprint"].dtype) == "UInt64"
    # Through a float column (pandas' guess) the low bits of 64-bit values would be lost.
    assert [None if v is pd.NA else int(v) for v in frame["fingerprint"]] == fingerprints
    assert any(f is not None and f >= 2**53 for f in fingerprints)


def test_the_dataframes_without_pandas_name_the_package_to_install(traces):
    script = ("import sys; sys.modules['pandas'] = None\n"
              "import lockstep\n"
              f"run = lockstep.open({str(traces / 'cuda-det-full-1')!r})\n"
              "try:\n    run.dataframe()\nexcept ImportError as e:\n    print(e)\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         check=True).stdout
    assert "python3-pandas" in out
