#!/usr/bin/env python3
"""How far Hugging Face transformers itself lands from the golden fp32 logits when the
fixture models run in bf16 (weights and activations), with the metric of
tests/common/runtime/golden_test.cc: per row max|ours - ref| / max|ref|, and top-1
agreement. This is the error a bf16 implementation should be compared with.
Usage (repository root, GPU machine): python3 tools/gpu/hf_bf16_error.py"""
import os
import sys

import torch
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM


def main():
    root = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "data", "golden")
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    for family in ("llama", "qwen2", "qwen3"):
        d = os.path.join(root, family)
        g = load_file(os.path.join(d, "golden.safetensors"))
        ids = torch.cat([g["prompt_ids"], g["decode_ids"]]).to(dev)
        ref = torch.cat([g["prefill_logits"], g["decode_logits"]]).double()
        for dtype in (torch.bfloat16, torch.float32):
            model = AutoModelForCausalLM.from_pretrained(d, dtype=dtype).to(dev).eval()
            with torch.no_grad():
                out = model(ids[None]).logits[0].double().cpu()
            err = ((out - ref).abs().amax(dim=1) / ref.abs().amax(dim=1)).max().item()
            top1 = (out.argmax(dim=1) == ref.argmax(dim=1)).double().mean().item()
            print(f"hf {family:6s} {str(dtype):15s} rows {ref.shape[0]} top-1 {top1:.4f} "
                  f"max relative error {err:.4g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
