"""bench/hashing/diagnostics.py's rows (GPU suite group c): a run that ended with every digest
equal passes, anything else fails.

launch_floor-97d104e-h100.txt (here) is launch_floor's real output on an H100 (2026-12-06,
results/overhead/2026-12-06T0415Z-97d104e-launch-floor-memops-h100.json), from the build before
the side-stream cases were added; launch_floor-f135733-h100.txt its output with them, as the
suite ran it (results/2026-12-06T0622Z-f135733-cf.json, another H100 instance);
side_stream-77fcfea-h200.txt side_stream_bench's as the suite ran it on an H200
(results/2026-12-06T0652Z-77fcfea-c.json); the other tables are written here in their programs'
formats (grid_variants.cu, hash_variants.cu, midsize_bench.cu, side_stream_bench.cu print them).

  python3 -m unittest -v test_hash_diagnostics      (in tests/gpu/e2e; ctest: hash_diagnostics_rows)
"""

import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "bench", "hashing"))
import diagnostics  # noqa: E402


def launch_floor_output(name="launch_floor-97d104e-h100.txt"):
    with open(os.path.join(HERE, name)) as f:
        return f.read()


def with_side_stream_cases(text):
    """The 97d104e output with the two cases added after it, placed before the engine line."""
    lines = text.rstrip("\n").splitlines()
    return "\n".join(lines[:-1] + [
        "cuStreamWaitEvent                            0.500     0.100          1.0",
        "job kernel + event record + wait event       3.900     2.100         63.0",
        lines[-1]]) + "\n"


class LaunchFloor(unittest.TestCase):
    def test_a_whole_run_passes_with_the_host_costs_of_each_way_to_order_a_hash(self):
        result, figure, numbers = diagnostics.launch_floor_row(
            with_side_stream_cases(launch_floor_output()), 0)
        self.assertEqual(result, "PASS", figure)
        self.assertIn("hash launch 3.14", figure)
        self.assertIn("write value 0.99", figure)
        self.assertIn("+ signal and wait 5.28", figure)
        self.assertIn("+ event and wait 3.90", figure)
        self.assertEqual(numbers["engine"], {"launches": 48800, "failures": 0, "overflows": 0})
        self.assertEqual(len(numbers["rows"]), len(diagnostics.LAUNCH_FLOOR_CASES))

    def test_the_output_with_the_side_stream_cases_passes_as_the_suite_read_it(self):
        result, figure, numbers = diagnostics.launch_floor_row(
            launch_floor_output("launch_floor-f135733-h100.txt"), 0)
        self.assertEqual(result, "PASS", figure)
        self.assertIn("event record 0.29, wait event 0.26; job kernel + hash launch 8.89, + signal "
                      "and wait 7.25, + event and wait 5.48", figure)
        self.assertEqual(numbers["rows"]["cuStreamWaitEvent"]["host_us"], 0.256)

    def test_an_output_without_a_case_the_program_prints_fails(self):
        result, figure, _ = diagnostics.launch_floor_row(launch_floor_output(), 0)
        self.assertEqual(result, "FAIL")
        self.assertIn("2 case(s) missing, e.g. cuStreamWaitEvent", figure)

    def test_a_run_cut_off_before_its_engine_line_fails(self):
        text = with_side_stream_cases(launch_floor_output())
        cut = text[:text.index("engine launches")]
        self.assertEqual(diagnostics.launch_floor_row(cut, 0)[0], "FAIL")
        self.assertEqual(diagnostics.launch_floor_row(text, 1)[0], "FAIL")

    def test_failed_hash_launches_fail_the_row(self):
        text = with_side_stream_cases(launch_floor_output()).replace("failures 0", "failures 3")
        result, figure, _ = diagnostics.launch_floor_row(text, 0)
        self.assertEqual(result, "FAIL")
        self.assertIn("3 failed launches", figure)


def hash_variants_output(bad_case=None, drop_case=None):
    lines = ["kernel,regs,blocks_per_sm,case,median_us,tb_per_s,digest"]
    for kernel in ("lsf1_batch_small", "lsf1_compact_small"):
        for case in diagnostics.HASH_VARIANTS_CASES:
            if case == drop_case:
                continue
            digest = "-" if "device_mem" in case else "MISMATCH" if case == bad_case else "ok"
            lines.append(f"{kernel},40,6,{case},5.10,0.001,{digest}")
    return "\n".join(lines) + "\n"


class HashVariants(unittest.TestCase):
    def test_every_digest_equal_to_the_hosts_passes(self):
        result, figure, numbers = diagnostics.hash_variants_row(hash_variants_output(), 0)
        self.assertEqual(result, "PASS", figure)
        self.assertIn("16 digests equal to the host's", figure)
        self.assertIn("batch_small 4KiB 5.10 us", figure)
        self.assertEqual(len(numbers["rows"]), 18)

    def test_one_digest_that_differs_fails(self):
        result, figure, _ = diagnostics.hash_variants_row(hash_variants_output(bad_case="1GiB"), 0)
        self.assertEqual(result, "FAIL")
        self.assertIn("2 digest(s) differ", figure)

    def test_a_case_missing_or_a_failed_exit_fails(self):
        self.assertEqual(
            diagnostics.hash_variants_row(hash_variants_output(drop_case="1GiB+3"), 0)[0], "FAIL")
        self.assertEqual(diagnostics.hash_variants_row(hash_variants_output(), 2)[0], "FAIL")
        self.assertEqual(diagnostics.hash_variants_row("", 0)[0], "FAIL")


def grid_variants_output(bad=False):
    lines = ["kernel,batch4,regs,40,local_bytes,0", "case,bytes,method,median_us,pct_of_reduce,check"]
    for case in diagnostics.GRID_VARIANTS_CASES:
        lines += [f"{case},4096,reduce,3.00,100,-", f"{case},4096,tiles/b256,4.00,75,ok",
                  f"{case},4096,batch4/b32,4.50,67,{'MISMATCH' if bad and case == 'mixed12' else 'ok'}",
                  f"{case},4096,loads+combine/b256,3.50,86,-"]
    return "\n".join(lines) + "\n"


class GridVariants(unittest.TestCase):
    def test_every_instance_checked_equal_passes_with_the_tile_kernels_share(self):
        result, figure, _ = diagnostics.grid_variants_row(grid_variants_output(), 0)
        self.assertEqual(result, "PASS", figure)
        self.assertIn("18 digests equal", figure)
        self.assertIn("tiles 64KiB 75% of reduce", figure)

    def test_a_mismatch_fails(self):
        self.assertEqual(diagnostics.grid_variants_row(grid_variants_output(bad=True), 0)[0],
                         "FAIL")


def midsize_output(sizes=diagnostics.MIDSIZE_SIZES_MIB):
    lines = ["device NVIDIA H100 80GB HBM3, 132 SMs, bulk kernel 6 blocks/SM (6336 resident warps)",
             "     MiB      n    tiles  capped_us balanced_us compact_us  reduce_us   capped"
             "  balanced    reduce"]
    for mib in sizes:
        lines.append(f"{mib:8.0f} {4000:6d} {mib * 64:8d} {mib * 0.5:10.2f} {mib * 0.5:10.2f} "
                     f"{mib * 0.6:10.2f} {mib * 0.4:10.2f} {2.10:7.2f}TB {2.10:7.2f}TB "
                     f"{2.62:7.2f}TB")
    return "\n".join(lines) + "\n"


class Midsize(unittest.TestCase):
    def test_every_size_printed_passes_with_the_bulk_kernels_share(self):
        result, figure, numbers = diagnostics.midsize_row(midsize_output(), 0)
        self.assertEqual(result, "PASS", figure)
        self.assertIn("16 MiB 80%", figure)
        self.assertEqual(len(numbers["rows"]), 12)

    def test_a_run_that_stopped_early_fails(self):
        result, figure, _ = diagnostics.midsize_row(midsize_output((1, 4, 8)), 0)
        self.assertEqual(result, "FAIL")
        self.assertIn("3 of 12 sizes", figure)
        self.assertEqual(diagnostics.midsize_row(midsize_output(), 1)[0], "FAIL")


def side_stream_output(drop=None, differ=None, failures=0):
    """side_stream_bench's table in its format, with figures shaped like an H100's."""
    host = {"untraced": 4.9, "in-stream": 8.9, "side-stream": 7.6, "side-batched": 6.1,
            "side-value": 6.0}
    lines = [f"{'workload':<14} {'buffers':<7} {'mode':<12} {'host_us':>9} {'wall_us':>9} "
             f"{'host_x':>8} {'wall_x':>8} {'launches':>8} digests"]
    mismatches = 0
    for workload in diagnostics.SIDE_STREAM_WORKLOADS:
        for buffers in diagnostics.SIDE_STREAM_BUFFERS:
            for mode in diagnostics.SIDE_STREAM_MODES:
                if (workload, buffers, mode) == drop:
                    continue
                digests = {"untraced": "-", "in-stream": "reference"}.get(mode, "equal")
                if (workload, buffers, mode) == differ:
                    digests, mismatches = "7 differ", 7
                h = host[mode] + (6.0 if buffers == 1 and mode in ("side-stream",
                                                                   "side-batched") else 0)
                wall = 90.0 * {"untraced": 1, "in-stream": 1.052, "side-stream": 1.012,
                               "side-batched": 1.008, "side-value": 1.011}[mode]
                launches = {"untraced": 0, "side-batched": 0.41}.get(mode, 1)
                lines.append(f"{workload:<14} {buffers:<7d} {mode:<12} {h:9.3f} {wall:9.3f} "
                             f"{h / host['untraced']:8.3f} {wall / 90:8.3f} {launches:8.2f} "
                             f"{digests}")
    lines.append(f"engine launches 18600 failures {failures} overflows 0; digest mismatches "
                 f"{mismatches}")
    return "\n".join(lines) + "\n"


class SideStream(unittest.TestCase):
    def test_every_case_with_equal_digests_passes_with_what_each_way_costs(self):
        result, figure, numbers = diagnostics.side_stream_row(side_stream_output(), 0)
        self.assertEqual(result, "PASS", figure)
        self.assertLessEqual(len(figure), 200)
        self.assertIn("job thread +us (4 KiB; in-stream/stream/batched): "
                      "4.00/2.70/1.20; in place: 4.00/8.70/7.20", figure)
        self.assertIn("wall x (compute): 1.052/1.012/1.008", figure)
        self.assertIn("batched launches 0.41", figure)
        self.assertEqual(len(numbers["rows"]), 24)
        self.assertEqual(numbers["rows"]["compute 4 MiB / 4 / side-batched"]["launches"], 0.41)

    def test_the_h200s_output_passes_as_the_suite_read_it(self):
        with open(os.path.join(HERE, "side_stream-77fcfea-h200.txt")) as f:
            result, figure, numbers = diagnostics.side_stream_row(f.read(), 0)
        self.assertEqual(result, "PASS", figure)
        self.assertEqual(figure, "job thread +us (4 KiB; in-stream/stream/batched): 3.54/2.60/2.73;"
                                 " in place: 3.96/7.42/7.61; wall x (compute): 1.048/1.010/1.010; "
                                 "batched launches 0.99; digests equal")
        self.assertEqual(numbers["end"], {"launches": 27660, "failures": 0, "overflows": 0,
                                          "mismatches": 0})

    def test_a_side_stream_digest_unequal_to_the_job_streams_fails_and_names_the_case(self):
        result, figure, _ = diagnostics.side_stream_row(
            side_stream_output(differ=("axpy 16 MiB", 1, "side-batched")), 1)
        self.assertEqual(result, "FAIL")
        self.assertIn("7 side-stream digest(s) differ from the job stream's, e.g. axpy 16 MiB, "
                      "1 buffer(s), side-batched", figure)

    def test_a_missing_case_a_failed_launch_or_a_cut_off_run_fails(self):
        result, figure, _ = diagnostics.side_stream_row(
            side_stream_output(drop=("compute 4 MiB", 4, "side-stream")), 0)
        self.assertEqual(result, "FAIL")
        self.assertIn("1 case(s) missing, e.g. compute 4 MiB / 4 / side-stream", figure)
        self.assertEqual(diagnostics.side_stream_row(side_stream_output(failures=2), 0)[0], "FAIL")
        text = side_stream_output()
        self.assertEqual(diagnostics.side_stream_row(text[:text.index("engine")], 0)[0], "FAIL")
        self.assertEqual(diagnostics.side_stream_row(text, 1)[0], "FAIL")


if __name__ == "__main__":
    unittest.main()
