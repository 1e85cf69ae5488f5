"""The verdicts of tools/gpu/cluster_faults.py: per repeat (`judge`) and the PASS/FAIL table of a log folder.
Standard library only."""
import json
from pathlib import Path


def in_flight_terminal_s(result):
    """Seconds from the fault to the terminal outcome of each request in flight at it (not cancelled)."""
    t = result["t_fault"]
    out = []
    for r in result["records"]:
        end = r["t_done"] if r["t_done"] is not None else r["t_end"]
        if r["cancelled"] or r["t_start"] is None or r["t_start"] > t:
            continue
        if end is None or end > t:
            out.append(None if end is None else end - t)
    return out


def summarize(result):
    outcomes = {}
    for r in result["records"]:
        key = r["outcome"] if not r["outcome"].startswith("broken") else "broken"
        outcomes[key] = outcomes.get(key, 0) + 1
    terminal = in_flight_terminal_s(result)
    clean = result["clean"]
    return {"requests": len(result["records"]), "outcomes": outcomes, "provoked": result["trigger"] is not None,
            "in_flight": len(terminal), "terminal_s": max([x for x in terminal if x is not None], default=None),
            "unended": sum(1 for x in terminal if x is None),
            "clean": all(c["clean"] for c in clean.values()),
            "clean_s": max([c["s"] for c in clean.values() if c["s"] is not None], default=None),
            "dirty": {n: c["dirty"] for n, c in clean.items() if not c["clean"]},
            "broken": [r["outcome"] for r in result["records"] if r["outcome"].startswith("broken")][:3],
            "trigger": result["trigger"]}


def judge(result, probe_result, exits, terminal_limit_s, clean_limit_s):
    """Why one repeat fails ([] = it passes). `exits`: [(node, exit status)] of the processes that
    died during it; only the victim may."""
    s = summarize(result)
    why = ["%s exited (status %s) without being killed" % (n, rc)
           for n, rc in exits if not s["trigger"] or n != s["trigger"]["victim"]]
    if not s["provoked"]:
        why.append("not provoked: no transfer in flight seen")
    bad = {k: v for k, v in s["outcomes"].items() if k in ("broken", "hang")}
    if "cancelled" in s["outcomes"] and result["scenario"] != "cancel":
        bad["cancelled"] = s["outcomes"]["cancelled"]
    if bad:
        why.append("without exactly one terminal outcome: %s %s" % (bad, s["broken"]))
    if result["scenario"] == "cancel" and s["provoked"] and not s["outcomes"].get("cancelled"):
        why.append("no stream was still waiting for its first token at the cancel")
    if result["scenario"] != "cancel" and s["unended"]:
        why.append("%d requests in flight never ended" % s["unended"])
    if result["scenario"] != "cancel" and s["terminal_s"] is not None and s["terminal_s"] > terminal_limit_s:
        why.append("terminal outcome %.2f s after the fault (limit %g s)" % (s["terminal_s"], terminal_limit_s))
    if not s["clean"]:
        why.append("not KV clean: %s" % s["dirty"])
    elif s["clean_s"] is not None and s["clean_s"] > clean_limit_s:
        why.append("KV clean %.2f s after idle (limit %g s)" % (s["clean_s"], clean_limit_s))
    if probe_result is None:
        why.append("no request after the fault")
    elif not probe_result["ok"]:
        why.append("request after the fault: %s" % probe_result["why"])
    return why


def describe(s):
    """One repeat's summary in a line."""
    trig = s["trigger"]
    if trig is None:
        at = "no transfer in flight seen"
    elif trig["victim"]:
        at = "killed %s %s" % (trig["victim"], "mid-transfer" if trig["sure"] else "(one of several receiving)")
    else:
        at = "cancelled %d streams mid-transfer" % trig.get("cancelled", 0)

    def fmt(v):
        return "n/a" if v is None else "%.2f s" % v
    return "%s; %d requests %s; %d in flight, terminal max %s; KV clean %s (%s after idle)" % (
        at, s["requests"], s["outcomes"], s["in_flight"], fmt(s["terminal_s"]), "yes" if s["clean"] else "NO",
        fmt(s["clean_s"]))


def gpu_memory(path):
    """"GPU i N MiB, ..." from a gpu_*.txt of cluster_faults.sh (nvidia-smi lines "index, MiB"), or ""."""
    if not path.exists():
        return ""
    gpus = [l.split(",") for l in path.read_text().splitlines() if l.strip() and not l.startswith("process")]
    return ", ".join("GPU %s %s MiB" % (g[0].strip(), g[1].strip()) for g in gpus if len(g) == 2)


def memory_growth(start_path, after_path):
    """The most any GPU's used memory (MiB) grew from gpu_start.txt to a repeat's file, or None without both."""
    def used(path):
        if not path.exists():
            return {}
        rows = [l.split(",") for l in path.read_text().splitlines() if l.strip() and not l.startswith("process")]
        return {r[0].strip(): int(r[1]) for r in rows if len(r) == 2}
    start, after = used(start_path), used(after_path)
    common = [g for g in after if g in start]
    return max(after[g] - start[g] for g in common) if common else None


# A restarted node takes what the killed one held; more than this over the start is memory still held for a
# dead process (e.g. its KV pool kept alive by another process's CUDA IPC mapping).
LEAK_MIB = 1024


def table(logdir, terminal_limit_s, clean_limit_s):
    logdir = Path(logdir)
    plan = [l.split(None, 2) for l in (logdir / "scenarios.txt").read_text().splitlines() if l.strip()]
    rows, details, failed = [], [], False
    for name, asked, desc in plan:
        results = sorted(logdir.glob("fault_%s_*.json" % name), key=lambda p: int(p.stem.rsplit("_", 1)[1]))
        agg = {"requests": 0, "outcomes": {}, "terminal": [], "clean_s": [], "clean": True, "probes": 0,
               "passed": 0, "sure": 0}
        for f in results:
            result = json.loads(f.read_text())
            pf = logdir / ("probe_%s_%s.json" % (name, result["repeat"]))
            probe_result = json.loads(pf.read_text()) if pf.exists() else None
            ef = logdir / ("exits_%s_%s.txt" % (name, result["repeat"]))
            exits = [tuple(l.split()) for l in ef.read_text().splitlines() if l.strip()] if ef.exists() else []
            s = summarize(result)
            why = judge(result, probe_result, exits, terminal_limit_s, clean_limit_s)
            growth = memory_growth(logdir / "gpu_start.txt", logdir / ("gpu_%s_%s.txt" % (name, result["repeat"])))
            if growth is not None and growth > LEAK_MIB:
                why.append("GPU memory %d MiB over the start (a dead process's memory still held)" % growth)
            agg["requests"] += s["requests"]
            for k, v in s["outcomes"].items():
                agg["outcomes"][k] = agg["outcomes"].get(k, 0) + v
            if s["terminal_s"] is not None:
                agg["terminal"].append(s["terminal_s"])
            if s["clean_s"] is not None:
                agg["clean_s"].append(s["clean_s"])
            agg["clean"] &= s["clean"]
            agg["probes"] += bool(probe_result and probe_result["ok"])
            agg["passed"] += not why
            agg["sure"] += bool(s["trigger"] and s["trigger"]["sure"])
            memory = gpu_memory(logdir / ("gpu_%s_%s.txt" % (name, result["repeat"])))
            details.append("- %s #%s: %s; probe %s%s%s" % (
                name, result["repeat"], describe(s), "ok" if probe_result and probe_result["ok"] else "FAILED",
                "; memory after: " + memory if memory else "",
                "" if not why else " -> FAIL: " + "; ".join(why)))
        n = len(results)
        verdict = "SKIPPED" if n == 0 else ("PASS" if agg["passed"] == n else "FAIL")
        failed |= verdict != "PASS"
        note = "" if n >= int(asked) else " (%d not run: DEADLINE or a stop, steps.log)" % (int(asked) - n)
        outcomes = " ".join("%s %d" % kv for kv in sorted(agg["outcomes"].items())) or "-"
        terminal = "n/a" if name == "cancel" or not agg["terminal"] else "%.2f" % max(agg["terminal"])
        rows.append("| %s | %d/%s%s | %d/%d | %d | %s | %s | %s | %s | %d/%d | %s |" % (
            name, n, asked, note, agg["sure"], n, agg["requests"], outcomes, terminal,
            "%.2f" % max(agg["clean_s"]) if agg["clean_s"] else "n/a",
            ("yes" if agg["clean"] else "NO") if n else "n/a", agg["probes"], n, verdict))
    print("| scenario | repeats | mid-transfer, sure | requests | outcomes | max s to terminal "
          "| max s to KV clean after idle | gauges clean | request after | verdict |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))
    print("\nscenarios: " + "; ".join("%s = %s" % (p[0], p[2]) for p in plan))
    print("limits: terminal outcome <= %g s after the fault (requests in flight at it); KV-clean gauges 0 <= %g s "
          "after the last request ended" % (terminal_limit_s, clean_limit_s))
    print("mid-transfer, sure: repeats whose fault surely met a transfer to (or from) the victim: the prefill node "
          "had more send sessions open than the other decode nodes had receive sessions (else: one of several "
          "decode nodes receiving)")
    start = gpu_memory(logdir / "gpu_start.txt")
    print("\n".join(["", "per repeat%s:" % (" (memory at the start: %s)" % start if start else "")] + details))
    return 1 if failed else 0
