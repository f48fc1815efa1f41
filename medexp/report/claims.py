"""Claims of the claims-to-evidence map: loading ``conf/claims/<id>.yaml`` and checking them.

Each file of the Hydra config group ``claims`` (in every folder of the search path, so a user's
``--config-dir`` adds claims) is composed on top of the structured schema
:class:`medexp.config.schemas.ClaimConfig` (``schema/claim``), which rejects unknown keys and
wrong types.
:func:`claim_from_config` then checks what a schema cannot: the id matches the file name, the
selections name cells, the conditions parse into the allowed language, names are unique.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Iterator, Sequence

from medexp.report.conditions import Condition, ConditionError
from medexp.report.quantifiers import Quantifier, QuantifierError

AXES = ("model", "bench", "detector", "control")
ANY = "*"
PATTERN_CHARACTERS = frozenset("*?[")  # a selected name holding one of them is a glob pattern (fnmatch)
NO_EVIDENCE = "no evidence"  # the status of a claim whose evidence is incomplete (reserved word)
UNDERPOWERED = "underpowered"  # the status of a claim a selected cell could not have shown (reserved word)
CONFOUNDED = "confounded"  # the status of a claim resting on a cell whose inputs alone separate its groups (reserved)
NOT_RUN = "not run"  # the status of a claim none of whose selected cells has a tracked run (reserved word)
GROUP = "claims"


class ClaimError(ValueError):
    """A claim file that cannot be used, with the file and the problem named."""


def is_pattern(name: str) -> bool:
    return not PATTERN_CHARACTERS.isdisjoint(name)


def name_matches(name: str, selected: str) -> bool:
    """A cell's config name against a selected name or glob pattern (``demo_clean_s*``)."""
    return fnmatchcase(name, selected) if is_pattern(selected) else name == selected


@dataclass(frozen=True)
class Selection:
    """Per axis the accepted config names and glob patterns, or None for any ("*")."""

    model: tuple[str, ...] | None
    bench: tuple[str, ...] | None
    detector: tuple[str, ...] | None
    control: tuple[str, ...] | None

    def names(self, axis: str) -> tuple[str, ...] | None:
        return getattr(self, axis)

    def combinations(self) -> Iterator[dict[str, str]]:
        """Each combination of the listed names and patterns (wildcard axes left out): one expected
        cell group (a pattern's group, like a wildcard's, needs at least one run)."""
        listed = [axis for axis in AXES if self.names(axis) is not None]
        for values in itertools.product(*(self.names(axis) for axis in listed)):
            yield dict(zip(listed, values))

    def describe(self) -> str:
        """E.g. ``model in {a, b}, bench=slake, detector=exch_rank, control=any``."""
        parts = []
        for axis in AXES:
            names = self.names(axis)
            if names is None:
                parts.append(f"{axis}=any")
            elif len(names) == 1:
                parts.append(f"{axis}={names[0]}")
            else:
                parts.append(f"{axis} in {{{', '.join(names)}}}")
        return ", ".join(parts)


@dataclass(frozen=True)
class Evidence:
    name: str
    selection: Selection
    condition: Condition
    quantifier: Quantifier
    expect: int | None = None  # the number of finished cells the selection must match


@dataclass(frozen=True)
class Claim:
    id: str
    sentence: str
    source: str
    evidence: tuple[Evidence, ...]
    holds: str  # status word when every evidence item holds
    fails: str  # status word otherwise
    manual_review: str | None = None
    effect: float | None = None  # the effect the claim names, in the cells' mde unit

    def describe(self) -> str:
        rule = (f"'{self.holds}' when every evidence item holds, '{self.fails}' when one does not, "
                f"'{NO_EVIDENCE}' when a selected cell has no finished run or lacks a value the rule reads, "
                f"'{NOT_RUN}' when no selected cell has any run")
        if self.effect is None:
            return rule
        return (f"{rule}, '{UNDERPOWERED}' when the outcome turns on selected cells that are not significant "
                f"and whose MDE exceeds the effect {self.effect:g}")


def claim_from_config(node, file_id: str) -> Claim:
    """A :class:`Claim` from a composed ``ClaimConfig`` node, checked; ``file_id`` is the file's name."""
    from omegaconf import OmegaConf

    where = f"claim file {GROUP}/{file_id}.yaml"
    data = OmegaConf.to_container(node, resolve=True, enum_to_str=True, throw_on_missing=False)
    for key in ("id", "sentence", "evidence", "statuses"):
        if OmegaConf.is_missing(node, key):
            raise ClaimError(f"{where}: missing required field {key!r}")
    if data["id"] != file_id:
        raise ClaimError(f"{where}: id {data['id']!r} must equal the file name {file_id!r}")
    if not _given(data["sentence"]):
        raise ClaimError(f"{where}: 'sentence' is empty")
    statuses = data["statuses"]
    for key in ("holds", "fails"):
        word = statuses.get(key)
        if not _given(word):
            raise ClaimError(f"{where}: statuses.{key} must be a status word (e.g. survives, collapses)")
        if str(word).strip() in (NO_EVIDENCE, UNDERPOWERED, CONFOUNDED, NOT_RUN):
            raise ClaimError(f"{where}: statuses.{key} may not be {str(word).strip()!r}, which the report reserves")
    if not data["evidence"]:
        raise ClaimError(f"{where}: 'evidence' lists no items")
    effect = data.get("effect")
    if effect is not None and not (math.isfinite(effect) and effect > 0):
        raise ClaimError(f"{where}: effect must be a positive number in the cells' mde unit "
                         f"(0.05 = 5 accuracy points), got {effect}")
    evidence = tuple(_evidence(item, where) for item in data["evidence"])
    names = [item.name for item in evidence]
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise ClaimError(f"{where}: evidence names must be unique; repeated: {repeated}")
    return Claim(
        id=file_id,
        sentence=" ".join(str(data["sentence"]).split()),
        source=str(data.get("source") or ""),
        evidence=evidence,
        holds=str(statuses["holds"]).strip(),
        fails=str(statuses["fails"]).strip(),
        manual_review=" ".join(str(data["manual_review"]).split()) if data.get("manual_review") else None,
        effect=None if effect is None else float(effect),
    )


def _evidence(item: dict, where: str) -> Evidence:
    name = item.get("name")
    if not _given(name):
        raise ClaimError(f"{where}: every evidence item needs a 'name'")
    label = f"{where}, evidence {name!r}"
    if not _given(item.get("require")):
        raise ClaimError(f"{label}: missing 'require' (a condition on the cell metrics)")
    try:
        condition = Condition.parse(item["require"])
    except ConditionError as error:
        raise ClaimError(f"{label}: {error}") from None
    selection = Selection(**{axis: _axis_names(item["select"][axis], f"{label}, select.{axis}") for axis in AXES})
    expect = item.get("expect")
    if expect is not None and expect < 1:
        raise ClaimError(f"{label}: expect must be a number of cells (1 or more), got {expect}")
    try:
        quantifier = Quantifier.parse(item["quantifier"])
        quantifier.check_expected(expect)
    except QuantifierError as error:
        raise ClaimError(f"{label}: {error}") from None
    return Evidence(str(name), selection, condition, quantifier, expect)


def _given(value) -> bool:
    """A value that is set: not None, not OmegaConf's missing marker "???", not blank."""
    return value is not None and str(value).strip() not in ("", "???")


def _axis_names(value, label: str) -> tuple[str, ...] | None:
    """A name or pattern, a list of them, or "*" (any) -> a tuple of names and patterns, or None for any."""
    if value == ANY:
        return None
    if isinstance(value, (str, int)) and not isinstance(value, bool):
        names = [str(value)]
    elif isinstance(value, list) and value:
        if not all(isinstance(entry, (str, int)) and not isinstance(entry, bool) for entry in value):
            raise ClaimError(f"{label}: a list must hold config names only, got {value!r}")
        names = [str(entry) for entry in value]
    else:
        raise ClaimError(f"{label}: expected a config name or glob pattern, a non-empty list of them or '*', "
                         f"got {value!r}")
    if ANY in names:
        raise ClaimError(f"{label}: '*' stands alone (any name); it cannot be part of a list {names!r}")
    if not all(name.strip() for name in names):
        raise ClaimError(f"{label}: empty config name in {names!r}")
    return tuple(dict.fromkeys(names))


def claim_ids(search_path: Sequence[str] = ()) -> list[str]:
    """Names of the claim files in the search path (conf/claims plus ``search_path`` folders)."""
    from hydra.core.global_hydra import GlobalHydra

    with _hydra():
        loader = GlobalHydra.instance().config_loader()
        return sorted(loader.get_group_options(GROUP, config_name=None, overrides=_search_override(search_path)))


def load_claims(ids: Sequence[str] | None = None, search_path: Sequence[str] = ()) -> list[Claim]:
    """The claims ``ids`` (default: every claim file), composed, validated and checked.

    Inside ``python -m medexp.report`` the app's search path (with ``--config-dir``) is used;
    elsewhere conf/ plus the folders in ``search_path`` (each holding a ``claims/`` folder).
    """
    from hydra import compose
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    available = claim_ids(search_path)
    chosen = available if ids is None else list(ids)
    unknown = [name for name in chosen if name not in available]
    if unknown:
        raise ClaimError(f"no claim file for {unknown}; available claims: {available}")
    claims = []
    with _hydra():
        for name in chosen:
            try:
                # the schema first, then the file merged onto it: the file is checked against the schema
                overrides = [*_search_override(search_path), "+schema@claim=claim", f"+{GROUP}@claim={name}"]
                cfg = compose(config_name=None, overrides=overrides)
            except (HydraException, OmegaConfBaseException) as error:
                raise ClaimError(f"claim file {GROUP}/{name}.yaml does not fit the claim schema: {error}") from None
            claims.append(claim_from_config(cfg.claim, name))
    return claims


def _search_override(search_path: Sequence[str]) -> list[str]:
    if not search_path:
        return []
    from pathlib import Path

    folders = ",".join(f"file://{Path(folder).resolve()}" for folder in search_path)
    return [f"hydra.searchpath=[{folders}]"]


def _hydra():
    """Hydra's running app when there is one, else a fresh one over conf/."""
    from contextlib import nullcontext

    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    from medexp.config import conf_dir

    if GlobalHydra.instance().is_initialized():
        return nullcontext()
    return initialize_config_dir(config_dir=str(conf_dir()), version_base="1.3")
