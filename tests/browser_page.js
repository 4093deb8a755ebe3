// What a reader would see broken on a typeset page (test_browser.py's asynchronous script): images not
// loaded, raw TeX, MathJax errors, SVG text under 12 px; display math or a table wider than the column
// (desktop only: on a phone it scrolls), anything cut off, inline math out of its line, sideways scrolling.
var done = arguments[arguments.length - 1], render = [], layout = [];
function short(text) {
  text = text.replace(/\s+/g, " ").trim();
  return text.length > 70 ? text.slice(0, 67) + "..." : text;
}
function describe(el) {
  if (el.matches("mjx-container")) {
    var item = Array.from(MathJax.startup.document.math).find(m => m.typesetRoot === el);
    var eqno = el.closest("div.math") && el.closest("div.math").querySelector(".eqno");
    return (eqno ? "equation " + eqno.firstChild.textContent.trim() + " " : "formula ")
      + short(item ? item.math : "");
  }
  if (el.matches("table")) return "table [" + short(el.textContent) + "]";
  var inner = el.querySelector("mjx-container, table");
  return el.tagName.toLowerCase() + (typeof el.className === "string" && el.className.trim()
    ? "." + el.className.trim().split(/\s+/).join(".") : "")
    + " [" + (inner ? describe(inner) : short(el.textContent)) + "]";
}
function visible(el) { var r = el.getBoundingClientRect(); return r.width > 0 && r.height > 0; }

var text = document.body.cloneNode(true);
text.querySelectorAll("script, style, pre, code, mjx-container, textarea").forEach(e => e.remove());
text = text.textContent;
["\\(", "\\[", "$$"].forEach(function (raw) {
  var at = text.indexOf(raw);
  if (at >= 0) render.push("raw TeX " + raw + " left: ..." + short(text.slice(Math.max(at - 60, 0), at + 60)));
});
if (document.querySelector('[data-mml-node="merror"]')) render.push("MathJax reported a TeX error");
document.querySelectorAll("svg text").forEach(function (t) {
  var svg = t.ownerSVGElement, box = svg.viewBox.baseVal;
  var size = parseFloat(getComputedStyle(t).fontSize) * (box && box.width ? svg.getBoundingClientRect().width / box.width : 1);
  if (visible(t) && !t.closest("mjx-container") && size < 12)
    render.push("SVG text '" + short(t.textContent) + "' drawn at " + size.toFixed(1) + " px");
});

var article = document.querySelector("article.bd-article") || document.body;
var style = getComputedStyle(article);
var column = article.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
article.querySelectorAll(":scope > section").forEach(function (section) {  // padding rounds
  column = Math.max(column, section.clientWidth);
});
if (innerWidth >= 1000) article.querySelectorAll("mjx-container[display='true'], table").forEach(function (el) {
  if (!visible(el)) return;
  var width = Math.max(el.scrollWidth, el.clientWidth), room = column;
  var svg = el.matches("mjx-container") && el.querySelector(":scope > svg");
  if (svg) width = Math.max(width, svg.getBoundingClientRect().width);
  for (var box = el; box && box !== article; box = box.parentElement)  // beside an equation number
    if (getComputedStyle(box).overflowX !== "visible") room = Math.min(room, box.clientWidth);
  if (width > room + 1) layout.push(describe(el) + " is " + Math.round(width) + " px wide in a " + Math.round(room) + " px column");
});
document.querySelectorAll("body, body *").forEach(function (el) {
  if (el.scrollWidth <= el.clientWidth + 1 || !visible(el) || el.closest("svg")
      || el.matches("mjx-container:not([display='true']), mjx-assistive-mml")) return;
  if (/hidden|clip/.test(getComputedStyle(el).overflowX))
    layout.push(describe(el) + " is cut off: " + el.scrollWidth + " px in a " + el.clientWidth + " px box that does not scroll");
});
article.querySelectorAll("mjx-container:not([display='true'])").forEach(function (el) {
  if (!visible(el)) return;
  var block = el.parentElement;
  while (block !== article && getComputedStyle(block).display.startsWith("inline")) block = block.parentElement;
  for (var a = el.parentElement; a && a !== article; a = a.parentElement)
    if (/auto|scroll/.test(getComputedStyle(a).overflowX) && a.scrollWidth > a.clientWidth + 1) return;
  var r = el.getBoundingClientRect(), b = block.getBoundingClientRect();
  if (r.right > b.right + 1 || r.left < b.left - 1)
    layout.push("inline " + describe(el) + " (" + Math.round(r.width) + " px) runs out of its " + Math.round(b.width) + " px line");
});
var page = document.documentElement;
if (page.scrollWidth > page.clientWidth + 1) {  // name the first element past the right edge
  var fixed = el => el && (getComputedStyle(el).position === "fixed" || fixed(el.parentElement));
  var culprit = [...document.querySelectorAll("body *")].find(el => visible(el) && !fixed(el)
    && el.getBoundingClientRect().right > page.clientWidth + 1 && !el.closest("mjx-assistive-mml"));
  layout.push("the page is " + page.scrollWidth + " px wide, scrolls sideways: " + (culprit ? describe(culprit) : "the page"));
}

Promise.all([...document.images].map(function (img) {
  img.loading = "eager";
  return img.decode().then(() => null, () => "image " + img.getAttribute("src") + " did not load");
})).then(failed => done({render: render.concat(failed.filter(Boolean)), layout: layout}));
