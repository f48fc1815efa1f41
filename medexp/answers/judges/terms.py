"""Words of a reply as a reader compares them: the field's abbreviations and spellings folded,
plurals made singular, numbers and units split, negation scope.

:func:`terms` turns a text into comparable terms: Unicode case folding, contractions opened
("isn't" -> "is not"), a number glued to its unit split ("5mm" -> "5 mm"), punctuation dropped
(a decimal point between digits kept), number words zero..twenty as digits, the articles dropped,
British medical spellings as American ones ("oedema" -> "edema", "haemorrhage" -> "hemorrhage"),
plurals singular ("ribs" -> "rib", "masses" -> "mass", "vertebrae" -> "vertebra") and every
variant of one name as one term ("computed tomography" -> "ct", "MR" -> "mri", "L" -> "left",
"x-ray" and "radiograph" -> "xray", "millimetres" -> "mm"). The same function reads the gold and the
reply, so a rule applies to both alike.

:func:`negated_at` says whether a term at a position is in the scope of a negation: after a
negation cue in its clause ("no", "not", "without", "absence of", "negative for", "free of",
"neither", "nor", "never") with no scope break between ("but", "however", "although", "except",
"which", "while"), or in a part of the clause (between scope breaks) that negates its verb ("is
not", "are not seen", "was ruled out", "is absent").
"""

from __future__ import annotations

import re
import unicodedata

_CONTRACTIONS = (
    (re.compile(r"\bcan'?t\b"), "cannot"), (re.compile(r"\bwon'?t\b"), "will not"),
    (re.compile(r"\b(\w+)n't\b"), r"\1 not"), (re.compile(r"\b(there|it|that|what)'s\b"), r"\1 is"),
    (re.compile(r"\b(i)'m\b"), r"\1 am"), (re.compile(r"\b(\w+)'re\b"), r"\1 are"),
    (re.compile(r"\b(\w+)'ve\b"), r"\1 have"), (re.compile(r"\b(\w+)'ll\b"), r"\1 will"),
    (re.compile(r"\b(\w+)'d\b"), r"\1 would"), (re.compile(r"'s\b"), ""),
)
_NUMBER_UNIT = re.compile(r"(\d)([a-z%]+)\b")
_DECIMAL = re.compile(r"(?<=\d)\.(?=\d)")
_NUMBER_WORDS = {word: str(value) for value, word in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
    "sixteen seventeen eighteen nineteen twenty".split())}
_ARTICLES = frozenset({"a", "an", "the"})

# Names written several ways -> one term. Multi-word names first (longest first when matching).
_VARIANTS = {
    "computed tomography": "ct", "computerized tomography": "ct", "computerised tomography": "ct",
    "cat scan": "ct", "ct scan": "ct",
    "magnetic resonance imaging": "mri", "magnetic resonance": "mri", "mr": "mri", "mri scan": "mri",
    "x ray": "xray", "xray": "xray", "radiograph": "xray", "plain film": "xray", "roentgenogram": "xray",
    "cxr": "chest xray",
    "ultrasonography": "ultrasound", "sonography": "ultrasound", "sonogram": "ultrasound", "usg": "ultrasound",
    "posteroanterior": "pa", "postero anterior": "pa", "posterior anterior": "pa",
    "anteroposterior": "ap", "antero posterior": "ap", "anterior posterior": "ap",
    "l": "left", "lt": "left", "r": "right", "rt": "right", "bilat": "bilateral",
    "t1 weighted": "t1", "t2 weighted": "t2", "t1w": "t1", "t2w": "t2",
    "gastrointestinal": "gi", "inferior vena cava": "ivc", "superior vena cava": "svc",
    "cerebrospinal fluid": "csf", "central nervous system": "cns",
    "millimeter": "mm", "millimetre": "mm", "centimeter": "cm", "centimetre": "cm",
    "percent": "%", "per cent": "%", "abd": "abdomen",
}
_MAX_VARIANT_WORDS = max(len(name.split()) for name in _VARIANTS)
# British medical spellings kept apart from words where "ae"/"oe" is not one ("aerated", "does").
_SPELLINGS = {"tumour": "tumor", "fibre": "fiber", "centre": "center", "foetus": "fetus", "foetal": "fetal",
              "colour": "color", "oedema": "edema", "oesophagus": "esophagus", "oesophageal": "esophageal",
              "oestrogen": "estrogen", "haemorrhage": "hemorrhage", "haemorrhagic": "hemorrhagic",
              "haematoma": "hematoma", "haemothorax": "hemothorax", "haemangioma": "hemangioma",
              "anaemia": "anemia", "ischaemia": "ischemia", "ischaemic": "ischemic", "leukaemia": "leukemia",
              "paediatric": "pediatric", "orthopaedic": "orthopedic", "aetiology": "etiology",
              "haemoptysis": "hemoptysis", "haematuria": "hematuria", "oedematous": "edematous"}
# Plurals a suffix rule gets wrong.
_PLURALS = {"metastases": "metastasis", "diagnoses": "diagnosis", "stenoses": "stenosis",
            "anastomoses": "anastomosis", "prostheses": "prosthesis", "bronchi": "bronchus",
            "calculi": "calculus", "nuclei": "nucleus", "emboli": "embolus", "thrombi": "thrombus",
            "fungi": "fungus", "foci": "focus", "teeth": "tooth", "feet": "foot", "women": "woman", "men": "man",
            "children": "child", "lymph": "lymph", "vertebrae": "vertebra", "bullae": "bulla",
            "lacunae": "lacuna", "sulci": "sulcus", "gyri": "gyrus", "indices": "index", "appendices": "appendix"}
_NOT_PLURAL_ENDINGS = ("ss", "us", "is", "ous", "ics", "as", "ys")
_NOT_PLURALS = frozenset({"does", "has", "yes", "always", "perhaps", "whereas", "thus", "less", "unless", "plus",
                          "minus", "lens", "diabetes", "herpes", "rabies", "scabies", "series", "species", "ascites",
                          "biceps", "triceps", "meninges", "testes", "feces", "faeces", "afterwards", "towards"})


def singular(word: str) -> str:
    """``word`` as a singular noun, by rule (ribs, arteries, masses, boxes) or by the table above."""
    if word in _PLURALS:
        return _PLURALS[word]
    if word in _NOT_PLURALS or len(word) <= 3 or not word.endswith("s") or word.endswith(_NOT_PLURAL_ENDINGS) or word[-2].isdigit():
        return word
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith(("sses", "xes", "ches", "shes", "zzes")):
        return word[:-2]
    return word[:-1]


def _number(word: str) -> str:
    """A number written one way: "12.0" and "12" alike, "3.50" as "3.5"."""
    if not re.fullmatch(r"\d+(?:\.\d+)?", word) or len(word) > 15:
        return word
    value = float(word)
    return str(int(value)) if value.is_integer() else repr(value)


def _spelling(word: str) -> str:
    return _SPELLINGS.get(word, word)


def terms(text: str) -> list[str]:
    """The comparable terms of ``text`` (see the module docstring)."""
    text = unicodedata.normalize("NFKC", text).casefold().replace("\u2019", "'")
    for pattern, replacement in _CONTRACTIONS:
        text = pattern.sub(replacement, text)
    text = _NUMBER_UNIT.sub(r"\1 \2", _DECIMAL.sub("\x00", text))
    text = "".join(char if char.isalnum() or char in "%\x00" else " " for char in text).replace("\x00", ".")
    words = [_number(_NUMBER_WORDS.get(word, word)) for word in text.split() if word not in _ARTICLES]
    words = [singular(_spelling(word)) for word in words]
    out: list[str] = []
    index = 0
    while index < len(words):
        for width in range(min(_MAX_VARIANT_WORDS, len(words) - index), 0, -1):
            name = " ".join(words[index:index + width])
            if name in _VARIANTS:
                out.extend(_VARIANTS[name].split())
                index += width
                break
        else:
            out.append(words[index])
            index += 1
    return out


def find(sequence: list[str], needle: list[str], start: int = 0) -> list[int]:
    """Every position at or after ``start`` where ``needle`` occurs in ``sequence`` as whole terms."""
    width = len(needle)
    return [index for index in range(start, len(sequence) - width + 1) if sequence[index:index + width] == needle] \
        if width else []


# ----------------------------------------------------------------------------- negation
_PRE_NEGATIONS = frozenset({"no", "not", "without", "neither", "nor", "never", "none", "cannot", "absence",
                            "negative", "free", "nothing", "lack", "lacks", "lacking"})
_SCOPE_BREAKS = frozenset({"but", "however", "although", "though", "except", "which", "while", "whereas", "yet",
                           "apart", "besides", "instead", "rather"})
_VERB_NEGATIONS = (("is", "not"), ("are", "not"), ("was", "not"), ("were", "not"), ("be", "not"), ("do", "not"),
                   ("does", "not"), ("did", "not"), ("has", "not"), ("have", "not"), ("not", "seen"),
                   ("not", "present"), ("not", "visible"), ("not", "identified"), ("not", "noted"),
                   ("not", "appreciated"), ("not", "evident"), ("not", "demonstrated"), ("not", "observed"),
                   ("ruled", "out"), ("been", "excluded"), ("is", "absent"), ("are", "absent"), ("not", "detected"))
_POST_NEGATIONS = frozenset({"absent", "excluded", "unremarkable", "resolved"})


def segment(clause: list[str], position: int) -> tuple[int, int]:
    """The bounds of the part of ``clause`` holding ``position``, between scope breaks."""
    start = next((index + 1 for index in range(position - 1, -1, -1) if clause[index] in _SCOPE_BREAKS), 0)
    end = next((index for index in range(position + 1, len(clause)) if clause[index] in _SCOPE_BREAKS), len(clause))
    return start, end


def negated_at(clause: list[str], position: int) -> bool:
    """Whether the term at ``position`` of ``clause`` (terms of one clause) is negated."""
    start, end = segment(clause, position)
    if any(word in _PRE_NEGATIONS for word in clause[start:position]):
        return True
    part = clause[start:end]
    return any(pair in set(zip(part, part[1:])) for pair in _VERB_NEGATIONS) or \
        any(word in _POST_NEGATIONS for word in clause[position:end])


# Sets of answers that exclude one another: a reply naming two of one set commits to neither.
CONTRASTS = tuple(frozenset(group) for group in (
    ("left", "right"), ("male", "female"), ("benign", "malignant"), ("axial", "coronal", "sagittal"),
    ("ct", "mri", "xray", "ultrasound", "pet"), ("t1", "t2", "flair"), ("anterior", "posterior"),
    ("upper", "lower"), ("increased", "decreased"), ("hyperdense", "hypodense", "isodense"),
    ("hyperintense", "hypointense", "isointense"), ("pa", "ap"), ("acute", "chronic"), ("solid", "cystic"),
    ("unilateral", "bilateral"), ("yes", "no"), ("superior", "inferior"), ("medial", "lateral"),
))
