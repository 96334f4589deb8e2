"""The hashing diagnostics' outputs read as rows of the GPU suite (group c, tests/gpu).

hash_bench (run_bench.py) is the benchmark with targets; these look inside it, and until they
ran in the suite their figures lived only in hand-run logs:
  launch_floor    what a small hash launch costs the launching thread and the GPU, piece by
                  piece, beside stream memory operations and events (issue #34: fewer driver calls
                  per hashed set than one launch)
  hash_variants   the shipped bulk and compact kernels timed directly, digests checked
  grid_variants   grid shapes and loads in flight from 4 KiB to 64 MiB, digests checked
  midsize_bench   the bulk kernel on a training job's tensor sizes (1-256 MiB) beside a sum
  side_stream_bench  hashing on a side stream launched by a helper thread against the hash launch
                  on the job's stream: the job thread's time, the wall time, equal digests

Each parser takes the program's stdout and gives (result, figure, numbers): PASS when the program
ran to its end with every digest it checked equal to the host's, FAIL otherwise (a MISMATCH, a
missing case, a failed launch); the figures are shown, not judged (the benchmark's targets are
run_bench.py's). Pure functions: tests/gpu/e2e/test_hash_diagnostics.py runs them (ctest
hash_diagnostics_rows).
"""

import re

# launch_floor's cases, in its order; each must appear once in a run that ended.
LAUNCH_FLOOR_CASES = (
    "empty kernel, 16 B params",
    "empty kernel, 808 B params",
    "empty kernel, 3.1 KB params (medium)",
    "reduce 4 KiB",
    "cuStreamIsCapturing",
    "lsf1 compact, 1 x 4 KiB, host slots",
    "lsf1 compact, 1 x 4 KiB, device slots",
    "engine enqueue 1 x 4 KiB",
    "engine enqueue 2 x 4 KiB",
    "engine enqueue 77 x 4 KiB (state call)",
    "job kernel (axpy 4 KiB)",
    "job kernel + enqueue 2 x 4 KiB",
    "cuStreamWriteValue32",
    "cuStreamWaitValue32 (met)",
    "cuEventRecord",
    "cuStreamWaitEvent",
    "job kernel + event record + wait event",
    "job kernel + write value + wait value",
)

_FLOOR_ROW = re.compile(r"^(.*?)\s+(-?[0-9.]+)\s+(-?[0-9.]+)\s+(-?[0-9.]+)$")
_ENGINE = re.compile(r"^engine launches (\d+) failures (\d+) overflows (\d+)$")


def parse_launch_floor(text):
    """(rows, engine): rows {case: {host_us, device_us, queue_ms}}; engine {launches, failures,
    overflows} or None when the closing line is missing (the program did not end)."""
    rows, engine = {}, None
    for line in text.splitlines():
        line = line.strip()
        m = _ENGINE.match(line)
        if m:
            engine = dict(zip(("launches", "failures", "overflows"), map(int, m.groups())))
            continue
        m = _FLOOR_ROW.match(line)
        if m and m.group(1) != "case":
            rows[m.group(1)] = {"host_us": float(m.group(2)), "device_us": float(m.group(3)),
                                "queue_ms": float(m.group(4))}
    return rows, engine


def launch_floor_row(text, rc):
    rows, engine = parse_launch_floor(text)
    numbers = {"rows": rows, "engine": engine}
    missing = [c for c in LAUNCH_FLOOR_CASES if c not in rows]
    if rc != 0 or engine is None:
        return "FAIL", f"rc {rc}: {'no closing engine line' if engine is None else 'failed'}", numbers
    if missing:
        return "FAIL", f"{len(missing)} case(s) missing, e.g. {missing[0]}", numbers
    if engine["failures"] or engine["overflows"]:
        return ("FAIL", f"engine: {engine['failures']} failed launches, {engine['overflows']} "
                        "overflows", numbers)

    def host(case):
        return rows[case]["host_us"]

    figure = (f"host us: hash launch {host('engine enqueue 2 x 4 KiB'):.2f}, empty kernel "
              f"{host('empty kernel, 16 B params'):.2f}, write value "
              f"{host('cuStreamWriteValue32'):.2f}, wait value "
              f"{host('cuStreamWaitValue32 (met)'):.2f}, event record "
              f"{host('cuEventRecord'):.2f}, wait event {host('cuStreamWaitEvent'):.2f}; job kernel "
              f"+ hash launch {host('job kernel + enqueue 2 x 4 KiB'):.2f}, + signal and wait "
              f"{host('job kernel + write value + wait value'):.2f}, + event and wait "
              f"{host('job kernel + event record + wait event'):.2f}")
    return "PASS", figure, numbers


def parse_csv(text, first_column):
    """The CSV table that starts at the header line whose first field is `first_column`: a list
    of dicts (values as text). Lines before the header and after the table are ignored."""
    rows, header = [], None
    for line in text.splitlines():
        fields = line.strip().split(",")
        if header is None:
            if fields and fields[0] == first_column:
                header = fields
            continue
        if len(fields) != len(header):
            break
        rows.append(dict(zip(header, fields)))
    return rows


HASH_VARIANTS_CASES = ("4KiB", "4KiB_slots_in_device_mem", "4KiB+3", "64KiB", "1MiB", "16MiB",
                       "256MiB", "1GiB", "1GiB+3")
GRID_VARIANTS_CASES = ("4KiB", "16KiB", "64KiB", "256KiB", "1024KiB", "4096KiB", "16384KiB",
                       "65536KiB", "mixed12")


def checked_csv_row(text, rc, first_column, check_column, cases, case_column, describe):
    """A variants program's row: every case of `cases` present, every checked digest 'ok' and at
    least one checked; `describe(rows)` gives the figure."""
    rows = parse_csv(text, first_column)
    numbers = {"rows": rows}
    mismatched = [r for r in rows if r.get(check_column) == "MISMATCH"]
    checked = [r for r in rows if r.get(check_column) == "ok"]
    missing = [c for c in cases if not any(r.get(case_column) == c for r in rows)]
    if rc != 0:
        return "FAIL", f"rc {rc}", numbers
    if mismatched:
        r = mismatched[0]
        return ("FAIL", f"{len(mismatched)} digest(s) differ from the host's, e.g. "
                        f"{' '.join(r[k] for k in list(r)[:4])}", numbers)
    if missing or not checked:
        return ("FAIL", f"{len(missing)} case(s) missing{', e.g. ' + missing[0] if missing else ''}"
                        f", {len(checked)} digests checked", numbers)
    return "PASS", f"{len(checked)} digests equal to the host's; {describe(rows)}", numbers


def hash_variants_row(text, rc):
    """hash_variants: kernel,regs,blocks_per_sm,case,median_us,tb_per_s,digest (the bulk and the
    compact kernel, 9 cases each)."""
    def describe(rows):
        return ", ".join(f"{r['kernel'].replace('lsf1_', '')} {r['case']} {r['median_us']} us"
                         for r in rows if r["case"] in ("4KiB", "1GiB"))
    return checked_csv_row(text, rc, "kernel", "digest", HASH_VARIANTS_CASES, "case", describe)


def grid_variants_row(text, rc):
    """grid_variants: case,bytes,method,median_us,pct_of_reduce,check (8 sizes and one mixed
    batch, each with the reduction and every instance)."""
    def describe(rows):
        return ", ".join(f"tiles {r['case']} {r['pct_of_reduce']}% of reduce" for r in rows
                         if r["method"] == "tiles/b256" and r["case"] in ("4KiB", "64KiB",
                                                                          "1024KiB", "mixed12"))
    return checked_csv_row(text, rc, "case", "check", GRID_VARIANTS_CASES, "case", describe)


_MIDSIZE_ROW = re.compile(
    r"^\s*([0-9.]+)\s+(\d+)\s+(\d+)\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)\s+"
    r"([0-9.]+)TB\s+([0-9.]+)TB\s+([0-9.]+)TB$")
MIDSIZE_SIZES_MIB = (1, 4, 8, 16, 24, 32, 48, 64, 96, 128, 192, 256)


def midsize_row(text, rc):
    """midsize_bench: one line per size (MiB, n, tiles, capped/balanced/compact/reduce us, TB/s);
    PASS when every size printed (its launches are not checked: hash_variants checks the same
    kernel's digests)."""
    rows = []
    for line in text.splitlines():
        m = _MIDSIZE_ROW.match(line)
        if m:
            mib, n, tiles, capped, balanced, compact, reduce, *_ = m.groups()
            rows.append({"mib": float(mib), "n": int(n), "tiles": int(tiles),
                         "capped_us": float(capped), "balanced_us": float(balanced),
                         "compact_us": float(compact), "reduce_us": float(reduce)})
    numbers = {"rows": rows}
    if rc != 0:
        return "FAIL", f"rc {rc}", numbers
    if [r["mib"] for r in rows] != [float(s) for s in MIDSIZE_SIZES_MIB]:
        return "FAIL", f"{len(rows)} of {len(MIDSIZE_SIZES_MIB)} sizes printed", numbers
    pct = {int(r["mib"]): 100 * r["reduce_us"] / r["capped_us"] for r in rows}
    return "PASS", ("bulk kernel, % of a read-only sum's time: "
                    + ", ".join(f"{m} MiB {pct[m]:.0f}%" for m in (1, 16, 64, 256))), numbers


# side_stream_bench (issue #34): the job thread's time and the wall time per iteration of a job
# kernel whose output is hashed on the job's stream, or on a side stream by a helper thread.
SIDE_STREAM_WORKLOADS = ("axpy 4 KiB", "axpy 16 MiB", "compute 4 MiB")
SIDE_STREAM_BUFFERS = (1, 4)
SIDE_STREAM_MODES = ("untraced", "in-stream", "side-stream", "side-batched")
# side-value: run only with the argument "value" (it did not end on an H100: side_stream_bench.cu).
_SIDE_ROW = re.compile(
    r"^(" + "|".join(map(re.escape, SIDE_STREAM_WORKLOADS)) + r")\s+(\d+)\s+("
    + "|".join(SIDE_STREAM_MODES + ("side-value",))
    + r")\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)\s+(\S.*)$")
_SIDE_END = re.compile(
    r"^engine launches (\d+) failures (\d+) overflows (\d+); digest mismatches (\d+)$")


def parse_side_stream(text):
    """(rows, end): rows {(workload, buffers, mode): {host_us, wall_us, host_x, wall_x, launches,
    digests}}; end {launches, failures, overflows, mismatches} or None (the program did not end)."""
    rows, end = {}, None
    for line in text.splitlines():
        line = line.strip()
        m = _SIDE_END.match(line)
        if m:
            end = dict(zip(("launches", "failures", "overflows", "mismatches"),
                           map(int, m.groups())))
            continue
        m = _SIDE_ROW.match(line)
        if m:
            workload, buffers, mode, *figures, digests = m.groups()
            rows[(workload, int(buffers), mode)] = dict(
                zip(("host_us", "wall_us", "host_x", "wall_x", "launches"), map(float, figures)),
                digests=digests)
    return rows, end


def side_stream_row(text, rc):
    """PASS when every workload, buffer count and mode printed, the engine never failed, and the
    side stream's digests equal the job stream's iteration by iteration (else a kernel overwrote
    bytes before their hash read them: the ordering rule is unsound). The figure, each way in
    SIDE_STREAM_MODES' order: what it adds to the job thread's time on the launch-bound workload
    (4 buffers; then in place, 1 buffer, where every kernel waits on the previous hash) and the
    wall time on the compute-bound one (4 buffers)."""
    rows, end = parse_side_stream(text)
    numbers = {"rows": {" / ".join(map(str, k)): v for k, v in rows.items()}, "end": end}
    if end is None:
        return "FAIL", f"rc {rc}: no closing engine line", numbers
    if end["mismatches"]:
        bad = next((k for k, v in rows.items() if v["digests"].endswith("differ")), None)
        return ("FAIL", f"{end['mismatches']} side-stream digest(s) differ from the job stream's"
                        + (f", e.g. {bad[0]}, {bad[1]} buffer(s), {bad[2]}" if bad else ""),
                numbers)
    if rc != 0:
        return "FAIL", f"rc {rc}", numbers
    missing = [(w, b, m) for w in SIDE_STREAM_WORKLOADS for b in SIDE_STREAM_BUFFERS
               for m in SIDE_STREAM_MODES if (w, b, m) not in rows]
    if missing:
        return "FAIL", f"{len(missing)} case(s) missing, e.g. {' / '.join(map(str, missing[0]))}", \
            numbers
    if end["failures"] or end["overflows"]:
        return ("FAIL", f"engine: {end['failures']} failed launches, {end['overflows']} overflows",
                numbers)

    def over(workload, buffers, mode):  # the job thread's us over untraced
        return rows[(workload, buffers, mode)]["host_us"] - rows[(workload, buffers,
                                                                    "untraced")]["host_us"]

    def wall(workload, buffers, mode):
        return rows[(workload, buffers, mode)]["wall_x"]

    small, gemm = "axpy 4 KiB", "compute 4 MiB"
    ways = SIDE_STREAM_MODES[1:]
    figure = (f"job thread +us (4 KiB; {'/'.join(w.replace('side-', '') for w in ways)}): "
              + "/".join(f"{over(small, 4, w):.2f}" for w in ways)
              + "; in place: " + "/".join(f"{over(small, 1, w):.2f}" for w in ways)
              + "; wall x (compute): " + "/".join(f"{wall(gemm, 4, w):.3f}" for w in ways)
              + f"; batched launches {rows[(small, 4, 'side-batched')]['launches']:.2f}"
              + "; digests equal")
    return "PASS", figure, numbers
