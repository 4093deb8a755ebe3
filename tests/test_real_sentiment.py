"""real-sentiment: human-rated sentences with lexicon rationales, the proxy for HateXplain
(qkov.language.ratings, qkov.figures.real_sentiment), and ERASER's plausibility measures
(qkov.language.metrics.plausibility). The notebook itself runs under nbval on the whole data;
these check the reader on a small archive of the same layout, and the steps on it, and the
fetched package where it is there (``make data``; skipped, saying so, without it)."""

import io
import math
import tarfile

import numpy as np
import pytest
import torch

from qkov.checks import ParameterError
from qkov.figures import real_sentiment
from qkov.language import ratings, sources, tuning
from qkov.language.data import DataError
from qkov.language.metrics import average_precision, iou_f1, plausibility, spans, top_k_mask

LEXICON = ("good\t1.9\t0.9\t[2, 2]\r\nhorrible\t-2.5\t0.5\t[-2, -3]\r\nokay\t0.9\t0.5\t[1]\r\n"
           "lol\t2.9\t0.8\t[3]\r\nlol\t1.0\t0.8\t[1]\r\n:-\xde\t0.9\t1.0\t[1]").encode("latin-1")
SENTENCES = {  # per corpus: (id, mean, sentence); two snippets share a document where "_"
    "tweets": [("1", 2.5, "so good lol"), ("2", -2.0, "horrible day"), ("3", 0.1, "it is okay"),
               ("4", 1.0, "Good, really"), ("5", -1.0, "not good")],
    "movieReviewSnippets": [("1", 3.0, "a good film"), ("2", -3.0, "a horrible film"),
                            ("3", 0.0, "a film"), ("4", 2.0, "good good"), ("5", -0.6, "meh")],
    "amazonReviewSnippets": [("1_1", 1.0, "good player"), ("1_2", -2.0, "horrible remote"),
                             ("2_1", 0.2, "it plays"), ("3_1", 2.0, "good buy"),
                             ("4_1", -1.5, "horrible!")],
    "nytEditorialSnippets": [("1_1", -0.5, "the city plans"), ("1_2", 1.5, "good news"),
                             ("2_1", -2.5, "horrible policy"), ("3_1", 0.3, "events include"),
                             ("4_1", 0.9, "a good year")],
}


def files(sentences=SENTENCES, lexicon=LEXICON):
    out = {ratings.LEXICON: lexicon}
    for corpus, rows in sentences.items():
        out[f"{corpus}_GroundTruth.txt"] = "\r\n".join(f"{i}\t{m}\t{s}" for i, m, s in rows).encode()
    return out


def test_classes_come_from_the_mean_rating():
    assert [ratings.label_of(m) for m in (-0.51, -0.5, 0.0, 0.5, 0.51)] == [0, 1, 1, 1, 2]
    assert ratings.label_of(0.8, band=1.0) == 1


def test_the_lexicon_is_latin1_and_the_later_entry_wins():
    lexicon = ratings.parse_lexicon("lexicon", LEXICON)
    assert lexicon["lol"] == 1.0 and lexicon[":-\u00de"] == 0.9 and len(lexicon) == 5


def test_rationale_words_are_strong_lexicon_words_with_punctuation_stripped():
    marks = ratings.rationale_marks(["Good,", "really", "HORRIBLE!!", "okay", ":-\u00de"],
                                    {"good", "horrible", ":-\u00de"})
    assert marks == (True, False, True, False, True)


def test_the_lexicon_reader_sums_the_valences_of_the_words_it_knows():
    lexicon = ratings.parse_lexicon("lexicon", LEXICON)
    assert ratings.lexicon_valence(["Good,", "really", "HORRIBLE!!"], lexicon) == \
        pytest.approx(1.9 - 2.5)
    assert ratings.lexicon_valence(["a", "film"], lexicon) == 0
    data = ratings.load_ratings(files=files())
    tweet = next(s for s in data.train + data.test if s.words == ("so", "good", "lol"))
    assert tweet.valence == pytest.approx(1.9 + 1.0)  # the later "lol" entry
    # the lexicon reader's class: the sign of the sum, neutral where no word is rated
    assert [ratings.label_of(v, 0.0) for v in (-0.6, 0.0, 2.9)] == [0, 1, 2]


def test_malformed_files_name_the_file_and_line():
    with pytest.raises(DataError, match=r"tweets_GroundTruth.txt: line 2: mean rating: expected a number"):
        ratings.parse_ground_truth("tweets_GroundTruth.txt", b"1\t0.5\tok\r\n2\tx\tbad")
    with pytest.raises(DataError, match=r"line 1: expected id<TAB>mean rating<TAB>sentence"):
        ratings.parse_ground_truth("t", b"1\t0.5")
    with pytest.raises(DataError, match=r"line 1: mean valence: expected a rating in \[-4, 4\]"):
        ratings.parse_lexicon("lex", b"good\t9\t0\t[]")
    with pytest.raises(DataError, match="byte 1: expected utf-8 text"):
        ratings.parse_ground_truth("t", b"1\xff\t0.5\tx")


def test_an_archive_without_a_file_is_named(tmp_path):
    path = tmp_path / "a.tar.gz"
    with tarfile.open(path, "w:gz") as archive:
        data = LEXICON
        info = tarfile.TarInfo(f"{ratings.FOLDER}/{ratings.LEXICON}")
        info.size = len(data)
        archive.addfile(info, io.BytesIO(data))
    with pytest.raises(DataError, match="expected tweets_GroundTruth.txt, .* in the archive"):
        ratings.read_archive(path)


def test_the_split_keeps_each_document_on_one_side():
    data = ratings.load_ratings(train_fraction=0.5, seed=3, files=files())
    assert len(data.train) + len(data.test) == 20
    assert not {s.document for s in data.train} & {s.document for s in data.test}
    amazon = {s.id: s for s in data.train + data.test if s.corpus == "amazonReviewSnippets"}
    assert (amazon["1_1"] in data.train) == (amazon["1_2"] in data.train)
    # good and horrible: "lol" is rated 1.0 by its later entry
    assert data.lexicon_words == 5 and data.rationale_words == 2
    with pytest.raises(ValueError, match="train_fraction"):
        ratings.load_ratings(train_fraction=1.0, files=files())


# --- plausibility ----------------------------------------------------------------------------


def test_plausibility_by_hand():
    scores = torch.tensor([[0.1, 0.5, 0.3, 0.05, 0.0], [0.2, 0.2, 0.2, 0.2, 0.2]])
    mask = torch.tensor([[1, 1, 1, 1, 0], [1, 1, 1, 0, 0]]).bool()
    human = torch.tensor([[0, 1, 0, 1, 0], [0, 0, 0, 0, 0]]).bool()
    found = plausibility(scores, human, mask, 2)
    # top 2 = tokens 1, 2: one of two right; one predicted span (1, 3) half-overlapping (1, 2)
    assert found["token_f1"][0].item() == pytest.approx(0.5)
    assert found["iou_f1"][0].item() == pytest.approx(2 * 1 * 0.5 / 1.5)
    # ranking 1 (hit), 2, 0, 3 (hit): precisions 1 and 2/4
    assert found["auprc"][0].item() == pytest.approx(0.75)
    assert all(math.isnan(found[m][1].item()) for m in found)  # no human marks: no score


def test_a_perfect_ranking_scores_one_and_a_reversed_one_less():
    mask = torch.ones(1, 6, dtype=torch.bool)
    human = torch.tensor([[1, 1, 0, 0, 0, 0]]).bool()
    best = torch.tensor([[0.9, 0.8, 0.1, 0.1, 0.0, 0.0]])
    found = plausibility(best, human, mask, 2)
    assert all(found[m].item() == pytest.approx(1.0) for m in found)
    worst = plausibility(-best, human, mask, 2)
    assert worst["token_f1"].item() == 0 and worst["iou_f1"].item() == 0
    assert worst["auprc"].item() == pytest.approx((1 / 5 + 2 / 6) / 2)


def test_padding_is_never_ranked_or_counted():
    scores = torch.tensor([[0.1, 0.2, 5.0]])
    mask = torch.tensor([[True, True, False]])
    human = torch.tensor([[False, True, True]])  # a mark on padding is dropped
    assert top_k_mask(scores, mask, 2).tolist() == [[True, True, False]]
    assert average_precision(scores, human, mask).item() == pytest.approx(1.0)
    with pytest.raises(ValueError, match="k: expected an integer >= 1"):
        top_k_mask(scores, mask, 0)
    with pytest.raises(ValueError, match="human: expected a bool tensor of shape"):
        plausibility(scores, human[:, :2], mask, 1)


def test_spans_and_iou_f1():
    assert spans([0, 1, 1, 0, 1]) == [(1, 3), (4, 5)]
    assert spans([]) == []
    assert iou_f1([0, 1, 1, 1], [0, 1, 0, 0]) == 0  # IOU 1/3: below ERASER's 0.5
    assert iou_f1([0, 1, 1, 0], [0, 1, 0, 0]) == 1
    assert iou_f1([0, 0], [1, 0]) == 0


# --- the figure's steps ----------------------------------------------------------------------

SMALL = {"seeds": [1, 2], "conditions": ["matched", "faster QK", "all faster"], "epochs": 2,
         "rates": [1e-4, 1e-3, 2e-3], "qk_multiplier": 20.0, "patience": 1, "workers": 1,
         "progress": False, "vocab_size": 300, "train_fraction": 0.6, "validation_fraction": 0.3,
         "matched_losses": [1.2, 1.1, 1.0]}


def test_bad_parameters_are_named():
    with pytest.raises(ParameterError, match="conditions"):
        real_sentiment.Parameters(conditions=["faster QK"])
    with pytest.raises(ParameterError, match="n_heads"):
        real_sentiment.Parameters(d_model=30, n_heads=4)
    with pytest.raises(ParameterError, match="neutral_band"):
        real_sentiment.Parameters(neutral_band=-1)
    with pytest.raises(ParameterError, match="eraser_fraction"):
        real_sentiment.Parameters(eraser_fraction=2)
    with pytest.raises(ParameterError, match="rates.*item 1"):
        real_sentiment.Parameters(rates=[1e-4, -1e-3])
    with pytest.raises(ParameterError, match="rates.*increasing"):
        real_sentiment.Parameters(rates=[1e-3, 1e-4])
    with pytest.raises(ParameterError, match="patience"):
        real_sentiment.Parameters(patience=0)
    for share in (0, 1, -0.1):
        with pytest.raises(ParameterError, match="validation_fraction"):
            real_sentiment.Parameters(validation_fraction=share)
    with pytest.raises(ParameterError, match="matched_losses.*decreasing"):
        real_sentiment.Parameters(matched_losses=[0.8, 0.9])
    with pytest.raises(ParameterError, match="seeds.*at least 2"):
        real_sentiment.Parameters(seeds=[1])


def larger(copies: int = 6) -> dict:
    """:data:`SENTENCES` ``copies`` times over, each copy its own documents: enough
    documents of every class for a training, a validation and a test split."""
    def renamed(sentence_id, k):
        document, _, part = sentence_id.partition("_")
        return f"{k}{document}" + (f"_{part}" if part else "")

    return {corpus: [(renamed(i, k), m, text) for k in range(copies) for i, m, text in rows]
            for corpus, rows in SENTENCES.items()}


def test_a_validation_split_without_a_class_is_refused():
    # one document per corpus is too few to hold out validation documents of every class
    p = real_sentiment.Parameters(**dict(SMALL, validation_fraction=0.05))
    with pytest.raises(ParameterError, match="validation_fraction"):
        real_sentiment.prepare(p, files())


def test_a_small_run_sweeps_every_rate_and_compares_at_the_chosen_ones():
    p = real_sentiment.Parameters(**SMALL)
    prepared = real_sentiment.prepare(p, files(larger()))
    # each rationale word's tokens are marked, and only those
    for row, s in zip(prepared.test.rationale, prepared.test_sentences):
        words = prepared.tokenizer.encode_words(list(s.words)).word_ids
        assert row[:len(words)].tolist() == [s.rationale[w] for w in words]
        assert not row[len(words):].any()
    # the documents of the three splits are disjoint
    documents = [{s.document for s in sentences} for sentences in (
        prepared.train_sentences, prepared.validation_sentences, prepared.test_sentences)]
    assert not (documents[0] & documents[1] or documents[0] & documents[2]
                or documents[1] & documents[2])
    counts = {(r["split"], r["corpus"]): r for r in real_sentiment.count_rows(prepared)}
    assert counts["test", "all"]["sentences"] == len(prepared.test)
    assert counts["validation", "all"]["sentences"] == len(prepared.validation)
    assert sum(counts["test", "all"][c] for c in ratings.SENTIMENT_LABELS) == len(prepared.test)

    results = real_sentiment.train(p, prepared)
    assert {(r["condition"], r["rate"], r["seed"]) for r in results} == set(real_sentiment.runs(p))
    # all faster at 1e-4 is matched at 1e-4 * 20 = 2e-3: trained once, reported under both
    assert ("all faster", 1e-4, "matched", 2e-3) in real_sentiment.same_runs(results)
    assert len(tuning.trained(results)) == len(results) - len(SMALL["seeds"])
    for r in results:
        assert r["best"]["validation_loss"] == r["trajectory"][:, 1].min()
        assert r["ended_by"] in ("cap", "patience") and 0 <= r["best_step"] <= r["steps"]
        assert len(r["correct"]) == len(prepared.test)
    chosen = real_sentiment.chosen_rates(results)
    for c, rate in chosen.items():
        best = real_sentiment.mean_best_loss(results, c, rate)
        assert all(best <= real_sentiment.mean_best_loss(results, c, other) for other in p.rates)
    sweep = real_sentiment.sweep_rows(results, chosen)
    assert len(sweep) == len(SMALL["conditions"]) * len(SMALL["rates"])  # every setting shown
    assert sum(row["chosen"] == "yes" for row in sweep) == len(SMALL["conditions"])

    matched_loss = real_sentiment.matched_loss_data(p, results, chosen)
    assert len(matched_loss) == 2 * len(SMALL["rates"]) * len(p.matched_losses)
    test = real_sentiment.test_data(prepared, results, chosen)
    assert len(test) == len(SMALL["conditions"]) * len(SMALL["rates"]) * 4  # all + 3 classes
    for row in test:
        assert row["accuracy_low"] <= row["accuracy"] <= row["accuracy_high"]
        assert ("no_cost" in row) == (not (row["condition"] == "matched" and row["chosen"]))
    assert len(real_sentiment.rate_rows(results, matched_loss, test)) == 2 * len(SMALL["rates"])

    records = real_sentiment.rows(real_sentiment.at_chosen_rates(results, chosen))
    assert {(r["condition"], r["seed"]) for r in records} == \
        {(c, s) for c in SMALL["conditions"] for s in SMALL["seeds"]}
    for r in records:
        assert 0 <= r["accuracy"] <= 1 and 0 <= r["attention_rollout"] <= 1 + 1e-9
        assert 0 <= r["auprc"] <= 1 and 0 <= r["token_f1"] <= 1
    at_chosen = real_sentiment.at_chosen_rates(results, chosen)
    against = real_sentiment.against_data(prepared, at_chosen)
    # the runs pair by seed whatever their order: all faster's reversed, the others' not (a
    # pairing by position would change the intervals, which draw the seeds)
    others = [r for r in at_chosen if r["condition"] != "all faster"]
    reordered = others + [r for r in at_chosen if r["condition"] == "all faster"][::-1]
    assert real_sentiment.against_data(prepared, reordered) == against
    assert {(r["condition"], r["against"], r["measure"]) for r in against} == (
        {(c, "lexicon reader", "accuracy") for c in SMALL["conditions"]}
        | {(c, "all faster", m) for c in SMALL["conditions"] if c != "all faster"
           for m in ("auprc", "attention")})
    for row in against:
        assert row["low"] <= row["mean"] <= row["high"]
    # the attention gap to all faster is the gap of the two conditions' test attention
    overall = {r["condition"]: r for r in test if r["chosen"] and r["class"] == "all"}
    (gap,) = [r["mean"] for r in against
              if (r["condition"], r["against"], r["measure"]) == ("faster QK", "all faster",
                                                                  "attention")]
    assert np.isclose(gap, overall["faster QK"]["attention"] - overall["all faster"]["attention"])
    glued = real_sentiment.glued(p, prepared, results, chosen, matched_loss, test, records,
                                 against)
    assert glued["rs_n_seeds"] == "2" and glued["rs_rate_matched"] == f"{chosen['matched']:g}"
    assert glued["rs_n_trained"] == str(len(results) - len(SMALL["seeds"]))
    assert glued["rs_vs_lexicon_verdict_faster_QK"] in ("above it", "below it", "not resolved")
    assert glued["rs_attention_vs_all_faster_verdict_faster_QK"] in ("higher", "lower",
                                                                    "not resolved")
    baseline = {row["baseline"].split(" (")[0]: row["value"]
                for row in real_sentiment.baseline_rows(prepared)}
    assert 0 < float(baseline["accuracy of the lexicon alone"]) <= 1
    maps = real_sentiment.heatmaps(prepared, real_sentiment.at_chosen_rates(results, chosen))
    assert all(np.isclose(m.sum(), 100) for m in maps.values())
    # the perturbation test draws two conditions, this three, the default five
    from qkov import plotting

    rendered = plotting.render(real_sentiment.plot(p, prepared, results, chosen, test, maps))
    assert rendered.overlaps == []
    assert plotting.check_text_size("real-sentiment", rendered.sizes) >= plotting.MIN_TEXT_PT


def test_the_fetched_package_holds_the_rated_sentences():
    try:
        data = ratings.load_ratings()
    except sources.SourceError as err:
        pytest.skip(f"vaderSentiment is not fetched ({err}); `make data` fetches it")
    assert len(data.train) + len(data.test) == 23_703
    assert data.lexicon_words == 7_502
    assert not {s.document for s in data.train} & {s.document for s in data.test}


def test_a_real_readout_token_is_never_ranked_into_a_rationale():
    """Read out at the last token, rollout keeps half of that token's weight on itself: it
    is left out of the ranking (ERASER's r_k, plausibility's top k)."""
    from qkov.language.metrics import eraser_rationale, ranked_tokens

    mask = torch.tensor([[True, True, True, True, False]])
    last = torch.tensor([3])
    pattern = torch.full((1, 1, 5, 5), 0.2)  # flat attention: the identity decides
    assert ranked_tokens(mask, last).tolist() == [[True, True, True, False, False]]
    assert not eraser_rationale([pattern], last, mask, 0.25)[0, 3]
    first_pad = torch.tensor([4])  # a padding readout: nothing to leave out
    assert ranked_tokens(mask, first_pad).tolist() == mask.tolist()


def test_label_smoothing_is_refused_for_a_classifier():
    from qkov.language.batches import TokenBatch
    from qkov.language.models import Decoder, DecoderConfig
    from qkov.language.train import TrainingSetup, train_classifier

    model = Decoder(DecoderConfig(vocab_size=10, max_len=4, d_model=4, n_heads=1, d_head=4,
                                  d_mlp=0, n_classes=2))
    data = TokenBatch(tokens=torch.ones(2, 3, dtype=torch.long),
                      attention_mask=torch.tensor([[1, 1, 0], [1, 0, 0]]).bool(),
                      labels=torch.tensor([0, 1]))
    with pytest.raises(ValueError, match="label_smoothing"):
        train_classifier(model, data, TrainingSetup(label_smoothing=0.1), progress=False)
