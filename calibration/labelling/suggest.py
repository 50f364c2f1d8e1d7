"""Active labelling: which (turn, reviewer) pairs to label next, ranked by what a label would teach.

A candidate is an unlabelled (item, human judge) pair; its label is that judge's answers to the rubric.
Strategies score candidates from the calibrator's seed ensemble (M members):
- `random`: the reference, a seeded random order.
- `entropy`: uncertainty sampling, the entropy of the pooled predicted target distribution (nats).
- `bald`: expected model change as expected information gain, the mutual information between the answer
  and the ensemble member, H(mean of members) - mean H(member) (Houlsby et al. 2011). High where members
  disagree, low where the answer is merely noisy (the aleatoric part that no label removes).
- `variance`: an expected reduction of held-out squared error: the members' variance of the expected
  target answer (the share of squared error that comes from not knowing the model) times the item's
  density (its mean similarity to the other candidate items), so that a label is worth more where it
  also informs many similar unlabelled items.
Diversity (`diversity` in [0, 1]) builds a batch greedily: each pick maximises
(1 - diversity) * score rank + diversity * distance, where distance is the item's distance in input space
to the nearest item already labelled or picked, halved within the same conversation and zero for the same
item, so one batch spreads over conversations (and, through their inputs, over roles) instead of asking
three reviewers about the same confusing turn.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from rubric.errors import InputError
from rubric.ids import clean_id_list

log = logging.getLogger(__name__)  # status lines; calibration/cli.py prints them (rubric/notices.py)

STRATEGIES = ("random", "entropy", "bald", "variance")
RANKED = ("entropy", "bald", "variance")  # a score worth a sheet column; random (and an estimate sample) has none
DISAGREEMENT = ("bald", "variance")  # scores from the members' disagreement: none with one member


def member_target_proba(
    net, X: torch.Tensor, item: np.ndarray, judge: np.ndarray, *, target: int, pool: str = "geometric"
) -> np.ndarray:
    """(M, B, K) target distribution of every ensemble member for (item, judge) pairs (judge -1 = population)."""
    from calibration.model.ensemble import ensemble_proba

    return np.stack(
        [
            ensemble_proba(net.subset(torch.tensor([m])), X, item, judge, pool=pool)[:, target]
            for m in range(net.n_models)
        ]
    )


def entropy(p: np.ndarray) -> np.ndarray:
    """Entropy in nats over the last axis.

    >>> entropy(np.array([[0.5, 0.5], [1.0, 0.0]])).round(4).tolist()
    [0.6931, 0.0]
    """
    return 0.0 - (p * np.log(np.clip(p, 1e-12, None))).sum(-1)  # 0.0 - : no negative zero


def acquisition(
    strategy: str,
    members: np.ndarray | None,
    pooled: np.ndarray,
    values: np.ndarray,
    *,
    density: np.ndarray | None = None,
    rng: np.random.Generator | None = None,
) -> np.ndarray:
    """(B,) score of each candidate (higher = label it sooner).

    members: (M, B, K) members' target distributions; pooled: (B, K) the ensemble's (recalibrated) one;
    values: (K,) option values (0 on padding); density: (B,) for `variance` (default 1).

    >>> members = np.array([[[0.9, 0.1], [0.5, 0.5]], [[0.1, 0.9], [0.5, 0.5]]])
    >>> (acquisition("bald", members, members.mean(0), np.array([1.0, 2.0])) > 0.3).tolist()
    [True, False]
    """
    if strategy not in STRATEGIES:
        raise InputError(f"unknown strategy {strategy!r}.", fix=f"use one of {list(STRATEGIES)}.")
    if strategy == "random":
        return (rng or np.random.default_rng(0)).random(len(pooled))
    if strategy == "entropy":
        return entropy(pooled)
    if members is None:  # bald and variance rank by the members' disagreement
        raise ValueError(f"strategy {strategy!r} needs the members' distributions")
    if strategy == "bald":
        return entropy(members.mean(0)) - entropy(members).mean(0)
    spread = (members * values).sum(-1).var(0)  # variance
    return spread * (1.0 if density is None else density)


def density(features: np.ndarray) -> np.ndarray:
    """(N,) mean RBF similarity of each row to every row (bandwidth: the median pairwise distance)."""
    d = _distances(features, features)
    scale = np.median(d[d > 0]) if (d > 0).any() else 1.0
    return np.exp(-((d / scale) ** 2)).mean(1)


def _distances(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    sq = (a * a).sum(1)[:, None] + (b * b).sum(1)[None] - 2 * a @ b.T
    return np.sqrt(np.clip(sq, 0, None))


def select(
    scores: np.ndarray,
    item: np.ndarray,
    budget: int,
    *,
    features: np.ndarray,
    groups: np.ndarray,
    labelled_items: np.ndarray | None = None,
    diversity: float = 0.0,
) -> np.ndarray:
    """Indices of `budget` candidates, best first.

    scores: (B,) per candidate; item: (B,) its item index; features: (N, D) item inputs; groups: (N,)
    conversation of each item; labelled_items: items that already have a label (they count as picked for
    the distance). diversity 0 = top scores; above 0 the greedy trade-off of the module docstring.
    """
    if not 0.0 <= diversity <= 1.0:
        raise InputError(f"diversity={diversity} is outside [0, 1].", fix="pass a weight in [0, 1].")
    budget = min(int(budget), len(scores))
    order = np.argsort(-scores, kind="stable")
    if diversity == 0.0 or budget == 0:
        return order[:budget]
    rank = np.empty(len(scores))
    rank[order] = np.linspace(1.0, 0.0, len(scores)) if len(scores) > 1 else 1.0
    cand_items = np.unique(item)
    dist = _distances(features[cand_items], features)  # (U, N)
    scale = dist.max() or 1.0
    near = np.full(len(cand_items), 1.0)  # normalised distance to the nearest labelled/picked item

    def cover(items: np.ndarray) -> None:
        for i in np.unique(items):
            d = dist[:, i] / scale
            d = np.where(groups[cand_items] == groups[i], d / 2, d)
            d[cand_items == i] = 0.0
            np.minimum(near, d, out=near)

    if labelled_items is not None:
        cover(labelled_items)
    where = np.searchsorted(cand_items, item)
    chosen = np.zeros(len(scores), dtype=bool)
    picks = []
    for _ in range(budget):
        gain = (1 - diversity) * rank + diversity * near[where]
        gain[chosen] = -np.inf
        best = int(np.argmax(gain))
        chosen[best] = True
        picks.append(best)
        cover(item[[best]])
    return np.array(picks, dtype=np.int64)


def rank_pairs(
    net,
    X: torch.Tensor,
    ds,
    item: np.ndarray,
    judge: np.ndarray,
    budget: int,
    *,
    strategy: str,
    diversity: float = 0.0,
    recalibration=None,
    pool: str = "geometric",
    seed: int = 0,
    labelled_items: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """(picked candidate indices, their scores): the `budget` best (item, judge) candidates of `strategy`."""
    from calibration.model.ensemble import ensemble_proba

    if strategy not in STRATEGIES:
        raise InputError(f"unknown strategy {strategy!r}.", fix=f"use one of {list(STRATEGIES)}.")
    if strategy in DISAGREEMENT and net.n_models < 2:  # one member agrees with itself: every score would be 0
        raise InputError(
            f"strategy={strategy} ranks by the disagreement of the calibrator's ensemble members, and this "
            "calibrator is a single model (model=linear|ordinal, or train.ensemble=1).",
            fix="pass strategy=entropy or strategy=random, or a network calibrator with an ensemble.",
        )
    t = ds.target_index
    values = ds.option_values()[t]
    members = pooled = dens = None
    if strategy != "random":
        members = member_target_proba(net, X, item, judge, target=t, pool=pool)
        pooled = ensemble_proba(net, X, item, judge, pool=pool, recalibration=recalibration)[:, t]
    if strategy == "variance":
        uniq, inverse = np.unique(item, return_inverse=True)
        dens = density(X.numpy()[uniq])[inverse]
    shape_ref = pooled if pooled is not None else np.zeros((len(item), 1))
    scores = acquisition(strategy, members, shape_ref, values, density=dens, rng=np.random.default_rng(seed))
    picked = select(
        scores,
        item,
        budget,
        features=X.numpy(),
        groups=ds.groups,
        labelled_items=labelled_items,
        diversity=diversity,
    )
    return picked, scores[picked]


def model_and_data(data: str | Path, model: str | Path, *, allow_judge_mismatch: bool = False):
    """suggest purpose=learn's calibrator (the model folder `model`) and the dataset folder `data` read against
    its rubric, its judge checked against the model's: (model, dataset)."""
    from calibration.data.dataset import load_dataset
    from calibration.model.files import load_model

    loaded = load_model(model)
    # ranking by a calibrator of another judge ranks that judge's doubts, not what a label would teach
    rubric = loaded.check_data(data, command="suggest", model_dir=model, allow_judge_mismatch=allow_judge_mismatch)
    ds = load_dataset(data, rubric=rubric, require_labels=False)
    return loaded, ds


def judges_to_ask(judges, model) -> list[str]:
    """The reviewers to rank pairs for: judges=null every training judge of the model, else the ids named."""
    if judges == "population":
        raise InputError("judges=population names no reviewer to ask.", fix="pass judges=null or judges=[id,...].")
    if judges is None:
        if not model.judges:
            raise InputError("the model has no training judges to ask.", fix="pass judges=[id,...].")
        return list(model.judges)
    chosen = clean_id_list(judges)
    if not chosen:
        raise InputError("judges is empty.", fix="pass judges=null (every training judge) or judges=[id,...].")
    return chosen


def unlabelled_pairs(ds, judges: list[str]) -> tuple[np.ndarray, list[str]]:
    """Every (item, judge) pair without a label in the dataset."""
    labelled = {(int(i), ds.judges[j]) for i, j in zip(ds.label_item, ds.label_judge, strict=True)}
    pairs = [(i, j) for i in range(len(ds.items)) for j in judges if (i, j) not in labelled]
    return np.array([i for i, _ in pairs], dtype=np.int64), [j for _, j in pairs]


def conversations_by_id(data: str | Path) -> dict:
    """{conversation_id: Conversation} of DIR/conversations.jsonl ({} without one: the sheet shows no text)."""
    path = Path(data) / "conversations.jsonl"
    if not path.exists():
        return {}
    from rubric.conversations import load_conversations

    return {c.conversation_id: c for c in load_conversations(path)}


def suggestions_frame(
    ds,
    item: np.ndarray,
    judge_ids: list[str],
    scores: np.ndarray,
    strategy: str,
    *,
    questions: str = "all",
    conversations: dict | None = None,
) -> pd.DataFrame:
    """The labelling sheet (calibration/labelling/sheet.py): one row per (suggested pair, question), ranked,
    with what the judge saw (the role, the earlier turns, the user message and the reply; empty when the
    dataset has no conversations.jsonl), the question and its options ("value: label" joined by " | "); the
    reviewer writes an option value into `answer`. The acquisition `score` is a column only where it ranks
    something: under strategy=random it is a random number, for an estimate sample nothing, and is left out."""
    from calibration.labelling.sheet import sheet_frame

    keys = [(str(c), str(t)) for c, t in ds.items.iloc[np.asarray(item, dtype=np.int64)].itertuples(index=False)]
    return sheet_frame(
        keys,
        list(judge_ids),
        ds.rubric,
        conversations or {},
        questions=questions,
        scores=[float(s) for s in scores] if strategy in RANKED else None,
    )
