"""lockstep.diff: the CLI's diff of the sample traces, as objects and as a DataFrame."""
import json

import pytest

pytest.importorskip("lockstep._core", reason="lockstep._core is not built")

import lockstep  # noqa: E402


def test_the_deterministic_pair_is_identical_with_the_clis_exit_code(traces):
    result = lockstep.diff(traces / "cuda-det-full-1", traces / "cuda-det-full-2")
    assert result.verdict == "identical" and result.identical and result.exit_code == 0
    assert result.culprit is None and result.divergences == [] and result.not_compared == []


def test_the_planted_pair_names_the_planted_kernel_as_its_origin(traces):
    result = lockstep.diff(traces / "cuda-atomic-full-1", traces / "cuda-atomic-full-2")
    assert result.divergent and result.exit_code == 1
    culprit = result.culprit
    assert culprit.classification == "origin" and culprit.kind == "kernel"
    assert culprit.name.startswith("planted_atomic_sum_squares")
    assert (culprit.rank, culprit.step) == (0, 3)  # examples/cuda plants it at step 3
    assert culprit.buffer.role == "out"
    assert culprit.buffer.fingerprint_a != culprit.buffer.fingerprint_b


def test_the_planted_culprit_carries_its_mechanism_and_short_name(traces):
    result = lockstep.diff(traces / "cuda-atomic-full-1", traces / "cuda-atomic-full-2")
    assert result.culprit.name_short == "planted_atomic_sum_squares"
    assert result.culprit.mechanism["id"] == "NamedAtomic"
    assert result.environment["compared"] is True
    # The two runs of the planted pair ran the same command line: nothing differs.
    assert result.environment["differences"] == []


def test_the_result_is_the_report_lockstep_diff_json_prints(traces, cli):
    a, b = traces / "cuda-atomic-full-1", traces / "cuda-atomic-full-2"
    code, out, _ = cli("diff", a, b, "--json")
    printed = json.loads(out)
    result = lockstep.diff(a, b)
    for report in (printed, result.json):
        report["stats"].pop("seconds")
    assert (result.exit_code, result.json) == (code, printed)
    culprit = printed["culprit"]
    assert result.culprit.buffer.fingerprint_a == int(culprit["buffer"]["fingerprint_a"], 16)
    assert result.culprit.seq_a == culprit["seq"]["a"]


def test_the_divergences_dataframe_marks_the_culprit_with_exact_fingerprints(traces):
    pytest.importorskip("pandas")
    result = lockstep.diff(traces / "cuda-atomic-full-1", traces / "cuda-atomic-full-2")
    frame = result.dataframe()
    assert len(frame) == len(result.divergences) > 0
    row = frame[frame["culprit"]].iloc[0]
    assert row["name"] == result.culprit.name and bool(row["first"])
    assert int(row["fingerprint_a"]) == result.culprit.buffer.fingerprint_a
    assert str(frame["fingerprint_a"].dtype) == "UInt64"


def test_a_cut_off_run_is_an_incomplete_result_not_an_error(traces, copy_run):
    size = next((traces / "cuda-det-full-1").glob("*.lstrace")).stat().st_size
    cut = copy_run("cuda-det-full-1", cut=size * 2 // 3)
    result = lockstep.diff(cut, traces / "cuda-det-full-2")
    assert result.verdict == "incomplete" and result.exit_code == 2
    assert result.not_compared and "cut off" in result.not_compared[0]


def test_steps_given_as_a_pair_compare_what_the_clis_text_compares(traces):
    a, b = traces / "cuda-atomic-full-1", traces / "cuda-atomic-full-2"
    as_pair = lockstep.diff(a, b, steps=(1, 2))
    as_text = lockstep.diff(a, b, steps="1-2")
    assert as_pair.compared == as_text.compared
    assert (as_pair.compared["first_step"], as_pair.compared["last_step"]) == (1, 2)
    assert as_pair.verdict == "identical"  # the planted step 3 is outside


def test_bad_input_raises_the_clis_one_line(traces, tmp_path):
    with pytest.raises(lockstep.InputError, match="no such file or directory"):
        lockstep.diff(tmp_path / "nowhere", traces / "cuda-det-full-2")
    with pytest.raises(lockstep.InputError, match="--steps 1000-2000"):
        lockstep.diff(traces / "cuda-det-full-1", traces / "cuda-det-full-2", steps="1000-2000")


def test_a_result_refuses_to_be_read_as_a_bool(traces):
    # `if lockstep.diff(a, b):` would be true for every verdict; the reader must say which.
    result = lockstep.diff(traces / "cuda-det-full-1", traces / "cuda-det-full-2")
    with pytest.raises(TypeError, match="identical"):
        bool(result)


def test_the_planted_pairs_first_differing_loss_is_its_metric_divergence_at_step_3(traces):
    import struct
    result = lockstep.diff(traces / "cuda-atomic-full-1", traces / "cuda-atomic-full-2")
    metric = result.metric_divergence
    assert metric.step == 3 and metric.a_bytes != metric.b_bytes
    # The values are the payload's f32 elements, as the bytes say.
    count = len(metric.a_bytes) // 4
    assert metric.dtype == "f32"
    assert metric.a_values == list(struct.unpack(f"<{count}f", metric.a_bytes))
    assert metric.b_values == list(struct.unpack(f"<{count}f", metric.b_bytes))
    assert result.state_divergence is None  # examples/cuda records no state


def test_the_result_says_how_steps_paired_and_align_reaches_the_diff(traces):
    # The sample traces number no steps: paired by position, and number alignment is refused.
    # (Resumed runs paired by number: tests/cpu/tools/resume_diff_test.cpp.)
    result = lockstep.diff(traces / "cuda-det-full-1", traces / "cuda-det-full-2")
    assert result.alignment["mode"] == "ordinal"
    assert result.alignment["reason"] == "neither run has numbered steps"
    assert result.phases == []
    with pytest.raises(lockstep.InputError, match="--align number: neither run has numbered"):
        lockstep.diff(traces / "cuda-det-full-1", traces / "cuda-det-full-2", align="number")
