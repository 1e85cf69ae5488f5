#!/usr/bin/env python3
"""The fault scenarios of tools/gpu/cluster_faults.sh, through the real processes (standard library only;
the client in fault_streams.py, the verdicts in fault_verdict.py).

  run OPTIONS     one repeat: REQUESTS streamed completions with long prompts at once; once a KV transfer
                  is in flight (the sender's tandem_kv_transfer_sessions >= 1, and the victim's own; after a
                  random part of --delay-ms, if one still is), SIGKILL the victim (--victim) or disconnect
                  every stream still waiting for its first token (--cancel); then wait for every stream's end
                  and for the surviving processes' KV-clean gauges, and write what was seen (--out FILE.json)
  probe OPTIONS   one completion after the fault that must succeed (through the prefill node when --sent-by
                  names its /metrics: its sent bytes must grow), every --clean process KV clean after it;
                  --out FILE.json
  table LOGDIR    the PASS/FAIL table of LOGDIR's scenarios.txt, fault_*.json, probe_*.json and exits_*.txt;
                  exit status 1 unless every scenario passed (FAIL, or SKIPPED: no repeat fitted the deadline)
"""
import argparse
import json
import os
import random
import signal
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import cluster_util  # noqa: E402  (the modules next to this file)
from fault_streams import Streams, classify  # noqa: E402
from fault_verdict import describe, summarize, table  # noqa: E402

SESSIONS = "tandem_kv_transfer_sessions"
SENT_BYTES = "tandem_kv_transfer_bytes_total"
# KV clean (docs/protocol.md, docs/metrics.md): all 0 once idle. The first ones must be exported;
# tandem_kv_reservations_active only on decode nodes.
NODE_REQUIRED = ["tandem_num_requests_running", "tandem_num_requests_waiting", "tandem_kv_blocks_referenced",
                 SESSIONS]
NODE_OPTIONAL = ["tandem_kv_reservations_active", "tandem_kv_transfer_blocks_in_use"]
ROUTER_REQUIRED = ["tandem_num_requests_running", "tandem_num_requests_waiting"]


def dirty(samples, is_node):
    """The KV-clean gauges of one /metrics page that are not 0 (or required and missing), as text;
    a gauge named *quarantin* (device blocks out of reuse) counts too once a process exports one."""
    if samples is None:
        return ["/metrics does not answer"]
    required = NODE_REQUIRED if is_node else ROUTER_REQUIRED
    names = required + (NODE_OPTIONAL if is_node else [])
    names += sorted({n for (n, _) in samples if "quarantin" in n and not n.endswith(("_total", "_created"))})
    out = []
    for name in names:
        series = {labels: v for (n, labels), v in samples.items() if n == name}
        if not series and name in required:
            out.append("%s missing" % name)
        out += ["%s%s=%g" % (name, labels, v) for labels, v in sorted(series.items()) if v != 0]
    return out


# ---- the fault ----

def parse_named(values, parts):
    """["NAME=A=B", ...] -> [(NAME, A, B)] with `parts` fields after NAME."""
    out = []
    for v in values or []:
        fields = v.split("=", parts)
        if len(fields) != parts + 1:
            sys.exit("bad value %r: want NAME%s" % (v, "=X" * parts))
        out.append(tuple(fields))
    return out


def pick_victim(sender_sessions, victim_sessions, waiting_since, now, unsure_after):
    """The victim to kill now, or None; returns (name, sure). A victim surely receives now when the sender
    has more sessions open than all other victims together have receive sessions (one of the sender's
    must then be to it): the surest such one is picked. Without one for `unsure_after` s since
    `waiting_since`, the victim with the most receive sessions."""
    if not sender_sessions or sender_sessions < 1:
        return None, False
    busy = {n: v for n, v in victim_sessions.items() if v and v >= 1}
    total = sum(busy.values())
    sure = sorted((sender_sessions - (total - v), n) for n, v in busy.items() if sender_sessions > total - v)
    if sure:
        return sure[-1][1], True
    if busy and waiting_since is not None and now - waiting_since >= unsure_after:
        return max(sorted(busy), key=lambda n: busy[n]), False
    return None, False


def scrape_all(pool, urls):
    """{key: parsed /metrics page, or None} for {key: url}, all scraped at once."""
    futures = {k: pool.submit(cluster_util.scrape, u, 1.0) for k, u in urls.items()}
    return {k: f.result() for k, f in futures.items()}


def wait_trigger(a, streams, victims, nodes, trace):
    """Polls the sender's (and victims') /metrics until a transfer is in flight; returns the trigger
    record, or None when every stream ended (or trigger_timeout passed) without one. The trigger holds
    once more on a snapshot of every node taken at once just before the fault, kept as `before` (what
    the nodes held as the fault came: the clean check afterwards is not vacuous). Appends [s, sessions
    by node] to `trace` whenever they change."""
    urls = {"sender": a.sender}
    urls.update({name: url for name, _, url in victims})
    waiting_since = None  # since when a transfer was in flight without a victim surely receiving it
    first_seen = None  # when a transfer was first seen in flight; the fault waits `delay` s more
    delay = random.Random(a.seed).uniform(0, a.delay_ms / 1000.0)

    def decide(pages):
        sessions = {k: (cluster_util.metric(p, SESSIONS) if p else None) for k, p in pages.items() if k in urls}
        sender = sessions.pop("sender")
        if not victims:
            return ({"victim": None, "sure": True} if sender and sender >= 1 else None), sender, sessions
        name, sure = pick_victim(sender, sessions, waiting_since, streams.now(), a.unsure_after)
        return ({"victim": name, "sure": sure} if name else None), sender, sessions

    end = streams.now() + a.trigger_timeout
    with ThreadPoolExecutor(max_workers=len(urls) + len(nodes)) as pool:
        while streams.now() < end and streams.alive():
            pages = scrape_all(pool, urls)
            trigger, sender, sessions = decide(pages)
            if not trace or trace[-1][1] != dict(sessions, sender=sender):
                trace.append([round(streams.now(), 3), dict(sessions, sender=sender)])
            busy = sender and sender >= 1 and any(v and v >= 1 for v in sessions.values())
            waiting_since = (waiting_since if waiting_since is not None else streams.now()) if busy else None
            if trigger and first_seen is None:
                first_seen = streams.now()
            if trigger and streams.now() - first_seen >= delay:
                snapshot = scrape_all(pool, dict(urls, **{"node " + n: u for n, u in nodes}))
                again, sender, sessions = decide(snapshot)
                if again == trigger:
                    trigger.update({"sender_sessions": sender, "sessions": sessions, "delay_s": round(delay, 3),
                                    "in_flight_for_s": round(streams.now() - first_seen, 3),
                                    "before": {n: dirty(snapshot["node " + n], n != "router") for n, _ in nodes}})
                    return trigger
            time.sleep(a.poll_ms / 1000.0)
    return None


def wait_clean(nodes, now, timeout, settle, poll_s=0.05):
    """Polls every (name, url) until its KV-clean gauges have read 0 for `settle` s on end (a node's
    gauges are published at the end of each engine step, so a long step can hide work for its length);
    {name: {clean, s, dirty, trace}}: s from the call to the first of those zero readings; trace: [s,
    dirty] whenever what is dirty changed."""
    start = now()
    result = {name: {"clean": False, "s": None, "dirty": None, "trace": [], "zero_since": None}
              for name, _ in nodes}
    while True:
        for name, url in nodes:
            r = result[name]
            if r["clean"]:
                continue
            now_dirty = dirty(cluster_util.scrape(url, timeout=1.0), name != "router")
            t = now() - start
            if now_dirty != r["dirty"]:
                r["trace"].append([round(t, 3), now_dirty])
            r["dirty"] = now_dirty
            if now_dirty:
                r["zero_since"] = None
            elif r["zero_since"] is None:
                r["zero_since"] = t
            if r["zero_since"] is not None and t - r["zero_since"] >= settle:
                r["clean"], r["s"] = True, round(r["zero_since"], 3)
        if all(r["clean"] for r in result.values()) or now() - start > timeout + settle:
            return result
        time.sleep(poll_s)


def run(a):
    t0 = time.monotonic()
    if a.budget:  # the whole run within `budget` s: each wait gets its share
        a.trigger_timeout = min(a.trigger_timeout, 0.3 * a.budget)
        a.timeout = min(a.timeout, 0.4 * a.budget)
        a.clean_timeout = max(1.0, min(a.clean_timeout, 0.3 * a.budget - a.settle))
    lo, hi = (int(x) for x in a.prompt.split(":"))
    bodies = []
    for i in range(a.requests):
        length = lo + (hi - lo) * i // max(1, a.requests - 1)
        bodies.append({"model": a.model, "prompt": cluster_util.random_prompt(a.seed * 1000 + i, length, a.vocab),
                       "max_tokens": a.max_tokens, "temperature": 0, "ignore_eos": True, "stream": True})
    host, port = a.router.split("//")[-1].rstrip("/").rsplit(":", 1)
    streams = Streams(host, int(port), bodies, a.timeout, t0)
    victims = parse_named(a.victim, 2)
    streams.start()
    sessions_trace = []
    all_nodes = parse_named(a.clean, 1)
    trigger = wait_trigger(a, streams, victims, all_nodes, sessions_trace)
    if trigger is not None:
        if trigger["victim"]:
            pid = int(next(p for name, p, _ in victims if name == trigger["victim"]))
            os.kill(pid, signal.SIGKILL)
            trigger["t"] = streams.now()
        else:
            trigger["t"] = streams.now()
            trigger["cancelled"] = streams.cancel_waiting()
    t_fault = trigger["t"] if trigger else streams.now()
    streams.join(t_fault + a.timeout)
    ends = [r["t_end"] for r in streams.records if r["t_end"] is not None]
    idle_at = max([t_fault] + ends)
    victim = trigger["victim"] if trigger else None
    clean_nodes = [(name, url) for name, url in all_nodes if name != victim]
    clean = wait_clean(clean_nodes, streams.now, a.clean_timeout, a.settle)
    for r in streams.records:
        r["outcome"] = classify(r)
    result = {"scenario": a.scenario, "repeat": a.repeat, "trigger": trigger, "t_fault": round(t_fault, 3),
              "idle_after_fault_s": round(idle_at - t_fault, 3), "clean": clean, "records": streams.records,
              "sessions_trace": sessions_trace}
    Path(a.out).write_text(json.dumps(result, indent=1))
    summary = summarize(result)
    print("%s #%s: %s" % (a.scenario, a.repeat, describe(summary)))


def probe(a):
    before = cluster_util.metric(cluster_util.scrape(a.sent_by) or {}, SENT_BYTES, 'direction="sent"') \
        if a.sent_by else None
    prompt = cluster_util.random_prompt(a.seed, a.len, a.vocab)
    result = cluster_util.complete(a.router.rstrip("/"), a.model, prompt, a.tokens, timeout=a.timeout)
    after = cluster_util.metric(cluster_util.scrape(a.sent_by) or {}, SENT_BYTES, 'direction="sent"') \
        if a.sent_by else None
    ok = "error" not in result and result.get("completion_tokens") == a.tokens
    why = result.get("error") or ("" if ok else "%s tokens, want %d" % (result.get("completion_tokens"), a.tokens))
    if ok and a.sent_by:
        sent = (after or 0) - (before or 0)
        result["sent_bytes"] = sent
        if sent <= 0:
            ok, why = False, "the prefill node sent no KV (served without it)"
    # Clean again once this request is done: a leak that a lagging gauge hid after the fault shows now.
    clean = wait_clean(parse_named(a.clean, 1), time.monotonic, a.clean_timeout, a.settle) if a.clean else {}
    dirty_after = {n: c["dirty"] for n, c in clean.items() if not c["clean"]}
    if ok and dirty_after:
        ok, why = False, "not KV clean after it: %s" % dirty_after
    Path(a.out).write_text(json.dumps({"ok": ok, "why": why, "result": result, "clean": clean}))
    print("probe: %s %s" % ("ok" if ok else "FAILED", why))


def main(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--scenario", required=True)
    r.add_argument("--repeat", type=int, default=1)
    r.add_argument("--router", required=True, help="http://HOST:PORT")
    r.add_argument("--model", required=True)
    r.add_argument("--requests", type=int, default=8)
    r.add_argument("--prompt", default="4096:8192", help="MIN:MAX tokens, spread over the requests")
    r.add_argument("--max-tokens", type=int, default=16)
    r.add_argument("--vocab", type=int, default=500)
    r.add_argument("--seed", type=int, default=1)
    r.add_argument("--sender", required=True, help="the prefill node's /metrics URL")
    r.add_argument("--victim", action="append", help="NAME=PID=METRICS_URL: a node to SIGKILL (one of them)")
    r.add_argument("--cancel", action="store_true", help="disconnect the streams instead")
    r.add_argument("--clean", action="append", help="NAME=METRICS_URL that must be KV clean afterwards")
    r.add_argument("--timeout", type=float, default=60, help="s without a byte = hang; and after the fault")
    r.add_argument("--trigger-timeout", type=float, default=60)
    r.add_argument("--unsure-after", type=float, default=3.0,
                   help="s to wait for a victim surely receiving before taking the one with most receive sessions")
    r.add_argument("--clean-timeout", type=float, default=30)
    r.add_argument("--settle", type=float, default=1.0, help="s the KV-clean gauges must stay 0")
    r.add_argument("--poll-ms", type=float, default=5)
    r.add_argument("--budget", type=float, default=0, help="s for the whole run; 0 = the timeouts as given")
    r.add_argument("--delay-ms", type=float, default=0,
                   help="fault up to this long (uniform, from --seed) after a transfer is first seen in flight, "
                        "if one still is")
    r.add_argument("--out", required=True)
    q = sub.add_parser("probe")
    q.add_argument("--router", required=True)
    q.add_argument("--model", required=True)
    q.add_argument("--len", type=int, required=True)
    q.add_argument("--tokens", type=int, default=16)
    q.add_argument("--vocab", type=int, default=500)
    q.add_argument("--seed", type=int, default=7)
    q.add_argument("--sent-by", help="the prefill node's /metrics URL: it must send the KV")
    q.add_argument("--timeout", type=float, default=60)
    q.add_argument("--clean", action="append", help="NAME=METRICS_URL that must be KV clean after it")
    q.add_argument("--clean-timeout", type=float, default=10)
    q.add_argument("--settle", type=float, default=1.0)
    q.add_argument("--out", required=True)
    t = sub.add_parser("table")
    t.add_argument("logdir")
    t.add_argument("--terminal-s", type=float, default=5)
    t.add_argument("--clean-s", type=float, default=5)
    a = p.parse_args(argv[1:])
    if a.cmd == "run":
        if bool(a.victim) == a.cancel:
            sys.exit("run: give --victim or --cancel")
        run(a)
    elif a.cmd == "probe":
        probe(a)
    else:
        sys.exit(table(a.logdir, a.terminal_s, a.clean_s))


if __name__ == "__main__":
    main(sys.argv)
