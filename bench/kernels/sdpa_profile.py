#!/usr/bin/env python3
"""One PyTorch scaled_dot_product_attention decode call on contiguous KV, between
cudaProfilerStart/Stop, for `ncu --profile-from-start off` (tools/gpu/attention_profile.sh).

    python3 bench/kernels/sdpa_profile.py BATCH CTX HQ HKV HD
"""
import sys

import torch
import torch.nn.functional as F


def main(b, ctx, hq, hkv, hd):
    q = torch.randn(b, hq, 1, hd, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(b, hkv, ctx, hd, device="cuda", dtype=torch.bfloat16)
    v = torch.randn(b, hkv, ctx, hd, device="cuda", dtype=torch.bfloat16)
    for _ in range(3):
        F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
    torch.cuda.synchronize()
    torch.cuda.profiler.start()
    F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
    torch.cuda.synchronize()
    torch.cuda.profiler.stop()
    print(f"torch {torch.__version__}: flash {torch.backends.cuda.flash_sdp_enabled()}, "
          f"cudnn {torch.backends.cuda.cudnn_sdp_enabled()}, "
          f"efficient {torch.backends.cuda.mem_efficient_sdp_enabled()}")


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:6]))
