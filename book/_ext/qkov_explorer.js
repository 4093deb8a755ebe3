/* The reduced-dynamics explorer of the qkov companion book (plain JS and SVG, no library).
 *
 * The ODE is the paper's (lib/qkov/theory/reduced.py, book/paper-fig4.md):
 *   alpha = m e^{mu_qk} / (m e^{mu_qk} + n),   L = log(1 + (M - 1) e^{-alpha mu_ov}),
 *   d mu_ov/dt = eta_ov alpha / (b [e^{alpha mu_ov} + M - 1]),
 *   d mu_qk/dt = eta_qk (M - 1) alpha (1 - alpha) mu_ov / (M b^2 [e^{alpha mu_ov} + M - 1]),
 * from mu = 0 until the loss first reaches the target, which takes many decades of time. The
 * integrator takes RK4 steps in s = log t (dy/ds = t f(y)), at most 1/100 of a decade and
 * shorter where step doubling asks for it, after a short linear start from t = 0; the
 * crossing of the target loss is found by bisection on the length of the last step. Time is
 * shown normalised, tau = min(eta_ov, eta_qk) t.
 *
 * The panel (made by qkov_explorer.py) carries the constants as data attributes. The model
 * functions are exported as window.qkovExplorer (and module.exports under node) for tests.
 */
(function () {
  "use strict";

  var STEPS_PER_DECADE = 100;  // at most this long RK4 steps in log time (the plots' points)
  var RTOL = 1e-10, ATOL = 1e-14;  // local error bounds of a step; the tests check against scipy
  var START_TAU = 1e-3;        // linear start up to here; the plots begin at tau = 1
  var START_STEPS = 50;

  function expit(z) {  // 1 / (1 + e^{-z}) without overflow
    if (z >= 0) return 1 / (1 + Math.exp(-z));
    var e = Math.exp(z);
    return e / (1 + e);
  }

  function setting(p) {  // p: {m, n, b, M, etaOV, etaQK, targetLoss}
    var names = ["m", "n", "b", "M", "etaOV", "etaQK", "targetLoss"];
    for (var i = 0; i < names.length; i++) {
      var v = p[names[i]];
      if (typeof v !== "number" || !isFinite(v) || v <= 0) {
        throw new Error("qkov explorer: " + names[i] + " must be a positive number, got " + v);
      }
    }
    if (p.M < 2) throw new Error("qkov explorer: M must be >= 2, got " + p.M);
    if (p.targetLoss >= Math.log(p.M)) {
      throw new Error("qkov explorer: targetLoss must lie below log M = " + Math.log(p.M));
    }
    return {m: p.m, n: p.n, b: p.b, M: p.M, etaOV: p.etaOV, etaQK: p.etaQK,
            targetLoss: p.targetLoss, logRho: Math.log(p.m / p.n),
            timeScale: Math.min(p.etaOV, p.etaQK)};
  }

  function alpha(muQK, s) { return expit(muQK + s.logRho); }

  function loss(muOV, muQK, s) {  // log(1 + e^x), x = log(M - 1) - alpha mu_ov
    var x = Math.log(s.M - 1) - alpha(muQK, s) * muOV;
    return Math.max(x, 0) + Math.log1p(Math.exp(-Math.abs(x)));
  }

  function rhs(y, s) {
    var z = y[1] + s.logRho, a = expit(z), notA = expit(-z);
    var decay = Math.exp(-a * y[0]);
    var inv = decay / (1 + (s.M - 1) * decay);  // 1 / (e^{alpha mu_ov} + M - 1)
    return [s.etaOV * a * inv / s.b,
            s.etaQK * (s.M - 1) * a * notA * y[0] * inv / (s.M * s.b * s.b)];
  }

  function add(y, k, h) { return [y[0] + h * k[0], y[1] + h * k[1]]; }

  function rk4Linear(y, t, h, s) {  // one step of length h in t
    var k1 = rhs(y, s), k2 = rhs(add(y, k1, h / 2), s);
    var k3 = rhs(add(y, k2, h / 2), s), k4 = rhs(add(y, k3, h), s);
    return [y[0] + h / 6 * (k1[0] + 2 * k2[0] + 2 * k3[0] + k4[0]),
            y[1] + h / 6 * (k1[1] + 2 * k2[1] + 2 * k3[1] + k4[1])];
  }

  function rk4Log(y, logT, h, s) {  // one step of length h in log t: dy/ds = t f(y)
    function g(state, lt) { var f = rhs(state, s), t = Math.exp(lt); return [t * f[0], t * f[1]]; }
    var k1 = g(y, logT), k2 = g(add(y, k1, h / 2), logT + h / 2);
    var k3 = g(add(y, k2, h / 2), logT + h / 2), k4 = g(add(y, k3, h), logT + h);
    return [y[0] + h / 6 * (k1[0] + 2 * k2[0] + 2 * k3[0] + k4[0]),
            y[1] + h / 6 * (k1[1] + 2 * k2[1] + 2 * k3[1] + k4[1])];
  }

  function linearStart(t, s) {  // the state at a small time t, from mu = 0
    var y = [0, 0], h = t / START_STEPS;
    for (var i = 0; i < START_STEPS; i++) y = rk4Linear(y, i * h, h, s);
    return y;
  }

  /* The trajectory from mu = 0 to the target loss: arrays tau, muOV, muQK (one entry per
   * step, the last at the crossing) and tauTarget, the normalised time of the crossing. */
  function solve(params) {
    var s = setting(params);
    var hMax = Math.LN10 / STEPS_PER_DECADE, h = hMax, t0 = START_TAU / s.timeScale;
    var logT = Math.log(t0), y = linearStart(t0, s);
    var out = {setting: s, logT: [logT], tau: [START_TAU], muOV: [y[0]], muQK: [y[1]]};
    var logTarget = Math.log(s.targetLoss);
    for (var i = 0; i < 1e6; i++) {
      // Step doubling: one step of h against two of h / 2; halve h until they agree, and
      // keep the two half steps (Richardson-extrapolated). Steep take-offs of mu_QK (small
      // alpha(0), large r) need steps far below the plotting resolution h = hMax.
      var full = rk4Log(y, logT, h, s);
      var half = rk4Log(rk4Log(y, logT, h / 2, s), logT + h / 2, h / 2, s);
      var err = Math.max(Math.abs(full[0] - half[0]) / (ATOL + RTOL * Math.abs(half[0])),
                         Math.abs(full[1] - half[1]) / (ATOL + RTOL * Math.abs(half[1]))) / 15;
      if (err > 1 && h > hMax * 1e-9) { h /= 2; continue; }
      var next = [half[0] + (half[0] - full[0]) / 15, half[1] + (half[1] - full[1]) / 15];
      if (Math.log(loss(next[0], next[1], s)) <= logTarget) {
        var lo = 0, hi = h;  // the loss falls monotonically: bisect on the step length
        for (var j = 0; j < 60; j++) {
          var mid = (lo + hi) / 2, ym = rk4Log(y, logT, mid, s);
          if (Math.log(loss(ym[0], ym[1], s)) <= logTarget) hi = mid; else lo = mid;
        }
        next = rk4Log(y, logT, hi, s);
        logT += hi;
        push(out, logT, next, s);
        out.tauTarget = s.timeScale * Math.exp(logT);
        return out;
      }
      y = next;
      logT += h;
      push(out, logT, y, s);
      if (err < 1 / 64) h = Math.min(2 * h, hMax);
    }
    throw new Error("qkov explorer: the loss did not reach the target");
  }

  function push(out, logT, y, s) {
    out.logT.push(logT);
    out.tau.push(s.timeScale * Math.exp(logT));
    out.muOV.push(y[0]);
    out.muQK.push(y[1]);
  }

  /* The state {tau, muOV, muQK, alpha, loss} at normalised time tau (0 <= tau <= tauTarget):
   * a partial RK4 step from the stored step before it, as accurate as the steps. */
  function stateAt(traj, tau) {
    var s = traj.setting;
    if (!(tau >= 0 && tau <= traj.tauTarget * (1 + 1e-12))) {
      throw new Error("qkov explorer: tau must lie in [0, " + traj.tauTarget + "], got " + tau);
    }
    var y;
    if (tau <= START_TAU) {
      y = tau === 0 ? [0, 0] : linearStart(tau / s.timeScale, s);
    } else {
      var logT = Math.log(tau / s.timeScale), k = 0;
      while (k + 1 < traj.logT.length && traj.logT[k + 1] <= logT) k++;
      y = rk4Log([traj.muOV[k], traj.muQK[k]], traj.logT[k], logT - traj.logT[k], s);
    }
    return {tau: tau, muOV: y[0], muQK: y[1], alpha: alpha(y[1], s), loss: loss(y[0], y[1], s)};
  }

  var api = {solve: solve, stateAt: stateAt, alpha: alpha, loss: loss, rhs: rhs,
             setting: setting, STEPS_PER_DECADE: STEPS_PER_DECADE};
  if (typeof module !== "undefined" && module.exports) module.exports = api;
  if (typeof window === "undefined") return;
  window.qkovExplorer = api;

  // --- drawing ------------------------------------------------------------------------------

  var SVG = "http://www.w3.org/2000/svg";
  var W = 280, H = 200, LEFT = 46, RIGHT = 14, TOP = 24, BOTTOM = 40;  // viewBox units (px at 280 px)
  var FONT = 12;
  var SUP = {"0": "⁰", "1": "¹", "2": "²", "3": "³", "4": "⁴", "5": "⁵", "6": "⁶", "7": "⁷",
             "8": "⁸", "9": "⁹", "-": "⁻"};

  function power(k) {  // "10³"
    return "10" + String(k).split("").map(function (c) { return SUP[c]; }).join("");
  }

  function el(name, attrs, text) {
    var node = document.createElementNS(SVG, name);
    for (var key in attrs) node.setAttribute(key, attrs[key]);
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function fmt(x, digits) {
    if (x === 0) return "0";
    var a = Math.abs(x);
    if (a >= 1e4 || a < 1e-3) {
      var k = Math.floor(Math.log10(a)), mant = x / Math.pow(10, k);
      return (mant.toPrecision(digits) + "×" + power(k)).replace(/^1(\.0+)?×/, "");
    }
    return String(Number(x.toPrecision(digits)));
  }

  function niceTicks(lo, hi) {  // 3-6 round values in [lo, hi]
    var span = hi - lo, step = Math.pow(10, Math.floor(Math.log10(span)));
    if (span / step < 3) step /= 2;
    if (span / step < 3) step /= 2.5;
    if (span / step > 6) step *= 2;
    if (span / step > 6) step *= 2.5;
    var ticks = [];
    for (var v = Math.ceil(lo / step) * step; v <= hi + 1e-9 * span; v += step) {
      ticks.push(Math.abs(v) < 1e-12 * span ? 0 : v);
    }
    return ticks;
  }

  /* One plot: x = log10 tau, y linear or log10; series: [{x: [], y: [], cls}] */
  function drawPlot(svg, spec) {
    while (svg.firstChild) svg.removeChild(svg.firstChild);
    var x0 = spec.xRange[0], x1 = spec.xRange[1], y0 = spec.yRange[0], y1 = spec.yRange[1];
    function px(x) { return LEFT + (x - x0) / (x1 - x0) * (W - LEFT - RIGHT); }
    function py(y) { return H - BOTTOM - (y - y0) / (y1 - y0) * (H - TOP - BOTTOM); }
    var font = {"font-size": FONT, fill: "currentColor", "font-family": "sans-serif"};
    function text(x, y, anchor, content) {  // "_OV", "_QK" become lowered, same-size text
      var attrs = {x: x, y: y, "text-anchor": anchor};
      for (var k in font) attrs[k] = font[k];
      var node = el("text", attrs);
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
    text(LEFT, TOP - 8, "start", spec.title);
    svg.appendChild(el("rect", {x: LEFT, y: TOP, width: W - LEFT - RIGHT, height: H - TOP - BOTTOM,
                                fill: "none", stroke: "#999", "stroke-width": 1}));
    var every = x1 - x0 > 6 ? 2 : 1;
    for (var d = Math.ceil(x0); d <= x1; d++) {
      svg.appendChild(el("line", {x1: px(d), x2: px(d), y1: H - BOTTOM, y2: H - BOTTOM + 4,
                                  stroke: "#999"}));
      if (d % every === 0) text(px(d), H - BOTTOM + 17, "middle", power(d));
    }
    text((LEFT + W - RIGHT) / 2, H - 4, "middle", "time τ = min(η_OV, η_QK)·t");
    spec.yTicks.forEach(function (v) {
      svg.appendChild(el("line", {x1: LEFT - 4, x2: LEFT, y1: py(v), y2: py(v), stroke: "#999"}));
      text(LEFT - 6, py(v) + 4, "end", spec.yLog ? power(v) : fmt(v, 3));
    });
    spec.series.forEach(function (series) {
      var d = "";
      for (var i = 0; i < series.x.length; i++) {
        d += (i ? "L" : "M") + px(series.x[i]).toFixed(2) + " " + py(series.y[i]).toFixed(2);
      }
      svg.appendChild(el("path", {d: d, fill: "none", stroke: series.color,
                                  "stroke-width": series.width, class: series.cls,
                                  "stroke-dasharray": series.dash || "none"}));
    });
  }

  function curves(traj) {  // points from tau = 1 on, log10 tau and the four quantities
    var s = traj.setting, c = {x: [], mu_ov: [], mu_qk: [], loss: [], alpha: []};
    for (var i = 0; i < traj.tau.length; i++) {
      if (traj.tau[i] < 1) continue;
      c.x.push(Math.log10(traj.tau[i]));
      c.mu_ov.push(traj.muOV[i]);
      c.mu_qk.push(traj.muQK[i]);
      c.loss.push(Math.log10(loss(traj.muOV[i], traj.muQK[i], s)));
      c.alpha.push(alpha(traj.muQK[i], s));
    }
    return c;
  }

  function max(values) { return values.reduce(function (a, b) { return Math.max(a, b); }, 0); }

  function setUp(panel) {
    var data = panel.dataset;
    var base = {m: +data.m, b: +data.b, M: +data.bigM, etaOV: +data.etaOv,
                targetLoss: +data.targetLoss};
    var rInput = panel.querySelector(".qkx-r"), nInput = panel.querySelector(".qkx-n");
    var out = panel.querySelector(".qkx-values");
    rInput.min = Math.log10(+data.rMin);
    rInput.max = Math.log10(+data.rMax);
    rInput.value = 0;  // r = 1
    nInput.max = data.nMax;
    nInput.value = data.n;
    var reference = null;  // the paper's start (r = 1, n of Fig. 4), drawn dashed for comparison

    function params(r, n) {
      return {m: base.m, n: n, b: base.b, M: base.M, etaOV: base.etaOV, etaQK: r * base.etaOV,
              targetLoss: base.targetLoss};
    }

    function redraw() {
      var r = Math.pow(10, +rInput.value), n = +nInput.value;
      var traj = solve(params(r, n)), s = traj.setting, c = curves(traj);
      var end = stateAt(traj, traj.tauTarget), alpha0 = alpha(0, s);
      rInput.setAttribute("aria-valuetext", "r = " + fmt(r, 3));
      nInput.setAttribute("aria-valuetext", "n = " + n + ", initial attention " + fmt(alpha0, 3));
      out.innerHTML = "r = " + fmt(r, 3) + ";  n = " + n + ", α(0) = " + fmt(alpha0, 3) +
        ";  the loss reaches " + fmt(s.targetLoss, 2) + " at τ = " + fmt(traj.tauTarget, 3) +
        ", with α = " + fmt(end.alpha, 4) + ", μ<sub>OV</sub> = " + fmt(end.muOV, 4) +
        ", μ<sub>QK</sub> = " + fmt(end.muQK, 4) + ".";  // numbers only: no markup to escape
      var ref = reference, xMax = Math.ceil(max(c.x.concat(ref ? ref.x : [])));
      var keys = ["mu_ov", "mu_qk", "loss", "alpha"];
      keys.forEach(function (key) {
        var svg = panel.querySelector('[data-plot="' + key + '"] svg');
        var series = [];
        if (ref && ref !== c) {
          series.push({x: ref.x, y: ref[key], color: "#888", width: 1.5, dash: "4 3",
                       cls: "qkx-reference"});
        }
        series.push({x: c.x, y: c[key], color: "#1f63b4", width: 2.5, cls: "qkx-curve"});
        var yRange, yTicks, yLog = key === "loss";
        if (key === "alpha") {
          yRange = [0, 1]; yTicks = [0, 0.25, 0.5, 0.75, 1];
        } else if (yLog) {
          yRange = [Math.floor(Math.log10(s.targetLoss)), Math.log10(Math.log(s.M))];
          yTicks = [];
          for (var k = yRange[0]; k <= yRange[1]; k++) yTicks.push(k);
        } else {
          var top = max(c[key].concat(ref ? ref[key] : [])) * 1.05 || 1;
          yRange = [0, top]; yTicks = niceTicks(0, top);
        }
        var title = {mu_ov: "μ_OV(τ)", mu_qk: "μ_QK(τ)", loss: "loss L(τ)",
                     alpha: "attention mass α(τ)"}[key];
        drawPlot(svg, {xRange: [0, Math.max(xMax, 1)], yRange: yRange, yTicks: yTicks,
                       yLog: yLog, series: series, title: title});
      });
      if (!reference) reference = c;
      panel.qkovTrajectory = traj;  // what is drawn, for the tests
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
