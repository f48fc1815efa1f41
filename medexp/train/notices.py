"""Library notices that training raises on purpose or that do not apply, silenced where they arise."""

from __future__ import annotations

import contextlib
import warnings

# opacus: its generators are not cryptographically secure (secure_mode off; they are seeded on
# purpose, for reproducible audits), and its backward hooks fire on outputs when the frozen
# embeddings need no gradient; transformers: is_gradient_checkpointing is deprecated, and peft
# and opacus still call it.
KNOWN = (".*[Ss]ecure RNG.*", ".*[Ff]ull backward hook.*", ".*is_gradient_checkpointing.*")


@contextlib.contextmanager
def known_notices_silenced():
    with warnings.catch_warnings():
        for message in KNOWN:
            warnings.filterwarnings("ignore", message=message)
        yield
