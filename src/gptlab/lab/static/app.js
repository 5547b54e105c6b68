// gptlab lab: the page. Vanilla JS + SVG; every number comes from the server (gptlab).
"use strict";

const SVGNS = "http://www.w3.org/2000/svg";
const $ = (id) => document.getElementById(id);
const MINUS_INF = "\u2212\u221e";  // what a masked score shows: −∞

// ------------------------------------------------------------------ plumbing

async function api(path, body) {
  const opts = body === undefined ? {} : {
    method: "POST", headers: {"Content-Type": "application/json"}, body: JSON.stringify(body)};
  const res = await fetch(path, opts);
  const data = await res.json().catch(() => ({error: `HTTP ${res.status}`}));
  if (!res.ok) throw new Error(data.error || `HTTP ${res.status}`);
  showError(null);
  return data;
}

function showError(message) {
  const box = $("error");
  box.hidden = !message;
  box.textContent = message || "";
}

// Run an async view update; a bad input shows its one-line message instead of failing.
function guarded(fn) {
  return async (...args) => {
    try { await fn(...args); } catch (e) { showError(e.message); }
  };
}

function debounce(fn, ms) {
  let timer = null;
  return (...args) => { clearTimeout(timer); timer = setTimeout(() => fn(...args), ms); };
}

function svgEl(tag, attrs = {}, text) {
  const node = document.createElementNS(SVGNS, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  if (text !== undefined) node.textContent = text;
  return node;
}

function htmlEl(tag, attrs = {}, text) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  if (text !== undefined) node.textContent = text;
  return node;
}

const fmt = (x, d = 2) => (x === null ? MINUS_INF : Number(x).toFixed(d).replace(/^-(0\.0+)$/, "$1"));
const human = (n) => (n >= 1e12 ? (n / 1e12).toFixed(2) + " T" : n >= 1e9 ? (n / 1e9).toFixed(2) + " G" : n >= 1e6 ? (n / 1e6).toFixed(2) + " M" : n >= 1e3 ? (n / 1e3).toFixed(1) + " k" : String(n));
const humanBytes = (n) => { const u = ["B", "KiB", "MiB", "GiB", "TiB"]; let i = 0; while (n >= 1024 && i < 4) { n /= 1024; i++; } return `${n.toFixed(i ? 2 : 0)} ${u[i]}`; };
// A token as a visible label: a space shows as ␣, control characters escaped.
const tokenLabel = (t) => JSON.stringify(t).slice(1, -1).replace(/ /g, "\u2423");
const transpose = (m) => m[0].map((_, j) => m.map((row) => row[j]));
const absMax = (m) => Math.max(1e-12, ...m.flat().filter((x) => x !== null).map(Math.abs));

// ------------------------------------------------------------------ colours

function lerp(a, b, t) { return a.map((x, i) => Math.round(x + (b[i] - x) * t)); }
const WHITE = [255, 255, 255], BLUE = [33, 102, 172], RED = [178, 24, 43], DEEP = [8, 48, 107];

function colour(value, scale, max) {
  if (value === null) return "#c8c8c8";
  let rgb;
  if (scale === "seq") rgb = lerp(WHITE, DEEP, Math.min(1, Math.max(0, value / max)));
  else {
    const t = Math.max(-1, Math.min(1, value / max));
    rgb = t >= 0 ? lerp(WHITE, RED, t) : lerp(WHITE, BLUE, -t);
  }
  return `rgb(${rgb.join(",")})`;
}

function inkFor(value, scale, max) {
  if (value === null) return "#333";
  const t = Math.abs(value) / max;
  return t > 0.55 ? "#fff" : "#111";
}

// ------------------------------------------------------------------ figures

// A matrix as an SVG heatmap. values: rows of numbers (null = −∞). Each cell carries a
// <title> for hover and, when shown, a text node with data-testid `${id}-${i}-${j}`.
function heatmap(o) {
  const values = o.values, nr = values.length, nc = values[0].length;
  const cell = o.cell || 40, decimals = o.decimals ?? 2;
  const showValues = o.showValues ?? (cell >= 30);
  const scale = o.scale || "div";
  const max = o.max || (scale === "seq" ? Math.max(1e-12, ...values.flat().filter((x) => x !== null)) : absMax(values));
  const rows = o.rows || values.map((_, i) => String(i));
  const cols = o.cols || values[0].map((_, j) => String(j));
  const labelW = Math.min(90, 10 + 7 * Math.max(...rows.map((r) => r.length)));
  const showCols = o.showColLabels ?? (cell >= 14);
  const top = 24 + (showCols ? 16 : 0);
  const width = Math.max(labelW + nc * cell + 8, 12 + 7.5 * (o.title || "").length);
  const height = top + nr * cell + 6;
  const svg = svgEl("svg", {xmlns: SVGNS, width, height, viewBox: `0 0 ${width} ${height}`,
    "font-family": "ui-monospace, Menlo, Consolas, monospace", "data-testid": `fig-${o.id}`});
  svg.appendChild(svgEl("rect", {x: 0, y: 0, width, height, fill: "#ffffff"}));
  svg.appendChild(svgEl("text", {x: 4, y: 15, "font-size": 13, "font-weight": 600,
    "font-family": "system-ui, sans-serif", fill: "#1b1f24"}, o.title || ""));
  if (showCols) cols.forEach((c, j) => svg.appendChild(svgEl("text", {
    x: labelW + j * cell + cell / 2, y: top - 4, "font-size": 11, "text-anchor": "middle",
    fill: "#5b6570"}, c)));
  if (cell >= 10) rows.forEach((r, i) => svg.appendChild(svgEl("text", {
    x: labelW - 4, y: top + i * cell + cell / 2 + 4, "font-size": 11, "text-anchor": "end",
    fill: "#5b6570"}, r)));
  for (let i = 0; i < nr; i++) {
    for (let j = 0; j < nc; j++) {
      const v = values[i][j];
      const x = labelW + j * cell, y = top + i * cell;
      const rect = svgEl("rect", {x, y, width: cell, height: cell, fill: colour(v, scale, max),
        stroke: o.highlight && o.highlight[i][j] ? "#f59f00" : "#ffffff",
        "stroke-width": o.highlight && o.highlight[i][j] ? 3 : 1, "data-cell": `${i},${j}`});
      const label = `${o.rowName || "row"} ${rows[i]}, ${o.colName || "col"} ${cols[j]}: ${v === null ? "-inf" : Number(v).toPrecision(6)}`;
      rect.appendChild(svgEl("title", {}, label));
      if (o.onHover) rect.addEventListener("mouseenter", () => o.onHover(label));
      if (o.onClick) rect.addEventListener("click", () => o.onClick(i, j));
      svg.appendChild(rect);
      if (showValues) svg.appendChild(svgEl("text", {x: x + cell / 2, y: y + cell / 2 + 4,
        "font-size": Math.min(12, cell / 3.4), "text-anchor": "middle", "pointer-events": "none",
        fill: inkFor(v, scale, max), "data-testid": `${o.id}-${i}-${j}`}, fmt(v, decimals)));
    }
  }
  (o.groupCols || []).forEach((j) => svg.appendChild(svgEl("line", {x1: labelW + j * cell,
    x2: labelW + j * cell, y1: top, y2: top + nr * cell, stroke: "#111", "stroke-width": 2})));
  (o.groupRows || []).forEach((i) => svg.appendChild(svgEl("line", {x1: labelW,
    x2: labelW + nc * cell, y1: top + i * cell, y2: top + i * cell, stroke: "#111", "stroke-width": 2})));
  return svg;
}

// A simple chart: bars or lines over x, in SVG. series: [{name, values, colour}]
function chart(o) {
  const W = o.width || 420, H = o.height || 220, L = 44, B = 30, T = 26, R = 10;
  const svg = svgEl("svg", {xmlns: SVGNS, width: W, height: H, viewBox: `0 0 ${W} ${H}`,
    "font-family": "system-ui, sans-serif", "data-testid": `fig-${o.id}`});
  svg.appendChild(svgEl("rect", {x: 0, y: 0, width: W, height: H, fill: "#ffffff"}));
  svg.appendChild(svgEl("text", {x: 4, y: 15, "font-size": 13, "font-weight": 600, fill: "#1b1f24"}, o.title));
  const n = o.series[0].values.length;
  const ymax = o.ymax ?? Math.max(1e-12, ...o.series.flatMap((s) => s.values));
  const px = (i) => L + (W - L - R) * (o.kind === "bar" ? i / n : (n === 1 ? 0.5 : i / (n - 1)));
  const py = (y) => T + (H - T - B) * (1 - y / ymax);
  svg.appendChild(svgEl("line", {x1: L, x2: W - R, y1: H - B, y2: H - B, stroke: "#888"}));
  svg.appendChild(svgEl("line", {x1: L, x2: L, y1: T, y2: H - B, stroke: "#888"}));
  [0, ymax / 2, ymax].forEach((y) => svg.appendChild(svgEl("text", {x: L - 4, y: py(y) + 4,
    "font-size": 10, "text-anchor": "end", fill: "#5b6570"}, y >= 1000 ? human(y) : y >= 100 ? y.toFixed(0) : y.toPrecision(2))));
  (o.xlabels || []).forEach((lab, i) => { if (lab !== "") svg.appendChild(svgEl("text", {
    x: px(i) + (o.kind === "bar" ? (W - L - R) / n / 2 : 0), y: H - B + 13, "font-size": 10,
    "text-anchor": "middle", fill: "#5b6570"}, lab)); });
  if (o.xtitle) svg.appendChild(svgEl("text", {x: (L + W) / 2, y: H - 3, "font-size": 11,
    "text-anchor": "middle", fill: "#5b6570"}, o.xtitle));
  o.series.forEach((s, k) => {
    if (o.kind === "bar") {
      const bw = (W - L - R) / n / o.series.length;
      s.values.forEach((v, i) => svg.appendChild(svgEl("rect", {x: px(i) + k * bw, y: py(v),
        width: Math.max(1, bw - 1), height: H - B - py(v), fill: s.colour, opacity: 0.8})));
    } else {
      svg.appendChild(svgEl("polyline", {points: s.values.map((v, i) => `${px(i)},${py(v)}`).join(" "),
        fill: "none", stroke: s.colour, "stroke-width": 2}));
      s.values.forEach((v, i) => svg.appendChild(svgEl("circle", {cx: px(i), cy: py(v), r: 2.5, fill: s.colour})));
    }
    svg.appendChild(svgEl("rect", {x: L + 10, y: T + 2 + 14 * k, width: 10, height: 10, fill: s.colour}));
    svg.appendChild(svgEl("text", {x: L + 24, y: T + 11 + 14 * k, "font-size": 11, fill: "#1b1f24"}, s.name));
  });
  return svg;
}

// A figure box: caption, the SVG, and SVG / PNG export buttons.
function figure(parent, name, caption, svg, extraClass) {
  const box = htmlEl("div", {class: "figure" + (extraClass ? " " + extraClass : ""), id: `figure-${name}`});
  const cap = htmlEl("div", {class: "caption"});
  cap.appendChild(htmlEl("span", {}, caption));
  const exp = htmlEl("span", {class: "export"});
  const bs = htmlEl("button", {"data-testid": `export-svg-${name}`, title: "download as SVG"}, "SVG");
  const bp = htmlEl("button", {"data-testid": `export-png-${name}`, title: "download as PNG"}, "PNG");
  bs.addEventListener("click", () => exportSVG(svg, name));
  bp.addEventListener("click", () => exportPNG(svg, name));
  exp.append(bs, bp);
  cap.appendChild(exp);
  box.append(cap, svg);
  parent.appendChild(box);
  return box;
}

function download(blob, filename) {
  const a = htmlEl("a", {href: URL.createObjectURL(blob), download: filename});
  document.body.appendChild(a);
  a.click();
  setTimeout(() => { URL.revokeObjectURL(a.href); a.remove(); }, 1000);
}

function svgText(svg) {
  const copy = svg.cloneNode(true);
  copy.setAttribute("xmlns", SVGNS);
  return '<?xml version="1.0" encoding="UTF-8"?>\n' + new XMLSerializer().serializeToString(copy);
}

function exportSVG(svg, name) {
  download(new Blob([svgText(svg)], {type: "image/svg+xml"}), `gptlab-${name}.svg`);
}

// PNG without a server: draw the SVG (as a blob image) onto a canvas at 2x.
function exportPNG(svg, name) {
  const w = +svg.getAttribute("width"), h = +svg.getAttribute("height"), k = 2;
  const url = URL.createObjectURL(new Blob([svgText(svg)], {type: "image/svg+xml"}));
  const img = new Image();
  img.onload = () => {
    const canvas = htmlEl("canvas", {width: w * k, height: h * k});
    const ctx = canvas.getContext("2d");
    ctx.fillStyle = "#ffffff";
    ctx.fillRect(0, 0, w * k, h * k);
    ctx.drawImage(img, 0, 0, w * k, h * k);
    URL.revokeObjectURL(url);
    canvas.toBlob((blob) => download(blob, `gptlab-${name}.png`), "image/png");
  };
  img.onerror = () => showError("PNG export failed: the browser could not draw the SVG");
  img.src = url;
}

// ------------------------------------------------------------------ tabs

const loaders = {};
const loaded = new Set();

function showView(name) {
  document.querySelectorAll("#tabs button").forEach((b) => b.classList.toggle("active", b.dataset.view === name));
  document.querySelectorAll(".view").forEach((s) => { s.hidden = s.id !== `view-${name}`; });
  if (location.hash !== `#${name}`) history.replaceState(null, "", `#${name}`);
  if (!loaded.has(name) && loaders[name]) { loaded.add(name); loaders[name](); }
}

// ------------------------------------------------------------------ 1. self-attention

const STAGES = [
  {title: "Stage 1 of 5 · Q, K, V projections",
   formula: "Q = X·W_Q,   K = X·W_K,   V = X·W_V",
   changed: (d) => `Each token's embedding (a row of X, d = ${d.d}) is projected three ways: into a query (what it looks for), a key (what it offers) and a value (what it passes on). Edit any input cell and everything downstream recomputes.`},
  {title: "Stage 2 of 5 · scores = QKᵀ / √d_k",
   formula: "scores = Q·Kᵀ / √d_k",
   changed: (d) => `Row i, column j is how well query i matches key j, divided by √d_k = ${fmt(d.sqrt_d_k)} so the spread stays near 1 whatever d_k is.`},
  {title: "Stage 3 of 5 · the causal mask",
   formula: "masked[i, j] = scores[i, j] if j ≤ i, else −∞",
   changed: (d) => d.causal
     ? "The upper triangle (a token looking at later tokens) is set to −∞: a GPT predicts the next token, so it must not see it. Outlined cells are the ones the mask changed."
     : "Mask off: masked = scores, every token sees every token (BERT-style, bidirectional). Switch it on to hide the future."},
  {title: "Stage 4 of 5 · softmax weights",
   formula: "weights[i, :] = softmax(masked[i, :]),  each row sums to 1",
   changed: (d) => d.causal
     ? `exp(−∞) = 0, so masked keys get weight 0. Row 0 ("${d.tokens[0]}") has one allowed key, itself: its weight is exactly ${fmt(d.weights[0][0])}.`
     : `Without the mask every row spreads its weight over all ${d.tokens.length} tokens; row 0 ("${d.tokens[0]}") now gives itself only ${fmt(d.weights[0][0])}.`},
  {title: "Stage 5 of 5 · output = weights · V",
   formula: "out = weights · V",
   changed: () => "Each output row is a weighted average of the value rows: what the token gathers from the tokens it attends to. This is one head's output, before concatenation and W_O."},
];

const calc = {stage: 0, data: null, edits: {}};

function calcBody() {
  const body = {tokens: $("calc-tokens").value, d: +$("calc-d").value, seed: +$("calc-seed").value,
    causal: $("mask-toggle").checked};
  for (const [k, v] of Object.entries(calc.edits)) body[k] = v;
  return body;
}

const calcCompute = guarded(async () => {
  calc.data = await api("/api/attention", calcBody());
  renderCalc();
});

function editGrid(name, title, matrix, rows, cols) {
  const box = htmlEl("div", {class: "figure"});
  box.appendChild(htmlEl("div", {class: "caption"}, `${title} (editable)`));
  const table = htmlEl("table", {class: "editgrid", "data-testid": `grid-${name}`});
  const head = htmlEl("tr");
  head.appendChild(htmlEl("th"));
  cols.forEach((c) => head.appendChild(htmlEl("th", {}, c)));
  table.appendChild(head);
  matrix.forEach((row, i) => {
    const tr = htmlEl("tr");
    tr.appendChild(htmlEl("th", {}, rows[i]));
    row.forEach((v, j) => {
      const td = htmlEl("td");
      const input = htmlEl("input", {type: "number", step: "0.01", value: v,
        id: `${name}-${i}-${j}`, "data-testid": `${name}-cell-${i}-${j}`});
      if (calc.edits[name]) input.classList.add("edited");
      input.addEventListener("change", () => {
        const value = Number(input.value);
        if (input.value.trim() === "" || !Number.isFinite(value)) { showError(`${title}[${i}][${j}] must be a number`); return; }
        const m = (calc.edits[name] || calc.data[name]).map((r) => r.slice());
        m[i][j] = value;
        calc.edits[name] = m;
        calcCompute();
      });
      td.appendChild(input);
      tr.appendChild(td);
    });
    table.appendChild(tr);
  });
  box.appendChild(table);
  return box;
}

function renderCalc() {
  const d = calc.data, s = calc.stage, stage = STAGES[s];
  if (!d) return;
  $("calc-stage").textContent = stage.title;
  $("calc-formula").textContent = stage.formula;
  $("calc-changed").textContent = stage.changed(d);
  $("calc-back").disabled = s === 0;
  $("calc-next").disabled = s === STAGES.length - 1;
  const maskLive = s === 2 || s === 3;
  $("mask-toggle").disabled = !maskLive;
  $("mask-toggle").parentElement.title = maskLive ? "switch the causal mask" : "live at stages 3 and 4";
  const tok = d.tokens, dims = [...Array(d.d).keys()].map((j) => `d${j}`);
  const inputs = $("calc-inputs"), figs = $("calc-figures");
  inputs.replaceChildren();
  figs.replaceChildren();
  // Cells shrink as the matrices grow (up to 64 x 64); numbers show while they fit.
  const cell = Math.max(12, Math.min(40, Math.floor(560 / Math.max(tok.length, d.d))));
  const hm = (name, caption, values, extra) => figure(figs, name, caption, heatmap({id: name,
    values, rows: tok, cols: dims, title: caption, cell, ...extra}));
  const tt = {rows: tok, cols: tok, rowName: "query", colName: "key"};
  if (s === 0) {
    inputs.appendChild(editGrid("x", "X (embeddings)", d.x, tok, dims));
    for (const w of ["w_q", "w_k", "w_v"]) inputs.appendChild(editGrid(w, "W_" + w.slice(2).toUpperCase(), d[w], dims, dims));
    hm("q", "Q = X·W_Q", d.q);
    hm("k", "K = X·W_K", d.k);
    hm("v", "V = X·W_V", d.v);
  } else if (s === 1) {
    hm("q", "Q", d.q);
    figure(figs, "kt", "Kᵀ", heatmap({id: "kt", values: transpose(d.k), rows: dims, cols: tok, title: "Kᵀ", cell}));
    hm("scores", "scores = QKᵀ/√d_k", d.scores, tt);
  } else if (s === 2) {
    hm("scores", "scores", d.scores, tt);
    const changed = d.masked.map((row, i) => row.map((v, j) => v !== d.scores[i][j]));
    hm("masked", d.causal ? "masked (causal)" : "masked (no mask)", d.masked, {...tt, highlight: changed});
    hm("other-masked", d.causal ? "for comparison: mask off" : "for comparison: mask on", d.other.masked, tt);
  } else if (s === 3) {
    hm("weights", d.causal ? "weights (causal)" : "weights (no mask)", d.weights, {...tt, scale: "seq", max: 1});
    hm("other-weights", d.causal ? "for comparison: mask off" : "for comparison: mask on", d.other.weights, {...tt, scale: "seq", max: 1});
    const diff = d.weights.map((row, i) => row.map((v, j) => v - d.other.weights[i][j]));
    hm("weights-diff", "difference (this − other)", diff, tt);
    figure(figs, "rowsums", "row sums", heatmap({id: "rowsums", values: d.weights.map((r) => [r.reduce((a, b) => a + b, 0)]),
      rows: tok, cols: ["Σ"], title: "row sums", scale: "seq", max: 1, cell: Math.max(cell, 30)}));
  } else {
    hm("weights", "weights", d.weights, {...tt, scale: "seq", max: 1});
    hm("v", "V", d.v);
    hm("out", "out = weights·V", d.out);
  }
}

loaders.calc = () => {
  const restart = () => { calc.edits = {}; calcCompute(); };
  $("calc-next").addEventListener("click", () => { calc.stage = Math.min(4, calc.stage + 1); renderCalc(); });
  $("calc-back").addEventListener("click", () => { calc.stage = Math.max(0, calc.stage - 1); renderCalc(); });
  $("mask-toggle").addEventListener("change", calcCompute);
  $("calc-reset").addEventListener("click", restart);
  for (const id of ["calc-tokens", "calc-d", "calc-seed"]) $(id).addEventListener("change", restart);
  calcCompute();
};

// ------------------------------------------------------------------ 2. sqrt(d_k)

const scalingCompute = guarded(async () => {
  const d = await api("/api/scaling", {d_k: +$("scaling-dk").value, n_keys: +$("scaling-keys").value,
    seed: +$("scaling-seed").value});
  const st = $("scaling-stats");
  st.replaceChildren();
  const t = htmlEl("table", {class: "stats"});
  const rows = [["", "unscaled q·k", "scaled q·k/√d_k"],
    ["std of the scores", fmt(d.std_raw, 3) + ` (√d_k = ${fmt(d.expected_std_raw, 3)})`, fmt(d.std_scaled, 3)],
    ["mean max softmax weight", fmt(d.unscaled.max_weight, 3), fmt(d.scaled.max_weight, 3)],
    [`mean entropy, nats (uniform = ${fmt(d.max_entropy, 3)})`, fmt(d.unscaled.entropy, 3), fmt(d.scaled.entropy, 3)]];
  rows.forEach((r, i) => {
    const tr = htmlEl("tr");
    r.forEach((c, j) => tr.appendChild(htmlEl(i === 0 ? "th" : "td", j ? {"data-testid": `scaling-${i}-${j}`} : {}, c)));
    t.appendChild(tr);
  });
  st.appendChild(t);
  const figs = $("scaling-figures");
  figs.replaceChildren();
  const [lo, hi] = d.hist_range, step = (hi - lo) / d.bins;
  const xl = d.hist_raw.map((_, i) => (i % 10 === 0 ? (lo + i * step).toFixed(0) : ""));
  figure(figs, "scaling-hist", "spread of the scores", chart({id: "scaling-hist", kind: "bar",
    title: `scores over ${d.n_queries}×${d.n_keys} pairs, d_k = ${d.d_k}`, xlabels: xl, xtitle: "score",
    series: [{name: "unscaled q·k", values: d.hist_raw, colour: "#b2182b"},
             {name: "scaled q·k/√d_k", values: d.hist_scaled, colour: "#2166ac"}]}));
  figure(figs, "scaling-row", "one query's softmax weights", chart({id: "scaling-row", kind: "bar",
    title: "softmax over the keys of query 0", ymax: 1, xlabels: d.example_row_scaled.map((_, i) => String(i)),
    xtitle: "key", series: [{name: "unscaled", values: d.example_row_unscaled, colour: "#b2182b"},
                            {name: "scaled", values: d.example_row_scaled, colour: "#2166ac"}]}));
  figure(figs, "scaling-sweep", "saturation as d_k grows", chart({id: "scaling-sweep", kind: "line",
    title: "mean max softmax weight vs d_k", ymax: 1, xlabels: d.sweep.map((s) => String(s.d_k)), xtitle: "d_k",
    series: [{name: "unscaled", values: d.sweep.map((s) => s.unscaled.max_weight), colour: "#b2182b"},
             {name: "scaled", values: d.sweep.map((s) => s.scaled.max_weight), colour: "#2166ac"}]}));
});

loaders.scaling = () => {
  const sel = $("scaling-dk");
  for (let k = 0; k <= 12; k++) sel.appendChild(htmlEl("option", {value: 2 ** k}, String(2 ** k)));
  sel.value = "64";
  for (const id of ["scaling-dk", "scaling-keys", "scaling-seed"]) $(id).addEventListener("change", scalingCompute);
  scalingCompute();
};

// ------------------------------------------------------------------ runs (views 3 and 6)

let runsPromise = null;
function fillRuns(select) {
  runsPromise = runsPromise || api("/api/runs");
  return runsPromise.then((d) => {
    select.replaceChildren();
    if (!d.runs.length) select.appendChild(htmlEl("option", {value: ""}, `no runs in ${d.root}`));
    d.runs.forEach((r) => select.appendChild(htmlEl("option", {value: r}, r)));
    return d.runs;
  });
}

// ------------------------------------------------------------------ 3. heads of a model

const heads = {data: null};

const headsCompute = guarded(async () => {
  const run = $("heads-run").value;
  if (!run) { showError("no run chosen: train one into the runs folder (gptlab train --out runs/NAME)"); return; }
  const layer = +$("heads-layer").value || 0;
  const d = await api("/api/heads", {run, prompt: $("heads-prompt").value, layer});
  heads.data = d;
  const layerSel = $("heads-layer"), headSel = $("heads-head");
  if (layerSel.options.length !== d.n_layer) {
    layerSel.replaceChildren(...[...Array(d.n_layer).keys()].map((i) => htmlEl("option", {value: i}, String(i))));
    layerSel.value = String(layer);
  }
  if (headSel.options.length !== d.n_head + 1) {
    const keep = headSel.value;
    headSel.replaceChildren(htmlEl("option", {value: "all"}, "all (grid)"),
      ...[...Array(d.n_head).keys()].map((h) => htmlEl("option", {value: h}, String(h))));
    headSel.value = keep && keep !== "all" && +keep < d.n_head ? keep : "all";
  }
  renderHeads();
});

function renderHeads() {
  const d = heads.data, figs = $("heads-figures"), wo = $("heads-wo");
  figs.replaceChildren();
  wo.replaceChildren();
  const T = d.tokens.length;
  const tok = d.tokens.map(tokenLabel);
  const hover = (label) => { $("heads-hover").textContent = label; };
  const choice = $("heads-head").value;
  // The grid shows every layer when that stays readable, else the chosen layer's heads.
  const layers = choice === "all" && d.n_layer * d.n_head <= 32 ? [...Array(d.n_layer).keys()] : [d.layer];
  const list = choice === "all" ? [...Array(d.n_head).keys()] : [+choice];
  const cell = choice === "all" ? Math.max(5, Math.min(22, Math.floor(260 / T))) : Math.max(10, Math.min(40, Math.floor(640 / T)));
  for (const l of layers) {
    const line = htmlEl("div", {class: "row"});
    figs.appendChild(line);
    for (const h of list) {
      const name = `head-${l}-${h}`;
      figure(line, name, `layer ${l}, head ${h}`,
        heatmap({id: name, values: d.attention[l][h], rows: tok, cols: tok, rowName: "query", colName: "key",
          title: `L${l} H${h} attention`, scale: "seq", max: 1, cell, showValues: cell >= 26, onHover: hover}));
    }
  }
  $("heads-wo-title").textContent = `Layer ${d.layer}: the concatenation of its heads and the output projection W_O`;
  const hs = d.head_dim, C = d.n_embd;
  const headCols = [...Array(d.n_head * hs).keys()].map((j) => (j % hs === 0 ? `h${j / hs}` : ""));
  const c2 = Math.max(6, Math.min(14, Math.floor(420 / (d.n_head * hs))));
  figure(wo, "concat", `concat of ${d.n_head} heads (T × ${d.n_head * hs})`, heatmap({id: "concat", values: d.concat,
    rows: tok, cols: headCols, title: "concat(head_0 … head_H−1)", cell: c2, showValues: false, showColLabels: true,
    groupCols: [...Array(d.n_head - 1).keys()].map((h) => (h + 1) * hs), onHover: hover}));
  figure(wo, "w_o", `W_O (${d.n_head * hs} × ${C})`, heatmap({id: "w_o", values: d.w_o, rows: headCols,
    cols: [...Array(C).keys()].map(() => ""), title: "W_O", cell: Math.max(5, Math.min(10, Math.floor(320 / C))),
    showValues: false, groupRows: [...Array(d.n_head - 1).keys()].map((h) => (h + 1) * hs), onHover: hover}));
  figure(wo, "attn-out", `output = concat·W_O + b (T × ${C})`, heatmap({id: "attn-out", values: d.out, rows: tok,
    cols: [...Array(C).keys()].map(() => ""), title: "attention output", cell: Math.max(5, Math.min(10, Math.floor(320 / C))),
    showValues: false, onHover: hover}));
  // Show, with the page's own arithmetic, that the output is the concatenation times W_O.
  let worst = 0;
  d.out.forEach((row, t) => row.forEach((v, c) => {
    let s = d.b_o ? d.b_o[c] : 0;
    d.concat[t].forEach((x, j) => { s += x * d.w_o[j][c]; });
    worst = Math.max(worst, Math.abs(s - v));
  }));
  $("heads-check").textContent = `Check: recomputing concat·W_O + b in this page matches the model's attention output to ${worst.toExponential(1)} (largest difference over ${T}×${C} numbers).`;
}

loaders.heads = () => {
  fillRuns($("heads-run")).then((runs) => { if (runs.length) headsCompute(); });
  $("heads-go").addEventListener("click", headsCompute);
  $("heads-layer").addEventListener("change", headsCompute);
  $("heads-run").addEventListener("change", () => { $("heads-layer").value = "0"; headsCompute(); });
  $("heads-head").addEventListener("change", () => heads.data && renderHeads());
  $("heads-prompt").addEventListener("change", headsCompute);
};

// ------------------------------------------------------------------ 4. positions

const sinCompute = guarded(async () => {
  const d = await api("/api/sinusoidal", {positions: +$("sin-positions").value, d_model: +$("sin-d").value});
  const figs = $("sin-figures");
  figs.replaceChildren();
  const cell = Math.max(3, Math.min(10, Math.floor(520 / Math.max(d.positions, d.d_model))));
  const pos = [...Array(d.positions).keys()].map((p) => (p % 8 === 0 ? String(p) : ""));
  const dims = [...Array(d.d_model).keys()].map((j) => (j % 8 === 0 ? String(j) : ""));
  figure(figs, "sinusoidal", `PE (${d.positions} positions × ${d.d_model} dims)`, heatmap({id: "sinusoidal",
    values: d.table, rows: pos, cols: dims, title: "sinusoidal PE", cell, showValues: false, max: 1,
    showColLabels: true, rowName: "position", colName: "dim"}));
  figure(figs, "sinusoidal-sim", "PE·PEᵀ: similarity falls with distance", heatmap({id: "sinusoidal-sim",
    values: d.similarity, rows: pos, cols: pos, title: "PE[m]·PE[n]", cell: Math.max(3, Math.min(10, Math.floor(520 / d.positions))),
    showValues: false, scale: "div", showColLabels: true, rowName: "m", colName: "n"}));
});

function ropeCircle(d) {
  const W = 300, H = 300, cx = 150, cy = 160, r = 110;
  const svg = svgEl("svg", {xmlns: SVGNS, width: W, height: H, viewBox: `0 0 ${W} ${H}`,
    "font-family": "system-ui, sans-serif", "data-testid": "fig-rope-circle"});
  svg.appendChild(svgEl("rect", {x: 0, y: 0, width: W, height: H, fill: "#ffffff"}));
  svg.appendChild(svgEl("text", {x: 4, y: 15, "font-size": 13, "font-weight": 600}, "pair 0 of q (red) and k (blue) at each position"));
  svg.appendChild(svgEl("circle", {cx, cy, r, fill: "none", stroke: "#ddd"}));
  const maxLen = Math.max(...d.q_pair0.concat(d.k_pair0).map(([a, b]) => Math.hypot(a, b)), 1e-9);
  const draw = (pts, colour) => pts.forEach(([a, b], m) => {
    const x = cx + (a / maxLen) * r, y = cy - (b / maxLen) * r;
    svg.appendChild(svgEl("line", {x1: cx, y1: cy, x2: x, y2: y, stroke: colour, "stroke-width": m === 0 ? 2.5 : 1, opacity: 0.35 + 0.65 * (1 - m / pts.length)}));
    svg.appendChild(svgEl("text", {x, y: y - 2, "font-size": 9, fill: colour}, String(m)));
  });
  draw(d.q_pair0, "#b2182b");
  draw(d.k_pair0, "#2166ac");
  return svg;
}

const ropeCompute = guarded(async () => {
  const d = await api("/api/rope", {head_dim: +$("rope-dim").value, base: +$("rope-base").value,
    offset: +$("rope-offset").value, seed: +$("rope-seed").value});
  const figs = $("rope-figures");
  figs.replaceChildren();
  figure(figs, "rope-circle", "rotation by m·θ₀ (θ₀ = 1 rad)", ropeCircle(d));
  const P = d.positions, pos = [...Array(P).keys()].map(String);
  const same = d.scores.map((row, m) => row.map((_, n) => n - m === d.offset));
  figure(figs, "rope-scores", `RoPE(q, m)·RoPE(k, n): constant along each diagonal`, heatmap({id: "rope-scores",
    values: d.scores, rows: pos, cols: pos, title: "q_m · k_n", cell: 22, showValues: false, highlight: same,
    rowName: "m (query)", colName: "n (key)"}));
  const tbl = $("rope-table");
  tbl.replaceChildren();
  const t = htmlEl("table", {class: "stats"});
  const head = htmlEl("tr");
  ["m", "n = m + " + d.offset, "q_m · k_n"].forEach((h) => head.appendChild(htmlEl("th", {}, h)));
  t.appendChild(head);
  d.same_offset.forEach((s, i) => {
    const tr = htmlEl("tr");
    tr.append(htmlEl("td", {}, String(s.m)), htmlEl("td", {}, String(s.n)),
      htmlEl("td", {"data-testid": `rope-score-${i}`}, s.score.toFixed(5)));
    t.appendChild(tr);
  });
  tbl.append(htmlEl("p", {}, `Same offset ${d.offset}, anywhere in the sequence: the same score (unrotated q·k = ${d.unrotated_score.toFixed(5)}).`), t);
});

loaders.positions = () => {
  for (const id of ["sin-positions", "sin-d"]) $(id).addEventListener("change", sinCompute);
  for (const id of ["rope-dim", "rope-base", "rope-offset", "rope-seed"]) $(id).addEventListener("change", ropeCompute);
  sinCompute();
  ropeCompute();
};

// ------------------------------------------------------------------ 5. parameters

// The form's fields; a "choice" field's options come from the server (/api/presets).
const PARAM_FIELDS = [
  ["vocab_size", "number"], ["block_size", "number"], ["n_layer", "number"], ["n_head", "number"],
  ["n_kv_head", "number"], ["n_embd", "number"], ["ffn_hidden", "number"],
  ["pos_encoding", "choice"], ["norm", "choice"], ["mlp", "choice"],
  ["bias", "bool"], ["tie_embeddings", "bool"]];
let presets = {}, choices = {};

function fillParamsForm(cfg) {
  const form = $("params-form");
  form.replaceChildren();
  for (const [name, kind] of PARAM_FIELDS) {
    const label = htmlEl("label", {}, name + " ");
    let input;
    if (kind === "choice") {
      input = htmlEl("select");
      choices[name].forEach((k) => input.appendChild(htmlEl("option", {value: k}, k)));
      input.value = cfg[name];
    } else if (kind === "bool") {
      input = htmlEl("input", {type: "checkbox"});
      input.checked = !!cfg[name];
    } else {
      input = htmlEl("input", {type: "number", min: 1, value: cfg[name]});
    }
    input.id = `param-${name}`;
    input.setAttribute("data-testid", `param-${name}`);
    input.addEventListener("input", paramsComputeSoon);
    label.appendChild(input);
    form.appendChild(label);
  }
}

function paramsConfig() {
  const cfg = {...presets[$("params-preset").value]};
  for (const [name, kind] of PARAM_FIELDS) {
    const input = $(`param-${name}`);
    if (kind === "bool") cfg[name] = input.checked;
    else if (kind === "choice") cfg[name] = input.value;
    else cfg[name] = input.value === "" ? null : Number(input.value);
  }
  return cfg;
}


const paramsCompute = guarded(async () => {
  const d = await api("/api/params", {config: paramsConfig()});
  $("params-summary").innerHTML = "";
  const p = htmlEl("p");
  p.innerHTML = `total <b data-testid="params-total">${d.total.toLocaleString("en-US")}</b> parameters (${human(d.total).replace(" G", " B")}); ` +
    `12·L·d² = <b data-testid="params-estimate">${d.estimate_12Ld2.toLocaleString("en-US")}</b> ` +
    `(${(100 * d.estimate_error).toFixed(1)}% vs the total, ${(100 * d.estimate_error_blocks).toFixed(1)}% vs the blocks alone: ` +
    `12·L·d² counts only the blocks' matrices). Forward ≈ ${human(d.flops.forward_per_token)}FLOP per token at ${d.seq_len} tokens; ` +
    `training with AdamW in fp32 ≈ ${humanBytes(d.memory.training_adamw_fp32)} (weights, grads, 2 moments).`;
  $("params-summary").appendChild(p);
  const t = $("params-table");
  t.replaceChildren();
  const head = htmlEl("tr");
  ["part", "parameters", "× count", "note"].forEach((h) => head.appendChild(htmlEl("th", {}, h)));
  t.appendChild(head);
  d.rows.forEach((r) => {
    const tr = htmlEl("tr");
    tr.append(htmlEl("td", {}, r.name), htmlEl("td", {class: "num"}, r.params.toLocaleString("en-US")),
      htmlEl("td", {class: "num"}, String(r.count)), htmlEl("td", {}, r.note));
    t.appendChild(tr);
  });
  const figs = $("params-figures");
  figs.replaceChildren();
  figure(figs, "params-breakdown", "where the parameters are", chart({id: "params-breakdown", kind: "bar",
    width: 560, title: `parameters by part (total ${human(d.total)})`,
    xlabels: d.rows.map((r) => r.name.split(" (")[0].slice(0, 14)),
    series: [{name: "params × count", values: d.rows.map((r) => r.params * r.count), colour: "#2166ac"}]}));
});
const paramsComputeSoon = debounce(paramsCompute, 120);

loaders.params = guarded(async () => {
  ({presets, choices} = await api("/api/presets"));
  const sel = $("params-preset");
  Object.keys(presets).forEach((n) => sel.appendChild(htmlEl("option", {value: n}, n)));
  sel.value = "gpt2";
  sel.addEventListener("change", () => { fillParamsForm(presets[sel.value]); paramsCompute(); });
  fillParamsForm(presets.gpt2);
  paramsCompute();
});

// ------------------------------------------------------------------ 6. head scores

const scores = {data: null};

const scoresCompute = guarded(async () => {
  const run = $("scores-run").value;
  if (!run) { showError("no run chosen: train one into the runs folder"); return; }
  const prompt = $("scores-prompt").value;
  const d = await api("/api/head_scores", {run, prompt, seed: +$("scores-seed").value});
  scores.data = d;
  $("scores-tokens").textContent = `${prompt ? "prompt" : "random tokens, repeated twice"}: ${JSON.stringify(d.tokens.join(""))}  (loss ${d.loss.toFixed(4)})`;
  const figs = $("scores-figures");
  figs.replaceChildren();
  $("scores-head").replaceChildren();
  $("scores-ablation").textContent = "";
  const L = [...Array(d.n_layer).keys()].map((l) => `L${l}`), H = [...Array(d.n_head).keys()].map((h) => `H${h}`);
  const open = (i, j) => openScoredHead(i, j);
  for (const [name, values] of Object.entries(d.scores)) {
    figure(figs, `scores-${name}`, `${name.replace("_", "-")} score`, heatmap({id: `scores-${name}`, values, rows: L, cols: H,
      title: name.replace("_", "-"), scale: "seq", max: 1, cell: 44, onClick: open, rowName: "layer", colName: "head"}), "clickable");
  }
  figure(figs, "scores-ablation", "loss change when the head is zeroed", heatmap({id: "scores-ablation-grid",
    values: d.ablation_deltas, rows: L, cols: H, title: "Δ loss (ablated − clean)", cell: 44, decimals: 3,
    onClick: open, rowName: "layer", colName: "head"}), "clickable");
});

const openScoredHead = guarded(async (layer, head) => {
  const d = scores.data;
  const h = await api("/api/heads", {run: d.run, ids: d.ids, layer});
  const box = $("scores-head");
  box.replaceChildren();
  const tok = h.tokens.map(tokenLabel);
  const cell = Math.max(8, Math.min(20, Math.floor(520 / tok.length)));
  figure(box, `scored-head`, `layer ${layer}, head ${head}: its pattern`, heatmap({id: "scored-head",
    values: h.attention[layer][head], rows: tok, cols: tok, title: `L${layer} H${head}`, scale: "seq", max: 1,
    cell, showValues: false, rowName: "query", colName: "key"}));
  const btn = htmlEl("button", {"data-testid": "ablate-head"}, `Ablate L${layer} H${head}`);
  btn.addEventListener("click", guarded(async () => {
    const a = await api("/api/ablate", {run: d.run, ids: d.ids, layer, head});
    $("scores-ablation").textContent = `Zeroing L${layer} H${head}: loss ${a.loss.toFixed(4)} → ${a.ablated_loss.toFixed(4)} (Δ ${a.delta >= 0 ? "+" : ""}${a.delta.toFixed(4)} nats).`;
  }));
  box.appendChild(btn);
});

loaders.scores = () => {
  fillRuns($("scores-run")).then((runs) => { if (runs.length) scoresCompute(); });
  $("scores-go").addEventListener("click", scoresCompute);
};

// ------------------------------------------------------------------ 7. quiz

const quiz = {q: null, seed: Math.floor(Math.random() * 100000)};

const quizNew = guarded(async () => {
  quiz.seed += 1;
  const q = await api("/api/quiz", {kind: $("quiz-kind").value || null, seed: quiz.seed});
  quiz.q = q;
  $("quiz-question").textContent = q.question;
  $("quiz-result").replaceChildren();
  const box = $("quiz-answer");
  box.replaceChildren();
  if (q.format === "choice") {
    q.choices.forEach((c) => {
      const label = htmlEl("label", {class: "choice"});
      const input = htmlEl("input", {type: "radio", name: "quiz-choice", value: c.id, "data-testid": `quiz-choice-${c.id}`});
      label.append(input, " " + c.text);
      box.appendChild(label);
    });
  } else {
    box.appendChild(htmlEl("input", {id: "quiz-input", "data-testid": "quiz-input", size: 40,
      placeholder: q.format === "list" ? "e.g. 0.25, 0.75" : "a number"}));
  }
});

const quizCheck = guarded(async () => {
  const q = quiz.q;
  if (!q) return;
  const answer = q.format === "choice"
    ? (document.querySelector("input[name=quiz-choice]:checked") || {}).value
    : $("quiz-input").value;
  if (answer === undefined || answer === "") { showError("give an answer first"); return; }
  const r = await api("/api/quiz/check", {kind: q.kind, seed: q.seed, answer});
  const out = $("quiz-result");
  out.replaceChildren(htmlEl("p", {class: r.correct ? "ok" : "no", "data-testid": "quiz-verdict"},
    r.correct ? "Correct." : `Not quite: the answer is ${Array.isArray(r.expected) ? r.expected.map((x) => x.toFixed(2)).join(", ") : typeof r.expected === "number" && !Number.isInteger(r.expected) ? r.expected.toFixed(4) : r.expected}.`),
    htmlEl("p", {}, "Worked answer: " + r.worked));
});

loaders.quiz = () => {
  $("quiz-new").addEventListener("click", quizNew);
  $("quiz-submit").addEventListener("click", quizCheck);
  quizNew();
};

// ------------------------------------------------------------------ start

document.querySelectorAll("#tabs button").forEach((b) => b.addEventListener("click", () => showView(b.dataset.view)));
showView((location.hash || "#calc").slice(1) in loaders ? location.hash.slice(1) || "calc" : "calc");
