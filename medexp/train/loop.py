"""Training one arm of a differential pair (Algorithm 1, lines 3-4 of the audit).

Both arms load the same saved initial state and share every hyperparameter; the candidate
trains on train + canary, the independent on train. Without DP each epoch visits the examples
in the order of a key drawn from (seed, epoch, example id), so the independent's order is the
candidate's with the canaries taken out. With DP-SGD (opacus) batches are Poisson samples, as
the privacy accounting requires, drawn from a generator seeded by the training seed.
AdamW with a cosine-annealed learning rate; the loss is the cross-entropy of the label.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from medexp.benchmarks.base import Example
from medexp.kernel.hashing import derive_seed
from medexp.train.notices import known_notices_silenced

log = logging.getLogger("medexp")


@dataclass(frozen=True)
class ArmData:
    """The examples of one arm's training set and the held-out parts it is evaluated on."""

    train: list[Example]
    evaluate: dict[str, list[Example]]  # part name -> examples (train, canary, test)


def epoch_order(example_ids: Sequence[str], seed: int, epoch: int) -> np.ndarray:
    """Indices of ``example_ids`` in the order of epoch ``epoch``: sorted by a key that depends
    on the example, not on what else is in the set."""
    keys = [derive_seed(seed, epoch, example_id) for example_id in example_ids]
    return np.argsort(np.asarray(keys, dtype=np.uint64), kind="stable")


def train_arm(spec, data: ArmData, initial_dir: Path, out_dir: Path) -> dict[str, Any]:
    """Train one arm from the initial state in ``initial_dir``, save it with ``save_pretrained``
    into ``out_dir`` (LoRA adapters merged into the weights) and return its training report."""
    from medexp.config.schemas import TrainMethod
    from medexp.train.initial import load_initial_state, uses_lora

    started = time.perf_counter()
    model, processor = load_initial_state(initial_dir, spec)
    label_ids = {str(label): int(index) for label, index in model.config.label2id.items()}
    pixels, labels = encode(processor, data.train, label_ids)
    method = TrainMethod(spec.method)
    if method is TrainMethod.dp_lora:
        model, losses, privacy = _train_private(model, spec, pixels, labels)
    else:
        losses, privacy = _train_keyed(model, spec, pixels, labels, [ex.example_id for ex in data.train]), {}
    model.eval()
    accuracy, loss = {}, {}
    for part, examples in data.evaluate.items():
        if examples:
            accuracy[part], loss[part] = evaluate(model, *encode(processor, examples, label_ids))
    if uses_lora(spec):
        model = model.merge_and_unload()
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out_dir)
    processor.save_pretrained(out_dir)
    trainable = "adapters and head" if uses_lora(spec) else "all weights"
    return {"n_train_examples": len(data.train), "steps": len(losses), "final_loss": losses[-1] if losses else None,
            "epoch_losses": _epoch_means(losses, int(spec.epochs)), "accuracy": accuracy, "loss": loss,
            "trained": trainable, **privacy, "seconds": round(time.perf_counter() - started, 2)}


def encode(processor, examples: Sequence[Example], label_ids: dict[str, int]):
    """(pixel tensor, label tensor) of examples, through the model's image processor."""
    import torch

    from medexp.benchmarks.images import read_image

    batches = []
    for start in range(0, len(examples), 256):
        images = [read_image(example.image, "RGB") for example in examples[start : start + 256]]
        batches.append(processor(images=images, return_tensors="pt")["pixel_values"])
    labels = torch.tensor([label_ids[example.answer] for example in examples], dtype=torch.long)
    return torch.cat(batches), labels


def evaluate(model, pixels, labels, batch_size: int = 256) -> tuple[float, float]:
    """(accuracy, mean cross-entropy) of the model on encoded examples."""
    import torch

    correct, total_loss = 0, 0.0
    with torch.inference_mode():
        for start in range(0, len(labels), batch_size):
            logits = model(pixel_values=pixels[start : start + batch_size]).logits
            target = labels[start : start + batch_size]
            correct += int((logits.argmax(-1) == target).sum())
            total_loss += float(torch.nn.functional.cross_entropy(logits, target, reduction="sum"))
    return correct / len(labels), total_loss / len(labels)


def _optimizer(model, spec, steps: int):
    import torch

    parameters = [parameter for parameter in model.parameters() if parameter.requires_grad]
    optimizer = torch.optim.AdamW(parameters, lr=float(spec.learning_rate), weight_decay=float(spec.weight_decay))
    return optimizer, torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=max(1, steps))


def _train_keyed(model, spec, pixels, labels, example_ids: list[str]) -> list[float]:
    import torch
    from tqdm.auto import tqdm

    size = int(spec.batch_size)
    per_epoch = -(-len(example_ids) // size)
    optimizer, schedule = _optimizer(model, spec, per_epoch * int(spec.epochs))
    model.train()
    losses = []
    for epoch in tqdm(range(int(spec.epochs)), desc="training", unit="epoch", disable=None, leave=False):
        order = torch.from_numpy(epoch_order(example_ids, int(spec.seed), epoch))
        for start in range(0, len(order), size):
            batch = order[start : start + size]
            loss = torch.nn.functional.cross_entropy(model(pixel_values=pixels[batch]).logits, labels[batch])
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            schedule.step()
            losses.append(loss.item())
    return losses


def _train_private(model, spec, pixels, labels):
    """DP-SGD to the target epsilon over the whole run; returns the trained (unwrapped) model,
    the losses and the accountant's epsilon with the noise multiplier opacus calibrated."""
    import torch
    from opacus import PrivacyEngine
    from tqdm.auto import tqdm

    dp = spec.dp
    loader = torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(pixels, labels), batch_size=int(spec.batch_size), shuffle=True,
        generator=torch.Generator().manual_seed(derive_seed(spec.seed, "dp batches")),
    )
    optimizer, _ = _optimizer(model, spec, 1)
    with known_notices_silenced():
        engine = PrivacyEngine(accountant=str(dp.accountant))
        private, optimizer, loader = engine.make_private_with_epsilon(
            module=model, optimizer=optimizer, data_loader=loader, target_epsilon=float(dp.target_epsilon),
            target_delta=float(dp.delta), epochs=int(spec.epochs), max_grad_norm=float(dp.max_grad_norm),
            noise_generator=torch.Generator().manual_seed(derive_seed(spec.seed, "dp noise")),
        )
        schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=max(1, len(loader) * int(spec.epochs)))
        private.train()
        losses = []
        for _ in tqdm(range(int(spec.epochs)), desc="training (DP-SGD)", unit="epoch", disable=None, leave=False):
            for batch_pixels, batch_labels in loader:
                if len(batch_labels) == 0:  # a Poisson sample can be empty: nothing to learn from
                    continue
                loss = torch.nn.functional.cross_entropy(private(pixel_values=batch_pixels).logits, batch_labels)
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                optimizer.step()
                schedule.step()
                losses.append(loss.item())
    privacy = {"epsilon": float(engine.get_epsilon(float(dp.delta))), "delta": float(dp.delta),
               "noise_multiplier": float(optimizer.noise_multiplier), "max_grad_norm": float(dp.max_grad_norm)}
    log.info("DP-SGD: epsilon %.3f at delta %g (noise multiplier %.3f)", privacy["epsilon"], dp.delta,
             privacy["noise_multiplier"])
    return private._module, losses, privacy


def _epoch_means(losses: list[float], epochs: int) -> list[float]:
    if not losses or epochs < 1:
        return []
    return [float(np.mean(chunk)) for chunk in np.array_split(np.asarray(losses), epochs) if len(chunk)]
