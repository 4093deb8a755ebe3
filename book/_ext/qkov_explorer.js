/* The reduced-dynamics explorer of the qkov companion book: it draws, it computes nothing.
 *
 * qkov_explorer.py solved the flow with the library at build time on a grid of ratios r and
 * token counts n and put it in the panel as JSON: runs[i_n][i_r] = {x: log10 tau, mu_ov,
 * mu_qk, loss: log10 L, alpha, end: {tau, alpha} where the loss reaches the target}. The
 * sliders step through the grid's indices. Drawn: the sliders' run (solid), r = 1 at the
 * same n (dashed), the runs shown before (faint), and a dot where each reaches the target.
 */
(function () {
  "use strict";

  var SVG = "http://www.w3.org/2000/svg";
  var W = 280, H = 200, LEFT = 46, RIGHT = 14, TOP = 24, BOTTOM = 40;  // viewBox units
  var FONT = 12, BLUE = "#1f63b4", GREY = "#555", TRACES = 8;
  var SUP = {"0": "⁰", "1": "¹", "2": "²", "3": "³", "4": "⁴", "5": "⁵", "6": "⁶", "7": "⁷",
             "8": "⁸", "9": "⁹", "-": "⁻"};
  var TITLES = {mu_ov: "μ_OV(τ)", mu_qk: "μ_QK(τ)", loss: "loss L(τ)", alpha: "attention mass α(τ)"};

  function power(k) {  // "10³"
    return "10" + String(k).split("").map(function (c) { return SUP[c]; }).join("");
  }

  function fmt(x, digits) {  // 0.922, 9.32×10⁶, 10⁻⁴
    var a = Math.abs(x);
    if (a >= 1e4 || (a > 0 && a < 1e-3)) {
      var k = Math.floor(Math.log10(a)), mant = Number((x / Math.pow(10, k)).toPrecision(digits));
      return mant === 1 ? power(k) : mant + "×" + power(k);
    }
    return String(Number(x.toPrecision(digits)));
  }

  function el(name, attrs, text) {
    var node = document.createElementNS(SVG, name);
    for (var key in attrs) node.setAttribute(key, attrs[key]);
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function text(svg, x, y, anchor, content) {  // "_OV", "_QK" become lowered, same-size text
    var node = el("text", {x: x, y: y, "text-anchor": anchor, "font-size": FONT,
                           fill: "currentColor", "font-family": "sans-serif"});
    content.split(/(_OV|_QK)/).forEach(function (part) {
      if (/^_(OV|QK)$/.test(part)) {
        node.appendChild(el("tspan", {dy: 3}, part.slice(1)));
        node.appendChild(el("tspan", {dy: -3}, "\u200b"));  // back to the baseline
      } else if (part) {
        node.appendChild(document.createTextNode(part));
      }
    });
    svg.appendChild(node);
  }

  function ticks(top) {  // 3-6 round values from 0 to top
    var step = Math.pow(10, Math.floor(Math.log10(top)));
    if (top / step < 3) step /= 2;
    if (top / step < 3) step /= 2.5;
    if (top / step > 6) step *= 2;
    var out = [];
    for (var v = 0; v <= top * (1 + 1e-9); v += step) out.push(Number(v.toPrecision(6)));
    return out;
  }

  /* One plot: x = log10 tau in [0, xMax]; y in yRange (log10 for the loss); lines: [{run,
   * style}], each style {stroke, width, opacity, dash}; marks at each run's end. */
  function drawPlot(svg, key, xMax, yRange, yTicks, lines, target) {
    while (svg.firstChild) svg.removeChild(svg.firstChild);
    var y0 = yRange[0], y1 = yRange[1];
    function px(x) { return LEFT + x / xMax * (W - LEFT - RIGHT); }
    function py(y) { return H - BOTTOM - (y - y0) / (y1 - y0) * (H - TOP - BOTTOM); }
    text(svg, LEFT, TOP - 8, "start", TITLES[key]);
    svg.appendChild(el("rect", {x: LEFT, y: TOP, width: W - LEFT - RIGHT,
                                height: H - TOP - BOTTOM, fill: "none", stroke: "#999"}));
    for (var d = 0; d <= xMax; d++) {
      svg.appendChild(el("line", {x1: px(d), x2: px(d), y1: H - BOTTOM, y2: H - BOTTOM + 4,
                                  stroke: "#999"}));
      if (d % 2 === 0) text(svg, px(d), H - BOTTOM + 17, "middle", power(d));
    }
    text(svg, (LEFT + W - RIGHT) / 2, H - 4, "middle", "time τ = min(η_OV, η_QK)·t");
    yTicks.forEach(function (v) {
      svg.appendChild(el("line", {x1: LEFT - 4, x2: LEFT, y1: py(v), y2: py(v), stroke: "#999"}));
      text(svg, LEFT - 6, py(v) + 4, "end", key === "loss" ? power(v) : fmt(v, 3));
    });
    if (target !== undefined) {  // the target loss
      svg.appendChild(el("line", {x1: LEFT, x2: W - RIGHT, y1: py(target), y2: py(target),
                                  stroke: "#b33", "stroke-dasharray": "1 3", class: "qkx-target"}));
      text(svg, LEFT + 4, py(target) - 4, "start", "target");
    }
    lines.forEach(function (line) {
      var run = line.run, s = line.style, path = "";
      for (var i = 0; i < run.x.length; i++) {
        path += (i ? "L" : "M") + px(run.x[i]).toFixed(1) + " " + py(run[key][i]).toFixed(1);
      }
      svg.appendChild(el("path", {d: path, fill: "none", stroke: s.stroke, "stroke-width": s.width,
                                  "stroke-opacity": s.opacity, "stroke-dasharray": s.dash,
                                  class: s.cls}));
      var last = run.x.length - 1;
      svg.appendChild(el("circle", {cx: px(run.x[last]), cy: py(run[key][last]),
                                    r: s.cls === "qkx-trace" ? 2 : 3.5, fill: s.stroke,
                                    "fill-opacity": s.opacity, class: s.cls + "-end"}));
      if (key === "alpha" && s.cls !== "qkx-trace") {  // a level line to the axis
        svg.appendChild(el("line", {x1: LEFT, x2: px(run.x[last]), y1: py(run.alpha[last]),
                                    y2: py(run.alpha[last]), stroke: s.stroke,
                                    "stroke-width": 0.8, "stroke-dasharray": "1 2",
                                    class: s.cls + "-level"}));
      }
    });
    if (key === "alpha") {
      label(svg, lines.filter(function (l) { return l.style.cls !== "qkx-trace"; }), py);
    }
  }

  /* alpha at the target loss, written at the left above its level line (where every curve
   * is still flat at alpha(0)), or below it at the top of the plot; one label where two would
   * meet. The text has a halo in the page's background colour, to stay legible on a curve. */
  function label(svg, lines, py) {
    function place(alpha) {
      var y = py(alpha) - 3;
      return y < TOP + FONT + 1 ? py(alpha) + FONT + 1 : y;
    }
    var current = lines[lines.length - 1].run.end.alpha, y = place(current);
    var labels = [[y, "α = " + fmt(current, 3)]];
    if (lines.length > 1) {
      var reference = lines[0].run.end.alpha, yRef = place(reference);
      if (Math.abs(yRef - y) < FONT + 2) labels[0][1] += ", at r = 1: " + fmt(reference, 3);
      else labels.push([yRef, "α = " + fmt(reference, 3) + " at r = 1"]);
    }
    labels.forEach(function (item) {
      text(svg, LEFT + 4, item[0], "start", item[1]);
      var node = svg.lastChild;
      node.setAttribute("class", "qkx-alpha-label");
      node.setAttribute("style", "paint-order: stroke; stroke: var(--pst-color-background, #fff); " +
                        "stroke-width: 3px; stroke-linejoin: round");
    });
  }

  var STYLES = {
    current: {stroke: BLUE, width: 2.5, opacity: 1, dash: "none", cls: "qkx-curve"},
    reference: {stroke: GREY, width: 1.5, opacity: 1, dash: "4 3", cls: "qkx-reference"},
    trace: {stroke: BLUE, width: 1.5, opacity: 0.3, dash: "none", cls: "qkx-trace"}
  };

  function setUp(panel) {
    var data = JSON.parse(panel.querySelector(".qkx-data").textContent);
    var rInput = panel.querySelector(".qkx-r"), nInput = panel.querySelector(".qkx-n");
    var out = panel.querySelector(".qkx-values");
    var traces = [], shown = null;  // [i_n, i_r] of earlier settings; the one drawn last

    function same(a, b) { return a[0] === b[0] && a[1] === b[1]; }

    function redraw() {
      var i = +nInput.value, j = +rInput.value, ref = data.start.reference_r;
      if (shown && !same(shown, [i, j])) {  // the setting left becomes the newest trace
        traces = traces.filter(function (t) { return !same(t, shown); }).concat([shown]);
        if (traces.length > TRACES) traces.shift();
      }
      shown = [i, j];
      var run = data.runs[i][j], reference = data.runs[i][ref];
      var lines = traces.filter(function (t) { return !same(t, shown) && !same(t, [i, ref]); })
        .map(function (t) { return {run: data.runs[t[0]][t[1]], style: STYLES.trace}; });
      if (j !== ref) lines.push({run: reference, style: STYLES.reference});
      lines.push({run: run, style: STYLES.current});

      rInput.setAttribute("aria-valuetext", "r = " + fmt(data.ratios[j], 3));
      nInput.setAttribute("aria-valuetext", "n = " + data.n[i] + ", initial attention " +
                          fmt(data.alpha0[i], 3));
      panel.querySelector(".qkx-r-value").textContent = fmt(data.ratios[j], 3);
      panel.querySelector(".qkx-n-value").textContent = data.n[i];
      var sentence = "From α(0) = " + fmt(data.alpha0[i], 3) + ", at the target loss " +
        fmt(data.target_loss, 2) + ": r = " + fmt(data.ratios[j], 3) + ", n = " + data.n[i] +
        " reaches α = " + fmt(run.end.alpha, 3) + " (at τ = " + fmt(run.end.tau, 3) + ")";
      if (j !== ref) {
        sentence += "; r = 1 reaches α = " + fmt(reference.end.alpha, 3) + " (at τ = " +
          fmt(reference.end.tau, 3) + ")";
      }
      out.textContent = sentence + ".";

      var xMax = 0, tops = {mu_ov: 0, mu_qk: 0};
      lines.forEach(function (line) {
        xMax = Math.max(xMax, Math.ceil(line.run.x[line.run.x.length - 1]));
        for (var key in tops) tops[key] = Math.max(tops[key], Math.max.apply(null, line.run[key]));
      });
      ["mu_ov", "mu_qk", "loss", "alpha"].forEach(function (key) {
        var range, yTicks, target;
        if (key === "alpha") {
          range = [0, 1]; yTicks = [0, 0.25, 0.5, 0.75, 1];
        } else if (key === "loss") {
          range = data.loss_axis; yTicks = [];
          for (var k = Math.ceil(range[0]); k <= range[1]; k++) yTicks.push(k);
          target = Math.log10(data.target_loss);
        } else {
          range = [0, tops[key] * 1.05 || 1]; yTicks = ticks(range[1]);
        }
        drawPlot(panel.querySelector('[data-plot="' + key + '"] svg'), key, Math.max(xMax, 1),
                 range, yTicks, lines, target);
      });
      panel.qkovShown = {n: data.n[i], r: data.ratios[j], alpha: run.end.alpha,  // for tests
                         referenceAlpha: reference.end.alpha, traces: traces.length};
    }

    rInput.addEventListener("input", redraw);
    nInput.addEventListener("input", redraw);
    redraw();
  }

  function start() {
    var panels = document.querySelectorAll("[data-qkov-explorer]");
    for (var i = 0; i < panels.length; i++) {
      try {
        setUp(panels[i]);
      } catch (err) {
        panels[i].insertAdjacentHTML("beforeend", "<p>The explorer failed: " +
          String(err.message).replace(/</g, "&lt;") + "</p>");
        throw err;
      }
    }
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
