# Independent check of tandem-make-model and source of the loader's HF-written
# fixtures (tests/common/model/testdata/hf_written). Needs torch, transformers
# (run on the GPU machine; no GPU is used).
#
#   python3 hf_check.py MODELS_DIR OUT_DIR
#
# 1. Loads every model directory under MODELS_DIR (made by tandem-make-model)
#    with transformers: no missing/unexpected weights, finite logits; loads its
#    tokenizer, round-trips text, renders the chat template. Prints a JSON report.
# 2. Writes tiny random checkpoints saved by transformers itself (llama with
#    llama3 RoPE and 4 shards, qwen2 tied, qwen3 with head_dim != hidden/heads,
#    mistral with a sliding window) plus a mixed-dtype file from
#    safetensors.torch, each with expected.json (shapes, first values, sums).
import json, os, sys, traceback
import torch, transformers, safetensors.torch
from transformers import AutoModelForCausalLM, AutoTokenizer

models_dir = sys.argv[1]
out = sys.argv[2]
print("transformers", transformers.__version__, "torch", torch.__version__)
report = {}
for name in sorted(os.listdir(models_dir)):
    d = os.path.join(models_dir, name)
    r = report[name] = {}
    try:
        model, info = AutoModelForCausalLM.from_pretrained(d, output_loading_info=True, dtype=torch.float32)
        r["class"] = type(model).__name__
        r["loading_info"] = {k: sorted(map(str, v)) for k, v in info.items()}
        c = model.config
        r["config"] = {k: str(getattr(c, k, None)) for k in ["head_dim", "num_key_value_heads", "rope_theta",
                       "rope_scaling", "rope_parameters", "tie_word_embeddings", "attention_bias", "sliding_window",
                       "bos_token_id", "eos_token_id", "dtype", "torch_dtype"]}
        ids = torch.tensor([[1, 2, 3, 4, 5, 6]])
        with torch.no_grad():
            logits = model(ids).logits
        r["logits_finite"] = bool(torch.isfinite(logits).all())
        r["logits_std"] = float(logits.std())
        tok = AutoTokenizer.from_pretrained(d)
        text = "The dog and the cat are in the house. Hello, world!"
        enc = tok(text)["input_ids"]
        r["tokenizer_class"] = type(tok).__name__
        r["encoded"] = enc
        r["tokens"] = tok.convert_ids_to_tokens(enc)
        r["decoded"] = tok.decode(enc, skip_special_tokens=True)
        r["roundtrip_ok"] = r["decoded"] == text
        r["chat"] = tok.apply_chat_template([{"role": "system", "content": "Be brief."},
                                             {"role": "user", "content": " Hi there "}],
                                            add_generation_prompt=True, tokenize=False)
        ci = tok.apply_chat_template([{"role": "user", "content": "Hi"}], add_generation_prompt=True)
        r["chat_ids"] = list(ci["input_ids"]) if hasattr(ci, "keys") else list(ci)
        r["utf8"] = tok.decode(tok("héllo 世界 🙂")["input_ids"], skip_special_tokens=True)
    except Exception:
        r["error"] = traceback.format_exc()
print(json.dumps(report, indent=1, ensure_ascii=False, default=str))

# HF-written fixtures: tiny random checkpoints saved by transformers itself.
torch.manual_seed(0)
fx = os.path.join(out, "hf_written")
common = dict(vocab_size=64, hidden_size=32, intermediate_size=48, num_hidden_layers=1,
              num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
              bos_token_id=1, eos_token_id=[2, 3])
cfgs = {
    "llama": transformers.LlamaConfig(**common, rope_scaling={"rope_type": "llama3", "factor": 8.0,
        "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 64},
        rope_theta=500000.0, rms_norm_eps=1e-5),
    "qwen2": transformers.Qwen2Config(**common, tie_word_embeddings=True, rope_theta=1e6),
    "qwen3": transformers.Qwen3Config(**common, head_dim=16, rope_theta=1e6),
    "mistral": transformers.MistralConfig(**common, sliding_window=128),
}
for fam, cfg in cfgs.items():
    try:
        m = AutoModelForCausalLM.from_config(cfg).to(torch.bfloat16)
        d = os.path.join(fx, fam)
        m.save_pretrained(d, max_shard_size="8KB" if fam == "llama" else "50MB")
        sd = m.state_dict()
        expected = {k: {"shape": list(v.shape), "first": [float(x) for x in v.float().flatten()[:4]],
                        "sum": float(v.float().sum())} for k, v in sd.items()}
        if getattr(cfg, "tie_word_embeddings", False):
            expected.pop("lm_head.weight", None)
        json.dump(expected, open(os.path.join(d, "expected.json"), "w"), indent=1)
        print(fam, sorted(os.listdir(d)))
    except Exception:
        traceback.print_exc()

d = os.path.join(fx, "mixed")
os.makedirs(d, exist_ok=True)
tensors = {"f32": torch.randn(3, 5), "f16": torch.randn(7).half(), "bf16": torch.randn(2, 2, 3).bfloat16(),
           "i64": torch.arange(6, dtype=torch.int64).reshape(2, 3), "i32": torch.tensor([-1, 5], dtype=torch.int32),
           "u8": torch.tensor([0, 200, 255], dtype=torch.uint8), "scalar": torch.tensor(2.5)}
safetensors.torch.save_file(tensors, os.path.join(d, "mixed.safetensors"), metadata={"format": "pt", "note": "x"})
json.dump({k: {"shape": list(v.shape), "values": [float(x) for x in v.float().flatten()]} for k, v in tensors.items()},
          open(os.path.join(d, "expected.json"), "w"), indent=1)
print("done")
