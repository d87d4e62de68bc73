"""The quantization targets on trained models (issue 19): the demo ViT, the Shakespeare GPT,
and int8 SQNR against PyTorch's quantize_dynamic on a trained MLP.

    python benchmarks/quant_targets.py [--vit-epochs 40] [--gpt CHECKPOINT | --gpt-steps 300]

Without --gpt it trains the GPT as `shapeflow train gpt --steps N` does (minutes on 2 cores).
"""

from __future__ import annotations

import argparse
import tempfile
import time


def vit_rows(epochs: int) -> list[str]:
    from shapeflow.cli._quant_models import digits_subject
    from shapeflow.quant import report

    s = digits_subject("vit", None, epochs, seed=0)
    rows = []
    for scheme in ("int8", "int8-weight", "int4-g32", "fp8-e4m3"):
        r = report(s.model, *s.inputs, scheme=scheme, calibration=s.calibration,
                   target=s.target)
        t = r.task
        rows.append(f"vit ({epochs} epochs) {scheme:<12} output SQNR {r.sqnr:5.1f} dB  accuracy "
                    f"{100 * t.accuracy_float:.2f} -> {100 * t.accuracy_quant:.2f} "
                    f"({100 * (t.accuracy_quant - t.accuracy_float):+.2f} points), top-1 "
                    f"agreement {100 * t.top1_agreement:.2f}%"
                    + (f"  [float: {', '.join(r.left_float)}]" if r.left_float else ""))
    return rows


def gpt_rows(checkpoint: str | None, steps: int) -> list[str]:
    from shapeflow.cli._quant_models import gpt_subject
    from shapeflow.cli.train import train_gpt
    from shapeflow.quant import report

    with tempfile.TemporaryDirectory() as tmp:
        if checkpoint is None:
            checkpoint = f"{tmp}/gpt.safetensors"
            train_gpt(steps=steps, save=checkpoint, sample_tokens=1)
        s = gpt_subject(checkpoint, seed=0)
    rows = []
    for scheme in ("int8", "int8-weight", "int4-g32", "fp8-e4m3"):
        r = report(s.model, *s.inputs, scheme=scheme, calibration=s.calibration,
                   target=s.target)
        t = r.task
        rows.append(f"gpt {scheme:<12} output SQNR {r.sqnr:5.1f} dB  held-out loss "
                    f"{t.loss_float:.4f} -> {t.loss_quant:.4f} ({t.loss_quant - t.loss_float:+.4f})"
                    f", perplexity {t.perplexity_float:.3f} -> {t.perplexity_quant:.3f}")
    return rows


def mlp_row() -> str:
    import torch
    from torch.ao.ns.fx.utils import compute_sqnr

    import shapeflow as sf
    from shapeflow.cli._quant_models import digits_subject

    s = digits_subject("mlp", None, 10, seed=0)
    r = sf.quant.report(s.model, *s.inputs, scheme="int8", target=s.target)
    twin = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(),
                               torch.nn.Linear(128, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))
    layers = [m for m in s.model.modules() if isinstance(m, sf.nn.Linear)]
    with torch.no_grad():
        for t, m in zip(twin[::2], layers):
            t.weight.copy_(torch.from_numpy(m.weight.detach().numpy()))
            t.bias.copy_(torch.from_numpy(m.bias.detach().numpy()))
        dyn = torch.ao.quantization.quantize_dynamic(twin, {torch.nn.Linear}, torch.qint8)
        x = torch.from_numpy(s.inputs[0].numpy())
        torch_db = compute_sqnr(twin(x), dyn(x)).item()
    return (f"mlp (digits, 10 epochs) int8 output SQNR: shapeflow {r.sqnr:.1f} dB, PyTorch "
            f"quantize_dynamic {torch_db:.1f} dB")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--vit-epochs", type=int, default=40)
    p.add_argument("--gpt", help="a checkpoint of `shapeflow train gpt` (else trained here)")
    p.add_argument("--gpt-steps", type=int, default=300)
    args = p.parse_args()
    start = time.perf_counter()
    for line in [mlp_row(), *vit_rows(args.vit_epochs), *gpt_rows(args.gpt, args.gpt_steps)]:
        print(line)
    print(f"({time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()
