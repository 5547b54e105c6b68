// View 4: sinusoidal position encodings and RoPE.

import {api, guarded} from "./api.js";
import {$, htmlEl} from "./dom.js";
import {figure} from "./figure.js";
import {SVGNS, chart, headColour, heatmap, svgEl} from "./svg.js";

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
  // one-sided colours while every dot product is positive (the default), two-sided once any is not
  const positive = d.similarity.every((row) => row.every((v) => v >= 0));
  figure(figs, "sinusoidal-sim", "PE·PEᵀ: similarity falls with distance", heatmap({id: "sinusoidal-sim",
    values: d.similarity, rows: pos, cols: pos, title: "PE[m]·PE[n]", cell: Math.max(3, Math.min(10, Math.floor(520 / d.positions))),
    showValues: false, scale: positive ? "seq" : "div", showColLabels: true, rowName: "m", colName: "n"}));
  rulers(figs, d);
}, ["sin-figures"]);

// The chapter's rulers: a few dimensions of the table against position. The first pairs turn
// fast (a second hand), the last ones slowly (an hour hand); together they tell every
// position apart, as a clock's hands do.
function rulers(figs, d) {
  const D = d.d_model, picks = [...new Set([0, 2 * Math.floor(D / 8), 2 * Math.floor(D / 4), D - 2])].filter((j) => j >= 0 && j < D);
  const svg = chart({id: "sinusoidal-rulers", kind: "line", width: 420, height: 200, ymin: -1, ymax: 1,
    title: "rulers: dims of PE against position", xtitle: "position", ytitle: "PE value",
    xlabels: [...Array(d.positions).keys()].map((p) => (p % 8 === 0 ? String(p) : "")), xthin: true,
    series: picks.map((j, k) => ({name: `dim ${j} (period ${(2 * Math.PI * 10000 ** (j / D)).toFixed(j ? 0 : 1)})`,
      values: d.table.map((row) => row[j]), colour: headColour(k)}))});
  svg.dataset.dims = JSON.stringify(picks);
  svg.dataset.values = JSON.stringify(picks.map((j) => d.table.map((row) => row[j])));
  figure(figs, "sinusoidal-rulers", "rulers: fast dimensions near 0, slow ones near d", svg);
}

// Colours as CSS variables (style.css): the page's theme picks them, an export the light ones.
const RED = "var(--fig-red)", BLUE = "var(--fig-blue)";

function ropeCircle(d) {
  const W = 320, H = 340, cx = 160, cy = 196, r = 100;
  const title = "pair 0 of q (red) and k (blue) at each position";
  const svg = svgEl("svg", {xmlns: SVGNS, width: W, height: H, viewBox: `0 0 ${W} ${H}`,
    "font-family": "system-ui, sans-serif", "data-testid": "fig-rope-circle", role: "img", "aria-label": title});
  svg.appendChild(svgEl("rect", {x: 0, y: 0, width: W, height: H, fill: "#ffffff", class: "fig-bg"}));
  // the title on two lines: on one it is wider than the figure
  ["pair 0 of q (red) and k (blue) at each", "position m; labels on the outer rings"].forEach((line, k) => svg.appendChild(svgEl("text",
    {x: 4, y: 15 + 16 * k, "font-size": 13, "font-weight": 600, fill: "#1b1f24", class: "fig-title"}, line)));
  svg.appendChild(svgEl("circle", {cx, cy, r, fill: "none", stroke: "#888"}));
  const maxLen = Math.max(...d.q_pair0.concat(d.k_pair0).map(([a, b]) => Math.hypot(a, b)), 1e-9);
  // Each position's label sits on a ring outside the circle, in its vector's direction (q's
  // ring inside k's): at the vectors' tips, labels of short vectors piled up in the centre.
  const draw = (pts, colour, ring, name) => pts.forEach(([a, b], m) => {
    const x = cx + (a / maxLen) * r, y = cy - (b / maxLen) * r, len = Math.hypot(a, b) || 1;
    svg.appendChild(svgEl("line", {x1: cx, y1: cy, x2: x, y2: y, style: `stroke: ${colour}`, "stroke-width": m === 0 ? 2.5 : 1.2}));
    svg.appendChild(svgEl("text", {x: cx + (a / len) * ring, y: cy - (b / len) * ring, dy: "0.35em", "text-anchor": "middle",
      "font-size": 10, style: `fill: ${colour}`, "data-label": `${name}${m}`}, String(m)));
  });
  draw(d.q_pair0, RED, r + 12, "q");
  draw(d.k_pair0, BLUE, r + 30, "k");
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
}, ["rope-figures", "rope-table"]);

export function load() {
  for (const id of ["sin-positions", "sin-d"]) $(id).addEventListener("change", sinCompute);
  for (const id of ["rope-dim", "rope-base", "rope-offset", "rope-seed"]) $(id).addEventListener("change", ropeCompute);
  sinCompute();
  ropeCompute();
}
