// Measures, once MathJax has typeset the page, what a reader cannot see: display math or
// tables wider than the content column, anything cut off without a scrollbar, and a page
// that overflows sideways. The result goes into the DOM for --dump-dom to read back.
window.addEventListener("load", function () {
  var ready = window.MathJax && window.MathJax.startup && window.MathJax.startup.promise;
  Promise.resolve(ready).then(function () { setTimeout(measure, 100); },
                              function () { setTimeout(measure, 100); });
  function tex(container) {
    var items = window.MathJax && MathJax.startup.document ? MathJax.startup.document.math : [];
    for (var item of items) if (item.typesetRoot === container) return item.math;
    return "";
  }
  function short(text) { text = text.replace(/\s+/g, " ").trim();
                         return text.length > 70 ? text.slice(0, 67) + "..." : text; }
  function describe(el) {
    if (el.matches("mjx-container")) {
      var eqno = el.closest("div.math") && el.closest("div.math").querySelector(".eqno");
      return (eqno ? "equation " + eqno.firstChild.textContent.trim() + " " : "formula ")
        + short(tex(el));
    }
    if (el.matches("table")) return "table [" + short(el.textContent) + "]";
    var name = el.tagName.toLowerCase() + (el.id ? "#" + el.id : "")
      + (el.className && el.className.baseVal === undefined && el.className
         ? "." + el.className.trim().split(/\s+/).join(".") : "");
    var inner = el.querySelector("mjx-container, table");
    return name + " [" + (inner ? describe(inner) : short(el.textContent)) + "]";
  }
  function scrolls(el) { return /auto|scroll/.test(getComputedStyle(el).overflowX); }
  function visible(el) { var r = el.getBoundingClientRect(); return r.width > 0 && r.height > 0; }
  function measure() {
    var found = [];
    var article = document.querySelector("article.bd-article") || document.body;
    var style = getComputedStyle(article);
    var column = article.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
    // (the article's sections are the column; its padding rounds differently by a px or two)
    article.querySelectorAll(":scope > section").forEach(function (section) {
      column = Math.max(column, section.clientWidth);
    });
    var wide = "mjx-container[display='true'], table";
    article.querySelectorAll(wide).forEach(function (el) {
      if (!visible(el)) return;
      // its content, and the room it has: the column, or less (an equation number beside it)
      var width = Math.max(el.scrollWidth, el.clientWidth);
      var svg = el.matches("mjx-container") && el.querySelector(":scope > svg");
      if (svg) width = Math.max(width, svg.getBoundingClientRect().width);
      var room = column;
      for (var box = el; box && box !== article; box = box.parentElement)
        if (getComputedStyle(box).overflowX !== "visible") room = Math.min(room, box.clientWidth);
      if (width > room + 1)
        found.push({kind: "wide", what: describe(el), width: Math.round(width),
                    column: Math.round(room)});
    });
    // cut off: content wider than its box, and the box clips instead of scrolling
    document.querySelectorAll("body, body *").forEach(function (el) {
      if (el.scrollWidth <= el.clientWidth + 1 || !visible(el) || el.closest("svg")) return;
      // inline math is checked below; MathML for screen readers is meant to be invisible
      if (el.matches("mjx-container:not([display='true']), mjx-assistive-mml")) return;
      var overflow = getComputedStyle(el).overflowX;
      if (overflow === "hidden" || overflow === "clip")
        found.push({kind: "clipped", what: describe(el), width: el.scrollWidth,
                    box: el.clientWidth});
    });
    // an inline formula running out of its line, not inside something that scrolls
    article.querySelectorAll("mjx-container:not([display='true'])").forEach(function (el) {
      if (!visible(el)) return;
      var block = el.parentElement;
      while (block !== article && getComputedStyle(block).display.indexOf("inline") === 0)
        block = block.parentElement;
      var r = el.getBoundingClientRect(), b = block.getBoundingClientRect();
      for (var a = el.parentElement; a && a !== article; a = a.parentElement)
        if (scrolls(a) && a.scrollWidth > a.clientWidth + 1) return;
      if (r.right > b.right + 1 || r.left < b.left - 1)
        found.push({kind: "inline", what: describe(el), width: Math.round(r.width),
                    line: Math.round(b.width)});
    });
    // (not a problem: how many display equations a reader must scroll sideways)
    var scrolling = [];
    article.querySelectorAll("mjx-container[display='true']").forEach(function (el) {
      if (visible(el) && el.scrollWidth > el.clientWidth + 1) scrolling.push(describe(el));
    });
    var page = document.documentElement;
    if (page.scrollWidth > page.clientWidth + 1) {
      // name the innermost element that reaches past the window's right edge
      // (the outermost one, leaving out fixed panels such as a closed sidebar)
      var culprit = null;
      document.querySelectorAll("body *").forEach(function (el) {
        if (!culprit && visible(el) && el.getBoundingClientRect().right > page.clientWidth + 1
            && !el.closest("mjx-assistive-mml")) {
          for (var a = el; a; a = a.parentElement)
            if (getComputedStyle(a).position === "fixed") return;
          culprit = el;
        }
      });
      found.push({kind: "page", what: culprit ? describe(culprit) : "the page",
                  width: page.scrollWidth, box: page.clientWidth});
    }
    var out = document.createElement("pre");
    out.id = "qkov-layout";
    out.textContent = JSON.stringify({width: window.innerWidth, column: Math.round(column),
                                      found: found, scrolling: scrolling});
    document.body.appendChild(out);
  }
});
