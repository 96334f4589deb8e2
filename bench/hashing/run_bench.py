#!/usr/bin/env python3
"""LSF1 benchmark, one table: our fingerprint (hash_bench: the shim's engine and kernels), a
read-only u64 reduction (same binary, same buffers) and torch.hash_tensor (timed here), for
4 KiB .. 4 GiB of fp32, bf16 and fp8 random data, and batches of regions of mixed sizes in one
launch against the reduction of their total. CUDA events after warm-up, median of many
runs (each queued behind a spin so that events time the device, not the host),
bytes counted. Usage: run_bench.py PATH/TO/hash_bench [--quick] [--markdown OUT.md]"""
import argparse
import json
import os
import statistics
import subprocess
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "overhead"))
import run_facts  # noqa: E402  (commit, GPU, driver, date of the --json file)

SIZES = [4096, 64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20, 256 << 20, 1 << 30,
         4 << 30]
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp8": torch.float8_e4m3fn}


# Issue #34's targets for launches of a few tiles (>= 80% of the reduction from 64 KiB, 4 KiB at
# most 1.3x) sit below LSF1's latency floor: one leaf's chain of dependent XXH64 multiplies, the
# host-visible digest write (hashing/README.md, "Speed"). Missed there but at or above this share
# of the reduction the verdict is KNOWN (README's Known limits); below it, FAIL.
LATENCY_FLOOR = 0.60

# The first round's bulk target, 4.0 TB/s for 1 GiB and more, was set on the H200 (4.8 TB/s
# rated): a share of the memory's peak, so that a GPU with slower memory is held to the same
# share (an H100's HBM3, 3.35 TB/s, could never reach 4.0). hash_bench reports the peak from the
# device's memory clock and bus width; without it, 4.0 TB/s.
BULK_TB_S, BULK_RATED_PEAK_TB_S = 4.0, 4.8


def bulk_target(peak_tb_s):
    """The 1 GiB+ bound in TB/s and how it reads: 4.0 TB/s, or its share of this GPU's peak."""
    if not peak_tb_s:
        return BULK_TB_S, f">= {BULK_TB_S:.1f} TB/s"
    bound = BULK_TB_S / BULK_RATED_PEAK_TB_S * peak_tb_s
    return bound, (f">= {bound:.2f} TB/s ({100 * BULK_TB_S / BULK_RATED_PEAK_TB_S:.0f}% of the "
                   f"memory's {peak_tb_s:.2f} TB/s peak)")


def known(ok, within_floor):
    """PASS, KNOWN (a target missed within the documented floor) or FAIL."""
    return "PASS" if ok else "KNOWN" if within_floor else "FAIL"


def human(n):
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n // scale} {unit}"
    return f"{n} B"


def time_torch(pool, nbytes, runs):
    """Median µs of torch.hash_tensor over `runs` different slices of `pool` (1-D, dtype set)."""
    elem = pool.element_size()
    count = nbytes // elem
    slices = max(1, pool.numel() // count)
    views = [pool[(i % slices) * count:(i % slices + 1) * count] for i in range(runs + 5)]
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for v in views[:5]:
        torch.hash_tensor(v)
    torch.cuda.synchronize()
    times = []
    for v in views[5:]:
        torch.cuda._sleep(400_000)  # ~200 us: queue behind a busy GPU, time the device alone
        start.record()
        torch.hash_tensor(v)
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop) * 1000.0)
    return statistics.median(times)


def torch_rows(quick):
    rows = {}
    pool_bytes = (256 << 20) if quick else (4 << 30)
    for name, dtype in DTYPES.items():
        base = torch.randn(pool_bytes // 4, device="cuda", dtype=torch.float32)
        base += torch.where(base == 0, 1.0, 0.0)  # never zeros
        pool = base.to(dtype) if dtype != torch.float32 else base
        note = ""
        try:
            torch.hash_tensor(pool[:16])
        except Exception:  # noqa: BLE001 - older torch or an unsupported dtype: hash the bytes
            pool = pool.view(torch.uint8)
            note = " (as uint8)"
        pool = pool[: pool_bytes // pool.element_size()]
        for nbytes in SIZES:
            if nbytes > pool_bytes:
                continue
            runs = 30 if nbytes >= 1 << 30 else 60 if nbytes >= 256 << 20 else 300
            rows[(name, nbytes)] = (time_torch(pool, nbytes, runs), note)
        del pool, base
        torch.cuda.empty_cache()
    return rows


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("hash_bench")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--markdown")
    parser.add_argument("--json", help="the table and the verdicts as JSON (tests/gpu reads it)")
    args = parser.parse_args()

    torch_us = {}
    if hasattr(torch, "hash_tensor"):
        torch_us = torch_rows(args.quick)
    torch.cuda.empty_cache()
    cmd = [args.hash_bench] + (["--quick"] if args.quick else [])
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    ours, reduce, batch, device, engine, peak = {}, {}, None, "", "", None
    mixed = {}  # label -> {"regions", "bytes", "lsf1_us", "reduce_us"}
    for line in out.splitlines():
        f = line.split(",")
        if f[0] == "device":
            device = f"{f[1]}, {f[3]} SMs"
            if len(f) >= 6 and f[4] == "peak_tb_s":
                peak = float(f[5])
                device += f", memory peak {peak:.2f} TB/s"
        elif f[0] == "single":
            key = (f[1], int(f[2]))
            (ours if f[3] == "lsf1" else reduce)[key] = (float(f[4]), f[6])
        elif f[0] == "mixed":
            m = mixed.setdefault(f[1], {"label": f[1], "regions": int(f[2]), "bytes": int(f[3])})
            m["lsf1_us" if f[4] == "lsf1" else "reduce_us"] = float(f[5])
        elif f[0] == "batch1000x4KiB":
            batch = float(f[4])
        elif f[0] == "engine":
            engine = line

    def tbs(nbytes, us):
        return nbytes / us / 1e6

    lines = [f"Device: {device}; torch {torch.__version__}",
             "",
             "| dtype | size | LSF1 µs | LSF1 TB/s | reduce µs | reduce TB/s | LSF1/reduce | torch.hash_tensor µs | torch TB/s | GPU==CPU |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    verdicts, records = [], []
    for (name, nbytes), (us, check) in ours.items():
        r_us = reduce[(name, nbytes)][0]
        t = torch_us.get((name, nbytes))
        t_cells = f"{t[0]:.1f}{t[1]} | {tbs(nbytes, t[0]):.2f}" if t else "n/a | n/a"
        lines.append(f"| {name} | {human(nbytes)} | {us:.1f} | {tbs(nbytes, us):.2f} | {r_us:.1f} | "
                     f"{tbs(nbytes, r_us):.2f} | {100 * r_us / us:.0f}% | {t_cells} | {check} |")
        records.append({"dtype": name, "bytes": nbytes, "size": human(nbytes), "lsf1_us": us,
                        "lsf1_tb_s": tbs(nbytes, us), "reduce_us": r_us,
                        "reduce_tb_s": tbs(nbytes, r_us), "torch_us": t[0] if t else None,
                        "torch_tb_s": tbs(nbytes, t[0]) if t else None, "gpu_equals_cpu": check})
        # Issue #34: >= 80% of the reduction from 64 KiB up, 4 KiB at most 1.3x its time; the
        # first round's bulk targets stay.
        if nbytes >= 1 << 30:
            bound, bound_text = bulk_target(peak)
            verdicts.append((f"{name} {human(nbytes)}: {bound_text} and >= 95% of reduce "
                             f"({tbs(nbytes, us):.2f} TB/s, {100 * r_us / us:.0f}%)",
                             known(tbs(nbytes, us) >= bound and r_us / us >= 0.95, False)))
        if nbytes >= 64 << 10:
            verdicts.append((f"{name} {human(nbytes)}: >= 80% of reduce "
                             f"({100 * r_us / us:.0f}%)", known(r_us / us >= 0.80,
                                                               r_us / us >= LATENCY_FLOOR)))
        if nbytes == 4096:
            verdicts.append((f"{name} 4 KiB: <= 1.3x reduce ({us / r_us:.2f}x)",
                             known(us <= 1.3 * r_us, us <= r_us / LATENCY_FLOOR)))
    if batch is not None:
        lines.append(f"| bf16 | 1000 x 4 KiB, one launch | {batch:.1f} | {tbs(4096000, batch):.2f} | | | | | | |")
        verdicts.append((f"1000 x 4 KiB batch: <= 15 us ({batch:.1f})", known(batch <= 15.0, False)))
    for m in mixed.values():
        if "lsf1_us" not in m or "reduce_us" not in m:
            continue
        us, r_us, nbytes = m["lsf1_us"], m["reduce_us"], m["bytes"]
        lines.append(f"| bf16 | {m['regions']} regions of mixed sizes ({m['label']}), "
                     f"{nbytes / 1e6:.2f} MB, one launch | {us:.1f} | {tbs(nbytes, us):.2f} | "
                     f"{r_us:.1f} | {tbs(nbytes, r_us):.2f} | {100 * r_us / us:.0f}% | | | - |")
        verdicts.append((f"{m['regions']} regions of mixed sizes, one launch: >= 80% of the "
                         f"reduce of their total ({100 * r_us / us:.0f}%)",
                         known(r_us / us >= 0.80, r_us / us >= LATENCY_FLOOR)))
    lines.append("")
    lines += [f"- {status}: {text}" for text, status in verdicts]
    lines.append(f"- {engine}")
    text = "\n".join(lines)
    print(text)
    if args.markdown:
        with open(args.markdown, "w") as fh:
            fh.write(text + "\n")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({**run_facts.facts(), "device": device, "torch": torch.__version__,
                       "memory_peak_tb_s": peak, "rows": records,
                       "batch_1000x4KiB_us": batch, "mixed": list(mixed.values()),
                       "engine": engine,
                       "verdicts": [{"target": text, "ok": status != "FAIL", "status": status}
                                    for text, status in verdicts]},
                      fh, indent=1)
    return 0 if all(status != "FAIL" for _, status in verdicts) else 1


if __name__ == "__main__":
    sys.exit(main())
