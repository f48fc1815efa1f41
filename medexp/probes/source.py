"""DIS-CO's question in its medical form: which public collection does this image come from?

Each distinct image of the audited examples (``source_audited``) and of a control set of
unseen images of the same kind (``source_control``) is asked the same multiple-choice question,
the collections listed in the same order for every image (the audited benchmark, other public
collections, "none of these"; configurable). The gold is the option naming the image's true
collection: the audited benchmark's for its own images, ``control_option`` for the control's.
A probe's id is ``<example_id>::<kind>`` of the first example showing the image; an image shown
by several examples is asked once. Examples without an image are skipped with their reason.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from medexp.benchmarks.options import LETTERS, normalise
from medexp.probes.base import Probe
from medexp.probes.choice import EXAMPLE_META, example_meta
from medexp.probes.sets import ProbeSet

SOURCE_AUDITED = "source_audited"
SOURCE_CONTROL = "source_control"


def option_position(collections: Sequence[str], name: str, what: str) -> int:
    """The position of ``name`` among the collections (case and spacing aside), or a ValueError."""
    matches = [index for index, option in enumerate(collections) if normalise(option) == normalise(name)]
    if len(matches) != 1:
        raise ValueError(f"{what} {name!r} must be exactly one of the collections {list(collections)}")
    return matches[0]


def source_probes(audited: Iterable, control: Iterable, question: str, collections: Sequence[str],
                  audited_option: str, control_option: str) -> ProbeSet:
    """One ``source_audited`` probe per distinct image of ``audited``, one ``source_control`` per
    distinct image of ``control``; an image in both sets is refused (it cannot be both)."""
    collections = tuple(str(name) for name in collections)
    if len(collections) < 2 or len(collections) > len(LETTERS):
        raise ValueError(f"source naming lists 2 to {len(LETTERS)} collections, got {len(collections)}")
    if not str(question).strip():
        raise ValueError("the source question is empty")
    golds = {SOURCE_AUDITED: option_position(collections, audited_option, "the audited benchmark's option"),
             SOURCE_CONTROL: option_position(collections, control_option, "the control images' option")}
    if golds[SOURCE_AUDITED] == golds[SOURCE_CONTROL]:
        raise ValueError(f"the audited and the control options are the same ({audited_option!r})")
    out, seen = ProbeSet(), {}
    for kind, examples in ((SOURCE_AUDITED, audited), (SOURCE_CONTROL, control)):
        for example in examples:
            if example.image is None:
                out.skipped.append((f"{example.example_id}::{kind}", "no image: nothing to name the source of"))
                continue
            key = str(example.image)
            if key in seen:
                if seen[key] != kind:
                    raise ValueError(f"image {key} is both an audited and a control image")
                continue
            seen[key] = kind
            out.probes.append(Probe(
                probe_id=f"{example.example_id}::{kind}", example_id=example.example_id, kind=kind,
                question=str(question), gold=LETTERS[golds[kind]], image=example.image, options=collections,
                meta={"n_options": len(collections), "variant": None,
                      "audited_letter": LETTERS[golds[SOURCE_AUDITED]], EXAMPLE_META: example_meta(example)},
            ))
    return out
