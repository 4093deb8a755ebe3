"""The real-data pipelines end to end on small files of the real formats (written by
test_language_data's writers), through the stored notebooks' own code: a few training steps
of both conditions, the metrics, the figure and the artifacts; without data, the message
once and nothing else; on bad data, an error before any training."""

import dataclasses
import json
import types

import nbformat
import numpy as np
import pytest
from test_language_data import (
    agreement_rows,
    hatexplain_posts,
    write_agreement,
    write_glove,
    write_hatexplain,
    write_squad,
)

from conftest import REPO
from qkov import plotting
from qkov.checks import ParameterError
from qkov.figures import language_hatexplain, language_squad, language_sva
from qkov.language.data import DataError

TINY = {"seeds": [1234, 1235], "epochs": 2, "d_model": 8, "n_heads": 2, "d_head": 4,
        "device": "cpu"}
RATES = ("accuracy", "attention_rollout", "attention_layer_mean", "attention_layer_max")


def notebook_code(figure_id: str, **parameters) -> dict:
    """Run the stored notebook's own code in this process, as papermill would with these
    ``parameters`` (injected after its parameters cell; its install cell left out), and
    return its namespace."""
    nb = nbformat.read(REPO / "notebooks" / f"{figure_id}.ipynb", as_version=4)
    namespace: dict = {}
    for cell in nb.cells:
        if cell.cell_type != "code" or 'find_spec("qkov")' in cell.source:
            continue
        exec(compile(cell.source, f"{figure_id}.ipynb", "exec"), namespace)
        if "parameters" in cell.metadata.get("tags", []):
            namespace.update(parameters)
    return namespace


def published(figure_id, folder, extra):
    files = sorted(path.name for path in folder.iterdir())
    assert files == sorted(["figure.png", "figure.pdf", "figure.svg", "data.csv",
                            "summary.json", *extra])
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["figure"] == figure_id
    return summary


def check_classifier_rows(rows, seeds):
    assert [(r["condition"], r["seed"]) for r in rows] == [
        (c, s) for s in seeds for c in ("matched", "faster QK")]
    for row in rows:
        assert all(0 <= row[key] <= 1 for key in RATES)
        assert -1 <= row["comprehensiveness"] <= 1 and -1 <= row["sufficiency"] <= 1
        assert np.isfinite(row["train_loss"])


def hatexplain_files(folder):
    """Forty posts (the writer's eight, relabelled ids) so that train and test both hold
    posts with rationales."""
    base = hatexplain_posts()
    posts = {}
    for k in range(40):
        post = json.loads(json.dumps(base[f"{k % 8}_gab"]))
        post["post_id"] = f"{k}_twitter"
        posts[post["post_id"]] = post
    divisions = {"train": [f"{k}_twitter" for k in range(28)],
                 "val": [f"{k}_twitter" for k in range(28, 32)],
                 "test": [f"{k}_twitter" for k in range(32, 40)]}
    return write_hatexplain(folder, posts, divisions)


def test_hatexplain_pipeline_trains_measures_and_publishes(tmp_path):
    hatexplain_files(tmp_path / "Data")
    ns = notebook_code("language-hatexplain", hatexplain_dir=str(tmp_path / "Data"),
                       vocab_size=300, d_mlp=8, lr=1e-3, top_fraction=0.2,
                       artifacts_dir=str(tmp_path / "out"), **{**TINY, "seeds": [1234]})
    prepared, (rows, heatmaps, _) = ns["data"], ns["results"]
    assert len(prepared.train) == 21 and len(prepared.test) == 6  # posts 3 and 7 of 8: no majority
    assert prepared.data.no_majority == 10
    assert prepared.test.rationale.any(1).sum() == 4  # hate speech and offensive posts
    check_classifier_rows(rows, [1234])
    assert all(r["n_with_rationale"] == 4 for r in rows)
    for grid in heatmaps.values():  # the four test posts with a rationale
        assert grid.shape == (5, 5) and grid.sum() == pytest.approx(100)
    summary = published("language-hatexplain", tmp_path / "out", ["heatmaps.csv"])
    assert len(summary["rows"]) == 2


def test_sva_pipeline_splits_by_attractors(tmp_path, capsys):
    path = write_agreement(tmp_path / "agr.tsv")
    ns = notebook_code("language-sva", agreement_tsv=str(path), train_fraction=0.5, lr=0.05,
                       top_fraction=0.2, artifacts_dir=str(tmp_path / "out"), **TINY)
    prepared, results = ns["data"], ns["results"]
    assert len(prepared.train) == 20 and len(prepared.test) == 20 and prepared.too_long == 0
    # the rationale is the subject, the second word of every sentence
    assert prepared.test.rationale.sum(1).tolist() == [1] * 20
    assert prepared.test.rationale[:, 1].all()
    check_classifier_rows(results.rows, TINY["seeds"])
    by_attractors = language_sva.attractor_rows(results.runs, prepared.test_attractors)
    assert sum(r["n"] for r in by_attractors) == 20 * 4  # every test sentence, per run
    assert {r["attractors"] for r in by_attractors} <= {0, 1}
    published("language-sva", tmp_path / "out", ["heatmaps.csv", "attractors.csv"])
    printed = capsys.readouterr().out
    assert printed.startswith("examples: train 20, test 20")  # what prepare loaded
    assert "attractors" in printed and "wrote " in printed  # the second table; the artifacts


def test_squad_pipeline_generates_answers_and_scores_them(tmp_path):
    train = write_squad(tmp_path / "train-v2.0.json")
    dev = write_squad(tmp_path / "dev-v2.0.json")
    glove = write_glove(tmp_path / "glove.txt", ["the", "normans", "France", "what"], dim=8)
    ns = notebook_code("language-squad", squad_train=str(train), squad_dev=str(dev),
                       glove_path=str(glove), vocab_size=400, d_mlp=8, n_layers=2,
                       max_length=64, max_answer_tokens=3, batch_size=4, lr=1e-3,
                       warmup_steps=1, artifacts_dir=str(tmp_path / "out"),
                       **{**TINY, "seeds": [1234], "epochs": 1})
    p, prepared, (rows, _, predictions) = ns["p"], ns["data"], ns["results"]
    assert len(prepared.train) == 12 and len(prepared.prompts) == 12
    with pytest.raises(ParameterError, match="'warmup_steps': expected fewer than the run's 2 "):
        language_squad.conditions(dataclasses.replace(p, warmup_steps=2), prepared)
    assert int(prepared.found.sum()) >= 3  # "the", "Normans" (lower-cased match), "France"
    # the answer span marks exactly the tokens of the answer inside the context
    tokenizer, first = prepared.tokenizer, prepared.train_data.examples[0]
    span = prepared.prompts.tokens[0][prepared.prompts.rationale[0]].tolist()
    assert tokenizer.decode(span).strip() == first.answer
    # training targets: the answer tokens and [EOS], nothing of the prompt
    targets = prepared.train.tokens[0][prepared.train.loss_mask[0]].tolist()
    assert targets[-1] == tokenizer.eos_id and tokenizer.decode(targets).strip() == first.answer
    assert [(r["condition"], r["seed"]) for r in rows] == [
        (c, s) for s in p.seeds for c in ("matched", "faster QK")]
    for row in rows:
        assert 0 <= row["exact_match"] <= row["f1"] <= 1 and row["n_eval"] == 12
        assert all(0 <= row[f"attention_{m}"] <= 1 for m in ("rollout", "layer_mean", "layer_max"))
    assert len(predictions) == 2 * 5
    published("language-squad", tmp_path / "out", ["heatmaps.csv", "predictions.csv"])


def test_squad_conditions_differ_in_the_qk_rate_alone_unless_asked():
    """Faster QK is matched with W_Q, W_K at qk_multiplier; matched_lr and matched_epochs
    (the authors' confound) change matched alone."""
    data = types.SimpleNamespace(train=[None] * 640)  # 20 batches: 10 optimizer steps
    p = language_squad.Parameters(epochs=10, warmup_steps=20)
    matched, faster = language_squad.conditions(p, data).values()
    assert dataclasses.replace(faster, qk_multiplier=1.0) == matched
    assert faster.qk_multiplier == 20 and matched.warmup_fraction == pytest.approx(0.2)
    theirs = dataclasses.replace(p, matched_lr=5e-4, matched_epochs=5)
    matched, faster = language_squad.conditions(theirs, data).values()
    assert (matched.lr, matched.epochs, matched.warmup_fraction) == (5e-4, 5, pytest.approx(0.4))
    assert (faster.lr, faster.epochs) == (p.lr, 10)
    assert language_squad.conditions(p, None) is None


def test_padded_batch_places_rows_and_their_marks():
    from qkov.language.pipelines import padded_batch

    batch = padded_batch([[3, 4], [5], [6, 7, 8]], 4, 0, labels=[0, 1, 0],
                         rationale=[[1, 0], [1], [0, 0, 1]])
    assert batch.tokens.tolist() == [[3, 4, 0, 0], [5, 0, 0, 0], [6, 7, 8, 0]]
    assert batch.lengths.tolist() == [2, 1, 3] and batch.labels.tolist() == [0, 1, 0]
    assert batch.rationale.nonzero().tolist() == [[0, 0], [1, 0], [2, 2]]
    with pytest.raises(ValueError, match="row 0: 3 tokens, more than the width 2"):
        padded_batch([[1, 2, 3]], 2)
    with pytest.raises(ValueError, match="rationale: expected one mark per token"):
        padded_batch([[1, 2], [3]], 3, rationale=[[1], [0, 1]])


def test_greedy_generation_stops_at_eos_and_at_the_budget():
    import torch

    from qkov.language.batches import TokenBatch
    from qkov.language.models import Decoder, DecoderConfig

    class Scripted(Decoder):
        """Writes 5, 6, 2 (EOS) after any prompt: the next token is a function of the step."""

        def forward(self, tokens, attention_mask, readout=None):
            out = super().forward(tokens, attention_mask, readout)
            step = attention_mask.sum(1) - prompt_lengths
            logits = torch.full_like(out.logits, -1.0)
            logits[torch.arange(len(tokens)), torch.tensor([5, 6, 2])[step.clamp(max=2)]] = 1.0
            out.logits = logits
            return out

    config = DecoderConfig(vocab_size=8, max_len=7, d_model=4, n_heads=1, d_head=4)
    prompts = TokenBatch(tokens=torch.tensor([[3, 4, 0], [3, 4, 4]]),
                         attention_mask=torch.tensor([[True, True, False], [True, True, True]]))
    prompt_lengths = prompts.attention_mask.sum(1)
    model = Scripted(config)
    assert language_squad.generate(model, prompts, max_new=5, eos_id=2) == [[5, 6], [5, 6]]
    assert language_squad.generate(model, prompts, max_new=1, eos_id=2) == [[5], [5]]


@pytest.mark.parametrize("module", [language_hatexplain, language_sva, language_squad])
def test_without_data_the_pipelines_say_where_to_get_it(module, capsys):
    assert module.data_missing(module.Parameters())
    printed = capsys.readouterr().out
    assert printed.startswith(f"No data, so nothing is trained or drawn: {module.SPEC.id}")
    assert f"papermill notebooks/{module.SPEC.id}.ipynb" in printed
    assert "(not given)" in printed
    # A path that is given but does not exist is a mistake, not "no data":
    # tests/test_loaders_strict.py checks that it fails, naming the parameter.


@pytest.mark.parametrize("module", [language_hatexplain, language_sva, language_squad])
def test_without_data_the_notebook_says_so_once_and_does_nothing_else(module, tmp_path,
                                                                     monkeypatch, capfd):
    """The stored notebook's own code at its defaults: the message, once, and then every
    step takes no data (None) and trains, draws, prints and writes nothing."""
    from qkov.language import pipelines

    def refused(*args, **kwargs):
        raise AssertionError("called without data")

    for owner, name in ((pipelines, "train_classifier"), (language_squad, "train_language_model"),
                        (pipelines, "plot_classifier"), (plotting, "publish")):
        monkeypatch.setattr(owner, name, refused)
    ns = notebook_code(module.SPEC.id, artifacts_dir=str(tmp_path / "out"))
    printed, errors = capfd.readouterr()
    assert printed.count("No data") == 1 and errors == ""
    assert printed.startswith(f"No data, so nothing is trained or drawn: {module.SPEC.id}")
    nb = nbformat.read(REPO / "notebooks" / f"{module.SPEC.id}.ipynb", as_version=4)
    assert printed == "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code"
                              for o in c.outputs)  # what the stored notebook shows
    assert ns["data"] is None and ns["results"] is None and ns["fig"] is None
    assert not (tmp_path / "out").exists()


def test_bad_data_fails_in_prepare_before_any_training(tmp_path):
    rows = agreement_rows()
    rows[7]["verb_pos"] = "VB"
    path = write_agreement(tmp_path / "agr.tsv", rows)
    p = language_sva.Parameters(agreement_tsv=str(path), **TINY)
    assert not language_sva.data_missing(p)
    with pytest.raises(DataError, match=r"agr.tsv: line 9: column 'verb_pos'"):
        language_sva.prepare(p)  # the notebook's load cell; training comes after it


@pytest.mark.parametrize("figure_id", ["language-hatexplain", "language-sva", "language-squad"])
def test_the_stored_notebooks_ran_without_data_and_drew_nothing(figure_id):
    """The stored outputs (nbval re-executes the notebooks at these defaults and compares):
    the way to the data and the command, no figure, no table of results, no artifacts."""
    nb = nbformat.read(REPO / "notebooks" / f"{figure_id}.ipynb", as_version=4)
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    text = "".join(o.get("text", "") for o in outputs)
    assert text.startswith(f"No data, so nothing is trained or drawn: {figure_id}")
    assert f"papermill notebooks/{figure_id}.ipynb" in text and "wrote" not in text
    assert all(o.get("output_type") == "stream" and o.get("name") == "stdout" for o in outputs)


def test_a_notebook_with_data_runs_end_to_end(tmp_path, run_tool):
    path = write_agreement(tmp_path / "agr.tsv")
    out = tmp_path / "artifacts"
    run_tool("papermill", "notebooks/language-sva.ipynb", tmp_path / "out.ipynb",
             "-p", "agreement_tsv", path, "-p", "artifacts_dir", out, "-p", "epochs", 1,
             "-p", "d_model", 8, "-p", "d_head", 4, "-p", "train_fraction", 0.5,
             "-p", "device", "cpu", "-y", "seeds: [1234]")
    published("language-sva", out, ["heatmaps.csv", "attractors.csv"])
    nb = nbformat.read(tmp_path / "out.ipynb", as_version=4)
    images = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs
              if "image/png" in o.get("data", {})]
    assert len(images) == 1  # the figure cell shows the figure once


# --- the authors' settings: defaults where the paper is silent, named options for defects ----


def test_the_position_embedding_learns_at_its_own_rate_where_asked():
    from qkov.language.models import Decoder, DecoderConfig, parameter_groups
    from qkov.seeding import init_generator

    model = Decoder(DecoderConfig(vocab_size=20, max_len=8, d_model=8, n_heads=2, d_head=4,
                                  d_mlp=0, n_layers=1, n_classes=2), generator=init_generator(1))
    by = {g["circuit"]: g for g in parameter_groups(model, base_lr=0.01, qk_multiplier=30,
                                                      embedding_multiplier=30,
                                                      position_multiplier=1)}
    assert by["position"]["lr"] == pytest.approx(0.01) and len(by["position"]["params"]) == 1
    assert by["embedding"]["lr"] == pytest.approx(0.3)
    assert by["position"]["params"][0] is model.position_embedding.weight
    together = parameter_groups(model, base_lr=0.01, embedding_multiplier=30)
    assert "position" not in {g["circuit"] for g in together}  # None: with the token embedding


def test_the_pipelines_default_to_the_authors_settings_where_the_paper_is_silent():
    from qkov.language.models import Decoder, DecoderConfig, parameter_groups

    sva = language_sva.Parameters()
    assert sva.residual is False and sva.grad_clip is None and sva.attention_bias
    # the authors' faster SVA notebook (cell 49): the position embedding, b_Q and b_K at 100x
    faster = dataclasses.replace(language_sva.training(sva), qk_multiplier=100.0,
                                 embedding_multiplier=100.0)
    model = Decoder(DecoderConfig(vocab_size=20, max_len=8, d_model=8, n_heads=2, d_head=4,
                                  d_mlp=0, attention_bias=True, n_classes=2))
    rates = {name: group["lr"] / sva.lr for group in parameter_groups(
        model, base_lr=faster.lr, qk_multiplier=faster.qk_multiplier,
        embedding_multiplier=faster.embedding_multiplier,
        position_multiplier=faster.position_multiplier, qk_bias=faster.qk_bias)
        for name, p in model.named_parameters() if any(p is q for q in group["params"])}
    assert {n for n, r in rates.items() if r == pytest.approx(100)} == {
        "token_embedding.weight", "position_embedding.weight", "layers.0.attn.W_Q",
        "layers.0.attn.W_K", "layers.0.attn.b_Q", "layers.0.attn.b_K"}
    hx = language_hatexplain.Parameters()
    assert hx.position_multiplier == 1 and hx.faster_weight_decay is None and hx.n_layers == 1
    squad = language_squad.Parameters()
    assert (squad.crop_chars, squad.weight_decay, squad.grad_clip) == (200, 0.05, 0.5)
    assert squad.attention_bias and squad.qk_bias  # q_linear's, k_linear's biases at 20x
    assert language_hatexplain.training(hx).qk_bias is False  # b_Q, b_K at the base rate


def test_squad_takes_the_fetched_glove_only_at_its_width():
    p = language_squad.Parameters(glove_package=True, d_model=50, n_heads=5, d_head=10)
    assert p.glove_package
    with pytest.raises(ParameterError, match="d_model.*expected 50"):
        language_squad.Parameters(glove_package=True)
    with pytest.raises(ParameterError, match="glove_path"):
        language_squad.Parameters(glove_package=True, d_model=50, glove_path="x.txt")


def test_the_notebooks_conditions_differ_in_the_faster_rates_alone(tmp_path, monkeypatch):
    """The conditions the notebooks' training cells build: faster QK is matched with W_Q,
    W_K and the token embedding at their multiples - and, in HateXplain where asked (the
    authors' confound), with its own weight decay."""
    from qkov.language import pipelines

    taken = []
    monkeypatch.setattr(pipelines, "run_classifier",
                        lambda data, conditions, *args, **kwargs: taken.append(conditions))
    hatexplain_files(tmp_path / "Data")
    for faster_decay in (None, 1e-3):
        notebook_code("language-hatexplain", hatexplain_dir=str(tmp_path / "Data"),
                      vocab_size=300, weight_decay=1e-4, faster_weight_decay=faster_decay,
                      artifacts_dir=str(tmp_path / "out"))
    notebook_code("language-sva", agreement_tsv=str(write_agreement(tmp_path / "agr.tsv")),
                  train_fraction=0.5, artifacts_dir=str(tmp_path / "out"))
    same, confounded, sva = taken
    for conditions, multiple in ((same, 30), (sva, 100)):
        matched, faster = conditions["matched"], conditions["faster QK"]
        assert (faster.qk_multiplier, faster.embedding_multiplier) == (multiple, multiple)
        assert dataclasses.replace(faster, qk_multiplier=1.0, embedding_multiplier=1.0) == matched
    assert {s.weight_decay for s in same.values()} == {1e-4}
    assert confounded["matched"].weight_decay == 1e-4
    assert confounded["faster QK"].weight_decay == 1e-3
    assert (sva["matched"].optimizer, same["matched"].optimizer) == ("sgd", "adamw")


def test_squad_context_is_cut_around_the_first_gold_answer():
    from qkov.language.data import SquadExample

    context = "a" * 300 + "Normandy" + "b" * 300
    ex = SquadExample("q1", "t", "Where?", context, ["Normandy", "in Normandy"], 300)
    cut = language_squad.cropped(ex, 200)
    assert cut.context == "a" * 200 + "Normandy" + "b" * 200
    assert cut.context[cut.answer_start:cut.answer_start + 8] == "Normandy"
    assert language_squad.cropped(ex, None) is ex
    near = SquadExample("q2", "t", "Where?", "Normandy is here", ["Normandy"], 0)
    assert language_squad.cropped(near, 3).context == "Normandy is"


def test_sva_reads_the_whole_sentence_as_the_authors_do_when_asked(tmp_path):
    path = write_agreement(tmp_path / "agr.tsv")
    ns = notebook_code("language-sva", agreement_tsv=str(path), train_fraction=0.5, lr=0.05,
                       top_fraction=0.2, input="sentence", artifacts_dir=str(tmp_path / "out"),
                       **TINY)
    prepared = ns["data"]
    # subject (word 2) and verb marked; the row ends with the verb's sentence, read at its end
    for example, marks, mask in zip(prepared.data.test, prepared.test.rationale,
                                    prepared.test.attention_mask):
        assert int(mask.sum()) == len(example.sentence) > len(example.words)
        assert marks.nonzero().squeeze(1).tolist() == [example.subject_index, example.verb_index]
    check_classifier_rows(ns["results"].rows, TINY["seeds"])
    with pytest.raises(ParameterError, match="input"):
        language_sva.Parameters(input="words")


def test_the_authors_hatexplain_measurement_is_an_option(tmp_path):
    """mask_padding False and attention_row "padded_end" read attention as the authors'
    notebooks do: from the last slot of the row padded to max_length, padding attended."""
    import torch

    from qkov.language.models import Decoder, DecoderConfig
    from qkov.seeding import init_generator

    tokens = torch.tensor([[5, 6, 0, 0]])
    mask = tokens != 0
    for masked in (True, False):
        model = Decoder(DecoderConfig(vocab_size=10, max_len=4, d_model=8, n_heads=2, d_head=4,
                                      d_mlp=0, n_classes=2, mask_padding=masked),
                        generator=init_generator(1))
        pattern = model(tokens, mask).attentions[0]
        assert (pattern[0, :, 3, 2] > 0).all() == (not masked)  # a pad query on a pad key
    hatexplain_files(tmp_path / "Data")
    common = dict(hatexplain_dir=str(tmp_path / "Data"), vocab_size=300, d_mlp=8, lr=1e-3,
                  top_fraction=0.2, max_length=16, **{**TINY, "seeds": [1234]})
    theirs = language_hatexplain.Parameters(**common, mask_padding=False,
                                            attention_row="padded_end")
    from qkov.language import pipelines
    from qkov.language.metrics import attention_rollout

    prepared = language_hatexplain.prepare(theirs)
    model = Decoder(prepared.config, generator=init_generator(1)).eval()
    readout = pipelines.evaluate_classifier(model, prepared.test, 0.2)
    end = pipelines.evaluate_classifier(model, prepared.test, 0.2, attention_row="padded_end")
    # by hand: rollout row max_len - 1 of the rows padded to max_len, padding included
    full = prepared.test.widened(16)
    with torch.no_grad():
        rollout = attention_rollout(model(full.tokens, full.attention_mask).attentions)
    by_hand = (rollout[:, -1] * full.rationale).sum(-1).numpy()
    np.testing.assert_allclose(end["attention_rollout"], by_hand, atol=1e-6)
    assert not np.allclose(end["attention_rollout"], readout["attention_rollout"])
    for key in ("comprehensiveness", "sufficiency", "correct", "auprc"):  # ranked as before
        np.testing.assert_array_equal(end[key], readout[key])
    ns = notebook_code("language-hatexplain", **common, mask_padding=False,
                       attention_row="padded_end", artifacts_dir=str(tmp_path / "out"))
    check_classifier_rows(ns["results"].rows, theirs.seeds)
    with pytest.raises(ParameterError, match="attention_row"):
        language_hatexplain.Parameters(attention_row="last")


def test_squad_attention_averages_the_steps_that_write_the_answer(tmp_path):
    """With empty answers the one step is the first: the same as answer_attention's; with
    answers, the mean over the steps."""
    import torch

    from qkov import seeding
    from qkov.language.metrics import rationale_attention_mass
    from qkov.language.models import Decoder

    train = write_squad(tmp_path / "train-v2.0.json")
    dev = write_squad(tmp_path / "dev-v2.0.json")
    glove = write_glove(tmp_path / "glove.txt", ["the", "normans", "France", "what"], dim=8)
    p = language_squad.Parameters(squad_train=str(train), squad_dev=str(dev),
                                  glove_path=str(glove), vocab_size=400, d_mlp=16, n_layers=2,
                                  max_length=64, **TINY)
    prepared = language_squad.prepare(p)
    model = Decoder(prepared.config, generator=seeding.init_generator(1)).eval()
    first = language_squad.answer_attention(model, prepared.prompts)
    empty = language_squad.step_attention(model, prepared.prompts, [[]] * len(prepared.prompts))
    for key, values in empty.items():
        np.testing.assert_allclose(values, first[key], atol=1e-6)
    answers = [[7, 8, 9], [], [11]] + [[]] * (len(prepared.prompts) - 3)
    stepped = language_squad.step_attention(model, prepared.prompts, answers)
    # prompt 0 by hand: the mean over its three steps (prompt, prompt + 7, prompt + 7 8)
    length = int(prepared.prompts.attention_mask[0].sum())
    prompt, span = prepared.prompts.tokens[0, :length], prepared.prompts.rationale[0, :length]
    masses = []
    for s in range(3):
        tokens = torch.cat([prompt, torch.tensor([7, 8][:s], dtype=torch.long)])[None]
        marks = torch.cat([span, torch.zeros(s, dtype=torch.bool)])[None]
        with torch.no_grad():
            out = model(tokens, torch.ones_like(tokens, dtype=torch.bool), readout="last")
        masses.append(float(rationale_attention_mass(out.attentions, marks, out.readout_index,
                                                     torch.ones_like(marks), "rollout")))
    assert stepped["attention_rollout"][0] == pytest.approx(np.mean(masses), abs=1e-6)
    np.testing.assert_allclose(stepped["attention_rollout"][1], first["attention_rollout"][1],
                               atol=1e-6)
