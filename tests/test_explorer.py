"""The explorer of the reduced dynamics (``book/explorer.md``, made by the ``{qkov-explorer}``
directive of ``book/_ext/qkov_explorer.py``, drawn by ``qkov_explorer.js``) in the built book.

Debian's headless Chromium opens the page from the local server of ``test_browser`` (every
other host goes to its recording proxy) and is driven over the DevTools protocol through
``--remote-debugging-pipe`` (JSON messages ended by a NUL byte on file descriptors 3 and 4),
so the tests can press keys, fire input events and read what the page computed.

Checked: the slider moves with the keyboard and redraws the curves; the trajectory the page
draws matches the library's solver (``qkov.theory.reduced.integrate_until``, scipy's DOP853 at
rtol 1e-11) at two ratios of paper Fig. 4 and at the corners of the sliders' ranges, to a
relative ``RTOL``; the controls are labelled; at a phone and a desktop width the plots fit the
panel, nothing scrolls sideways and all text is at least 12 px; nothing is requested from
another host and the page's script throws nothing. Where node is installed, the same script's
integrator is also checked without a browser or a book build.
"""

from __future__ import annotations

import fcntl
import json
import math
import os
import select
import shutil
import subprocess
import tempfile
import time

import pytest
from test_browser import CHROMIUM_SERVICES, QUIET_FLAGS, Site, _host, chromium

from conftest import REPO
from qkov.figures.paper_fig4 import Parameters
from qkov.theory.reduced import Setting, closed_form_alpha, closed_form_mu_qk, integrate_until

PAGE = "book/explorer.html"
SCRIPT = REPO / "book" / "_ext" / "qkov_explorer.js"
# The page's RK4 (step doubling, local error 1e-10 relative) against DOP853 at rtol 1e-11:
# they agree to about 1e-10 where this was written; 1e-7 leaves room and still catches a
# wrong term of the ODE or a wrong constant.
RTOL = 1e-7
MIN_TEXT_PX = 12
WIDTHS = (420, 1280)  # a phone and a desktop window
TIMEOUT_S = 60

PANEL = "document.querySelector('[data-qkov-explorer]')"



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
    browser.wait_for(f"document.readyState === 'complete' && !!{PANEL} "
                     f"&& !!{PANEL}.qkovTrajectory", "the explorer was not drawn")


def drawn(browser: DevTools) -> dict:
    """The sliders, the curves' SVG paths and the values line, as the page shows them."""
    return browser.evaluate(f"""(() => {{
      const p = {PANEL};
      const path = (key, cls) => {{
        const el = p.querySelector(`[data-plot="${{key}}"] .${{cls}}`);
        return el ? el.getAttribute('d') : null; }};
      const keys = ['mu_ov', 'mu_qk', 'loss', 'alpha'];
      return {{r: +p.querySelector('.qkx-r').value, n: +p.querySelector('.qkx-n').value,
        curves: Object.fromEntries(keys.map(k => [k, path(k, 'qkx-curve')])),
        references: Object.fromEntries(keys.map(k => [k, path(k, 'qkx-reference')])),
        text: p.querySelector('.qkx-values').textContent}}; }})()""")


def set_ratio(browser: DevTools, r: float):
    """Set the r slider as a script would and fire its input event."""
    browser.evaluate(f"""(() => {{ const s = {PANEL}.querySelector('.qkx-r');
      s.value = {math.log10(r)!r}; s.dispatchEvent(new Event('input', {{bubbles: true}})); }})()""")


def page_states(browser: DevTools, taus, params: dict | None = None) -> dict:
    """The page's trajectory (the drawn one, or one solved for ``params``): its time at the
    target loss and its state at normalised times ``taus``."""
    trajectory = (f"qkovExplorer.solve({json.dumps(params)})" if params
                  else f"{PANEL}.qkovTrajectory")
    return browser.evaluate(f"""(() => {{ const tr = {trajectory};
      return {{tauTarget: tr.tauTarget,
               states: {json.dumps(list(taus))}.map(t => qkovExplorer.stateAt(tr, t))}}; }})()""")


def check_against_library(page: dict, reference, taus, what: str):
    problems = []
    tau_end = reference.tau[-1]
    if not math.isclose(page["tauTarget"], tau_end, rel_tol=RTOL):
        problems.append(f"{what}: tau at the target loss {page['tauTarget']!r}, "
                        f"library {tau_end!r}")
    expected = reference.sample(list(taus))
    for i, state in enumerate(page["states"]):
        for key, name in (("muOV", "mu_ov"), ("muQK", "mu_qk"), ("alpha", "alpha"),
                          ("loss", "loss")):
            if not math.isclose(state[key], expected[name][i], rel_tol=RTOL):
                problems.append(f"{what}, tau={taus[i]:.6g}: {name} {state[key]!r}, "
                                f"library {expected[name][i]!r}")
    assert not problems, "\n".join(problems)


def sample_times(reference) -> list[float]:
    """Two times inside the run: the take-off and the late phase, in log time."""
    end = reference.tau[-1]
    return [end ** 0.5, end ** 0.8]


# --- the tests ------------------------------------------------------------------------------

def test_keyboard_moves_the_ratio_and_redraws(explorer):
    before = drawn(explorer)
    assert before["r"] == 0 and all(before["curves"].values()), before
    explorer.evaluate(f"{PANEL}.querySelector('.qkx-r').focus()")
    for kind in ("keyDown", "keyUp"):
        explorer.page("Input.dispatchKeyEvent", type=kind, key="ArrowRight", code="ArrowRight",
                      windowsVirtualKeyCode=39)
    after = drawn(explorer)
    assert after["r"] > before["r"], "ArrowRight did not move the r slider"
    for key in before["curves"]:
        assert after["curves"][key] != before["curves"][key], f"the {key} curve was not redrawn"
    assert after["text"] != before["text"], "the values line did not change"
    # the dashed reference keeps the starting curve (compared where the axes are fixed: alpha
    # runs from 0 to 1, and a step this small keeps the time axis)
    assert after["references"]["alpha"] == before["curves"]["alpha"], \
        "the dashed reference is not the starting curve"


@pytest.mark.parametrize("index", [1, 3])  # two of paper Fig. 4's ratios (0.1 and 10 there)
def test_drawn_trajectory_matches_the_library(explorer, index):
    p = Parameters()
    r = p.ratios[index]
    set_ratio(explorer, r)
    shown = drawn(explorer)
    assert math.isclose(10 ** shown["r"], r, rel_tol=1e-12), shown["r"]
    reference = integrate_until(p.setting, p.eta_ov, r * p.eta_ov, p.target_loss)
    taus = sample_times(reference)
    states = page_states(explorer, taus)
    check_against_library(states, reference, taus, f"r={r:g}")
    # And against the closed form (the conserved relation of paper Fig. 4's flow): the
    # page's mu_OV at each time gives its mu_QK and alpha.
    for tau, state in zip(taus, states["states"]):
        assert math.isclose(closed_form_mu_qk(state["muOV"], p.setting, r), state["muQK"],
                            rel_tol=RTOL, abs_tol=1e-12), (r, tau, state)
        assert math.isclose(closed_form_alpha(state["muOV"], p.setting, r), state["alpha"],
                            rel_tol=RTOL), (r, tau, state)
    final_alpha = float(reference.alpha[-1])
    assert f"α = {float(f'{final_alpha:.4g}'):g}," in shown["text"], shown["text"]
    assert f"r = {r:g};" in shown["text"], shown["text"]


def test_corners_of_the_sliders_match_the_library(explorer):
    """The page's integrator at the ends of both sliders (sharpest take-off at the smallest
    initial attention and the largest r)."""
    p = Parameters()
    bounds = explorer.evaluate(f"""(() => {{ const p = {PANEL};
      return [+p.querySelector('.qkx-n').min, +p.querySelector('.qkx-n').max]; }})()""")
    for r in (min(p.ratios), max(p.ratios)):
        for n in bounds:
            setting = Setting(m=p.m, n=n, b=p.b, M=p.M)
            reference = integrate_until(setting, p.eta_ov, r * p.eta_ov, p.target_loss)
            taus = sample_times(reference)
            params = {"m": p.m, "n": n, "b": p.b, "M": p.M, "etaOV": p.eta_ov,
                      "etaQK": r * p.eta_ov, "targetLoss": p.target_loss}
            check_against_library(page_states(explorer, taus, params), reference, taus,
                                  f"r={r:g}, n={n:g}")


def test_integrator_under_node_matches_the_library():
    """The same script under node, where it is installed: the integrator checked in a second,
    without a book build (the browser tests above check what the page draws)."""
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed; the browser tests check the integrator")
    p = Parameters()
    cases = [(r, n) for r in (min(p.ratios), 1.0, max(p.ratios)) for n in (1.0, p.n, 10 * p.n)]
    references = {case: integrate_until(Setting(m=p.m, n=case[1], b=p.b, M=p.M), p.eta_ov,
                                        case[0] * p.eta_ov, p.target_loss) for case in cases}
    runs = [{"params": {"m": p.m, "n": n, "b": p.b, "M": p.M, "etaOV": p.eta_ov,
                        "etaQK": r * p.eta_ov, "targetLoss": p.target_loss},
             "taus": sample_times(references[r, n])} for r, n in cases]
    script = (f"const q = require({json.dumps(str(SCRIPT))});"
              f"const runs = {json.dumps(runs)};"
              "console.log(JSON.stringify(runs.map(run => { const tr = q.solve(run.params);"
              "  return {tauTarget: tr.tauTarget,"
              "          states: run.taus.map(t => q.stateAt(tr, t))}; })));")
    result = subprocess.run([node, "-e", script], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    for (r, n), run, page in zip(cases, runs, json.loads(result.stdout)):
        check_against_library(page, references[r, n], run["taus"], f"node, r={r:g}, n={n:g}")


def test_controls_are_labelled_and_span_fig4(explorer, site):
    load(explorer, site, WIDTHS[-1])  # the sliders where a reader finds them
    controls = explorer.evaluate(f"""[...{PANEL}.querySelectorAll('input')].map(i => ({{
      id: i.id, cls: i.className, labels: [...i.labels].map(l => l.textContent.trim()),
      valuetext: i.getAttribute('aria-valuetext'), min: +i.min, max: +i.max, value: +i.value}}))""")
    assert len(controls) == 2, controls
    for control in controls:
        assert control["labels"] and all(control["labels"]), f"unlabelled input {control}"
        assert control["valuetext"], f"input {control['id']} has no aria-valuetext"
    ratio, tokens = sorted(controls, key=lambda c: c["cls"] != "qkx-r")
    p = Parameters()
    assert math.isclose(10 ** ratio["min"], min(p.ratios)), ratio
    assert math.isclose(10 ** ratio["max"], max(p.ratios)), ratio
    assert tokens["value"] == p.n and tokens["min"] == 1 and tokens["max"] > p.n, tokens


@pytest.mark.parametrize("width", WIDTHS)
def test_layout_fits_and_text_is_readable(explorer, site, width):
    """As a reader opening the page in a window that wide sees it."""
    load(explorer, site, width)
    layout = explorer.evaluate(f"""new Promise(done => requestAnimationFrame(() => {{
      const p = {PANEL}, box = p.getBoundingClientRect();
      const svgs = [...p.querySelectorAll('svg')].map(svg => {{
        const b = svg.getBoundingClientRect(), scale = b.width / svg.viewBox.baseVal.width;
        const sizes = [...svg.querySelectorAll('text')].map(
          t => parseFloat(getComputedStyle(t).fontSize) * scale);
        return {{left: b.left, right: b.right, width: b.width, text: Math.min(...sizes)}}; }});
      const html = [...p.querySelectorAll('label, output')].map(
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
