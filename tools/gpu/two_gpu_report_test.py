#!/usr/bin/env python3
"""Unit tests of two_gpu_report.py (tools/gpu/two_gpu_check.sh's reports): the gtest and
kv_transfer_gpu_bench parsers and their verdicts, the sweep's runs, best goodput, saturation and
overhead from tandem-bench-serving summaries, and the SVG plot."""
import contextlib
import io
import json
import sys
import tempfile
import unittest
import xml.etree.ElementTree as ET
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import two_gpu_report as r  # noqa: E402

GTEST = """[==========] Running 3 tests from 1 test suite.
[ RUN      ] NcclTransportTest.ConformsAcrossProcesses
[       OK ] NcclTransportTest.ConformsAcrossProcesses (812 ms)
[ RUN      ] NcclTransportTest.CancelMidTransferEndsBothSides
[  FAILED  ] NcclTransportTest.CancelMidTransferEndsBothSides (95 ms)
[ RUN      ] NcclTransportTest.SessionLandsFromAnotherProcess
[  SKIPPED ] NcclTransportTest.SessionLandsFromAnotherProcess (0 ms)
[  PASSED  ] 1 test.
[  SKIPPED ] 1 test, listed below:
[  SKIPPED ] NcclTransportTest.SessionLandsFromAnotherProcess
[  FAILED  ] 1 test, listed below:
[  FAILED  ] NcclTransportTest.CancelMidTransferEndsBothSides
"""


def bench_text():
    """kv_transfer_gpu_bench's two GPU 0 -> GPU 1 tables, in its printf formats."""
    lines = ["GPU 0, 512 MiB: D2D cudaMemcpyAsync 2100.0 GB/s", "",
             "GPU 0 -> GPU 1      | size     | cuda_ipc GB/s | cudaMemcpyPeer (contiguous) GB/s | ratio"]
    for kind, mib, gbps, peer in [("contiguous", 1, 60.0, 100.0), ("contiguous", 16, 90.0, 100.0),
                                  ("scattered 64 KiB", 16, 59.0, 100.0)]:
        lines.append("%-19s | %4d MiB | %13.1f | %32.1f | %.2f" % (kind, mib, gbps, peer, gbps / peer))
    lines += ["", "GPU 0 -> GPU 1 nccl  | size     | transport GB/s | ncclSend/ncclRecv (contiguous) GB/s | ratio"]
    lines.append("%-20s | %4d MiB | %14.1f | %35.1f | %.2f%s" % ("contiguous", 64, 80.0, 100.0, 0.8, ""))
    lines.append("%-20s | %4d MiB | %14.1f | %35.1f | %.2f%s" % ("scattered 64 KiB", 64, 70.0, 100.0, 0.7,
                                                                 " FAILED"))
    lines += ["", "== summary (GB/s = bytes moved once / host wall time; ratio = GB/s / ceiling) ==",
              "GPU0->GPU1 cuda_ipc contiguous 16 MiB | 1024 MiB | 90.0 | cudaMemcpyPeer 100.0 | 0.90 |"]
    return "\n".join(lines) + "\n"


def summary(goodput, within, completed, failed=0, ttft_ms=100.0, server=None):
    lat = {"mean": ttft_ms, "p50": ttft_ms, "p90": ttft_ms * 2, "p99": ttft_ms * 3}
    return {"completed": completed, "failed": failed, "goodput": goodput, "within_slo": within,
            "goodput_limits_ms": {"ttft": 500.0, "tpot": 50.0},
            "client_ms": {"ttft": lat, "tpot": {"mean": 20.0, "p50": 19.0, "p90": 25.0, "p99": 31.0}},
            "server": server or {}}


def histogram(mean_s, count):
    return {"count": count, "sum": mean_s * count, "mean": mean_s}


def write_log(folder, name, s):
    """A bench output ending in the summary `s`, or the text `s` (a skip line, a run that failed)."""
    text = "tandem-bench-serving\nsummary_json=%s\n" % json.dumps(s) if isinstance(s, dict) else s
    (Path(folder) / name).write_text(text)


def printed(fn, *args):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        fn(*args)
    return out.getvalue()


class GtestTest(unittest.TestCase):
    def test_each_outcome_once(self):
        self.assertEqual(r.parse_gtest(GTEST), {
            "OK": ["NcclTransportTest.ConformsAcrossProcesses"],
            "FAILED": ["NcclTransportTest.CancelMidTransferEndsBothSides"],
            "SKIPPED": ["NcclTransportTest.SessionLandsFromAnotherProcess"]})

    def test_verdicts(self):
        with tempfile.TemporaryDirectory() as d:
            (Path(d) / "bad.log").write_text(GTEST)
            (Path(d) / "bad.rc").write_text("1\n")
            (Path(d) / "good.log").write_text("[       OK ] A.B (1 ms)\n[       OK ] A.C (1 ms)\n")
            (Path(d) / "good.rc").write_text("0\n")
            (Path(d) / "late.log").write_text("skipped: DEADLINE (540 s) reached\n")
            lines = printed(r.tests, d, ["bad", "good", "late", "absent"]).splitlines()
        self.assertTrue(lines[2].endswith("| 1 | FAIL |"), lines[2])
        self.assertIn("SessionLandsFromAnotherProcess", lines[2])
        self.assertEqual(lines[3], "| good | 2 | 0 | 0 | 0 | PASS |")
        self.assertIn("skipped: DEADLINE", lines[4])
        self.assertIn("not run", lines[5])

    def test_a_skip_fails(self):  # on two GPUs nothing may skip
        with tempfile.TemporaryDirectory() as d:
            (Path(d) / "t.log").write_text("[       OK ] A.B (1 ms)\n[  SKIPPED ] A.C (0 ms)\n")
            (Path(d) / "t.rc").write_text("0\n")
            self.assertTrue(printed(r.tests, d, ["t"]).splitlines()[2].endswith("FAIL |"))


class KvBenchTest(unittest.TestCase):
    def test_rows_of_both_tables_only(self):
        rows = r.parse_kv_bench(bench_text())
        self.assertEqual([(x["backend"], x["kind"], x["mib"]) for x in rows], [
            ("cuda_ipc", "contiguous", 1), ("cuda_ipc", "contiguous", 16), ("cuda_ipc", "scattered", 16),
            ("nccl", "contiguous", 64), ("nccl", "scattered", 64)])
        self.assertEqual((rows[1]["gbps"], rows[1]["ceiling_gbps"], rows[1]["ratio"]), (90.0, 100.0, 0.9))
        self.assertEqual([x["failed"] for x in rows], [False, False, False, False, True])

    def test_targets(self):
        self.assertIsNone(r.kv_target("contiguous", 1))
        self.assertEqual(r.kv_target("contiguous", 16), 0.85)
        self.assertEqual(r.kv_target("scattered", 512), 0.6)

    def test_table_verdicts(self):
        with tempfile.TemporaryDirectory() as d:
            (Path(d) / "kv.log").write_text(bench_text())
            lines = printed(r.kv, str(Path(d) / "kv.log")).splitlines()
        self.assertEqual([l.rsplit("|", 2)[1].strip() for l in lines[2:]], ["-", "yes", "NO", "NO", "FAILED"])

    def test_no_rows(self):
        self.assertIn("no GPU 0 -> GPU 1 rows", printed(r.kv, "/nonexistent/kv.log"))
        with tempfile.TemporaryDirectory() as d:
            (Path(d) / "kv.log").write_text("skipped: DEADLINE (540 s) reached\n")
            self.assertIn("    skipped: DEADLINE", printed(r.kv, str(Path(d) / "kv.log")))


class SweepTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        d = self.dir.name
        write_log(d, "sweep_1p1d_fixed_4.log", summary(3.9, 39, 40))
        write_log(d, "sweep_1p1d_fixed_16.log", summary(9.0, 100, 190, failed=2))
        write_log(d, "sweep_1p1d_fixed_8.log", summary(7.5, 90, 96))
        write_log(d, "sweep_1p1d_fixed_24.log", "skipped: fewer than 0.5 of the requests at 16 req/s met the SLO\n")
        write_log(d, "sweep_colocated_fixed_4.log", summary(3.8, 38, 40))
        tokens = lambda n: {"counters": {'tandem_generation_tokens_total{model_name="m"}': n}}
        write_log(d, "sweep_colocated_fixed_8.log", summary(5.0, 60, 96, server={
            "router": tokens(400), "colocated0": tokens(300), "colocated1": tokens(100)}))
        write_log(d, "sweep_colocated_sharegpt_4.log", "request failed: connection refused\n")
        router = {"histograms": {'tandem_time_to_first_token_seconds{model_name="m"}': histogram(0.105, 5)}}
        write_log(d, "single_1p1d.log", summary(1, 5, 5, server={
            "router": router, "prefill": {"histograms": {
                'tandem_request_prefill_time_seconds{model_name="m"}': histogram(0.100, 5)}}}))
        write_log(d, "single_colocated.log", summary(1, 5, 5, server={
            "router": router,
            "colocated0": {"histograms": {"tandem_request_prefill_time_seconds": histogram(0.090, 3)}},
            "colocated1": {"histograms": {"tandem_request_prefill_time_seconds": histogram(0.110, 2)}}}))

    def tearDown(self):
        self.dir.cleanup()

    def test_runs_by_rate(self):
        runs = r.sweep_runs(self.dir.name)
        self.assertEqual([rate for rate, _, _ in runs[("1p1d", "fixed")]], [4, 8, 16, 24])
        self.assertTrue(runs[("1p1d", "fixed")][3][2].startswith("skipped: fewer"))
        self.assertTrue(runs[("colocated", "sharegpt")][0][2].startswith("no summary"))

    def test_best_and_saturation(self):
        runs = r.sweep_runs(self.dir.name)
        self.assertEqual(r.best(runs[("1p1d", "fixed")]), (9.0, 16))
        self.assertIsNone(r.best(runs[("colocated", "sharegpt")]))
        d = Path(self.dir.name)
        self.assertFalse(r.saturated(d / "sweep_1p1d_fixed_8.log", 0.5))
        self.assertTrue(r.saturated(d / "sweep_1p1d_fixed_16.log", 0.53))  # 100 of 192 sent
        self.assertTrue(r.saturated(d / "sweep_colocated_sharegpt_4.log", 0.5))  # no summary
        self.assertTrue(r.saturated(d / "absent.log", 0.5))

    def test_overhead(self):
        o = r.overhead(self.dir.name)
        self.assertAlmostEqual(o["1p1d"][0], 0.105)
        self.assertAlmostEqual(o["1p1d"][1], 0.100)
        self.assertAlmostEqual(o["colocated"][1], (0.090 * 3 + 0.110 * 2) / 5)  # pooled over both nodes
        self.assertIn("+5.0 % (target <= 5 %: met)", r.overhead_line(self.dir.name))

    def test_table(self):
        text = printed(r.sweep, self.dir.name)
        self.assertIn("| 1P1D | fixed | 16 | 190/2 | 9.00 (100/192) | 100.0 / 200.0 / 300.0 | 19.00 / 25.00 / 31.00 |",
                      text)
        self.assertIn("| fixed | 9.00 req/s (16) | 5.00 req/s (8) | 1.80 |", text)
        self.assertIn("| sharegpt | n/a | n/a | n/a |", text)
        self.assertIn("generated tokens over the sweep: colocated0 300 (75 %), colocated1 100 (25 %)", text)


class PlotTest(unittest.TestCase):
    def test_nice_steps(self):
        self.assertEqual([r.nice_step(t) for t in (4.4, 10, 33, 0.9)], [1, 2, 10, 0.2])

    def test_svg_parses_with_a_line_per_layout(self):
        series = {"fixed": {"1p1d": [(4, 3.9), (8, 7.5)], "colocated": [(4, 3.8)]}, "sharegpt": {"1p1d": [(2, 2)]}}
        root = ET.fromstring(r.svg(series, "t <&>", "x", "y"))
        ns = "{http://www.w3.org/2000/svg}"
        self.assertEqual(len(root.findall(ns + "polyline")), 3)
        self.assertEqual(root.get("width"), "840")

    def test_plot_of_logs(self):
        with tempfile.TemporaryDirectory() as d:
            write_log(d, "sweep_1p1d_fixed_4.log", summary(3.9, 39, 40))
            out = Path(d) / "p.svg"
            printed(r.plot, d, out)
            self.assertIn("TTFT &lt;= 500 ms", out.read_text())
            ET.parse(out)


if __name__ == "__main__":
    unittest.main()
