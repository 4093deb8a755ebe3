/* Draws, computes nothing: the panel's JSON holds the library's runs[i_n][i_r] = {x: log10 tau, mu_ov,
 * mu_qk, loss: log10 L, alpha, end: {tau, alpha} at the target loss}; the sliders step the indices. */
(() => {
  "use strict";
  const W = 280, H = 200, LEFT = 46, RIGHT = 14, TOP = 24, BOTTOM = 40, FONT = 12, TRACES = 8;
  const TITLES = {mu_ov: "μ_OV(τ)", mu_qk: "μ_QK(τ)", loss: "loss L(τ)", alpha: "attention α(τ)"};
  const STYLES = {
    current: {stroke: "#1f63b4", "stroke-width": 2.5, class: "qkx-curve"},
    reference: {stroke: "#555", "stroke-width": 1.5, "stroke-dasharray": "4 3", class: "qkx-reference"},
    trace: {stroke: "#1f63b4", "stroke-width": 1.5, "stroke-opacity": 0.3, class: "qkx-trace"}};
  const power = k => "10" + String(k).replace(/./g, c => "⁰¹²³⁴⁵⁶⁷⁸⁹⁻"["0123456789-".indexOf(c)]);

  function fmt(x, digits) {  // 0.922, 9.32×10⁶, 10⁻⁴
    const a = Math.abs(x), k = Math.floor(Math.log10(a));
    if (!a || (a < 1e4 && a >= 1e-3)) return String(Number(x.toPrecision(digits)));
    const mantissa = Number((x / 10 ** k).toPrecision(digits));
    return mantissa === 1 ? power(k) : `${mantissa}×${power(k)}`;
  }

  function add(parent, name, attrs) {
    const node = parent.appendChild(document.createElementNS("http://www.w3.org/2000/svg", name));
    for (const key in attrs) node.setAttribute(key, attrs[key]);
    return node;
  }

  function text(svg, x, y, anchor, content) {  // "_OV", "_QK" as subscripts
    const node = add(svg, "text", {x, y, "text-anchor": anchor, "font-size": FONT, fill: "currentColor"});
    content.split(/_(OV|QK)/).forEach((part, i) => {
      if (i % 2) add(node, "tspan", {"baseline-shift": "sub"}).textContent = part;
      else node.append(part);
    });
    return node;
  }

  function ticks(top) {  // 3-6 round values from 0 to top
    let step = 10 ** Math.floor(Math.log10(top));
    if (top / step < 3) step /= 2;
    if (top / step < 3) step /= 2.5;
    if (top / step > 6) step *= 2;
    const out = [];
    for (let v = 0; v <= top * (1 + 1e-9); v += step) out.push(Number(v.toPrecision(6)));
    return out;
  }

  function drawPlot(svg, key, xMax, range, yTicks, lines, target) {
    svg.textContent = "";
    const px = x => LEFT + x / xMax * (W - LEFT - RIGHT);
    const py = y => H - BOTTOM - (y - range[0]) / (range[1] - range[0]) * (H - TOP - BOTTOM);
    text(svg, LEFT, TOP - 8, "start", TITLES[key]);
    text(svg, (LEFT + W - RIGHT) / 2, H - 4, "middle", "time τ = min(η_OV, η_QK)·t");
    add(svg, "rect", {x: LEFT, y: TOP, width: W - LEFT - RIGHT, height: H - TOP - BOTTOM,
                      fill: "none", stroke: "#999"});
    for (let d = 0; d <= xMax; d++) {
      add(svg, "path", {d: `M${px(d)} ${H - BOTTOM}v4`, stroke: "#999"});
      if (d % 2 === 0) text(svg, px(d), H - BOTTOM + 17, "middle", power(d));
    }
    for (const v of yTicks) {
      add(svg, "path", {d: `M${LEFT} ${py(v)}h-4`, stroke: "#999"});
      text(svg, LEFT - 6, py(v) + 4, "end", key === "loss" ? power(v) : fmt(v, 3));
    }
    if (target !== undefined) {
      add(svg, "path", {d: `M${LEFT} ${py(target)}H${W - RIGHT}`, stroke: "#b33",
                        "stroke-dasharray": "1 3", class: "qkx-target"});
      text(svg, LEFT + 4, py(target) - 4, "start", "target");
    }
    let labels = [];
    for (const {run, style} of lines) {
      const last = run.x.length - 1;
      const d = run.x.map((x, i) => `${i ? "L" : "M"}${px(x).toFixed(1)} ${py(run[key][i]).toFixed(1)}`);
      add(svg, "path", {...style, fill: "none", d: d.join("")});
      add(svg, "circle", {cx: px(run.x[last]), cy: py(run[key][last]), fill: style.stroke,
                          r: style === STYLES.trace ? 2 : 3.5, "fill-opacity": style["stroke-opacity"] || 1});
      if (key === "alpha" && style !== STYLES.trace) {  // alpha at the target: a level line, a label
        const y = py(run.end.alpha);
        add(svg, "path", {d: `M${LEFT} ${y}H${px(run.x[last])}`, stroke: style.stroke,
                          "stroke-width": 0.8, "stroke-dasharray": "1 2"});
        labels.push([y - 3 < TOP + FONT + 1 ? y + FONT + 1 : y - 3,
                     `α = ${fmt(run.end.alpha, 3)}${style === STYLES.reference ? " at r = 1" : ""}`]);
      }
    }
    if (labels.length > 1 && Math.abs(labels[0][0] - labels[1][0]) < FONT + 2) {
      labels = [[labels[1][0], `${labels[1][1]}, ${labels[0][1]}`]];  // one where two would meet
    }
    for (const [y, label] of labels) {  // a halo in the page's colour keeps it legible on a curve
      const node = text(svg, LEFT + 4, y, "start", label);
      node.setAttribute("class", "qkx-label");
      node.setAttribute("style", "paint-order: stroke; stroke-width: 3px; " +
                        "stroke: var(--pst-color-background, #fff)");
    }
  }

  const panel = document.currentScript.parentElement, $ = s => panel.querySelector(s);
  const data = JSON.parse($(".qkx-data").textContent), ref = data.start.reference_r;
  let traces = [], shown = null;  // "i_n,i_r" of the settings drawn before, and now

  function redraw() {
    const i = +$(".qkx-n").value, j = +$(".qkx-r").value, key = `${i},${j}`;
    if (shown && shown !== key) traces = [...traces.filter(t => t !== shown), shown].slice(-TRACES);
    shown = key;
    const run = data.runs[i][j], reference = data.runs[i][ref], r = fmt(data.ratios[j], 3);
    const lines = traces.filter(t => t !== key && t !== `${i},${ref}`)
      .map(t => ({run: data.runs[t.split(",")[0]][t.split(",")[1]], style: STYLES.trace}));
    if (j !== ref) lines.push({run: reference, style: STYLES.reference});
    lines.push({run, style: STYLES.current});

    $(".qkx-r").setAttribute("aria-valuetext", `r = ${r}`);
    $(".qkx-n").setAttribute("aria-valuetext", `n = ${data.n[i]}`);
    $(".qkx-r-value").textContent = r;
    $(".qkx-n-value").textContent = data.n[i];
    const reaches = (what, at) =>
      `${what} reaches α = ${fmt(at.end.alpha, 3)} (at τ = ${fmt(at.end.tau, 3)})`;
    $(".qkx-values").textContent = `From α(0) = ${fmt(data.alpha0[i], 3)}, at the target loss ` +
      `${fmt(data.target_loss, 2)}: ${reaches(`r = ${r}, n = ${data.n[i]}`, run)}` +
      `${j !== ref ? "; " + reaches("r = 1", reference) : ""}.`;

    const xMax = Math.max(1, ...lines.map(l => Math.ceil(l.run.x[l.run.x.length - 1])));
    const top = k => Math.max(...lines.flatMap(l => l.run[k])) * 1.05 || 1;
    const decades = [];
    for (let k = Math.ceil(data.loss_axis[0]); k <= data.loss_axis[1]; k++) decades.push(k);
    const plots = {mu_ov: [[0, top("mu_ov")]], mu_qk: [[0, top("mu_qk")]],
                   loss: [data.loss_axis, decades, Math.log10(data.target_loss)],
                   alpha: [[0, 1], [0, 0.25, 0.5, 0.75, 1]]};
    for (const [name, [range, yTicks, target]] of Object.entries(plots)) {
      drawPlot($(`[data-plot="${name}"]`), name, xMax, range, yTicks || ticks(range[1]), lines, target);
    }
  }
  $(".qkx-r").addEventListener("input", redraw);
  $(".qkx-n").addEventListener("input", redraw);
  redraw();
})();
