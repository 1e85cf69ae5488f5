"""The client side of tools/gpu/cluster_faults.py: streamed completions read to their end, each one's
SSE events counted and its outcome classified (RELIABILITY.md's terminal outcomes). Standard library only."""
import http.client
import json
import socket
import threading
import time


def new_record(i, prompt_len):
    return {"i": i, "prompt_len": prompt_len, "status": None, "events": 0, "tokens": 0, "finishes": 0,
            "errors": 0, "done": 0, "after_done": 0, "bad_events": 0, "eof": False, "cancelled": False,
            "hung": False, "t_start": None, "t_first": None, "t_done": None, "t_end": None}


def note_event(rec, data, t):
    """Counts one SSE `data:` payload (bytes) of rec's stream, arrived at t."""
    rec["events"] += 1
    if rec["done"]:
        rec["after_done"] += 1
    if data == b"[DONE]":
        rec["done"] += 1
        if rec["t_done"] is None:
            rec["t_done"] = t
        return
    try:
        event = json.loads(data)
    except ValueError:
        rec["bad_events"] += 1
        return
    if not isinstance(event, dict):
        rec["bad_events"] += 1
        return
    if "error" in event:
        rec["errors"] += 1
        rec["error"] = json.dumps(event["error"])[:300]
    for choice in event.get("choices") or []:
        if rec["t_first"] is None:
            rec["t_first"] = t
        rec["tokens"] += 1
        if choice.get("finish_reason"):
            rec["finishes"] += 1


def classify(rec):
    """The outcome of one request: "ok", "error" (one terminal error: an HTTP 4xx/5xx with an error body,
    or an SSE error event, [DONE], close), "cancelled" (the client left first), "hang", or "broken: why"
    (no terminal outcome, or more than one)."""
    complete = rec["status"] == 200 and rec["done"] == 1 and rec["eof"]
    if rec["cancelled"] and not complete:
        return "cancelled"
    if rec["hung"]:
        return "hang"
    if rec["status"] is None:
        return "broken: no response (%s)" % rec.get("exc", "?")
    if rec["status"] != 200:
        return "error" if rec.get("error_body") else "broken: HTTP %d without an error body" % rec["status"]
    if rec["after_done"]:
        return "broken: %d events after [DONE]" % rec["after_done"]
    if rec["done"] != 1:
        return "broken: %d [DONE] (%s)" % (rec["done"], rec.get("exc", "closed"))
    if not rec["eof"]:
        return "broken: not closed after [DONE] (%s)" % rec.get("exc", "?")
    if rec["bad_events"]:
        return "broken: %d events that are not JSON" % rec["bad_events"]
    if rec["errors"] == 0 and rec["finishes"] >= 1:
        return "ok"
    if rec["errors"] == 1 and rec["finishes"] == 0:
        return "error"
    return "broken: %d finishes and %d error events" % (rec["finishes"], rec["errors"])


def shutdown(sock):
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:  # already closed by the other side
        pass


class Streams:
    """REQUESTS streamed completions, one thread each; `cancel_waiting` closes the connections of those
    without a first token. Thread rule: records and connections under `lock`."""

    def __init__(self, host, port, bodies, timeout, t0):
        self.host, self.port, self.timeout, self.t0 = host, port, timeout, t0
        self.lock = threading.Lock()
        self.records = [new_record(i, len(b["prompt"])) for i, b in enumerate(bodies)]
        self.conns = {}
        self.threads = [threading.Thread(target=self._stream, args=(i, b), daemon=True)
                        for i, b in enumerate(bodies)]

    def now(self):
        return time.monotonic() - self.t0

    def start(self):
        for t in self.threads:
            t.start()

    def alive(self):
        return any(t.is_alive() for t in self.threads)

    def _stream(self, i, body):
        rec = self.records[i]
        conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
        with self.lock:
            rec["t_start"] = self.now()
        try:
            conn.connect()
            with self.lock:  # the response keeps the socket after `conn` lets go of it (Connection: close)
                self.conns[i] = conn.sock
            conn.request("POST", "/v1/completions", body=json.dumps(body),
                         headers={"Content-Type": "application/json", "Connection": "close"})
            resp = conn.getresponse()
            rec["status"] = resp.status
            if resp.status != 200:
                text = resp.read().decode(errors="replace")
                rec["error"] = text[:300]
                try:
                    rec["error_body"] = "error" in json.loads(text)
                except ValueError:
                    rec["error_body"] = False
                rec["t_done"] = self.now()
                rec["eof"] = True
                return
            for raw in iter(resp.readline, b""):  # b"": the end of the body
                line = raw.strip()
                if line.startswith(b"data:"):
                    with self.lock:
                        note_event(rec, line[5:].strip(), self.now())
            rec["eof"] = True
        except socket.timeout:
            rec["hung"] = True
            rec["exc"] = "no byte for %g s" % self.timeout
        except Exception as e:  # classify() reports it
            rec["exc"] = repr(e)[:200]
        finally:
            with self.lock:
                rec["t_end"] = self.now()
                self.conns.pop(i, None)
            conn.close()

    def cancel_waiting(self):
        """Disconnects every stream without a first token; returns how many."""
        n = 0
        with self.lock:
            for i, sock in list(self.conns.items()):
                rec = self.records[i]
                if rec["t_first"] is None and rec["t_end"] is None:
                    rec["cancelled"] = True
                    shutdown(sock)
                    n += 1
        return n

    def join(self, until):
        for t in self.threads:
            t.join(max(0.0, until - self.now()))
        with self.lock:
            for i, sock in list(self.conns.items()):  # still open: hung
                self.records[i]["hung"] = True
                shutdown(sock)
        for t in self.threads:
            t.join(2.0)
