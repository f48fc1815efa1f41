"""Each distinct image of a scoring call run through the image processor once.

Scoring asks the processor about one image many times: on the shared-prefix path once per
question to find the prefixes (the expanded input ids) and once per prefix for its pixels; for
every example run whole, once for its length (with a token budget) and once for its inputs; and
a benchmark asks several questions about each image (SLAKE about eleven). :class:`ImageInputs`
keeps the image processor's output of each image by the image's content (the SHA-256 of its
file's bytes, so two paths to one file's copy share it and a replaced file does not), and serves
every later call from it: the processor still expands the text and tokenises each prompt (cheap),
but its image processor runs once per distinct image.

The scorer releases an entry once nothing pending needs it (:meth:`ImageInputs.retain`), so a
large benchmark never holds every image's pixels. An image asked again after its release is
processed again, and counted again (``processed``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from medexp.kernel.hashing import file_sha256


class ImageInputs:
    """The image processor's outputs, one entry per image content, for one scoring call."""

    def __init__(self):
        self.digests: dict[str, str] = {}  # file path -> SHA-256 of its bytes
        self.entries: dict[str, tuple[Any, dict[str, Any]]] = {}  # digest -> (decoded image, processor output)
        self.processed = 0  # images run through the image processor (an image released and asked again counts again)

    def key(self, path: str | Path) -> str:
        """The image's identity: the SHA-256 of its file's bytes (read once per path)."""
        name = str(path)
        if name not in self.digests:
            self.digests[name] = file_sha256(name)
        return self.digests[name]

    def image(self, key: str, path: str | Path):
        """The decoded image of ``key``: the kept one when it was processed, else read from ``path``."""
        from medexp.benchmarks.images import read_image

        entry = self.entries.get(key)
        return entry[0] if entry is not None else read_image(path, "RGB")

    def retain(self, keys) -> None:
        """Forget every entry but those of ``keys``."""
        keys = set(keys)
        for key in [key for key in self.entries if key not in keys]:
            del self.entries[key]

    @contextlib.contextmanager
    def serving(self, processor, keys: Sequence[str]) -> Iterator[None]:
        """``processor``'s image processor replaced, for one call, by one that answers the images
        of ``keys`` (in the order the call passes its images) from the kept outputs, running the
        real one on each image not kept yet."""
        real = processor.image_processor
        processor.image_processor = _KeptImages(real, self, list(keys))
        try:
            yield
        finally:
            processor.image_processor = real


class _KeptImages:
    """An image processor whose call is answered image by image from :class:`ImageInputs`; every
    other attribute is the real image processor's."""

    def __init__(self, real, kept: ImageInputs, keys: list[str]):
        self._real, self._kept, self._keys = real, kept, keys

    def __getattr__(self, name: str):
        return getattr(self._real, name)

    def __call__(self, images, *args, **kwargs):
        from transformers.image_processing_base import BatchFeature
        from transformers.image_utils import make_flat_list_of_images

        flat = make_flat_list_of_images(images)
        if len(flat) != len(self._keys):
            raise ValueError(f"the processor passed {len(flat)} images for {len(self._keys)} image keys")
        # One image as the call passed each: nested (one list per prompt) or flat.
        nested = isinstance(images, (list, tuple)) and bool(images) and isinstance(images[0], (list, tuple))
        outputs = []
        for key, image in zip(self._keys, flat):
            if key not in self._kept.entries:
                output = self._real([[image]] if nested else [image], *args, **kwargs)
                self._kept.entries[key] = (image, dict(output))
                self._kept.processed += 1
            outputs.append(self._kept.entries[key][1])
        return BatchFeature({name: combine([output[name] for output in outputs]) for name in outputs[0]})


def combine(values: list):
    """One image processor output of several images from each image's own: tensors and arrays
    concatenated along their first axis (zero-padded at the end of any other axis where they
    differ, as LLaVA-OneVision pads its tiles when it processes a batch), lists joined."""
    import numpy as np
    import torch

    first = values[0]
    if torch.is_tensor(first) or isinstance(first, np.ndarray):
        if first.ndim == 0:
            raise TypeError("an image processor output without a batch axis cannot be combined")
        widest = [max(value.shape[axis] for value in values) for axis in range(first.ndim)]
        padded = []
        for value in values:
            gaps = [(0, 0)] + [(0, widest[axis] - value.shape[axis]) for axis in range(1, first.ndim)]
            if any(gap for _, gap in gaps):
                if torch.is_tensor(value):
                    value = torch.nn.functional.pad(value, [side for _, gap in reversed(gaps) for side in (0, gap)])
                else:
                    value = np.pad(value, gaps)
            padded.append(value)
        return torch.cat(padded) if torch.is_tensor(first) else np.concatenate(padded)
    if isinstance(first, (list, tuple)):
        return [item for value in values for item in value]
    raise TypeError(f"cannot combine image processor outputs of type {type(first).__name__}")
