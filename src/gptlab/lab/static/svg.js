// Figures as SVG: heatmaps of matrices and simple bar or line charts.

import {fmt, human} from "./dom.js";

export const SVGNS = "http://www.w3.org/2000/svg";

export function svgEl(tag, attrs = {}, text) {
  const node = document.createElementNS(SVGNS, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  if (text !== undefined) node.textContent = text;
  return node;
}

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

// A matrix as an SVG heatmap. values: rows of numbers (null = −∞). Each cell carries a
// <title> for hover and, when shown, a text node with data-testid `${id}-${i}-${j}`.
export function heatmap(o) {
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
export function chart(o) {
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
