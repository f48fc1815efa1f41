"""Where two CPUs part ways in a demo build: per-step digests of data, ops, gradients and weights.

``python -m medexp.demo.build_trace --out this-cpu.json`` runs the first steps of the clean demo
build in the same pinned-kernel process as a real build and writes, as JSON:

- ``probes``: digests of single operations on fixed inputs (a matrix product through MKL, a
  convolution, ``exp``/``log``/``tanh``/``erf``/``rsqrt`` over a grid, softmax, layer and RMS
  norms, one AdamW update): which library answers differently;
- ``data``: the tokenizer trained here, the pool's token ids and pixel values;
- ``init``: every parameter as initialised;
- ``steps``: per training step, each module's forward output in call order, the loss, every
  gradient (after clipping) and every weight before the update.

``--compare other.json`` (a trace written on another machine) prints the first entry of each part
that differs: the first op whose output differs on identical inputs is the cause. The traces
measured so far are in docs/measurements/ and their comparison in docs/portability.md.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

TRACE_VERSION = 1


def _digest(value) -> str:
    """SHA-256 (first 16 hex digits) of a tensor's bytes, or of a nest of tensors in order."""
    digest = hashlib.sha256()
    for tensor in _tensors(value):
        digest.update(str(tuple(tensor.shape)).encode())
        digest.update(tensor.detach().contiguous().cpu().numpy().tobytes())
    return digest.hexdigest()[:16]


def _tensors(value):
    import torch

    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _tensors(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _tensors(item)


def op_probes() -> dict[str, str]:
    """Digests of single operations on fixed inputs: each names the library that computes it."""
    import torch
    import torch.nn.functional as F

    generator = torch.Generator().manual_seed(0)
    a = torch.randn(64, 129, generator=generator)
    b = torch.randn(129, 96, generator=generator)
    image = torch.randn(2, 3, 32, 32, generator=generator)
    kernel = torch.randn(64, 3, 8, 8, generator=generator)
    grid = torch.linspace(-20, 20, 4097)
    positive = torch.linspace(1e-3, 50, 4097)
    weight = torch.randn(96, generator=generator)
    parameter = torch.nn.Parameter(torch.randn(96, 96, generator=generator))
    parameter.grad = torch.randn(96, 96, generator=generator)
    optimizer = torch.optim.AdamW([parameter], lr=3e-3, weight_decay=0.0)
    optimizer.step()
    optimizer.step()
    return {
        "matmul (BLAS sgemm)": _digest(a @ b),
        "matmul transposed": _digest(b.T @ a.T),
        "linear (addmm)": _digest(F.linear(a, b.T, weight)),
        "conv2d stride 8": _digest(F.conv2d(image, kernel, stride=8)),
        "exp": _digest(torch.exp(grid)),
        "log": _digest(torch.log(positive)),
        "tanh": _digest(torch.tanh(grid)),
        "erf": _digest(torch.erf(grid)),
        "sigmoid": _digest(torch.sigmoid(grid)),
        "rsqrt": _digest(torch.rsqrt(positive)),
        "pow 0.5": _digest(torch.pow(positive, 0.5)),
        "sin/cos": _digest([torch.sin(grid), torch.cos(grid)]),
        "softmax": _digest(torch.softmax(a, dim=-1)),
        "log_softmax": _digest(torch.log_softmax(a, dim=-1)),
        "layer_norm": _digest(F.layer_norm(a, (129,))),
        "rms norm": _digest(a * torch.rsqrt(a.pow(2).mean(-1, keepdim=True) + 1e-6)),
        "silu": _digest(F.silu(grid)),
        "gelu": _digest(F.gelu(grid)),
        "sum": _digest(a.sum(dim=0)),
        "adamw two steps": _digest(parameter),
    }


def trace_build(settings: dict, cache_dir: str, steps: int) -> dict:
    """The trace of the first ``steps`` steps of the clean build ``settings`` describe (run in a
    pinned-kernel process by :func:`main`, as builds are)."""
    import torch
    from omegaconf import OmegaConf

    from medexp.demo.models import clean_training_setup, train_clean
    from medexp.demo.shipped import cpu_description
    from medexp.kernel.portable import kernel_settings

    demo_cfg = OmegaConf.create(settings)
    probes = op_probes()
    processor, model, pool = clean_training_setup(demo_cfg, cache_dir)
    data = {
        "tokenizer": hashlib.sha256(processor.tokenizer.backend_tokenizer.to_str().encode()).hexdigest()[:16],
        "token ids": hashlib.sha256(json.dumps([s.input_ids for s in pool]).encode()).hexdigest()[:16],
        "labels": hashlib.sha256(json.dumps([s.labels for s in pool]).encode()).hexdigest()[:16],
        "pixel values": _digest([s.pixel_values for s in pool if s.pixel_values is not None]),
    }
    init = {name: _digest(tensor) for name, tensor in model.state_dict().items()}
    trace_steps: list[dict] = []
    forward: list[list[str]] = []

    def record_output(module, _inputs, output):
        forward.append([module_names[module], _digest(output)])

    module_names = {module: name or "(model)" for name, module in model.named_modules()}
    hooks = [module.register_forward_hook(record_output) for module in model.modules()]

    def observe(step, inputs, loss):
        trace_steps.append({
            "inputs": _digest(inputs),
            "forward": list(forward),
            "loss": loss.item().hex(),
            "grads": {name: _digest(p.grad) for name, p in model.named_parameters() if p.grad is not None},
            "weights": {name: _digest(p) for name, p in model.named_parameters()},
        })
        forward.clear()

    try:
        train_clean(model, pool, demo_cfg, observe, max_steps=steps)
    finally:
        for hook in hooks:
            hook.remove()
    return {"version": TRACE_VERSION, "machine": cpu_description(), "torch": torch.__version__,
            "kernels": kernel_settings(), "settings": settings, "probes": probes, "data": data, "init": init,
            "steps": trace_steps}


def _first_difference(ours: dict, theirs: dict) -> str | None:
    for key in ours:
        if key not in theirs:
            return f"{key}: only in the first trace"
        if ours[key] != theirs[key]:
            return f"{key}: {ours[key]} vs {theirs[key]}"
    return None


def compare(ours: dict, theirs: dict) -> list[str]:
    """Lines naming, for each part of two traces, the first entry that differs (or that none does)."""
    lines = [f"first:  {ours['machine']['cpu']} ({', '.join(ours['machine']['isa'])}), torch {ours['torch']}",
             f"second: {theirs['machine']['cpu']} ({', '.join(theirs['machine']['isa'])}), torch {theirs['torch']}"]
    if ours["settings"] != theirs["settings"]:
        lines.append("the traces are of different build settings: not comparable")
        return lines
    for part in ("probes", "data", "init"):
        differing = [key for key in ours[part] if ours[part][key] != theirs[part].get(key)]
        lines.append(f"{part}: {len(differing)} of {len(ours[part])} differ" + (f" ({', '.join(differing)})" if differing else ""))
    for number, (a, b) in enumerate(zip(ours["steps"], theirs["steps"])):
        for part in ("inputs", "forward", "loss", "grads", "weights"):
            if part == "forward":
                first = next(((i, x, y) for i, (x, y) in enumerate(zip(a[part], b[part])) if x != y), None)
                found = None if first is None else f"forward op {first[0]} ({first[1][0]}): {first[1][1]} vs {first[2][1]}"
            elif part in ("grads", "weights"):
                found = _first_difference(a[part], b[part])
                found = None if found is None else f"{part} {found}"
            else:
                found = None if a[part] == b[part] else f"{part}: {a[part]} vs {b[part]}"
            if found is not None:
                lines.append(f"step {number}: first difference at {found}")
                return lines
    lines.append(f"steps: the {min(len(ours['steps']), len(theirs['steps']))} traced steps are bit-identical")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m medexp.demo.build_trace", description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=3, help="training steps to trace (default 3)")
    parser.add_argument("--out", type=Path, help="write this machine's trace here (JSON)")
    parser.add_argument("--compare", type=Path, nargs="+", metavar="TRACE",
                        help="compare traces: this machine's (or --out's) against each file, or two files")
    parser.add_argument("--cache-dir", type=Path, help="the demo benchmark's cache (default: a temporary directory)")
    parser.add_argument("--host-kernels", action="store_true",
                        help="trace in this process with the host's own kernels instead of the pinned ones (to see "
                             "what pinning changes)")
    args = parser.parse_args(argv)
    if args.steps < 1:
        parser.error(f"--steps must be at least 1, got {args.steps}")
    if args.out is None and not args.compare:
        parser.error("give --out FILE, --compare TRACE [TRACE], or both")
    traces = [json.loads(Path(path).read_text(encoding="utf-8")) for path in args.compare or []]
    if args.out is not None or len(traces) == 1:
        import tempfile

        from medexp.config import compose
        from medexp.kernel.portable import run_pinned
        from omegaconf import OmegaConf

        settings = OmegaConf.to_container(compose(["model=demo_clean"]).model.demo)
        with tempfile.TemporaryDirectory(prefix="medexp-trace-") as scratch:
            cache_dir = str(args.cache_dir or scratch)
            ours = (trace_build(settings, cache_dir, args.steps) if args.host_kernels else
                    run_pinned("medexp.demo.build_trace:trace_build", settings=settings, cache_dir=cache_dir,
                               steps=args.steps))
        if args.out is not None:
            args.out.write_text(json.dumps(ours, indent=1) + "\n", encoding="utf-8")
            print(f"trace of {args.steps} steps written to {args.out}")
        traces.insert(0, ours)
    if len(traces) >= 2:
        for other in traces[1:]:
            print("\n".join(compare(traces[0], other)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
