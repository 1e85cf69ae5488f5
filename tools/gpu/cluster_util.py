#!/usr/bin/env python3
"""Helpers of tools/gpu/cluster_check.sh and cluster_faults.sh (standard library only: the GPU image
has python3); also imported by cluster_faults.py.

  free-port                         print a free TCP port on 127.0.0.1
  name-ids MODEL_DIR                give every id of config.json's vocab_size a distinct text
  greedy URL MODEL LEN TOKENS VOCAB OUT.json
                                    one greedy completion of a fixed LEN-token prompt
  table LOGDIR                      the final table from LOGDIR's bench summaries
"""
import json
import random
import re
import socket
import sys
import urllib.request
from pathlib import Path

TTFT = "tandem_time_to_first_token_seconds"
ITL = "tandem_inter_token_latency_seconds"
KV_SECONDS = "tandem_kv_transfer_seconds"
PREFILL = "tandem_request_prefill_time_seconds"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        print(s.getsockname()[1])


def name_ids(model_dir):
    """Random-weight models generate ids across the whole vocabulary while the built-in
    tokenizer names only its first few hundred: the others decode to nothing. Naming each
    unnamed id " t<id>" (byte-level 'Ġ' is the space) makes the text show every token, so two
    texts are equal exactly when their token ids are, and client TTFT sees the first token."""
    d = Path(model_dir)
    vocab_size = json.loads((d / "config.json").read_text())["vocab_size"]
    tok = json.loads((d / "tokenizer.json").read_text())
    vocab = tok["model"]["vocab"]
    used = set(vocab.values()) | {t["id"] for t in tok.get("added_tokens", [])}
    added = 0
    for i in range(vocab_size):
        if i not in used:
            vocab["\u0120t%d" % i] = i
            added += 1
    (d / "tokenizer.json").write_text(json.dumps(tok))
    print("tokenizer: named %d ids (vocab_size %d)" % (added, vocab_size))


def random_prompt(seed, length, vocab):
    """`length` token ids in [3, vocab) drawn from `seed` (ids below 3 are special in the tiny tokenizer)."""
    rng = random.Random(seed)
    return [rng.randrange(3, int(vocab)) for _ in range(int(length))]


def complete(url, model, prompt, tokens, timeout=120):
    """One greedy, non-streamed completion: {"text", "completion_tokens"}, or {"error"}."""
    body = {"model": model, "prompt": prompt, "max_tokens": int(tokens), "temperature": 0,
            "ignore_eos": True, "stream": False}
    req = urllib.request.Request(url + "/v1/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            answer = json.loads(r.read())
        return {"text": answer["choices"][0]["text"],
                "completion_tokens": answer.get("usage", {}).get("completion_tokens")}
    except Exception as e:  # the callers report it
        return {"error": str(e)}


def greedy(url, model, length, tokens, vocab, out):
    result = complete(url, model, random_prompt(20261203, length, vocab), tokens)
    Path(out).write_text(json.dumps(result))
    print("greedy: %s" % json.dumps(result)[:200])


_SAMPLE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(\{[^}]*\})?\s+(\S+)")


def parse_metrics(text):
    """{(name, labels): value} of a Prometheus text page; labels is the raw "{...}" text or ""."""
    samples = {}
    for line in text.splitlines():
        m = _SAMPLE.match(line)
        if m:
            try:
                samples[(m.group(1), m.group(2) or "")] = float(m.group(3))
            except ValueError:
                pass
    return samples


def scrape(url, timeout=2.0):
    """The parsed /metrics page at `url`, or None when it does not answer."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return parse_metrics(r.read().decode(errors="replace"))
    except Exception:
        return None


def metric(samples, name, labels_contain=""):
    """Sum of the series of `name` whose labels contain `labels_contain`; None when there is none."""
    values = [v for (n, labels), v in samples.items() if n == name and labels_contain in labels]
    return sum(values) if values else None


def read_summary(path):
    for line in Path(path).read_text(errors="replace").splitlines():
        if line.startswith("summary_json="):
            return json.loads(line[len("summary_json="):])
    return None


def hist(summary, page, family):
    """(mean, count, sum) of the first series of `family` on `page`, or None."""
    h = summary.get("server", {}).get(page, {}).get("histograms", {})
    for series, v in h.items():
        if series == family or series.startswith(family + "{"):
            return v
    return None


def fmt(v, scale=1.0, digits=1):
    return "n/a" if v is None else "%.*f" % (digits, v * scale)


def row(scenario, mode, s):
    ttft, itl = hist(s, "router", TTFT), hist(s, "router", ITL)
    land, send = hist(s, "decode", KV_SECONDS), hist(s, "prefill", KV_SECONDS)
    kv = s.get("server", {}).get("decode", {}).get("kv_transfer", {})
    pre = hist(s, "prefill", PREFILL) or hist(s, "decode", PREFILL)
    nbytes = kv.get("bytes") or 0
    mb = nbytes / land["count"] / 1e6 if land and nbytes else None
    gbs = nbytes / land["sum"] / 1e9 if land and nbytes and land["sum"] > 0 else None
    gbs_send = nbytes / send["sum"] / 1e9 if send and nbytes and send["sum"] > 0 else None
    cells = [scenario, mode, "%d/%d" % (s["completed"], s["failed"]),
             fmt(ttft and ttft["mean"], 1e3), fmt(itl and itl["mean"], 1e3, 2),
             fmt(land and land["mean"], 1e3), fmt(send and send["mean"], 1e3), fmt(mb, 1, 2), fmt(gbs, 1, 2),
             fmt(gbs_send, 1, 2), fmt(pre and pre["mean"], 1e3), fmt(s["client_ms"]["ttft"]["mean"]),
             "%.2f (%d/%d)" % (s["goodput"], s["within_slo"], s["completed"])]
    return "| " + " | ".join(cells) + " |", (ttft and ttft["mean"]), s["client_ms"]["ttft"]["mean"]


def table(logdir):
    logdir = Path(logdir)
    scenarios = [l.split() for l in (logdir / "scenarios.txt").read_text().splitlines() if l.strip()]
    print("| scenario | mode | ok/failed | TTFT srv (ms) | ITL srv (ms) | KV land (ms) | KV send (ms) | KV MB/req "
          "| GB/s land | GB/s send | prefill (ms) | TTFT client (ms) | goodput req/s (in SLO) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    ttfts = {}
    # reserve_first (cluster_check.sh RESERVE_FIRST=1): disaggregated, the PrefillRequest after the reservation.
    modes = [m for m in ("disaggregated", "reserve_first", "colocated")
             if m != "reserve_first" or list(logdir.glob("bench_reserve_first_*.log"))]
    for name, desc in [(s[0], " ".join(s[1:])) for s in scenarios]:
        for mode in modes:
            f = logdir / ("bench_%s_%s.log" % (mode, name))
            s = read_summary(f) if f.exists() else None
            if s is None:
                first = f.read_text(errors="replace").strip().splitlines()[:1] if f.exists() else []
                why = first[0] if first and first[0].startswith("skipped") else "no summary (see %s)" % f.name
                print("| %s | %s | %s |" % (name, mode, why))
                continue
            line, srv, cli = row(name, mode, s)
            print(line)
            ttfts[(name, mode)] = (srv, cli)
    print("\nscenarios: " + "; ".join("%s = %s" % (s[0], " ".join(s[1:])) for s in scenarios))
    print("TTFT/ITL srv: router /metrics means. KV land: decode's first layer landed -> every layer landed; KV "
          "send: prefill's first layer handed to the sender -> every layer written; GB/s = decode's received bytes / "
          "summed time. prefill: the engine's first step for a prompt -> its first token, forward computed (prefill "
          "node; the decode node when it prefills locally); queueing before it is "
          "tandem_request_queue_time_seconds{stage}.")
    others = [m for m in modes if m != "colocated"]
    print("\n| scenario | " + " | ".join("TTFT %s / colocated (server) | (client)" % m for m in others) + " |")
    print("|---|" + "---|---|" * len(others))
    ratio = lambda a, b: "n/a" if a is None or b is None or not b else "%.2f" % (a / b)
    for name in [s[0] for s in scenarios]:
        c = ttfts.get((name, "colocated"))
        cells = []
        for m in others:
            d = ttfts.get((name, m))
            cells += [ratio(d and d[0], c and c[0]), ratio(d and d[1], c and c[1])]
        print("| %s | %s |" % (name, " | ".join(cells)))
    startup = logdir / "startup.txt"
    if startup.exists():
        print("\n| node | start-up, launch -> /health/ready (s) |\n|---|---|")
        for l in startup.read_text().splitlines():
            print("| %s | %s |" % tuple(l.split(None, 1)))
    g = {m: logdir / ("greedy_%s.json" % m) for m in modes}
    if all(p.exists() for p in g.values()):
        out = {m: json.loads(p.read_text()) for m, p in g.items()}
        a = out["disaggregated"]
        same = all("error" not in o and o == a for o in out.values())
        print("\ngreedy equality (same prompt, temperature 0, %s): %s (%s tokens; %s)" % (
            ", ".join(modes), "IDENTICAL" if same else "DIFFERENT", a.get("completion_tokens"),
            "text %r" % a.get("text", "")[:60] if same else " vs ".join(
                "%s %r" % (m, o.get("text", o.get("error", ""))[:60]) for m, o in out.items())))


def main(argv):
    cmd = argv[1] if len(argv) > 1 else ""
    if cmd == "free-port":
        free_port()
    elif cmd == "name-ids":
        name_ids(argv[2])
    elif cmd == "greedy":
        greedy(*argv[2:8])
    elif cmd == "table":
        table(argv[2])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
