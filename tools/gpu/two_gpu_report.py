#!/usr/bin/env python3
"""The reports of tools/gpu/two_gpu_check.sh (standard library only: the GPU image has python3).

  tests LOGDIR NAME...        the transport tests' table (LOGDIR/NAME.log, gtest output; NAME.rc, exit status)
  kv LOG                      kv_transfer_gpu_bench's GPU 0 -> GPU 1 ratios against issue 22's targets
  saturated LOG SHARE         exit 0 when fewer than SHARE of the run's requests met the SLO (or no summary)
  sweep LOGDIR                the rate sweep's table, each layout's best goodput, the 4K-prompt overhead
  plot LOGDIR OUT.svg         goodput against rate, both layouts, one panel per workload

Sweep logs (two_gpu_check.sh writes them): sweep_<layout>_<workload>_<rate>.log and single_<layout>.log,
each a tandem-bench-serving output ending in summary_json=..., or a first line "skipped: <why>".
"""
import math
import re
import sys
from pathlib import Path
from xml.sax.saxutils import escape

from cluster_util import PREFILL, TTFT, fmt, hist, read_summary

LAYOUTS = {"1p1d": "1P1D (prefill GPU 0, decode GPU 1)", "colocated": "2 colocated replicas (GPU 0, GPU 1)"}
WORKLOADS = ("sharegpt", "fixed")
SHORT = {"1p1d": "1P1D", "colocated": "2x colocated"}
COLORS = {"1p1d": "#1f77b4", "colocated": "#d62728"}

# ---- (a) the transport tests ----

_GTEST = re.compile(r"^\[\s+(OK|FAILED|SKIPPED)\s+\] ([A-Za-z_][\w/]*\.[\w/]+)")


def parse_gtest(text):
    """{"OK"|"FAILED"|"SKIPPED": sorted test names} of a gtest output."""
    seen = {"OK": set(), "FAILED": set(), "SKIPPED": set()}
    for line in text.splitlines():
        m = _GTEST.match(line)
        if m:
            seen[m.group(1)].add(m.group(2))
    return {k: sorted(v) for k, v in seen.items()}


def tests(logdir, names):
    print("| test binary | passed | failed | skipped | exit | verdict |\n|---|---|---|---|---|---|")
    for name in names:
        log, rc = Path(logdir) / (name + ".log"), Path(logdir) / (name + ".rc")
        if not log.exists():
            print("| %s | not run | | | | |" % name)
            continue
        text = log.read_text(errors="replace")
        if text.startswith("skipped"):
            print("| %s | %s | | | | |" % (name, text.splitlines()[0]))
            continue
        r = parse_gtest(text)
        code = rc.read_text().strip() if rc.exists() else "?"
        ok = code == "0" and r["OK"] and not r["FAILED"] and not r["SKIPPED"]
        print("| %s | %d | %s | %s | %s | %s |" % (
            name, len(r["OK"]), ", ".join(r["FAILED"]) or "0", ", ".join(r["SKIPPED"]) or "0", code,
            "PASS" if ok else "FAIL"))


# ---- (b) the KV transfer benchmark ----

def parse_kv_bench(text):
    """The GPU 0 -> GPU 1 rows of kv_transfer_gpu_bench: dicts of backend (cuda_ipc | nccl), kind
    (contiguous | scattered), mib, gbps, ceiling_gbps, ratio, failed."""
    rows, backend = [], None
    for line in text.splitlines():
        cells = [c.strip() for c in line.split("|")]
        if line.startswith("GPU 0 -> GPU 1"):
            backend = "nccl" if "ncclSend" in line else "cuda_ipc"
            continue
        if backend is None or len(cells) != 5 or not cells[1].endswith("MiB"):
            continue
        if cells[0] not in ("contiguous", "scattered 64 KiB"):
            continue
        ratio = cells[4].split()
        rows.append({"backend": backend, "kind": cells[0].split()[0], "mib": int(cells[1].split()[0]),
                     "gbps": float(cells[2]), "ceiling_gbps": float(cells[3]), "ratio": float(ratio[0]),
                     "failed": "FAILED" in ratio})
    return rows


def kv_target(kind, mib):
    """Issue 22's floor for a row, or None (1 MiB is shown without one): >= 16 MiB, 0.85 of the same
    run's raw call (cudaMemcpyPeer, ncclSend/ncclRecv) contiguous, 0.6 scattered (the gather included)."""
    if mib < 16:
        return None
    return 0.85 if kind == "contiguous" else 0.6


def kv(log):
    text = Path(log).read_text(errors="replace") if Path(log).exists() else ""
    rows = parse_kv_bench(text)
    if not rows:
        print("no GPU 0 -> GPU 1 rows in %s; its last lines:" % Path(log).name)
        print("\n".join("    " + line for line in text.strip().splitlines()[-5:]))
        return
    ceiling = {"cuda_ipc": "cudaMemcpyPeer", "nccl": "ncclSend/ncclRecv"}
    print("| transport | destination | size | GB/s | ceiling (same run, contiguous) GB/s | ratio | target | met |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        target = kv_target(r["kind"], r["mib"])
        met = "FAILED" if r["failed"] else "-" if target is None else "yes" if r["ratio"] >= target else "NO"
        print("| %s | %s | %d MiB | %.1f | %s %.1f | %.2f | %s | %s |" % (
            r["backend"], r["kind"], r["mib"], r["gbps"], ceiling[r["backend"]], r["ceiling_gbps"], r["ratio"],
            "-" if target is None else ">= %.2f" % target, met))


# ---- (c) the cluster sweep ----

def first_line(path):
    lines = path.read_text(errors="replace").strip().splitlines() if path.exists() else []
    return lines[0] if lines else ""


def sweep_runs(logdir):
    """{(layout, workload): [(rate, summary or None, why)]} sorted by rate; why says what a run lacks."""
    runs = {}
    for f in Path(logdir).glob("sweep_*_*_*.log"):
        _, layout, workload, rate = f.stem.split("_", 3)
        summary = read_summary(f)
        why = "" if summary else first_line(f) if first_line(f).startswith("skipped") else "no summary (%s)" % f.name
        runs.setdefault((layout, workload), []).append((float(rate), summary, why))
    return {k: sorted(v, key=lambda r: r[0]) for k, v in runs.items()}


def best(runs):
    """(goodput, rate) of the run with the highest goodput, or None."""
    done = [(s["goodput"], rate) for rate, s, _ in runs if s]
    return max(done) if done else None


def latencies(s, key, digits):
    v = s["client_ms"][key]
    return " / ".join(fmt(v[p], 1, digits) for p in ("p50", "p90", "p99"))


def pooled_mean(summary, pages, family):
    """Mean of `family` over the histograms of several /metrics pages (sum of sums / sum of counts)."""
    found = [h for h in (hist(summary, p, family) for p in pages) if h and h["count"]]
    count = sum(h["count"] for h in found)
    return sum(h["sum"] for h in found) / count if count else None


def replica_split(runs):
    """{node page: generated tokens} of the colocated replicas over `runs`: both GPUs must have served."""
    tokens = {}
    for _, s, _ in runs:
        for page, report in (s or {}).get("server", {}).items():
            if page.startswith("colocated"):
                for series, v in report.get("counters", {}).items():
                    if series.startswith("tandem_generation_tokens_total"):
                        tokens[page] = tokens.get(page, 0) + v
    return tokens


def overhead(logdir):
    """{layout: (TTFT, prefill)} server-side means in s of single_<layout>.log: the router's TTFT and
    the prefill time of the node(s) that prefilled (the prefill node; the colocated nodes)."""
    pages = {"1p1d": ["prefill"], "colocated": ["colocated0", "colocated1"]}
    out = {}
    for layout, names in pages.items():
        f = Path(logdir) / ("single_%s.log" % layout)
        s = read_summary(f) if f.exists() else None
        if s:
            ttft = hist(s, "router", TTFT)
            out[layout] = (ttft and ttft["mean"], pooled_mean(s, names, PREFILL))
    return out


def overhead_line(logdir):
    o = overhead(logdir)
    ttft, prefill = o.get("1p1d", (None, None))
    if ttft is None or not prefill:
        why = first_line(Path(logdir) / "single_1p1d.log")
        line = "single prompt, one at a time: 1P1D TTFT or prefill time n/a (single_1p1d.log%s)" % (
            ": " + why if why.startswith("skipped") else "")
    else:
        share = ttft / prefill - 1
        line = ("single prompt, one at a time: 1P1D TTFT %s ms (router) over the prefill node's prefill %s ms: "
                "%+.1f %% (target <= 5 %%: %s)" % (fmt(ttft, 1e3), fmt(prefill, 1e3), share * 100,
                                                   "met" if share <= 0.05 else "NOT met"))
    ttft, prefill = o.get("colocated", (None, None))
    if ttft is None:
        return line + "; colocated TTFT n/a"
    return line + "; colocated TTFT %s ms (prefill %s ms)" % (fmt(ttft, 1e3), fmt(prefill, 1e3))


def sweep(logdir):
    runs = sweep_runs(logdir)
    print("| layout | workload | rate req/s | ok/failed | goodput req/s (in SLO) | TTFT p50 / p90 / p99 (ms) "
          "| TPOT p50 / p90 / p99 (ms) |")
    print("|---|---|---|---|---|---|---|")
    for layout in LAYOUTS:
        for workload in WORKLOADS:
            for rate, s, why in runs.get((layout, workload), []):
                if not s:
                    print("| %s | %s | %g | %s | | | |" % (SHORT[layout], workload, rate, why))
                    continue
                print("| %s | %s | %g | %d/%d | %.2f (%d/%d) | %s | %s |" % (
                    SHORT[layout], workload, rate, s["completed"], s["failed"], s["goodput"], s["within_slo"],
                    s["completed"] + s["failed"], latencies(s, "ttft", 1), latencies(s, "tpot", 2)))
    print("\n| workload | 1P1D best goodput (at rate) | 2x colocated best goodput (at rate) | 1P1D / colocated "
          "| target |\n|---|---|---|---|---|")
    cell = lambda b: "n/a" if b is None else "%.2f req/s (%g)" % b
    for workload in WORKLOADS:
        d, c = best(runs.get(("1p1d", workload), [])), best(runs.get(("colocated", workload), []))
        ratio = "n/a" if d is None or c is None or c[0] <= 0 else "%.2f" % (d[0] / c[0])
        print("| %s | %s | %s | %s | >= 1.5 on one workload |" % (workload, cell(d), cell(c), ratio))
    split = replica_split([r for wl in WORKLOADS for r in runs.get(("colocated", wl), [])])
    total = sum(split.values())
    if total:
        print("\ncolocated replicas, generated tokens over the sweep: " + ", ".join(
            "%s %d (%.0f %%)" % (page, v, 100.0 * v / total) for page, v in sorted(split.items())))
    print("\n" + overhead_line(logdir))


# ---- the plot ----

def nice_step(top, ticks=5):
    """A 1, 2 or 5 times a power of ten step that splits 0..top into at most `ticks` intervals."""
    step = 10.0 ** math.floor(math.log10(top / ticks))
    for m in (1, 2, 5, 10):
        if top / (m * step) <= ticks:
            return m * step
    return 10 * step


def marker(layout, x, y):
    if layout == "1p1d":
        return '<circle cx="%.1f" cy="%.1f" r="3.5" fill="%s"/>' % (x, y, COLORS[layout])
    return '<rect x="%.1f" y="%.1f" width="7" height="7" fill="%s"/>' % (x - 3.5, y - 3.5, COLORS[layout])


def svg(series, title, x_label, y_label):
    """An SVG line chart: one panel per workload, series = {workload: {layout: [(x, y), ...]}}; the
    dashed diagonal is goodput = offered rate."""
    w, h, pad = 420, 300, 50
    panels = [wl for wl in WORKLOADS if wl in series]
    parts = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" '
             'font-size="12">' % (w * max(1, len(panels)), h + 40),
             '<rect width="100%" height="100%" fill="white"/>',
             '<text x="10" y="18" font-size="14">%s</text>' % escape(title)]
    for i, workload in enumerate(panels):
        points = [p for line in series[workload].values() for p in line]
        most = max([x for x, _ in points] + [y for _, y in points] + [1.0])
        step = nice_step(most)
        top = math.ceil(most / step) * step
        x0, y0, pw, ph = i * w + pad, h, w - pad - 20, h - pad - 10
        sx = lambda v: x0 + v / top * pw
        sy = lambda v: y0 - v / top * ph
        parts.append('<text x="%d" y="42" font-weight="bold">%s</text>' % (x0, escape(workload)))
        parts.append('<path d="M%d %d H%d M%d %d V%d" stroke="black" fill="none"/>' % (
            x0, y0, x0 + pw, x0, y0, y0 - ph))
        parts.append('<path d="M%.1f %.1f L%.1f %.1f" stroke="#999" stroke-dasharray="4 4"/>' % (
            sx(0), sy(0), sx(top), sy(top)))
        parts.append('<text x="%.1f" y="%.1f" fill="#999" text-anchor="end">offered</text>' % (
            sx(0.8 * top) - 6, sy(0.8 * top)))
        for k in range(int(round(top / step)) + 1):
            v = k * step
            parts.append('<text x="%.1f" y="%d" text-anchor="middle">%g</text>' % (sx(v), y0 + 15, v))
            parts.append('<text x="%d" y="%.1f" text-anchor="end">%g</text>' % (x0 - 4, sy(v) + 4, v))
        parts.append('<text x="%.1f" y="%d" text-anchor="middle">%s</text>' % (
            x0 + pw / 2, y0 + 32, escape(x_label)))
        parts.append('<text transform="translate(%d %.1f) rotate(-90)" text-anchor="middle">%s</text>' % (
            x0 - 38, y0 - ph / 2, escape(y_label)))
        for j, layout in enumerate(l for l in LAYOUTS if l in series[workload]):
            line = series[workload][layout]
            xy = " ".join("%.1f,%.1f" % (sx(x), sy(y)) for x, y in line)
            dash = ' stroke-dasharray="6 4"' if layout == "colocated" else ""  # equal lines stay visible
            parts.append('<polyline points="%s" fill="none" stroke="%s" stroke-width="2"%s/>' % (
                xy, COLORS[layout], dash))
            parts += [marker(layout, sx(x), sy(y)) for x, y in line]
            parts.append(marker(layout, x0 + 14, y0 - ph + 6 + 16 * j))
            parts.append('<text x="%d" y="%d">%s</text>' % (x0 + 24, y0 - ph + 10 + 16 * j, escape(SHORT[layout])))
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def plot(logdir, out):
    runs = sweep_runs(logdir)
    series, limits = {}, None
    for (layout, workload), rs in runs.items():
        line = [(rate, s["goodput"]) for rate, s, _ in rs if s]
        if line:
            series.setdefault(workload, {})[layout] = line
            limits = limits or next(s for _, s, _ in rs if s)["goodput_limits_ms"]
    limits = limits or {"ttft": "?", "tpot": "?"}
    title = "goodput (TTFT <= %g ms, TPOT <= %g ms) against the Poisson request rate" % (
        limits["ttft"], limits["tpot"]) if series else "no sweep run has a summary"
    Path(out).write_text(svg(series, title, "request rate (req/s)", "goodput (req/s)"))
    print("plot: %s (%d workloads)" % (out, len(series)))


def saturated(log, share):
    s = read_summary(log) if Path(log).exists() else None
    sent = s and s["completed"] + s["failed"]
    return not sent or s["within_slo"] < float(share) * sent


def main(argv):
    cmd = argv[1] if len(argv) > 1 else ""
    if cmd == "tests" and len(argv) > 3:
        tests(argv[2], argv[3:])
    elif cmd == "kv" and len(argv) == 3:
        kv(argv[2])
    elif cmd == "saturated" and len(argv) == 4:
        sys.exit(0 if saturated(argv[2], argv[3]) else 1)
    elif cmd == "sweep" and len(argv) == 3:
        sweep(argv[2])
    elif cmd == "plot" and len(argv) == 4:
        plot(argv[2], argv[3])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
