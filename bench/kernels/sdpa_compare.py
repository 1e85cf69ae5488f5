#!/usr/bin/env python3
"""PyTorch scaled_dot_product_attention on contiguous KV for the decode shapes in the CSV
written by decode_attention_bench (same run, same GPU), next to our paged kernel.

    python3 bench/kernels/sdpa_compare.py decode.csv
"""
import csv
import sys

import torch
import torch.nn.functional as F


def median_ms(fn, warmup=3, reps=20):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(reps):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop))
    times.sort()
    return times[len(times) // 2]


def main(path):
    rows = list(csv.DictReader(open(path)))
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name(0)}")
    print(f"{'batch':>5} {'ctx':>6} {'hq':>3} {'hkv':>3} {'hd':>3} {'bs':>3} {'KV_MB':>8} "
          f"{'ours_us':>9} {'sdpa_us':>9} {'sdpa/ours':>9} {'ours/copy':>9} {'ours/read':>9}")
    for r in rows:
        b, ctx, hq, hkv, hd = (int(r[k]) for k in ("batch", "ctx", "hq", "hkv", "hd"))
        q = torch.randn(b, hq, 1, hd, device="cuda", dtype=torch.bfloat16)
        k = torch.randn(b, hkv, ctx, hd, device="cuda", dtype=torch.bfloat16)
        v = torch.randn(b, hkv, ctx, hd, device="cuda", dtype=torch.bfloat16)
        try:
            ms = median_ms(lambda: F.scaled_dot_product_attention(q, k, v, enable_gqa=True))
        except Exception as e:  # noqa: BLE001 - report and go on
            print(f"sdpa failed for {r}: {e}")
            continue
        ours_us = float(r["time_us"])
        gbs = float(r["gbs"])
        print(f"{b:>5} {ctx:>6} {hq:>3} {hkv:>3} {hd:>3} {int(r['bs']):>3} "
              f"{float(r['kv_bytes']) / 1e6:>8.1f} {ours_us:>9.1f} {ms * 1e3:>9.1f} "
              f"{ms * 1e3 / ours_us:>9.2f} {gbs / float(r['copy_gbs']):>9.3f} "
              f"{gbs / float(r['read_gbs']):>9.3f}")
        del q, k, v
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main(sys.argv[1])
