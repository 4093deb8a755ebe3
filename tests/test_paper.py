"""The paper's run configurations match paper-spec sections 3 and 4."""

from qkov import paper


def test_fig2_has_eight_panels_of_five_seeds_at_paper_scale():
    runs = paper.fig2_runs()
    assert len(runs) == 40 and len({r.name for r in runs}) == 40
    assert {r.seed for r in runs} == {1234, 1235, 1236, 1237, 1238}
    by_key = {p.key: p.template for p in paper.FIG2_PANELS}
    assert (by_key["CAFO"].epochs, by_key["CAFO"].batches_per_epoch) == (5000, 200)
    assert by_key["FAFO-qk20x"].lr_qk == 0.2 and by_key["FAFO-qk20x"].lr_ov == 0.01
    assert by_key["FAFO-ramp40x"].qk_ramp == (1.0, 40.0)
    assert by_key["CACO-qk5x"].T == 128 and by_key["CACO-qk5x"].lr_qk == 0.05
    assert by_key["FAFO"].model.qk_init == "default" and by_key["FAFO"].model.ov_init == "identity"
    assert sum(r.steps for r in runs) == 5 * 3_450_000


def test_fig3_trains_the_ov_circuit_only_under_fixed_attention():
    runs = paper.fig3_runs()
    assert len(runs) == 10
    for r in runs:
        assert r.lr_qk == 0 and r.model.fixed_alpha in paper.FIG3_ALPHAS
        assert r.per_class_batches and r.steps == 500 * 250 and r.seed == 1234
        assert r.model.ov_bias == (r.model.ov == "collapsed")
