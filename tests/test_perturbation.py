"""The rounding-perturbation test: what a figure prints must not depend on the CPU.

Another processor rounds the same float arithmetic differently (other vector widths, other
kernels). This machine can show that without another one: ``ATEN_CPU_CAPABILITY=default``
makes torch take its scalar kernels, another rounding of the same computation with the same
data and seeds. Each trained figure's notebook runs twice, with the native kernels and with
the scalar ones, and its printed outputs are compared under nbval's contract
(``nbval_tolerance``): cells tagged ``nbval-tolerance`` within its tolerance, every other
compared cell exactly. Figs. 2 and 3, the Fig. 2 controls, the ratio sweep, the shortcut
test and the real-text agreement run at a reduced scale, the language-agreement experiment as
the book runs it.

The draws themselves (data, initial parameters, held-out sets) must be bit-identical under
every capability the CPU has, AVX2's included: torch's float32 ``normal_`` has a vectorised
path on AVX2 only (``qkov.seeding``).
"""

from __future__ import annotations

import os
import subprocess
import sys

import nbformat
import pytest

import qkov
from conftest import REPO
from nbval_tolerance import TOLERANCE_TAG, output_differences, sanitize_patterns

SCALAR = "default"  # torch's kernels without vector instructions
IGNORED = "nbval-ignore-output"

# Reduced-scale parameters (papermill arguments); language-agreement as the book runs it.
RUNS = {
    "paper-fig2": ["-p", "epochs_scale", "0.1", "-p", "eval_batches", "20",
                   "-p", "trajectory_batches", "4", "-y", "seeds: [7, 8]"],
    "paper-fig3": ["-p", "epochs", "40", "-p", "batches_per_epoch", "50",
                   "-p", "eval_batches", "20", "-y", "seeds: [3, 4]"],
    "theory-ratio-sweep": ["-p", "max_epochs", "100", "-p", "batches_per_epoch", "50",
                           "-p", "eval_batches", "10", "-y", "seeds: [3, 4]"],
    "theory-shortcut": ["-p", "max_epochs", "100", "-p", "batches_per_epoch", "50",
                        "-p", "eval_batches", "10", "-y", "seeds: [3, 4]",
                        "-y", "ratios: [0.1, 1, 10, 100]", "-y", "shortcut_lengths: [32]",
                        "-y", "shortcut_ratios: [1, 10]", "-y", "sensitivity_ratios: [1, 10]",
                        "-y", "sensitivity_lr_ov: [0.3]", "-y", "sensitivity_init_scales: [0.1]",
                        "-y", "sensitivity_batch_sizes: [128]"],
    # with paper-fig2's reduced run (its seeds and trajectory batches), run natively first
    "fig2-controls": ["-p", "epochs_scale", "0.1", "-p", "eval_batches", "20",
                      "-p", "trajectory_batches", "4", "-y", "seeds: [7, 8]",
                      "-y", "qk_rates: [0.1]"],
    "language-agreement": [],
    # the real sentences' first 6,000 examples (the addresses of 1790 to about 1850)
    "real-agreement": ["-p", "example_limit", "6000", "-p", "epochs", "2", "-y", "seeds: [7, 8]",
                       "-y", "conditions: [matched, faster QK]"],
    # every rated sentence, one epoch, two seeds
    "real-sentiment": ["-p", "epochs", "1", "-y", "seeds: [7, 8]",
                       "-y", "conditions: [matched, faster QK]"],
}


def environment(capability: str | None) -> dict:
    """This process's environment with torch's CPU capability forced (None: native)."""
    env = {k: v for k, v in os.environ.items() if k != "ATEN_CPU_CAPABILITY"}
    if capability is not None:
        env["ATEN_CPU_CAPABILITY"] = capability
    return env


def execute(figure_id: str, args: list[str], folder, capability: str | None):
    folder.mkdir(parents=True, exist_ok=True)
    out = folder / f"{capability or 'native'}.ipynb"
    subprocess.run([sys.executable, "-m", "papermill", str(REPO / "notebooks" / f"{figure_id}.ipynb"),
                    str(out), *args, "-p", "artifacts_dir", str(folder / (capability or "native")),
                    *(["-p", "progress", "False"] if figure_id != "language-agreement" else [])],
                   check=True, capture_output=True, env=environment(capability), timeout=900)
    return nbformat.read(out, as_version=4)


def differences(native, perturbed) -> list[str]:
    """Where two runs of one notebook print differently beyond nbval's contract
    (``nbval_tolerance.output_differences``): cells tagged TOLERANCE_TAG within its
    tolerance, other compared cells exactly."""
    masks = sanitize_patterns(REPO / "tests" / "nbval-sanitize.cfg")
    found = []
    cells = [(a, b) for a, b in zip(native.cells, perturbed.cells, strict=True)
             if a.cell_type == "code"]
    for index, (a, b) in enumerate(cells):
        tags = a.metadata.get("tags", [])
        if IGNORED not in tags or TOLERANCE_TAG in tags:  # (nbval_tolerance compares those)
            found += [f"code cell {index} (native: stored, scalar kernels: fresh): {d}" for d in
                      output_differences(b.outputs, a.outputs, masks, TOLERANCE_TAG in tags)]
    return found


def test_differences_flags_a_moved_digit_and_passes_equal_runs():
    def notebook(text, tags):
        nb = nbformat.v4.new_notebook()
        cell = nbformat.v4.new_code_cell("print(x)", metadata={"tags": tags})
        cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=text)]
        nb.cells = [cell]
        return nb

    assert differences(notebook("a 0.4833 ± 0.052\n", []), notebook("a 0.4833 ± 0.052\n", [])) == []
    assert differences(notebook("a 0.4833\n", []), notebook("a 0.4834\n", []))  # exact
    tolerant = [TOLERANCE_TAG]
    assert differences(notebook("a 0.4833\n", tolerant), notebook("a 0.4834\n", tolerant)) == []
    # The language-agreement digits that moved between an Intel and an AMD machine:
    assert differences(notebook("faster QK 0.4833 ± 0.052\n", tolerant),
                       notebook("faster QK 0.496 ± 0.018\n", tolerant))
    assert differences(notebook("x\n", [IGNORED]), notebook("y\n", [IGNORED])) == []
    # What nbval's sanitize file masks (a temporary path) is no difference.
    assert differences(notebook("in /tmp/a\n", []), notebook("in /tmp/b\n", [])) == []


@pytest.mark.parametrize("figure_id", list(RUNS))
def test_printed_results_survive_another_rounding(figure_id, tmp_path):
    import torch

    from qkov.figures import specs

    if torch.backends.cpu.get_cpu_capability() == "DEFAULT":
        pytest.skip("torch runs its scalar kernels natively here: no other rounding to compare")
    args = list(RUNS[figure_id])
    for read in sorted({r.split("/")[0] for r in specs()[figure_id].reads}):
        # the figure it reads, once, natively: both runs below read the same files
        execute(read, RUNS[read], tmp_path / read, None)
        args += ["-p", f"{read.replace('paper-', '').replace('-', '')}_summary",
                 str(tmp_path / read / "native" / "summary.json")]
    native = execute(figure_id, args, tmp_path, None)
    perturbed = execute(figure_id, args, tmp_path, SCALAR)
    found = differences(native, perturbed)
    assert not found, (f"{figure_id}: the scalar kernels (ATEN_CPU_CAPABILITY={SCALAR}) "
                       f"print other results:\n" + "\n\n".join(found))


DRAWS = r"""
import hashlib, torch
from qkov.seeding import derived_seed, init_generator
from qkov.synthetic import models, tasks
from qkov.synthetic.models import ModelConfig
from qkov.language import agreement
from qkov.language.models import Decoder
from qkov.figures import language_agreement as la

def digest(*tensors):
    h = hashlib.sha256()
    for t in tensors:
        h.update(t.contiguous().numpy().tobytes())
    return h.hexdigest()[:16]

stream = tasks.DataStream(derived_seed(1, "data"), 64, 32, False)
chunk = stream.chunk_at(0)
print("synthetic data", digest(chunk.counts, chunk.classes))
specs = [ModelConfig(name, qk_init=init, ov_init=init, ov_bias=True)
         for name in ("FAFO", "FACO", "CAFO", "CACO") for init in ("identity", "default")]
params = [models.init_parameters(spec, init_generator(3)) for spec in specs]
print("synthetic init", digest(*(p[n] for p in params for n in sorted(p))))
p = la.Parameters()
data = agreement.generate(p.train_sentences, derived_seed(1234, "data"), modifiers=(0, 3))
print("agreement data", digest(data.tokens, data.labels))
print("agreement held-out", digest(*(t.tokens for t in la.held_out_sets(p, 1234).values())))
model = Decoder(la.model_config(p), generator=init_generator(1234))
print("agreement init", digest(*(q.detach() for q in model.parameters())))
"""


def capabilities() -> list[str | None]:
    """Native, scalar, and AVX2 where the CPU has more than AVX2 (there AVX2 is not native)."""
    import torch

    native = torch.backends.cpu.get_cpu_capability()
    return [None, SCALAR] + (["avx2"] if native.startswith("AVX512") else [])


def test_data_and_initial_parameters_are_the_same_on_every_cpu():
    printed = {}
    for capability in capabilities():
        result = subprocess.run([sys.executable, "-c", DRAWS], capture_output=True, text=True,
                                env=environment(capability), timeout=300)
        assert result.returncode == 0, result.stderr[-3000:]
        printed[capability or "native"] = result.stdout
    native = printed.pop("native")
    assert native.count("\n") == 5
    for capability, text in printed.items():
        assert text == native, f"draws under ATEN_CPU_CAPABILITY={capability}:\n{text}\nnative:\n{native}"


def test_numerics_are_pinned_before_torch_computes():
    code = ("import qkov, torch, os; print(os.environ['MKL_CBWR'], torch.get_num_threads())")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            env={k: v for k, v in os.environ.items()
                                 if k not in ("MKL_CBWR", "OMP_NUM_THREADS", "QKOV_THREADS")},
                            timeout=120)
    assert result.stdout.split() == [qkov.MKL_CBWR, "1"], result.stderr
    bad = subprocess.run([sys.executable, "-c", "import qkov"], capture_output=True, text=True,
                         env={**os.environ, qkov.THREADS_ENV: "two"}, timeout=120)
    assert bad.returncode != 0 and "QKOV_THREADS" in bad.stderr and "'two'" in bad.stderr
