"""The built book as a reader's browser sees it: Debian's headless Chromium (nothing
downloads a browser) opens every page from a local HTTP server that the tests start and
stop, with every other host sent to a recording proxy that answers nothing.

Checked on every page: no request leaves localhost, every image the page shows was served,
math is typeset (no raw ``\\(``, ``\\[`` or ``$$`` left), and, from the HTML, every internal
link and download link resolves, everything a page loads is in the book and nothing is
loaded from another host. A screenshot of every page, whole, at 1280 and 420 px is saved under
``_build/screenshots/``. The negative tests break a copy of the built book (a removed data
file, a broken cross-reference, a CDN script) and check that the failure names the page.
"""

from __future__ import annotations

import functools
import html
import io
import json
import posixpath
import re
import shutil
import subprocess
import threading
import time
from html.parser import HTMLParser
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

from conftest import REPO

SCREENSHOTS = REPO / "_build" / "screenshots"
SKIPPED = ("genindex.html", "search.html")  # Sphinx's index and search pages: no content
# Chromium itself calls these (sign-in, component updates, network time) whatever the page,
# even with background networking disabled; no page of the book names them.
CHROMIUM_SERVICES = {"accounts.google.com", "update.googleapis.com", "clients2.google.com",
                     "clientservices.googleapis.com", "optimizationguide-pa.googleapis.com",
                     "safebrowsing.googleapis.com", "content-autofill.googleapis.com"}


def _host(request: str) -> str:
    """The host of a request line the proxy saw: "CONNECT h:443" or "GET http://h/..."."""
    target = request.split(" ", 1)[1]
    return (urlsplit(target).hostname if "://" in target else target.rsplit(":", 1)[0]) or ""


# Headless, and as few calls home as Chromium allows (test_explorer.py starts it so too).
QUIET_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
               "--disable-background-networking", "--disable-component-update", "--disable-sync",
               "--disable-extensions", "--disable-quic", "--disable-domain-reliability",
               "--no-pings", "--disable-breakpad", "--disable-client-side-phishing-detection",
               "--disable-default-apps",
               "--disable-features=NetworkTimeServiceQuerying,OptimizationHints,MediaRouter,"
               "AutofillServerCommunication,SigninInterceptBubble,ChromeWhatsNewUI,Translate")


def chromium() -> str:
    path = shutil.which("chromium")
    if path is None:
        pytest.fail("Debian's chromium is needed for the browser checks: "
                    "apt-get install chromium (`make test` installs it when run as root)")
    return path


# --- a local server for the book, and a proxy that records what went elsewhere -----------

class _BookHandler(SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def send_response(self, code, message=None):
        self.server.served.append((unquote(urlsplit(self.path).path), code))
        super().send_response(code, message)


class _Recorder(SimpleHTTPRequestHandler):
    """Every request that reaches it was meant for another host: record it, refuse it."""

    def log_message(self, *args):
        pass

    def _refuse(self):
        self.server.requests.append(f"{self.command} {self.path}")
        self.send_error(403, "the book must not load anything from another host")

    do_GET = do_POST = do_HEAD = do_CONNECT = do_PUT = do_OPTIONS = _refuse


class _Server(ThreadingHTTPServer):
    def handle_error(self, request, client_address):
        pass  # a browser closing a connection early is not the page's fault


def _serve(server):
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    return thread


class Site:
    """The built book served on 127.0.0.1 and the recording proxy, started and stopped."""

    def __init__(self, root: Path, handler=None):
        self.root = root
        self.book = _Server(("127.0.0.1", 0),
                            functools.partial(handler or _BookHandler, directory=str(root)))
        self.book.served = []
        self.proxy = _Server(("127.0.0.1", 0), _Recorder)
        self.proxy.requests = []
        _serve(self.book), _serve(self.proxy)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.book.server_address[1]}/"

    def close(self):
        for server in (self.book, self.proxy):
            server.shutdown()
            server.server_close()

    def open(self, page: str, profile: Path, *extra: str) -> str:
        """The page's DOM after its scripts ran; what it requested is in served/requests."""
        self.book.served.clear()
        self.proxy.requests.clear()
        result = subprocess.run(
            [chromium(), *QUIET_FLAGS,
             f"--proxy-server=http://127.0.0.1:{self.proxy.server_address[1]}",
             "--virtual-time-budget=15000", f"--user-data-dir={profile}", *extra,
             self.url + page],
            capture_output=True, text=True, timeout=120)
        assert result.returncode == 0, f"{page}: chromium failed: {result.stderr[-2000:]}"
        return result.stdout


@pytest.fixture(scope="module")
def site(book_html):
    served = Site(book_html)
    yield served
    served.close()


def pages(root: Path) -> list[str]:
    """The book's pages, not counting one that only redirects (the root index.html, whose
    target is a page of its own: opened through it, the target's relative image paths
    would be read against the wrong folder)."""
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*.html")
                  if "_static" not in p.parts and p.name not in SKIPPED
                  and not p.relative_to(root).as_posix().startswith("_")
                  and not p.read_text().startswith('<meta http-equiv="Refresh"'))


# --- what a rendered page must show ---------------------------------------------------------

class _Text(HTMLParser):
    """The text a reader sees, outside code, scripts and typeset math."""

    HIDDEN = {"script", "style", "pre", "code", "mjx-container", "textarea", "title"}

    def __init__(self):
        super().__init__()
        self.depth, self.figures, self.parts, self.images = 0, 0, [], []

    def handle_starttag(self, tag, attrs):
        if tag in self.HIDDEN:
            self.depth += 1
        if tag == "figure":
            self.figures += 1
        if tag == "img":
            self.images.append((dict(attrs).get("src", ""), self.figures > 0))

    def handle_endtag(self, tag):
        if tag in self.HIDDEN and self.depth:
            self.depth -= 1
        if tag == "figure" and self.figures:
            self.figures -= 1

    def handle_data(self, data):
        if not self.depth:
            self.parts.append(data)


def rendered_problems(page: str, dom: str, site: Site) -> list[str]:
    problems = [f"{page} requested {r} from another host" for r in site.proxy.requests
                if _host(r) not in CHROMIUM_SERVICES]
    reader = _Text()
    reader.feed(dom)
    text = "".join(reader.parts)
    for raw in (r"\(", r"\[", "$$"):
        if raw in text:
            at = text.index(raw)
            problems.append(f"{page}: raw TeX {raw!r} left: ...{text[max(at - 60, 0):at + 60]!r}")
    if '<g data-mml-node="merror"' in dom:
        problems.append(f"{page}: MathJax reported a TeX error")
    served = {path: code for path, code in site.book.served}
    base = "/" + page
    for src, in_figure in reader.images:
        if src.startswith("data:"):
            continue
        path = unquote(urlsplit(src).path) if "://" in src else \
            str(Path(base).parent.joinpath(src)).split("?")[0]
        path = posixpath.normpath(path)
        status = served.get(path)
        if status == 200:
            continue
        if status is None and not in_figure and (site.root / path.lstrip("/")).is_file():
            continue  # an icon in a closed menu: the browser did not need it yet
        problems.append(f"{page}: image {src} did not load ({status or 'not requested'})")
    return problems


# --- links and hosts, from the built HTML ---------------------------------------------------

class _Links(HTMLParser):
    def __init__(self):
        super().__init__()
        self.ids, self.hrefs, self.loads = set(), [], []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if attrs.get("id"):
            self.ids.add(attrs["id"])
        if tag == "a" and attrs.get("href"):
            self.hrefs.append(attrs["href"])
        if tag in ("script", "img", "iframe", "source", "audio", "video", "embed") and attrs.get("src"):
            self.loads.append(attrs["src"])
        if tag == "link" and attrs.get("href") and "canonical" not in (attrs.get("rel") or ""):
            self.loads.append(attrs["href"])


REMOTE = re.compile(r"^(?:https?:)?//", re.I)


def link_problems(root: Path) -> list[str]:
    """Every internal link and download link of every page resolves (file and anchor)."""
    parsed = {}

    def parse(path: Path) -> _Links:
        if path not in parsed:
            parser = _Links()
            parser.feed(path.read_text(errors="replace"))
            parsed[path] = parser
        return parsed[path]

    problems = []
    for page in pages(root):
        path = root / page
        for href in parse(path).hrefs:
            if REMOTE.match(href) or href.startswith(("mailto:", "javascript:")):
                continue
            target, _, anchor = href.partition("#")
            file = (path.parent / unquote(target.split("?")[0])).resolve() if target else path
            if file.is_dir():
                file = file / "index.html"
            if not file.is_file():
                problems.append(f"{page}: link {href} points to a missing file")
            elif anchor and file.suffix == ".html" and unquote(anchor) not in parse(file).ids:
                problems.append(f"{page}: link {href} points to a missing anchor")
            elif file.stat().st_size == 0:
                problems.append(f"{page}: link {href} points to an empty file")
    return problems


def local_load_problems(root: Path) -> list[str]:
    """Everything a page loads from the book itself is there (scripts, styles, images)."""
    problems = []
    for page in pages(root):
        parser = _Links()
        parser.feed((root / page).read_text(errors="replace"))
        for url in parser.loads:
            if REMOTE.match(url) or url.startswith("data:"):
                continue
            local = (root / page).parent / unquote(url.split("?")[0].split("#")[0])
            if not local.resolve().exists():
                problems.append(f"{page} loads missing {url}")
    return problems


def remote_problems(root: Path) -> list[str]:
    """Nothing in the HTML or CSS loads from another host (links to other sites are fine)."""
    problems = []
    for page in pages(root) + [p.relative_to(root).as_posix() for p in root.rglob("*.html")
                               if p.name in SKIPPED]:
        parser = _Links()
        parser.feed((root / page).read_text(errors="replace"))
        problems += [f"{page} loads {url} from another host"
                     for url in parser.loads if REMOTE.match(url)]
    for css in root.rglob("*.css"):
        for url in re.findall(r"""(?:url\(\s*['"]?|@import\s+['"])((?:https?:)?//[^'")\s]+)""",
                              css.read_text(errors="replace")):
            problems.append(f"{css.relative_to(root).as_posix()} loads {url} from another host")
    return problems


# --- the checks on the real build -----------------------------------------------------------

def test_every_page_renders_offline(site, tmp_path):
    all_pages = pages(site.root)
    assert len(all_pages) >= 10
    problems = []
    for k, page in enumerate(all_pages):  # a fresh profile each: no image from the cache
        problems += rendered_problems(page, site.open(page, tmp_path / f"profile-{k}",
                                                      "--dump-dom"), site)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("page", ["book/paper-fig4.html", "book/theory.html"])
def test_math_is_typeset(site, tmp_path, page):
    """Every formula of a math-heavy page is typeset by the book's own MathJax."""
    dom = site.open(page, tmp_path / "profile", "--dump-dom")
    expected = len(re.findall(r'class="math[ "]', (site.root / page).read_text()))
    assert expected >= 10
    typeset = len(re.findall(r'<mjx-container[^>]*jax="SVG"', dom))
    assert typeset >= expected, f"{page}: only {typeset} of {expected} formulas were typeset"
    assert '<g data-mml-node="merror"' not in dom, f"{page}: MathJax reported a TeX error"


def test_links_resolve(book_html):
    problems = link_problems(book_html)
    assert not problems, "\n".join(problems)


def test_nothing_is_loaded_from_other_hosts(book_html):
    problems = remote_problems(book_html) + local_load_problems(book_html)
    assert not problems, "\n".join(problems)
    assert (book_html / "_static" / "mathjax" / "tex-svg-full.js").is_file()


def test_screenshots_of_every_page(site, tmp_path):
    """Every page, whole, at a desktop (1280 px) and a phone (420 px) width, once its math
    is typeset: what a reviewer looks at before a change lands. DevTools, because a window
    screenshot holds only a window's height."""
    import base64

    from test_explorer import DevTools

    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    browser = DevTools(tmp_path / "profile", site.proxy.server_address[1])
    try:
        for page in pages(site.root):
            for width in (1280, 420):
                browser.page("Emulation.setDeviceMetricsOverride", width=width, height=900,
                             deviceScaleFactor=1, mobile=width < 600)
                browser.page("Page.navigate", url=site.url + page)
                browser.wait_for("document.readyState === 'complete'", f"{page} did not load")
                browser.evaluate("window.MathJax && MathJax.startup ? "
                                 "MathJax.startup.promise.then(() => true) : true")
                height = browser.evaluate("document.documentElement.scrollHeight")
                shot = browser.page("Page.captureScreenshot", format="png",
                                    captureBeyondViewport=True,
                                    clip={"x": 0, "y": 0, "width": width, "height": height,
                                          "scale": 1})
                path = SCREENSHOTS / f"{page.removesuffix('.html').replace('/', '-')}-{width}px.png"
                path.write_bytes(base64.b64decode(shot["data"]))
                assert path.stat().st_size > 20_000, f"{page}: an empty screenshot"
    finally:
        browser.close()


# --- the checks catch what they are for (on a copy of the build) ----------------------------

@pytest.fixture
def broken(book_html, tmp_path):
    copy = tmp_path / "html"
    shutil.copytree(book_html, copy)
    return copy


def test_a_removed_data_file_is_named(broken):
    text = (broken / "book" / "paper-fig4.html").read_text()
    href = re.search(r'href="\.\./(_downloads/[^"]+/data\.csv)"', text).group(1)
    (broken / href).unlink()
    problems = link_problems(broken)
    assert any(p.startswith("book/paper-fig4.html: link ") and "data.csv" in p
               for p in problems), problems


def test_a_broken_cross_reference_is_named(broken):
    page = broken / "book" / "intro.html"  # it cites Fig. 4 in its chapter
    text = page.read_text()
    assert "paper-fig4.html#paper-fig4" in text
    page.write_text(text.replace("paper-fig4.html#paper-fig4", "paper-fig4.html#no-such-figure"))
    problems = link_problems(broken)
    assert any(p.startswith("book/intro.html: link ") and "no-such-figure" in p
               for p in problems), problems


def test_a_cdn_url_is_named(broken, tmp_path):
    page = broken / "book" / "theory.html"
    cdn = "https://cdn.jsdelivr.net/npm/mathjax@3/es5/tex-svg.js"
    page.write_text(page.read_text().replace("</head>", f'<script src="{cdn}"></script></head>'))
    assert f"book/theory.html loads {cdn} from another host" in remote_problems(broken)
    site = Site(broken)
    try:
        dom = site.open("book/theory.html", tmp_path / "profile", "--dump-dom")
        problems = rendered_problems("book/theory.html", dom, site)
    finally:
        site.close()
    assert any(p.startswith("book/theory.html requested") and "cdn.jsdelivr.net" in p
               for p in problems), problems


# --- layout: math and tables fit the column, nothing is cut off ------------------------------

LAYOUT_JS = Path(__file__).with_name("browser_layout.js")
LAYOUT_WIDTHS = (1280, 420)  # a desktop window and a phone


class _MeasuringHandler(_BookHandler):
    """Serves every page with tests/browser_layout.js added at its end: once MathJax has
    typeset the page, it writes what does not fit into a ``<pre id="qkov-layout">``. And
    ``/_layout/<width>/<page>`` shows the page in a frame that many pixels wide (headless
    Chromium's window is at least 500 px wide) and copies the frame's result out of it."""

    FRAME = """<!DOCTYPE html><html><body style="margin:0">
<iframe id="page" src="/{page}" style="width:{width}px;height:1000px;border:0"></iframe>
<script>var timer = setInterval(function () {{
  var frame = document.getElementById("page").contentDocument;
  var result = frame && frame.getElementById("qkov-layout");
  if (!result) return;
  clearInterval(timer);
  var copy = document.createElement("pre");
  copy.id = "qkov-layout";
  copy.textContent = result.textContent;
  document.body.appendChild(copy);
}}, 50);</script></body></html>"""

    def send_head(self):
        frame = re.fullmatch(r"/_layout/(\d+)/(.+)", urlsplit(self.path).path)
        path = Path(self.translate_path(self.path))
        if frame:
            body = self.FRAME.format(width=frame.group(1), page=frame.group(2))
        elif path.suffix == ".html" and path.is_file():
            script = f"<script>{LAYOUT_JS.read_text()}</script>"
            body = path.read_text(errors="replace").replace("</body>", script + "</body>", 1)
        else:
            return super().send_head()
        data = body.encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        return io.BytesIO(data)


def layout_problems(site: Site, page: str, width: int, profile: Path,
                    scrolling: list | None = None) -> list[str]:
    """What does not fit on ``page`` in a window ``width`` px wide: at any width, anything
    cut off without a scrollbar, an inline formula running out of its line, a page that
    scrolls sideways; at a desktop width, a display equation or table wider than the
    content column (on a phone such a one must scroll, which the first check covers)."""
    dom = site.open(f"_layout/{width}/{page}", profile, "--window-size=1400,1100",
                    "--hide-scrollbars", "--dump-dom")
    found = re.search(r'<pre id="qkov-layout">(.*?)</pre>', dom, re.S)
    if found is None:
        return [f"{page} at {width} px: the layout was not measured (MathJax did not finish?)"]
    layout = json.loads(html.unescape(found.group(1)))
    assert layout["width"] == width, f"{page}: the window is {layout['width']} px, not {width}"
    if scrolling is not None:
        scrolling += [f"{page} at {width} px: {what}" for what in layout["scrolling"]]
    messages = {"wide": "{what} is {width} px wide in a {column} px column",
                "clipped": "{what} is cut off: {width} px in a {box} px box that does not scroll",
                "inline": "inline {what} ({width} px) runs out of its {line} px line",
                "page": "the page is {width} px wide, scrolls sideways ({box} px window): {what}"}
    return [f"{page} at {width} px: " + messages[f["kind"]].format(**f)
            for f in layout["found"] if f["kind"] != "wide" or width >= 1000]


@pytest.fixture(scope="module")
def measured_site(book_html):
    served = Site(book_html, _MeasuringHandler)
    yield served
    served.close()


def test_math_and_tables_fit_the_column(measured_site, tmp_path):
    """Every page at 1280 and 420 px: no display equation or table wider than the content
    column on a desktop; on a phone, whatever is wider scrolls, nothing is clipped."""
    all_pages = pages(measured_site.root)
    assert len(all_pages) >= 10
    started, problems, scrolling = time.monotonic(), [], []
    for page in all_pages:
        for width in LAYOUT_WIDTHS:
            problems += layout_problems(measured_site, page, width, tmp_path / "profile",
                                        scrolling)
    print(f"layout of {len(all_pages)} pages at {LAYOUT_WIDTHS} px measured in "
          f"{time.monotonic() - started:.0f} s; display equations that scroll sideways:",
          *scrolling, sep="\n")
    assert not problems, "\n".join(problems)


def test_a_too_wide_equation_is_named(broken, tmp_path):
    page = broken / "book" / "theory.html"
    wide = r"\[" + r" + ".join(f"x_{{{i}}}^{{{i}}}" for i in range(60)) + r"\]"
    page.write_text(page.read_text().replace("</article>", f'<div class="math notranslate '
                                             f'nohighlight">{wide}</div></article>', 1))
    site = Site(broken, _MeasuringHandler)
    try:
        problems = layout_problems(site, "book/theory.html", 1280, tmp_path / "profile")
    finally:
        site.close()
    assert any(p.startswith("book/theory.html at 1280 px: formula x_{0}^{0} + x_{1}^{1}")
               and "px column" in p for p in problems), problems


def test_a_clipped_inline_formula_is_named(broken, tmp_path):
    """On a phone, a long inline formula in a box that hides what overflows is named, and
    so is one that runs out of its line and makes the page scroll sideways."""
    page = broken / "book" / "theory.html"
    wide = r"\(" + r" + ".join(f"y_{{{i}}}" for i in range(40)) + r"\)"
    page.write_text(page.read_text().replace(
        "</article>", f'<p><span class="math notranslate nohighlight">{wide}</span></p>'
        "<style>span.math { overflow: hidden !important; max-width: 100% !important; }"
        "</style></article>", 1))  # the theme's own rule, which qkov.css overrides
    site = Site(broken, _MeasuringHandler)
    try:
        problems = layout_problems(site, "book/theory.html", 420, tmp_path / "profile")
    finally:
        site.close()
    assert any(p.startswith("book/theory.html at 420 px: span.math") and "y_{0} + y_{1}" in p
               and "is cut off" in p for p in problems), problems
    assert any(p.startswith("book/theory.html at 420 px: inline formula y_{0} + y_{1}")
               for p in problems), problems
