"""Goldens for the tiny Hugging Face snapshots of tools/tiny_hf_models.py, computed by transformers
itself (the independent reference): each snapshot is loaded with AutoModelForCausalLM in float32
with eager attention on the CPU; the logits of every prompt position and an 8-step greedy
continuation go to <out>/<name>.json with the versions, the seed and both configs (the Hub-style one
we wrote and the one transformers saves back). Needs torch + transformers (the device machine has
them): python tools/make_transformers_tiny.py --out tests/golden/transformers_tiny [--snapshots DIR]
"""
import argparse
import hashlib
import json
import pathlib
import platform
import sys
import tempfile

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import tiny_hf_models  # noqa: E402


def _round(x):
    return float(f"{x:.8g}")  # float32 logits of a few units: 1e-7 absolute, far below 1e-4


def golden(name, snapshot):
    import torch
    import transformers

    cfg = tiny_hf_models.config(name)
    family, dtype, seed = tiny_hf_models.MODELS[name]
    model, info = transformers.AutoModelForCausalLM.from_pretrained(
        snapshot, dtype=torch.float32, attn_implementation="eager", output_loading_info=True)
    model.eval()
    # Every tensor we wrote must be one transformers expects, and the reverse (a tied head is
    # not missing: it is the embedding).
    missing = [k for k in info.get("missing_keys", []) if k != "lm_head.weight"]
    problems = {k: list(v) for k, v in info.items() if k != "missing_keys" and v}
    if missing or problems or type(model).__name__ != cfg["architectures"][0]:
        raise SystemExit(f"{name}: loaded as {type(model).__name__}: missing {missing} {problems}")

    prompt = tiny_hf_models.PROMPT
    with torch.no_grad():
        logits = model(torch.tensor([prompt])).logits[0].float()
        router_margin = _router_margin(model, cfg, prompt) if tiny_hf_models.is_moe(cfg) else None
        sequence, greedy, margins = list(prompt), [], []
        # Each step re-runs the whole sequence without a cache: the plainest reading of the model.
        for _ in range(tiny_hf_models.GREEDY_STEPS):
            last = model(torch.tensor([sequence])).logits[0, -1].float()
            top = torch.topk(last, 2)
            greedy.append(int(top.indices[0]))
            margins.append(round(float(top.values[0] - top.values[1]), 6))
            sequence.append(greedy[-1])
    with tempfile.TemporaryDirectory() as saved:
        model.config.save_pretrained(saved)
        saved_config = json.loads((pathlib.Path(saved) / "config.json").read_text())
    weights = pathlib.Path(snapshot) / "model.safetensors"
    return {
        "name": name,
        "family": family,
        "hf_class": type(model).__name__,
        "weight_dtype": dtype,
        "seed": seed,
        "generator": "tools/tiny_hf_models.py (numpy default_rng(seed), std 1/sqrt(fan_in))",
        "safetensors_sha256": hashlib.sha256(weights.read_bytes()).hexdigest(),
        "config": cfg,
        "config_saved_by_transformers": saved_config,
        "transformers_version": transformers.__version__,
        "torch_version": torch.__version__,
        "python_version": platform.python_version(),
        "settings": {"dtype": "float32", "attn_implementation": "eager", "device": "cpu",
                     "greedy": "argmax, whole sequence re-run each step, no KV cache"},
        "prompt_tokens": prompt,
        "n_vocab": cfg["vocab_size"],
        "logits": [[_round(x) for x in row] for row in logits.tolist()],
        "greedy_continuation": greedy,
        "greedy_top2_margins": margins,
        **({"router_min_topk_margin": router_margin} if router_margin is not None else {}),
    }


def _router_margin(model, cfg, prompt):
    """The smallest gap, over every layer and prompt token, between the router logits of the last
    chosen expert and the best unchosen one: how far the routing is from a tie that a 1e-6
    difference could flip."""
    import torch

    k = cfg["num_experts_per_tok"]
    try:
        routers = model(torch.tensor([prompt]), output_router_logits=True).router_logits
    except (TypeError, AttributeError) as error:  # a transformers without it: no margin, say so
        print(f"no router logits: {error}", file=sys.stderr)
        return None
    gaps = []
    for layer in routers or ():
        top = torch.topk(layer.float().reshape(-1, layer.shape[-1]), k + 1).values
        gaps.append(float((top[:, k - 1] - top[:, k]).min()))
    return round(min(gaps), 6) if gaps else None


def _dumps(result):
    """Indented JSON with one line per logits row."""
    rows = result.pop("logits")
    head = json.dumps(result, indent=1)[:-2]
    body = ",\n".join("  " + json.dumps(row) for row in rows)
    return f'{head},\n "logits": [\n{body}\n ]\n}}\n'


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, type=pathlib.Path)
    parser.add_argument("--snapshots", type=pathlib.Path,
                        help="prebuilt snapshots (tools/tiny_hf_models.py OUT); made when absent")
    parser.add_argument("names", nargs="*", default=list(tiny_hf_models.MODELS))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch:
        root = args.snapshots or pathlib.Path(scratch)
        for name in args.names:
            snapshot = root / name
            if not (snapshot / "model.safetensors").exists():
                tiny_hf_models.write_snapshot(name, snapshot)
            result = golden(name, snapshot)
            (args.out / f"{name}.json").write_text(_dumps(result))
            print(name, result["hf_class"], "greedy", result["greedy_continuation"],
                  "min margin", min(result["greedy_top2_margins"]), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
