"""The four parameterizations: dense vs counts paths, hand-written gradients, invariants."""

import pytest
import torch

from qkov.circuits import PARAMETERIZATIONS
from qkov.synthetic import models as M
from qkov.synthetic import tasks

SPECS = [M.ModelConfig(p, ov_bias=bias, fixed_alpha=alpha)
         for p in PARAMETERIZATIONS for bias in (False, True) for alpha in (None, 0.6)]


def spec_id(s):
    return f"{s.parameterization}{'+b' if s.ov_bias else ''}{'-fixed' if s.fixed_alpha else ''}"


@pytest.fixture(scope="module")
def batch():
    return tasks.sample_tokens(torch.Generator().manual_seed(3), 32, 64)


@pytest.mark.parametrize("spec", SPECS, ids=spec_id)
def test_dense_and_counts_paths_agree_in_logits_and_gradients(spec, batch):
    counts = batch.to_counts()
    params = M.init_parameters(spec, torch.Generator().manual_seed(1))
    grads = []
    logits = []
    for path in ("dense", "counts"):
        p = {k: v.clone().requires_grad_(True) for k, v in params.items()}
        if path == "dense":
            z, _ = M.dense_logits(p, batch.inputs, spec.fixed_alpha, batch.classes)
        else:
            z, _ = M.count_logits(p, counts.counts, counts.classes, spec.fixed_alpha)
        torch.nn.functional.cross_entropy(z, batch.targets).backward()
        logits.append(z.detach())
        grads.append({k: v.grad for k, v in p.items() if v.grad is not None})
    assert torch.allclose(logits[0], logits[1], atol=1e-5)
    assert grads[0].keys() == grads[1].keys()
    for k in grads[0]:
        assert torch.allclose(grads[0][k], grads[1][k], atol=1e-5), k


def test_attention_over_positions_sums_to_attention_over_tokens(batch):
    spec = M.ModelConfig("CACO")
    p = M.init_parameters(spec, torch.Generator().manual_seed(0))
    _, a_pos = M.dense_logits(p, batch.inputs)
    _, a_tok = M.count_logits(p, batch.to_counts().counts, batch.classes)
    per_token = torch.zeros(32, 50).scatter_add_(1, batch.inputs, a_pos)
    assert torch.allclose(per_token, a_tok, atol=1e-6)


def ordered(specs):
    return [specs[i] for i in M.ensemble_order(specs)]


MIXED = ordered([M.ModelConfig("FAFO", ov_bias=True), M.ModelConfig("CAFO"),
                 M.ModelConfig("FAFO", qk_init="identity", ov_init="identity"),
                 M.ModelConfig("FACO", ov_bias=True), M.ModelConfig("CACO"),
                 M.ModelConfig("CACO", qk_init="identity", ov_init="identity", ov_bias=True)])
FIXED = ordered([M.ModelConfig("CACO", ov_bias=True, fixed_alpha=0.3),
                 M.ModelConfig("CAFO", fixed_alpha=0.8), M.ModelConfig("CACO", fixed_alpha=1.0)])


@pytest.mark.parametrize("specs", [MIXED, FIXED], ids=["all-four", "fixed-attention"])
@pytest.mark.parametrize("shared_ov_rate", [False, True], ids=["ov-rate-each", "ov-rate-one"])
def test_every_ensemble_step_is_sgd_on_each_members_autograd_gradient(specs, shared_ov_rate):
    """Each step moves each member by -lr x its own gradient, taken by autograd on the
    member alone (count_logits and cross-entropy: a reference that shares none of the
    step's hand-written gradients), from wherever the step before left it.

    50 steps on fresh batches with large rates, so that the state the step keeps between
    calls is exercised too: its work space (the batch size changes at step 20), its cached
    OV rates (the per-member rate tensor is changed in place at step 30) and its views of
    the parameters (members are dropped at step 40, as the trainer drops finished runs).
    """
    E = len(specs)
    ens = M.Ensemble(specs, [torch.Generator().manual_seed(i) for i in range(E)])
    lr_qk = torch.linspace(0.5, 0.01, E)
    lr_ov = torch.full((E,), 0.3) if shared_ov_rate else torch.linspace(0.01, 0.5, E)
    streams = [tasks.DataStream(11, 64, 32), tasks.DataStream(12, 128, 48)]
    for t in range(50):
        if t == 30 and not shared_ov_rate:
            lr_ov.mul_(0.5)  # the same tensor, changed in place: the cached rates must follow
        if t == 40:
            keep = torch.tensor([i for i in range(len(specs)) if i != 1])
            ens.keep(keep)
            specs, lr_qk, lr_ov = [specs[i] for i in keep], lr_qk[keep], lr_ov[keep]
        b = streams[t >= 20].batch_at(t)
        E = len(specs)
        before = [ens.member(i) for i in range(E)]
        p_target = ens.step(ens.batch(b.counts.expand(E, -1, -1), b.classes.expand(E, -1)),
                            lr_qk, 0.3 if shared_ov_rate else lr_ov)
        losses = M.mean_losses(p_target)
        for i, spec in enumerate(specs):
            own = {k: v.clone().requires_grad_(True) for k, v in before[i].items()}
            z, _ = M.count_logits(own, b.counts, b.classes, spec.fixed_alpha)
            loss = torch.nn.functional.cross_entropy(z, b.targets)
            grads = dict(zip(own, torch.autograd.grad(loss, list(own.values()))))
            assert losses[i].item() == pytest.approx(loss.item(), abs=1e-6), (t, spec)
            after = ens.member(i)
            assert after.keys() == own.keys()
            for k, v in before[i].items():
                rate = lr_qk[i] if k in ("W_QK", "W_Q", "W_K") else lr_ov[i]
                step = 0 if (k == "b" and not spec.ov_bias) else rate
                assert torch.allclose(after[k], v - step * grads[k], rtol=1e-5, atol=1e-6), \
                    (t, spec, k)
    assert len(ens) == len(specs) == E


def test_ensemble_order_is_required():
    with pytest.raises(ValueError, match="ensemble_order"):
        M.Ensemble([M.ModelConfig("FAFO"), M.ModelConfig("CACO")], [torch.Generator()] * 2)


def test_factorized_ov_conserves_its_balance_under_small_steps(batch):
    """W_O^T W_O - W_V W_V^T is conserved by gradient flow; small-step GD keeps it to 1e-3."""
    spec = M.ModelConfig("CAFO", fixed_alpha=0.5)
    ens = M.Ensemble([spec], [torch.Generator().manual_seed(5)])
    counts = batch.to_counts()
    data = ens.batch(counts.counts[None], counts.classes[None])

    def balance():
        w_o, w_v = ens.params["W_O"][0].double(), ens.params["W_V"][0].double()
        return w_o.T @ w_o - w_v @ w_v.T

    start = balance()
    first_loss = None
    for _ in range(12000):  # full batch: the same 32 sequences every step
        losses = M.mean_losses(ens.step(data, torch.zeros(1), 0.01))
        first_loss = first_loss or losses.item()
    assert losses.item() < 0.5 * first_loss, "the OV circuit should have learned"
    moved = (ens.params["W_O"][0] @ ens.params["W_V"][0]).norm()
    drift = (balance() - start).norm() / start.norm()
    assert drift < 1e-3, drift
    assert moved > 1.0  # the product itself changed a lot


def test_unknown_parameterization_lists_the_valid_ones():
    with pytest.raises(ValueError) as err:
        M.ModelConfig("FAC0")
    assert all(p in str(err.value) for p in PARAMETERIZATIONS)


def test_identity_init_and_default_init():
    p = M.init_parameters(M.ModelConfig("FAFO", qk_init="default", ov_init="identity"),
                          torch.Generator().manual_seed(0))
    assert torch.equal(p["W_V"], 1e-6 * torch.eye(50)) and torch.equal(p["W_O"], p["W_V"])
    assert p["W_Q"].abs().max() <= 50 ** -0.5 and p["W_Q"].std() > 0.05
    assert torch.equal(p["b"], torch.zeros(50))


@pytest.mark.parametrize("bad", [{"qk_init": "zeros"}, {"fixed_alpha": 1.5}])
def test_bad_specs_are_refused(bad):
    with pytest.raises(ValueError, match="parameter"):
        M.ModelConfig("CACO", **bad)


@pytest.mark.parametrize("cut", ["self", "context"])
@pytest.mark.parametrize("parameterization", PARAMETERIZATIONS)
def test_with_a_cut_the_query_does_not_attend_to_itself(parameterization, cut):
    """The dense computation with the query's position masked is the counts path on the
    context's counts."""
    batch = tasks.sample_tokens(torch.Generator().manual_seed(4), 32, 64, cut=cut)
    counts = batch.to_counts(cut)
    spec = M.ModelConfig(parameterization)
    p = M.init_parameters(spec, torch.Generator().manual_seed(2))
    z_dense, a_pos = M.dense_logits(p, batch.inputs, cut=cut)
    z_counts, a_tok = M.count_logits(p, counts.counts, counts.classes)
    assert (a_pos[:, -1] == 0).all()  # the query's own position
    assert torch.allclose(z_dense, z_counts, atol=1e-5)
    per_token = torch.zeros(32, 50).scatter_add_(1, batch.inputs, a_pos)
    assert torch.allclose(per_token, a_tok, atol=1e-6)


def test_factor_measures_give_the_rate_factor_and_the_authors_conserved_quantity():
    specs = [M.ModelConfig("CACO"), M.ModelConfig("CAFO", ov_init="identity"),
             M.ModelConfig("FACO", qk_init="default"), M.ModelConfig("FAFO", qk_init="identity",
                                                                  ov_init="default")]
    order = M.ensemble_order(specs)
    specs = [specs[i] for i in order]
    ensemble = M.Ensemble(specs, [torch.Generator().manual_seed(i) for i in range(4)])
    c = ensemble.circuits()
    by_name = {s.parameterization: k for k, s in enumerate(specs)}
    # collapsed circuits: rate 1, no conserved quantity
    assert c["rate_qk"][by_name["CACO"]] == 1 and c["rate_ov"][by_name["CACO"]] == 1
    assert torch.isnan(c["conserved_qk"][by_name["CAFO"]])
    # factors at 1e-6 I: phi^2 + psi^2 = 2e-12, balanced (the quantity is 0)
    assert c["rate_ov"][by_name["CAFO"]] == pytest.approx(2e-12, rel=1e-6)
    assert c["conserved_ov"][by_name["CAFO"]] == 0
    # PyTorch's default initialisation: each diagonal entry of a Gram ~ 50 / 150 = 1/3
    for name, circuit in (("FACO", "qk"), ("FAFO", "ov")):
        assert c[f"rate_{circuit}"][by_name[name]] == pytest.approx(2 / 3, rel=0.15)
        assert 0.5 < c[f"conserved_{circuit}"][by_name[name]] < 1.5  # random: unbalanced
    # by hand for one member: W = A B with A = W_Q^T, B = W_K
    k = by_name["FACO"]
    a, b = ensemble.params["W_Q"][k].double().T, ensemble.params["W_K"][k].double()
    rows = (a @ a.T).diagonal()[M.RATE_ROWS["qk"]].mean()
    columns = (b.T @ b).diagonal()[M.RATE_COLUMNS].mean()
    assert c["rate_qk"][k] == pytest.approx(float(rows + columns), rel=1e-12)
    quantity = a.T @ a - b @ b.T
    expected = torch.linalg.norm(quantity) / max(torch.linalg.norm(a.T @ a),
                                                 torch.linalg.norm(b @ b.T))
    assert c["conserved_qk"][k] == pytest.approx(float(expected), rel=1e-12)
