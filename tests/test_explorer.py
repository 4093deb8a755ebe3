"""The explorer of the reduced dynamics (``book/explorer.md``; the ``{qkov-explorer}`` directive
of ``book/_ext/qkov_explorer.py``; drawn by ``qkov_explorer.js``).

Without a book: the grid the page ships is the library's flow (``qkov.theory.reduced``) to
under a pixel of each plot; the directive's markup, its error for a bad ``n-max``, and the
paragraph LaTeX gets, from small Sphinx builds. In the built book, headless Chromium driven
over the DevTools protocol (``--remote-debugging-pipe``: JSON messages ended by a NUL byte on
file descriptors 3 and 4; ``test_browser`` uses the driver too): the page opens with two
ratios and the library's alpha at the target loss; a slider moved with the keyboard leaves
a trace; the plots fit at a phone and a desktop width with text of at least 12 px; nothing
is requested from another host and the script throws nothing.
"""

from __future__ import annotations

import fcntl
import io
import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np
import pytest
import yaml
from test_browser import CHROMIUM_SERVICES, QUIET_FLAGS, Site, _host, chromium

from conftest import REPO
from qkov.figures.paper_fig4 import Parameters
from qkov.theory.reduced import Setting, integrate_until

EXT = REPO / "book" / "_ext"
sys.path.insert(0, str(EXT))
import qkov_explorer  # noqa: E402  (the book's extension, not a package)

PAGE = "book/explorer.html"
MIN_TEXT_PX = 12
WIDTHS = (420, 1280)  # a phone and a desktop window
TIMEOUT_S = 60
PANEL = "document.querySelector('[data-qkov-explorer]')"
N_MAX = round(10 * Parameters().n)  # the directive's default


def _high(fd: int) -> int:
    moved = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)
    os.close(fd)
    return moved


class DevTools:
    """Headless Chromium on a pipe: ``call`` sends a command and waits for its answer;
    events that arrive meanwhile are kept in ``events``."""

    def __init__(self, profile, proxy_port: int):
        # Above the descriptors the shell rewires (3, 4), so that none is overwritten first.
        to_child, self._send = map(_high, os.pipe())
        self._receive, from_child = map(_high, os.pipe())
        self._log = tempfile.TemporaryFile()
        # bash (dash takes no descriptor above 9) puts the pipe's ends on descriptors 3 and 4,
        # where Chromium expects them.
        self.process = subprocess.Popen(
            ["/bin/bash", "-c", f'exec "$@" 3<&{to_child} 4>&{from_child}', "bash", chromium(),
             *QUIET_FLAGS,
             f"--proxy-server=http://127.0.0.1:{proxy_port}", f"--user-data-dir={profile}",
             "--remote-debugging-pipe", "about:blank"],
            pass_fds=(to_child, from_child), stdin=subprocess.DEVNULL, stdout=self._log,
            stderr=self._log)
        os.close(to_child)
        os.close(from_child)
        self._buffer, self._id, self.events = b"", 0, []
        page = next(t for t in self.call("Target.getTargets")["targetInfos"]
                    if t["type"] == "page")
        self.session = self.call("Target.attachToTarget", targetId=page["targetId"],
                                 flatten=True)["sessionId"]

    def call(self, method: str, session: str | None = None, **params):
        self._id += 1
        message = {"id": self._id, "method": method, "params": params}
        if session:
            message["sessionId"] = session
        os.write(self._send, json.dumps(message).encode() + b"\0")
        while True:
            reply = self._read(method)
            if reply.get("id") == self._id:
                assert "error" not in reply, f"DevTools {method} failed: {reply['error']}"
                return reply["result"]
            self.events.append(reply)

    def page(self, method: str, **params):
        return self.call(method, self.session, **params)

    def _read(self, method: str) -> dict:
        deadline = time.monotonic() + TIMEOUT_S
        while b"\0" not in self._buffer:
            ready, _, _ = select.select([self._receive], [], [], max(deadline - time.monotonic(), 0))
            chunk = os.read(self._receive, 1 << 16) if ready else b""
            if not chunk:
                self._log.seek(0)
                raise AssertionError(f"chromium did not answer {method}: "
                                     f"{self._log.read()[-2000:].decode(errors='replace')}")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def evaluate(self, expression: str):
        """The value of a JavaScript expression in the page (promises awaited)."""
        result = self.page("Runtime.evaluate", expression=expression, awaitPromise=True,
                           returnByValue=True)
        if "exceptionDetails" in result:
            details = result["exceptionDetails"]
            raise AssertionError(f"{expression[:200]}: "
                                 f"{details.get('exception', {}).get('description', details)}")
        return result["result"].get("value")

    def wait_for(self, expression: str, what: str):
        deadline = time.monotonic() + TIMEOUT_S
        while not self.evaluate(expression):
            assert time.monotonic() < deadline, f"{PAGE}: {what} within {TIMEOUT_S} s"
            time.sleep(0.1)

    def close(self):
        try:
            self.call("Browser.close")
        except AssertionError:
            pass  # it closes the pipe as it goes
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        os.close(self._send)
        os.close(self._receive)
        self._log.close()


@pytest.fixture(scope="module")
def site(book_html):
    served = Site(book_html)
    yield served
    served.close()


# --- the grid, against the library ---------------------------------------------------------

def library_run(r: float, n: float):
    p = Parameters()
    return integrate_until(Setting(m=p.m, n=n, b=p.b, M=p.M), p.eta_ov, r * p.eta_ov,
                           p.target_loss)


def test_the_grid_spans_the_figure_and_starts_at_two_ratios():
    p, data = Parameters(), qkov_explorer.grid(N_MAX)
    assert data["ratios"][0] == min(p.ratios) and data["ratios"][-1] == max(p.ratios)
    assert set(p.ratios) <= set(data["ratios"]) and data["n"][0] == 1 and data["n"][-1] == N_MAX
    assert all(b / a <= 2.5 for grid in (data["ratios"], data["n"])
               for a, b in zip(grid, grid[1:])), "a step of more than 2.5x on a slider"
    start = data["start"]
    assert data["ratios"][start["reference_r"]] == 1 and data["n"][start["n"]] == p.n
    assert data["ratios"][start["r"]] == min(r for r in p.ratios if r > 1)
    assert data["alpha0"] == pytest.approx([p.m / (p.m + n) for n in data["n"]], rel=1e-3)
    assert data["target_loss"] == p.target_loss
    size = len(json.dumps(data, separators=(",", ":")))
    assert size < 200_000, f"the explorer ships {size:,} bytes"


@pytest.mark.parametrize("r, n", [(10, 50), (1, 50), (0.01, 500), (100, 1), (0.2, 5)])
def test_shipped_runs_are_the_librarys_flow(r, n):
    """Where the loss reaches the target (to the 4 digits shipped), and every curve as the
    page draws it (straight lines between the shipped points) within 0.3 % of each plot's
    range of the library's flow at 2,000 times."""
    data = qkov_explorer.grid(N_MAX)
    run = data["runs"][data["n"].index(n)][data["ratios"].index(r)]
    library = library_run(r, n)
    assert run["end"]["tau"] == pytest.approx(library.tau[-1], rel=1e-3)
    assert run["end"]["alpha"] == pytest.approx(library.alpha[-1], rel=1e-3)
    tau = np.geomspace(1.0, library.tau[-1], 2000)
    expected = library.sample(tau)
    expected["loss"] = np.log10(expected["loss"])
    lo, hi = data["loss_axis"]
    assert run["x"][0] == 0 and run["x"][-1] == pytest.approx(np.log10(library.tau[-1]), abs=1e-3)
    for key, scale in (("mu_ov", expected["mu_ov"].max()), ("mu_qk", expected["mu_qk"].max()),
                       ("loss", hi - lo), ("alpha", 1.0)):
        drawn = np.interp(np.log10(tau), run["x"], run[key])
        worst = np.abs(drawn - expected[key]).max() / scale
        assert worst < 3e-3, f"r={r:g}, n={n:g}: {key} drawn {worst:.2%} of its range off"


# --- the directive, in a small Sphinx build ------------------------------------------------

def sphinx_build(tmp_path, builder: str, pages: dict[str, str]) -> tuple:
    """Build ``pages`` (reStructuredText) with the extension; the output folder and the
    warnings."""
    from sphinx.application import Sphinx
    from sphinx.util.docutils import docutils_namespace, patch_docutils

    src = tmp_path / "src"
    src.mkdir()
    (src / "conf.py").write_text(f"import sys\nsys.path.insert(0, {str(EXT)!r})\n"
                                 "extensions = ['qkov_explorer']\n")
    shutil.copyfile(REPO / "CITATION.cff", src / "CITATION.cff")
    toc = "\n".join(f"   {name}" for name in pages if name != "index")
    (src / "index.rst").write_text(f"Index\n=====\n\n.. toctree::\n\n{toc}\n")
    for name, text in pages.items():
        (src / f"{name}.rst").parent.mkdir(parents=True, exist_ok=True)
        (src / f"{name}.rst").write_text(text)
    warnings = io.StringIO()
    with patch_docutils(str(src)), docutils_namespace():  # as sphinx-build: one build's roles
        Sphinx(str(src), str(src), str(tmp_path / builder), str(tmp_path / "doctrees"),
               builder, status=None, warning=warnings, freshenv=True).build()
    return tmp_path / builder, warnings.getvalue()


PAGE_RST = "Explorer\n========\n\n.. qkov-explorer::\n"


def test_directive_markup(tmp_path):
    out, warnings = sphinx_build(tmp_path, "html", {"explorer": PAGE_RST,
                                                    "plain": "Plain\n=====\n\nText.\n"})
    assert not warnings, warnings
    page = (out / "explorer.html").read_text()
    data = qkov_explorer.grid(N_MAX)
    shipped = page.split('<script type="application/json" class="qkx-data">')[1]
    assert json.loads(shipped.split("</script>")[0]) == json.loads(json.dumps(data))
    start = data["start"]
    for name, values, at in (("r", data["ratios"], start["r"]), ("n", data["n"], start["n"])):
        assert (f'class="qkx-{name}" type="range" min="0" max="{len(values) - 1}" step="1" '
                f'value="{at}"') in page
        assert (f'<output class="qkx-{name}-value" for="qkx0-{name}">{values[at]:g}</output>'
                in page), f"slider {name} does not show its value"
        assert f"<span>{values[0]:g}</span><span>{values[-1]:g}</span>" in page, \
            f"slider {name} has no end labels"
    assert 'src="_static/qkov_explorer.js"' in page
    assert (out / "_static" / "qkov_explorer.js").is_file()
    assert "qkov_explorer.js" not in (out / "plain.html").read_text(), \
        "the script is added to a page without the explorer"
    assert "online book" not in page  # the other builders' paragraph


@pytest.mark.parametrize("option, message", [
    ("50", "n-max must exceed paper Fig. 4's n=50 and be at most 5000, got 50"),
    ("5001", "n-max must exceed paper Fig. 4's n=50 and be at most 5000, got 5001"),
    ("many", "invalid option value: (option: \"n-max\"; value: 'many')")])
def test_a_bad_n_max_is_named(tmp_path, option, message):
    out, warnings = sphinx_build(tmp_path, "html", {"bad": f"{PAGE_RST}   :n-max: {option}\n"})
    assert "bad.rst" in warnings and message in warnings, warnings
    assert "data-qkov-explorer" not in (out / "bad.html").read_text()


def test_other_builders_get_a_paragraph_with_the_online_page(tmp_path):
    out, warnings = sphinx_build(tmp_path, "latex", {"book/explorer": PAGE_RST})
    assert not warnings, warnings
    tex = "\n".join(path.read_text() for path in out.glob("*.tex"))
    assert "interactive explorer of these dynamics" in tex
    book_url = yaml.safe_load((REPO / "CITATION.cff").read_text())["url"]
    assert f"{book_url.rstrip('/')}/book/explorer.html" in tex  # CITATION.cff's url
    assert "qkx-data" not in tex


# --- the page in the built book ------------------------------------------------------------

@pytest.fixture(scope="module")
def explorer(site, tmp_path_factory):
    """The explorer page, loaded and drawn once (the tests run in this file's order)."""
    assert (site.root / PAGE).is_file(), f"{PAGE} is not in the book (_toc.yml)"
    site.proxy.requests.clear()
    browser = DevTools(tmp_path_factory.mktemp("profile"), site.proxy.server_address[1])
    try:
        browser.page("Runtime.enable")
        load(browser, site, WIDTHS[-1])
        yield browser
    finally:
        browser.close()


def load(browser: DevTools, site: Site, width: int):
    """Open the page in a window ``width`` px wide and wait until the explorer has drawn."""
    browser.page("Emulation.setDeviceMetricsOverride", width=width, height=900,
                 deviceScaleFactor=1, mobile=False)
    browser.page("Page.navigate", url=site.url + PAGE)
    browser.wait_for(f"document.readyState === 'complete' && !!{PANEL} && !!{PANEL}.qkovShown",
                     "the explorer was not drawn")


def drawn(browser: DevTools) -> dict:
    """What the page shows: the sliders' values, the paths by kind, the labels and lines."""
    return browser.evaluate(f"""(() => {{
      const p = {PANEL}, all = sel => [...p.querySelectorAll(sel)];
      const paths = cls => all(`.${{cls}}`).filter(e => e.tagName === 'path')
        .map(e => e.closest('[data-plot]').dataset.plot + ' ' + e.getAttribute('d'));
      return {{shown: p.qkovShown, r: p.querySelector('.qkx-r-value').textContent,
        n: p.querySelector('.qkx-n-value').textContent,
        curves: paths('qkx-curve'), references: paths('qkx-reference'), traces: paths('qkx-trace'),
        labels: all('.qkx-alpha-label').map(e => e.textContent),
        targets: all('[data-plot="loss"] .qkx-target').length,
        ends: all('[data-plot="alpha"] circle').length,
        text: p.querySelector('.qkx-values').textContent}}; }})()""")


def test_opens_with_two_ratios_and_the_librarys_alpha_at_the_target(explorer):
    p = Parameters()
    faster = min(r for r in p.ratios if r > 1)
    page = drawn(explorer)
    assert page["shown"]["r"] == faster and page["shown"]["n"] == p.n, page["shown"]
    assert page["r"] == f"{faster:g}" and page["n"] == f"{p.n:g}", page
    assert len(page["curves"]) == 4 and len(page["references"]) == 4, page
    assert not set(page["curves"]) & set(page["references"]), "the dashed curve lies under"
    assert page["targets"] == 1 and page["ends"] == 2, page
    sharper, matched = library_run(faster, p.n).alpha[-1], library_run(1.0, p.n).alpha[-1]
    assert sharper > matched + 0.1  # the point the page opens on
    assert page["labels"] == [f"α = {sharper:.3g}", f"α = {matched:.3g} at r = 1"], page["labels"]
    alpha0 = p.m / (p.m + p.n)
    assert page["text"].startswith(f"From α(0) = {alpha0:.3g}, at the target loss "), page["text"]
    assert f": r = {faster:g}, n = {p.n:g} reaches α = {sharper:.3g} (at τ = " in page["text"]


def test_keyboard_moves_the_ratio_and_leaves_a_trace(explorer):
    before = drawn(explorer)
    explorer.evaluate(f"{PANEL}.querySelector('.qkx-r').focus()")
    for kind in ("keyDown", "keyUp"):
        explorer.page("Input.dispatchKeyEvent", type=kind, key="ArrowRight", code="ArrowRight",
                      windowsVirtualKeyCode=39)
    after = drawn(explorer)
    data = qkov_explorer.grid(N_MAX)
    next_ratio = data["ratios"][data["ratios"].index(before["shown"]["r"]) + 1]
    assert after["shown"]["r"] == next_ratio and after["r"] == f"{next_ratio:g}", after
    def fixed(paths):  # the plots whose axes stay (the mu plots' heights follow the curves)
        return [path for path in paths if path.split()[0] in ("loss", "alpha")]

    assert fixed(after["references"]) == fixed(before["references"]), "the r = 1 curve moved"
    assert fixed(after["traces"]) == fixed(before["curves"]), \
        "the earlier curve did not stay as a trace"
    assert len(after["traces"]) == 4, after["traces"]
    assert not set(after["curves"]) & set(before["curves"]), "the curves were not redrawn"
    assert after["text"] != before["text"] and after["labels"] != before["labels"]


@pytest.mark.parametrize("width", WIDTHS)
def test_layout_fits_and_text_is_readable(explorer, site, width):
    """As a reader opening the page in a window that wide sees it."""
    load(explorer, site, width)
    layout = explorer.evaluate(f"""new Promise(done => requestAnimationFrame(() => {{
      const p = {PANEL}, box = p.getBoundingClientRect();
      const svgs = [...p.querySelectorAll('.qkx-plot svg')].map(svg => {{
        const b = svg.getBoundingClientRect(), scale = b.width / svg.viewBox.baseVal.width;
        const sizes = [...svg.querySelectorAll('text')].map(
          t => parseFloat(getComputedStyle(t).fontSize) * scale);
        return {{left: b.left, right: b.right, width: b.width, text: Math.min(...sizes)}}; }});
      const html = [...p.querySelectorAll('label, output, .qkx-ends, .qkx-legend')].map(
        e => parseFloat(getComputedStyle(e).fontSize));
      done({{panel: [box.left, box.right], svgs, html: Math.min(...html),
             scroll: document.documentElement.scrollWidth, inner: innerWidth}}); }}))""")
    left, right = layout["panel"]
    assert layout["scroll"] <= layout["inner"], f"{width} px: the page scrolls sideways {layout}"
    assert len(layout["svgs"]) == 4
    for svg in layout["svgs"]:
        assert left - 0.5 <= svg["left"] and svg["right"] <= right + 0.5, \
            f"{width} px: a plot overflows the panel ({left:.0f}..{right:.0f}): {svg}"
        assert svg["text"] >= MIN_TEXT_PX, \
            f"{width} px: plot text drawn at {svg['text']:.1f} px (panel {right - left:.0f} px)"
    assert layout["html"] >= MIN_TEXT_PX, f"{width} px: control text at {layout['html']} px"


def test_nothing_else_was_requested_and_nothing_failed(explorer, site):
    """Last in the file: everything above happened without a request to another host and
    without an exception in the page."""
    elsewhere = [r for r in site.proxy.requests if _host(r) not in CHROMIUM_SERVICES]
    assert not elsewhere, f"{PAGE} requested from other hosts: {elsewhere}"
    # (Every page of the book also throws "THEBE_JS_URL has already been declared" from two
    # inline scripts of the theme; only the explorer's script is this file's business.)
    thrown = [e["params"]["exceptionDetails"] for e in explorer.events
              if e.get("method") == "Runtime.exceptionThrown"
              and "qkov_explorer" in e["params"]["exceptionDetails"].get("url", "")]
    assert not thrown, json.dumps(thrown, indent=1)[:3000]
    assert ("/_static/qkov_explorer.js", 200) in site.book.served, \
        "the explorer's script was not served"  # later loads may be 304s from the cache
