"""The built book in Debian's headless Chromium (Selenium, Debian's chromedriver: nothing
downloads a browser): every page from a local server at 1280 and 420 px, every other host sent
to a proxy that records and refuses, full-page screenshots in ``_build/screenshots/``."""

from __future__ import annotations

import functools
import io
import re
import shutil
import sys
import threading
from html.parser import HTMLParser
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

import numpy as np
import pytest
from PIL import Image
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from conftest import REPO
from qkov.figures.paper_fig4 import Parameters
from qkov.plotting import BOOK_WIDTH_PX
from qkov.theory.reduced import Setting, integrate_until

sys.path.insert(0, str(REPO / "book" / "_ext"))
import qkov_explorer  # noqa: E402  (the book's extension, not a package)

SCREENSHOTS = REPO / "_build" / "screenshots"
WIDTHS = (1280, 420)  # a desktop window and a phone
PAGE_JS = Path(__file__).with_name("browser_page.js").read_text()
# Chromium calls these itself (sign-in, updates, network time), whatever the page.
CHROMIUM_SERVICES = {"accounts.google.com", "update.googleapis.com", "clients2.google.com",
                     "clientservices.googleapis.com", "optimizationguide-pa.googleapis.com",
                     "safebrowsing.googleapis.com", "content-autofill.googleapis.com"}
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--disable-quic",
         "--disable-component-update", "--disable-domain-reliability", "--no-pings",
         "--disable-features=NetworkTimeServiceQuerying,OptimizationHints,MediaRouter,"
         "AutofillServerCommunication,Translate")


def installed(program: str) -> str:
    return shutil.which(program) or pytest.fail(f"no {program}: `make browser` installs it")


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


class _Proxy(_Quiet):  # every request that reaches it was meant for another host
    def refuse(self):  # "CONNECT host:443" or "GET http://host/..."
        host = urlsplit(self.path).hostname if "://" in self.path else self.path.rsplit(":", 1)[0]
        if host not in CHROMIUM_SERVICES:
            self.server.requests.append(f"{self.command} {self.path}")
        self.send_error(403)

    do_GET = do_POST = do_HEAD = do_CONNECT = do_PUT = do_OPTIONS = refuse


def _serve(handler, **attributes) -> ThreadingHTTPServer:
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.handle_error = lambda *args: None  # a browser closing a connection early
    vars(server).update(attributes)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def open_page(browser, page: str, width: int):  # loaded, its math typeset
    window(browser, width)
    browser.get(f"http://127.0.0.1:{browser.book.server_port}/{page}")
    browser.execute_async_script("Promise.resolve(window.MathJax?.startup?.promise)"
                                 ".then(() => setTimeout(arguments[0], 100))")


def window(browser, width: int, height: int = 900):
    browser.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {
        "width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})


@pytest.fixture(scope="module")
def browser(book_html):
    """Chromium, with the book's server (``browser.book``) and the proxy."""
    book, proxy = _serve(functools.partial(_Quiet, directory=book_html)), _serve(_Proxy, requests=[])
    options = webdriver.ChromeOptions()
    options.binary_location = installed("chromium")
    for flag in (*FLAGS, f"--proxy-server=127.0.0.1:{proxy.server_port}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(options, Service(installed("chromedriver")))
    driver.book, driver.proxy = book, proxy
    yield driver
    driver.quit()


def pages(root: Path) -> list[str]:  # less the root index.html, which only redirects
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*.html")
                  if not p.relative_to(root).as_posix().startswith("_")
                  and not p.read_text().startswith('<meta http-equiv="Refresh"'))


def visit(browser, page: str, shots: Path | None = None) -> list[str]:
    """What fails on ``page`` at each width; with ``shots``, full-page screenshots (the window
    made as tall as the page: a capture beyond it shifted the layout)."""
    found = []
    for width in WIDTHS:
        browser.proxy.requests.clear()
        open_page(browser, page, width)
        result, at = browser.execute_async_script(PAGE_JS), f"{page} at {width} px"
        found += [f"{at} requested {r}" for r in browser.proxy.requests]
        found += [f"{at}: {problem}" for problem in result["render"] + result["layout"]]
        if shots:
            first_screen = browser.get_screenshot_as_png()
            window(browser, width, browser.execute_script("return document.documentElement.scrollHeight"))
            path = shots / f"{page.removesuffix('.html').replace('/', '-')}-{width}px.png"
            browser.save_screenshot(str(path))
            moved = differing_share(first_screen, path.read_bytes())
            found += [f"{at}: the saved capture's top differs from the window in {moved:.0%} "
                      "of its pixels"] * (moved > 0.03)
    return found


def differing_share(window_png: bytes, full_png: bytes) -> float:
    """The share of the window's pixels that differ in the top of the full-page capture (a
    capture that shifts the layout moves most of them; MathJax's rendering moves a few)."""
    seen, full = (np.asarray(Image.open(io.BytesIO(png)).convert("L"), dtype=int)
                  for png in (window_png, full_png))
    height = min(len(seen), len(full))
    return float((np.abs(seen[:height] - full[:height]) > 16).mean())


def test_every_page_at_1280_and_420_px(browser, book_html):
    """Its links resolve and what it loads is there (static_problems); no request leaves the
    machine; images load, math is typeset, SVG text is legible; nothing too wide or cut off."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    problems = static_problems(book_html) + [
        problem for page in pages(book_html) if page not in ("genindex.html", "search.html")
        for problem in visit(browser, page, SCREENSHOTS)]  # (Sphinx's pages: no content)
    assert not problems, "\n".join(problems)


class _Links(HTMLParser):
    def __init__(self, path: Path):
        super().__init__()
        self.ids, self.hrefs, self.loads = set(), [], []
        self.feed(path.read_text(errors="replace"))

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.ids.add(attrs.get("id"))
        if tag == "a" and attrs.get("href"):
            self.hrefs.append(attrs["href"])
        if tag == "link":
            self.loads.append(attrs.get("href"))
        elif tag in ("script", "img", "iframe", "source", "audio", "video", "embed"):
            self.loads.append(attrs.get("src"))


REMOTE = re.compile(r"^(?:https?:)?//", re.I)


def static_problems(root: Path) -> list[str]:
    """Every internal and download link resolves (file and anchor) and everything a page loads
    from the book is there (a load from another host: the proxy's check, on every page)."""
    parse, problems = functools.cache(_Links), []
    for page in pages(root):
        path = root / page
        for href in parse(path).hrefs:
            target, _, anchor = href.partition("#")
            if REMOTE.match(href):
                continue
            file = (path.parent / unquote(target.split("?")[0])).resolve() if target else path
            if not file.is_file() or not file.stat().st_size:
                problems.append(f"{page}: link {href} points to a missing or empty file")
            elif anchor and file.suffix == ".html" and unquote(anchor) not in parse(file).ids:
                problems.append(f"{page}: link {href} points to a missing anchor")
        for url in filter(None, parse(path).loads):
            if not REMOTE.match(url) and not (path.parent / unquote(re.split("[?#]", url)[0])).exists():
                problems.append(f"{page} loads {url}, which is missing")
    return problems


def test_planted_faults_are_named(book_html, browser, tmp_path):
    """In a copy of the book: a removed data file, a broken cross-reference, a CDN script, a
    too-wide equation and an inline formula in a box that hides what overflows."""
    broken = tmp_path / "html"
    shutil.copytree(book_html, broken)
    fig4, intro, theory = (broken / "book" / f"{name}.html"
                           for name in ("paper-fig4", "intro", "theory"))
    href = re.search(r'href="\.\./(_downloads/[^"]+/data\.csv)"', fig4.read_text()).group(1)
    (broken / href).unlink()
    intro.write_text(intro.read_text().replace("#paper-fig4", "#no-such-figure"))
    cdn = "https://cdn.jsdelivr.net/npm/mathjax@3/es5/tex-svg.js"
    wide = " + ".join(f"x_{{{i}}}^{{{i}}}" for i in range(60))
    inline = " + ".join(f"y_{{{i}}}" for i in range(40))
    theory.write_text(theory.read_text().replace("</article>", (
        f'<script src="{cdn}"></script><div class="math notranslate nohighlight">\\[{wide}\\]'
        f'</div><p><span class="math notranslate nohighlight">\\({inline}\\)</span></p><style>'
        "span.math { overflow: hidden !important; max-width: 100% !important; }</style>"
        "</article>"), 1))  # (the theme's own rule for inline math, which qkov.css overrides)
    problems = static_problems(broken)
    book, browser.book = browser.book, _serve(functools.partial(_Quiet, directory=broken))
    try:  # (another port: nothing cached from the book)
        problems += visit(browser, "book/theory.html")
    finally:
        browser.book = book
    for page, expected in [("paper-fig4", ": link ../_downloads/"),
                           ("intro", ": link paper-fig4.html#no-such-figure"),
                           ("theory", " at 1280 px requested CONNECT cdn.jsdelivr.net"),
                           ("theory", " at 1280 px: formula x_{0}^{0} + x_{1}^{1}"),
                           ("theory", " at 420 px: span.math.notranslate.nohighlight [formula y_{0}"),
                           ("theory", " at 420 px: inline formula y_{0} + y_{1}")]:
        assert any(p.startswith(f"book/{page}.html{expected}") for p in problems), \
            f"{page}: {expected!r} not in\n" + "\n".join(problems)


def library_run(r: float, n: float):
    p = Parameters()
    return integrate_until(Setting(m=p.m, n=n, b=p.b, M=p.M), p.eta_ov, r * p.eta_ov,
                           p.target_loss)


@pytest.mark.parametrize("r, n", [(10, 50), (1, 50), (0.01, 500), (100, 1), (0.2, 5)])
def test_the_explorer_ships_the_librarys_flow(r, n):
    """Where the loss reaches the target (to the 4 digits shipped), and every curve as the
    page draws it (straight lines between the shipped points) within 0.3 % of each plot's
    range of the library's flow at 2,000 times."""
    data = qkov_explorer.grid()
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


SHOWN = """const p = document.querySelector('[data-qkov-explorer]'), all = s => [...p.querySelectorAll(s)];
  const paths = cls => all('path.' + cls).map(e => e.closest('svg').dataset.plot + e.getAttribute('d'));
  return {labels: all('label').map(e => e.textContent), curves: paths('qkx-curve'), references:
    paths('qkx-reference'), traces: paths('qkx-trace'), alphas: all('.qkx-label').map(e => e.textContent),
    text: p.querySelector('.qkx-values').textContent, ends: all('.qkx-ends span').map(e => e.textContent)};"""


def test_the_explorer_shows_its_point(browser, book_html):
    """It opens with two ratios (the figure's first faster one and r = 1) and the library's
    alpha at the target loss; moving the ratio slider with the keyboard keeps the earlier
    curve as a trace. The PDF names the online page instead."""
    [page] = [p for p in pages(book_html) if "data-qkov-explorer" in (book_html / p).read_text()]
    assert page == "book/paper-fig4.html", "the explorer is not with Fig. 4"
    p, data = Parameters(), qkov_explorer.grid()
    faster = min(r for r in p.ratios if r > 1)
    open_page(browser, page, 1280)
    before = browser.execute_script(SHOWN)
    assert before["labels"] == [f"Learning-rate ratio r = ηQK / ηOV: {faster:g}",
                                f"Irrelevant tokens n: {p.n:g}"], before["labels"]
    assert before["ends"] == [f"{data[k][i]:g}" for k in ("ratios", "n") for i in (0, -1)]
    assert len(before["curves"]) == 4 and len(before["references"]) == 4 and not before["traces"]
    assert not set(before["curves"]) & set(before["references"]), "the dashed curve lies under"
    sharper, matched = library_run(faster, p.n).alpha[-1], library_run(1.0, p.n).alpha[-1]
    assert sharper > matched + 0.1  # the point the page opens on
    assert before["alphas"] == [f"α = {matched:.3g} at r = 1", f"α = {sharper:.3g}"]
    assert before["text"].startswith(f"From α(0) = {p.m / (p.m + p.n):.3g}, at the target loss ")

    browser.find_element(By.CSS_SELECTOR, ".qkx-r").send_keys(Keys.ARROW_RIGHT)
    after = browser.execute_script(SHOWN)
    next_ratio = data["ratios"][data["ratios"].index(faster) + 1]
    assert after["labels"][0].endswith(f": {next_ratio:g}"), after["labels"]
    fixed = [path for path in before["curves"] if path.startswith(("loss", "alpha"))]
    assert set(fixed) <= set(after["traces"]), "the earlier curve did not stay as a trace"
    assert after["references"][2:] == before["references"][2:], "the r = 1 curve moved"
    assert not set(after["curves"]) & set(before["curves"]) and after["alphas"] != before["alphas"]

    tex = "".join(path.read_text() for path in book_html.parent.glob("latex/*.tex"))
    if tex:  # the book was built with TeX
        assert f"{qkov_explorer.citation(REPO)['url'].rstrip('/')}/{page}" in tex and "qkx-data" not in tex


CAPTIONS = """return [...document.querySelectorAll('article figure figcaption')].map(c => {
  const text = c.cloneNode(true), p = c.querySelector('p') || c;
  text.querySelectorAll('mjx-container').forEach(m => m.remove());
  return [c.closest('figure').id, text.textContent.replace(/\\s+/g, ' '),
          c.getBoundingClientRect().height / parseFloat(getComputedStyle(p).lineHeight)]; });"""
PLAIN_MATH = re.compile(r"[\u0391-\u03c9]|\w_\w|\^|sqrt\(")  # Greek, x_y, x^y outside MathJax


def test_the_reader_sees_the_claim_first_and_captions_read_as_the_body(browser, book_html):
    """The intro's first screen says the claim before its first picture; every caption is at
    most five lines at 1280 px, with its math typeset (no Greek letter, subscript, power or
    square root in plain text)."""
    open_page(browser, "book/intro.html", 1280)
    before, top = browser.execute_script("""const img = document.querySelector('article img');
      const range = document.createRange();
      range.setStartAfter(document.querySelector('article h1'));
      range.setEndBefore(img.closest('figure') || img);
      return [range.toString(), img.getBoundingClientRect().top];""")
    assert len(before.split(". ")) >= 2 and re.search(r"query-key|QK", before), before
    assert "attention" in before and top < 900, f"the claim ends {top:.0f} px down: {before!r}"
    problems = []
    for page in pages(book_html):
        if "<figcaption" in (book_html / page).read_text():
            open_page(browser, page, 1280)
            for label, text, lines in browser.execute_script(CAPTIONS):
                problems += [f"{page}#{label}: {round(lines)} lines"] * (round(lines) > 5)
                problems += [f"{page}#{label}: plain-text math in ...{text[m.start() - 30:][:60]}"
                             for m in PLAIN_MATH.finditer(text)]
    assert not problems, "\n".join(problems)


def test_a_figure_zooms_on_a_phone(browser):
    """At 420 px, tapping a figure opens it at the desktop column's width (where its text is at
    least 9 pt), in a view that scrolls sideways and closes again; on a desktop it links the SVG."""
    open_page(browser, "book/paper-fig2.html", 420)
    browser.find_element(By.CSS_SELECTOR, "a.qkov-full-size").click()
    shown = browser.execute_script("""const d = document.querySelector('dialog.qkov-zoom[open]');
      return d && [d.querySelector('img').getBoundingClientRect().width, d.scrollWidth > d.clientWidth];""")
    assert shown and shown[0] >= BOOK_WIDTH_PX and shown[1], shown
    browser.find_element(By.CSS_SELECTOR, "dialog.qkov-zoom button").click()
    assert not browser.execute_script("return document.querySelector('dialog.qkov-zoom')")
    open_page(browser, "book/paper-fig2.html", 1280)
    assert browser.find_element(By.CSS_SELECTOR, "a.qkov-full-size").get_attribute("href").endswith(".svg")
