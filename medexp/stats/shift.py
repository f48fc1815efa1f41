"""Distribution-shift control of a membership audit: can the inputs alone tell members from
non-members?

Membership attacks compare members with non-members; when the two groups come from different
distributions (another source, period or template), an attack separates them without any
memorisation, and so does a classifier that never sees the model under audit (arXiv
2504.18349: VLM membership results collapse to chance once members and non-members are drawn
alike). The test: a logistic regression on the inputs only (TF-IDF of the text, optionally
standardised numeric columns such as image statistics), its ROC AUC from stratified k-fold
out-of-fold scores, and a one-sided permutation test of that AUC (membership labels permuted
over the examples, the whole cross-validation rerun per permutation). The AUC's interval is a
stratified bootstrap of the out-of-fold scores (unit: example), conditional on the fitted
folds.

The vectoriser and the column scaling are fitted on every example at once: they read no label,
so they leak nothing about membership, and the permutations reuse them.
"""

from __future__ import annotations

from dataclasses import dataclass
import numpy as np

from medexp.kernel.hashing import derive_seed
from medexp.stats.roc import auc_bootstrap_ci, mean_auc


@dataclass(frozen=True)
class ShiftInputs:
    """What a model under audit would read, per example: its text (question, options, answer)
    and optional numeric columns (rows: examples), e.g. image statistics."""

    texts: list[str]
    numeric: np.ndarray | None = None

    def __post_init__(self) -> None:
        if self.numeric is not None:
            numeric = np.asarray(self.numeric, dtype=np.float64)
            if numeric.ndim != 2 or numeric.shape[0] != len(self.texts):
                raise ValueError(f"numeric inputs of shape {numeric.shape} do not match {len(self.texts)} texts")
            if not np.all(np.isfinite(numeric)):
                raise ValueError("numeric inputs hold NaN or infinite values")
            object.__setattr__(self, "numeric", numeric)


@dataclass(frozen=True)
class ShiftTest:
    """The inputs-only classifier's cross-validated AUC (members against non-members), its
    bootstrap interval and the permutation p = (1 + #{null AUC >= AUC}) / (1 + n_permutations)."""

    auc: float
    ci_low: float
    ci_high: float
    p_value: float
    n_permutations: int
    n_folds: int
    null_mean: float


def input_features(inputs: ShiftInputs):
    """A sparse (examples, features) matrix: TF-IDF of word uni- and bigrams (when any text has a
    word), then the numeric columns standardised (a constant column is dropped)."""
    from scipy import sparse
    from sklearn.feature_extraction.text import TfidfVectorizer

    blocks = []
    if any(text.strip() for text in inputs.texts):
        blocks.append(TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True).fit_transform(inputs.texts))
    if inputs.numeric is not None:
        spread = inputs.numeric.std(axis=0)
        varying = spread > 0
        if varying.any():
            columns = inputs.numeric[:, varying]
            blocks.append(sparse.csr_matrix((columns - columns.mean(axis=0)) / spread[varying]))
    if not blocks:
        raise ValueError("the inputs hold no word and no varying numeric column: nothing to classify on")
    return sparse.hstack(blocks, format="csr")


def shift_test(inputs: ShiftInputs, labels, n_folds: int, n_permutations: int, n_bootstrap: int, level: float,
               seed: int) -> ShiftTest:
    """The inputs-only classifier test of :class:`ShiftTest`; ``labels`` True for members.

    The folds are min(n_folds, size of the smaller group), so every fold holds both groups."""
    labels = np.asarray(labels, dtype=bool)
    if labels.size != len(inputs.texts):
        raise ValueError(f"{labels.size} labels for {len(inputs.texts)} inputs")
    folds = min(int(n_folds), int(labels.sum()), int((~labels).sum()))
    if folds < 2:
        raise ValueError(f"cross-validation needs at least two members and two non-members, "
                         f"got {int(labels.sum())} and {int((~labels).sum())}")
    if n_permutations < 1:
        raise ValueError(f"n_permutations must be >= 1, got {n_permutations}")
    features = input_features(inputs)
    fold_seed = derive_seed(seed, "shift", "folds")
    scores = _out_of_fold_scores(features, labels, folds, fold_seed)
    auc = mean_auc(labels, scores)
    rng = np.random.default_rng(derive_seed(seed, "shift", "permutation"))
    null = np.array([mean_auc(permuted, _out_of_fold_scores(features, permuted, folds, fold_seed))
                     for permuted in (rng.permutation(labels) for _ in range(int(n_permutations)))])
    low, high = auc_bootstrap_ci(labels, scores, int(n_bootstrap), float(level), derive_seed(seed, "shift", "bootstrap"))
    p_value = (1 + int(np.sum(null >= auc))) / (1 + null.size)
    return ShiftTest(auc, low, high, p_value, int(null.size), folds, float(null.mean()))


def _out_of_fold_scores(features, labels: np.ndarray, folds: int, seed: int) -> np.ndarray:
    """Each example's decision value from the logistic regression fitted on the other folds."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import StratifiedKFold

    scores = np.empty(labels.size)
    for train, held in StratifiedKFold(folds, shuffle=True, random_state=seed).split(np.zeros(labels.size), labels):
        model = LogisticRegression(solver="liblinear").fit(features[train], labels[train])
        scores[held] = model.decision_function(features[held])
    return scores

