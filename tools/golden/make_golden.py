#!/usr/bin/env python3
"""Writes golden-logit fixtures from Hugging Face `transformers` (the independent oracle).

For each family (Llama with GQA + llama3 rope scaling; Qwen2 with qkv bias + tied embeddings;
Qwen3 with q/k norm) it builds a small random model, saves it as a HF directory (float32
safetensors), and writes golden.safetensors:
  prompt_ids     I64 [T]     the prompt
  prefill_logits F32 [T, V]  logits at every prompt position
  decode_ids     I64 [S]     tokens fed one at a time after the prompt (greedy picks)
  decode_logits  F32 [S, V]  logits after feeding each decode token
Logits come from full recomputation over the whole sequence (no HF cache), in float64 math on CPU.
Every weight is a bfloat16 value (stored as float32), so a bf16 backend runs the very weights the
reference ran: what it is compared on is its own arithmetic, not the rounding of the checkpoint.

Run where transformers is installed (the GPU machine; no GPU needed):
  python3 tools/golden/make_golden.py --out tests/data/golden
"""
import argparse
import json
import os

import torch
from safetensors.torch import save_file
import transformers

COMMON = dict(vocab_size=384, hidden_size=64, intermediate_size=160, num_hidden_layers=2,
              num_attention_heads=4, num_key_value_heads=2, head_dim=16, rms_norm_eps=1e-5,
              max_position_embeddings=512, initializer_range=0.15, bos_token_id=1, eos_token_id=2)

FAMILIES = {
    "llama": (transformers.LlamaConfig, transformers.LlamaForCausalLM, dict(
        rope_theta=500000.0, tie_word_embeddings=False, attention_bias=False,
        rope_scaling=dict(rope_type="llama3", factor=8.0, low_freq_factor=1.0,
                          high_freq_factor=4.0, original_max_position_embeddings=64))),
    "qwen2": (transformers.Qwen2Config, transformers.Qwen2ForCausalLM, dict(
        rope_theta=1000000.0, tie_word_embeddings=True)),
    "qwen3": (transformers.Qwen3Config, transformers.Qwen3ForCausalLM, dict(
        rope_theta=1000000.0, tie_word_embeddings=False, attention_bias=False)),
}


def classic_config(path, extra):
    """Rewrites config.json the way released checkpoints spell it (rope_theta + rope_scaling)."""
    with open(path) as f:
        cfg = json.load(f)
    with open(path.replace("config.json", "config.transformers5.json"), "w") as f:
        json.dump(cfg, f, indent=2, sort_keys=True)
    params = cfg.pop("rope_parameters", None)
    if params is not None:
        cfg["rope_theta"] = params.get("rope_theta", extra.get("rope_theta"))
        scaling = {k: v for k, v in params.items() if k != "rope_theta"}
        cfg["rope_scaling"] = None if scaling.get("rope_type", "default") == "default" else scaling
    cfg["torch_dtype"] = "float32"
    with open(path, "w") as f:
        json.dump(cfg, f, indent=2, sort_keys=True)


def randomize_extras(model, gen):
    """HF initializes norms to 1 and biases to 0; randomize them so those paths are tested."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(1.0 + 0.2 * torch.randn(p.shape, generator=gen))
            elif name.endswith(".bias"):
                p.copy_(0.2 * torch.randn(p.shape, generator=gen))


def round_to_bf16(model):
    """Makes every parameter exactly representable in bfloat16 (see the module docstring)."""
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(p.to(torch.bfloat16).to(p.dtype))


def logits_of(model, ids):
    with torch.no_grad():
        return model(input_ids=torch.tensor([ids])).logits[0].to(torch.float32)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--prompt-len", type=int, default=21)
    ap.add_argument("--decode-steps", type=int, default=6)
    args = ap.parse_args()
    torch.set_default_dtype(torch.float64)
    for i, (family, (cfg_cls, model_cls, extra)) in enumerate(FAMILIES.items()):
        torch.manual_seed(1234 + i)
        gen = torch.Generator().manual_seed(99 + i)
        cfg = cfg_cls(**COMMON, **extra)
        model = model_cls(cfg).to(torch.float64).eval()
        randomize_extras(model, gen)
        round_to_bf16(model)
        out = os.path.join(args.out, family)
        os.makedirs(out, exist_ok=True)
        model.to(torch.float32).save_pretrained(out, safe_serialization=True)
        model.to(torch.float64)
        classic_config(os.path.join(out, "config.json"), extra)
        prompt = torch.randint(3, COMMON["vocab_size"], (args.prompt_len,), generator=gen).tolist()
        # Reference math in float64 over the float32-rounded weights that were saved.
        model_ref = model_cls.from_pretrained(out, dtype=torch.float64).eval()
        prefill = logits_of(model_ref, prompt)
        seq, decode_ids, decode_logits = list(prompt), [], []
        next_id = int(prefill[-1].argmax())
        for _ in range(args.decode_steps):
            decode_ids.append(next_id)
            seq.append(next_id)
            row = logits_of(model_ref, seq)[-1]
            decode_logits.append(row)
            next_id = int(row.argmax())
        save_file({
            "prompt_ids": torch.tensor(prompt, dtype=torch.int64),
            "prefill_logits": prefill.contiguous(),
            "decode_ids": torch.tensor(decode_ids, dtype=torch.int64),
            "decode_logits": torch.stack(decode_logits).contiguous(),
        }, os.path.join(out, "golden.safetensors"))
        print(f"{family}: prompt {len(prompt)}, decode {len(decode_ids)}, "
              f"transformers {transformers.__version__}, files {sorted(os.listdir(out))}")


if __name__ == "__main__":
    main()
