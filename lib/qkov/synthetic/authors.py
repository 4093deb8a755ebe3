"""What the authors' released notebooks show for paper Figs. 2 and 3, quoted with where it is.

Read from github.com/vashishtrahul/Faster-Query-Key-Learning-Sharpens-Attention-in-Self-
Attention-Models (commit 9e89c94), folder ``Fig2-Heatmaps``: ``Fig-2-Heatmaps-Row-1.ipynb``
(R1) and ``Fig-2_CACO_FAFO Experiments.ipynb`` (R2). The heatmap cells are read off the
saved PNG outputs (the numbers printed in each cell). These are the authors' numbers, not
the companion's, and not necessarily the paper's: the book labels them so wherever it shows
them.

What the notebooks do *not* hold: heatmaps of CAFO and CACO of row 1 and of both FAFO
panels of row 2 (their cells were never run), values of the conserved quantity (R1's CAFO
cell computes it per epoch, but was never run), and any result of a CACO QK-rate sweep
(a comment in R2's CACO cell lists the rates 0.02, 0.03, 0.04, 0.05, 0.1; only 0.05 was
saved). Their training data come from an unseeded ``np.random``, so no run of theirs can be
redrawn.
"""

from __future__ import annotations

from dataclasses import dataclass

SOURCE = ("the authors' released notebooks (Fig2-Heatmaps, commit 9e89c94), read off their "
          "saved heatmaps")


@dataclass(frozen=True)
class AuthorsHeatmap:
    """The top row (probability of the correct token 0.8-1.0) of one saved heatmap: % of
    held-out sequences per attention bin (0-0.2, ..., 0.8-1.0), averaged over ``seeds``; every
    other row of these heatmaps is 0.0. ``epochs``: epochs each seed trained. ``where``: the
    notebook and cell."""

    panel: str
    seeds: tuple[int, ...]
    epochs: int
    top_row: tuple[float, float, float, float, float]
    where: str


# 200 held-out batches of 32 sequences per seed (6,400), as the companion's default.
HEATMAPS = (
    AuthorsHeatmap("FAFO", (1234,), 1101, (0.1, 64.1, 35.7, 0.0, 0.0),
                   "R1 cell 8 (Params1.pdf); early stop fired after epoch 1,101"),
    AuthorsHeatmap("FACO", (1234,), 2500, (0.0, 0.0, 0.0, 5.4, 94.6),
                   "R1 cell 32 (Params2.pdf); no early stop fired in 2,500 epochs"),
    AuthorsHeatmap("CACO-qk5x", (1234, 1235, 1236, 1237, 1238), 2000,
                   (0.0, 0.0, 2.3, 76.8, 20.8), "R2 cell 24 (params_increased_caco_1.pdf)"),
    AuthorsHeatmap("CACO-ramp10x", (1234, 1235, 1236, 1237, 1238), 2000,
                   (0.0, 0.0, 2.6, 86.9, 10.5), "R2 cell 31 (params_increasing_caco.pdf)"),
)

# The separability diagnostic (largest attention on a distinct-token position minus the
# smallest on a common-token position, mean over 6,400 held-out sequences; one seed, 1234):
# R1 cells 49 (FAFO) and 50 (FACO).
SEPARABILITY = {"FAFO": 0.0036011230207805057, "FACO": 0.10556412973190163}

# Row-1 FAFO: epochs its one seed trained before the authors' early stop fired.
FAFO_EPOCHS = 1101

# The QK rates of the CACO sweep that R2's CACO cell names in a comment (OV rate 0.01,
# T = 128, default initialisation, 2000 x 100 batches, no early stop).
CACO_QK_RATES = (0.02, 0.03, 0.04, 0.05, 0.1)


# Paper Fig. 3: the final losses (epoch 500, one seed: 1234) the authors' FIg-3-Code notebooks
# print (Fig-3_Fixed-Self-Attention-Experiments_Collapsed / _Factorised), per OV circuit and
# fixed attention alpha.
FIG3_FINAL_LOSS = {
    "collapsed": {0.2: 0.5980, 0.4: 0.1582, 0.6: 0.0645, 0.8: 0.0346, 1.0: 0.02155},
    "factorized": {0.2: 0.00379, 0.4: 0.00148, 0.6: 0.000892, 0.8: 0.000633, 1.0: 0.000486},
}
