#!/usr/bin/env python3
"""Unit tests of the pure parts of cluster_faults.py, fault_streams.py, fault_verdict.py and cluster_util.py:
/metrics parsing, the KV-clean check, SSE outcome classification, victim choice, the per-repeat verdict."""
import json
import sys
import tempfile
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import cluster_faults as cf  # noqa: E402
import cluster_util  # noqa: E402
import fault_streams as fs  # noqa: E402
import fault_verdict as fv  # noqa: E402

PAGE = """# HELP tandem_num_requests_running Running.
# TYPE tandem_num_requests_running gauge
tandem_num_requests_running 0
tandem_num_requests_waiting 0
tandem_kv_blocks_referenced{tier="gpu"} 0
tandem_kv_blocks_referenced{tier="host"} 0
tandem_kv_transfer_sessions 0
tandem_kv_reservations_active 0
tandem_kv_transfer_bytes_total{direction="sent"} 1.5e+06
tandem_kv_transfer_bytes_total{direction="received"} 0
tandem_time_to_first_token_seconds_bucket{le="+Inf"} 7
"""


def stream(events, status=200, eof=True, cancelled=False):
    """A record as Streams._stream leaves it after reading `events` (SSE data payloads)."""
    rec = fs.new_record(0, 10)
    rec["status"], rec["eof"], rec["cancelled"] = status, eof, cancelled
    for i, e in enumerate(events):
        fs.note_event(rec, e if isinstance(e, bytes) else json.dumps(e).encode(), 1.0 + i)
    return rec


TOKEN = {"choices": [{"text": " t5", "finish_reason": None}]}
LAST = {"choices": [{"text": " t6", "finish_reason": "length"}]}
ERROR = {"error": {"message": "decode node died", "type": "server_error"}}


class MetricsTest(unittest.TestCase):
    def test_parse_and_sum(self):
        m = cluster_util.parse_metrics(PAGE)
        self.assertEqual(m[("tandem_kv_blocks_referenced", '{tier="gpu"}')], 0.0)
        self.assertEqual(cluster_util.metric(m, "tandem_kv_transfer_bytes_total", 'direction="sent"'), 1.5e6)
        self.assertEqual(cluster_util.metric(m, "tandem_kv_transfer_bytes_total"), 1.5e6)
        self.assertEqual(cluster_util.metric(m, "tandem_time_to_first_token_seconds_bucket"), 7.0)
        self.assertIsNone(cluster_util.metric(m, "tandem_absent"))

    def test_clean_node(self):
        self.assertEqual(cf.dirty(cluster_util.parse_metrics(PAGE), is_node=True), [])

    def test_dirty_node_names_each_gauge(self):
        page = PAGE.replace('tandem_kv_blocks_referenced{tier="host"} 0', 'tandem_kv_blocks_referenced{tier="host"} 3')
        page = page.replace("tandem_kv_transfer_sessions 0", "tandem_kv_transfer_sessions 2")
        self.assertEqual(cf.dirty(cluster_util.parse_metrics(page), is_node=True),
                         ['tandem_kv_blocks_referenced{tier="host"}=3', "tandem_kv_transfer_sessions=2"])

    def test_missing_required_gauge_and_quarantine(self):
        page = PAGE.replace("tandem_kv_transfer_sessions 0\n", "") + "tandem_kv_device_blocks_quarantined 4\n"
        self.assertEqual(cf.dirty(cluster_util.parse_metrics(page), is_node=True),
                         ["tandem_kv_transfer_sessions missing", "tandem_kv_device_blocks_quarantined=4"])

    def test_router_needs_only_its_gauges(self):
        page = "tandem_num_requests_running 1\ntandem_num_requests_waiting 0\n"
        self.assertEqual(cf.dirty(cluster_util.parse_metrics(page), is_node=False), ["tandem_num_requests_running=1"])
        self.assertEqual(cf.dirty(None, is_node=False), ["/metrics does not answer"])


class ClassifyTest(unittest.TestCase):
    def test_success(self):
        rec = stream([TOKEN, LAST, b"[DONE]"])
        self.assertEqual(fs.classify(rec), "ok")
        self.assertEqual((rec["t_first"], rec["t_done"], rec["tokens"]), (1.0, 3.0, 2))

    def test_error_event_then_done(self):
        self.assertEqual(fs.classify(stream([TOKEN, ERROR, b"[DONE]"])), "error")

    def test_http_error_with_body(self):
        rec = stream([], status=503)
        rec["error_body"] = True
        self.assertEqual(fs.classify(rec), "error")
        rec["error_body"] = False
        self.assertEqual(fs.classify(rec), "broken: HTTP 503 without an error body")

    def test_no_terminal_outcome(self):
        rec = stream([TOKEN], eof=False)
        rec["exc"] = "IncompleteRead"
        self.assertEqual(fs.classify(rec), "broken: 0 [DONE] (IncompleteRead)")
        self.assertEqual(fs.classify(stream([TOKEN, TOKEN])), "broken: 0 [DONE] (closed)")

    def test_two_outcomes(self):
        self.assertEqual(fs.classify(stream([LAST, ERROR, b"[DONE]"])), "broken: 1 finishes and 1 error events")
        self.assertEqual(fs.classify(stream([LAST, b"[DONE]", ERROR, b"[DONE]"])), "broken: 2 events after [DONE]")

    def test_cancel_and_hang(self):
        self.assertEqual(fs.classify(stream([], status=None, eof=False, cancelled=True)), "cancelled")
        # A stream that had already ended whole when the client left counts as what it was.
        self.assertEqual(fs.classify(stream([LAST, b"[DONE]"], cancelled=True)), "ok")
        rec = stream([TOKEN], eof=False)
        rec["hung"] = True
        self.assertEqual(fs.classify(rec), "hang")


class VictimTest(unittest.TestCase):
    def test_nothing_sent_no_victim(self):
        self.assertEqual(cf.pick_victim(0, {"a": 3, "b": 1}, 0.0, 10.0, 3.0), (None, False))

    def test_only_receiver_is_sure(self):
        self.assertEqual(cf.pick_victim(1, {"a": 0, "b": 2}, 0.0, 0.0, 3.0), ("b", True))

    def test_more_sends_than_the_others_receive_is_sure(self):
        # 3 sends, a has 1 and b has 2 receive sessions: at least 1 of the sends goes to b, 2 to a.
        self.assertEqual(cf.pick_victim(3, {"a": 1, "b": 2}, 0.0, 0.0, 3.0), ("b", True))

    def test_ambiguous_waits_then_takes_the_busiest(self):
        self.assertEqual(cf.pick_victim(1, {"a": 2, "b": 1}, 0.0, 1.0, 3.0), (None, False))
        self.assertEqual(cf.pick_victim(1, {"a": 2, "b": 1}, 0.0, 3.0, 3.0), ("a", False))

    def test_the_sender_itself(self):
        self.assertEqual(cf.pick_victim(1, {"prefill": 1}, None, 0.0, 3.0), ("prefill", True))


def result(scenario, records, t_fault=2.0, trigger=True, clean_s=0.1):
    for r in records:
        r["outcome"] = fs.classify(r)
    return {"scenario": scenario, "repeat": 1, "t_fault": t_fault,
            "trigger": {"victim": "prefill", "sure": True} if trigger else None,
            "clean": {"decode-a": {"clean": clean_s is not None, "s": clean_s, "dirty": [] if clean_s is not None
                                   else ["tandem_kv_reservations_active=1"]}},
            "records": records}


def timed(rec, start, done):
    rec["t_start"], rec["t_done"], rec["t_end"] = start, done, done
    return rec


OK_PROBE = {"ok": True, "why": ""}


class JudgeTest(unittest.TestCase):
    def test_pass(self):
        r = result("kill_prefill", [timed(stream([LAST, b"[DONE]"]), 0.0, 1.0),  # ended before the fault
                                    timed(stream([LAST, b"[DONE]"]), 0.0, 4.5),
                                    timed(stream([ERROR, b"[DONE]"]), 0.5, 2.5)])
        self.assertEqual(fv.in_flight_terminal_s(r), [2.5, 0.5])
        self.assertEqual(fv.judge(r, OK_PROBE, [("prefill", "137")], 5, 5), [])

    def test_each_failure_is_named(self):
        late = timed(stream([LAST, b"[DONE]"]), 0.0, 8.0)
        broken = timed(stream([TOKEN], eof=False), 0.0, 2.1)
        r = result("kill_prefill", [late, broken], clean_s=None)
        why = fv.judge(r, {"ok": False, "why": "HTTP 503"}, [("decode-a", "139")], 5, 5)
        self.assertEqual(why, [
            "decode-a exited (status 139) without being killed",
            "without exactly one terminal outcome: {'broken': 1} ['broken: 0 [DONE] (closed)']",
            "terminal outcome 6.00 s after the fault (limit 5 s)",
            "not KV clean: {'decode-a': ['tandem_kv_reservations_active=1']}",
            "request after the fault: HTTP 503"])

    def test_not_provoked_and_slow_clean(self):
        r = result("kill_decode", [timed(stream([LAST, b"[DONE]"]), 0.0, 1.0)], trigger=False, clean_s=6.0)
        self.assertEqual(fv.judge(r, None, [], 5, 5), [
            "not provoked: no transfer in flight seen", "KV clean 6.00 s after idle (limit 5 s)",
            "no request after the fault"])

    def test_cancel_needs_a_cancelled_stream(self):
        done = timed(stream([LAST, b"[DONE]"]), 0.0, 3.0)
        self.assertEqual(fv.judge(result("cancel", [done]), OK_PROBE, [], 5, 5),
                         ["no stream was still waiting for its first token at the cancel"])
        left = timed(stream([], status=None, eof=False, cancelled=True), 0.0, 2.0)
        self.assertEqual(fv.judge(result("cancel", [left, done]), OK_PROBE, [], 5, 5), [])
        # A cancel elsewhere is a client that gave up: no terminal outcome seen.
        self.assertEqual(fv.judge(result("kill_prefill", [left]), OK_PROBE, [], 5, 5),
                         ["without exactly one terminal outcome: {'cancelled': 1} []"])

    def test_gpu_memory_line(self):
        with tempfile.TemporaryDirectory() as d:
            path = Path(d) / "gpu_kill_decode_1.txt"
            path.write_text("0, 91234\n1, 17\nprocess 4242, 30000\n")
            self.assertEqual(fv.gpu_memory(path), "GPU 0 91234 MiB, GPU 1 17 MiB")
            self.assertEqual(fv.gpu_memory(Path(d) / "absent.txt"), "")

    def test_memory_growth(self):
        with tempfile.TemporaryDirectory() as d:
            start, after = Path(d) / "gpu_start.txt", Path(d) / "gpu_kill_decode_1.txt"
            start.write_text("0, 92478\n1, 17\nprocess 1, 30000\n")
            after.write_text("0, 108862\n1, 17\nprocess 2, 30000\n")
            self.assertEqual(fv.memory_growth(start, after), 16384)
            after.write_text("0, 92480\n1, 10\n")
            self.assertEqual(fv.memory_growth(start, after), 2)
            self.assertIsNone(fv.memory_growth(Path(d) / "absent.txt", after))


if __name__ == "__main__":
    unittest.main()
