// Figures as SVG: heatmaps of matrices (with a colour bar) and simple bar or line charts.
// Text and backgrounds carry classes (fig-bg, fig-title, fig-label) so the page's dark mode
// can restyle them; their attributes hold the light colours an exported file keeps.

import {fmt, human} from "./dom.js";

export const SVGNS = "http://www.w3.org/2000/svg";

export function svgEl(tag, attrs = {}, text) {
  const node = document.createElementNS(SVGNS, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  if (text !== undefined) node.textContent = text;
  return node;
}

const absMax = (m) => Math.max(1e-12, ...m.flat().filter((x) => x !== null).map(Math.abs));

// A colour scale's end that a few outliers cannot set: the q-th quantile of |value| (values
// past it take the end colour). A learned position table has a handful of large entries;
// scaled to its largest, the rest was almost white.
export function robustMax(m, q = 0.98) {
  const xs = m.flat().filter((x) => x !== null).map(Math.abs).sort((a, b) => a - b);
  if (!xs.length) return 1e-12;
  return Math.max(1e-12, xs[Math.min(xs.length - 1, Math.floor(q * (xs.length - 1)))]);
}
const CHAR_W = 0.62;  // a monospace glyph's width in ems, to size labels before drawing them

// The frame every figure starts with: background and title.
function frame(id, width, height, title, font) {
  const svg = svgEl("svg", {xmlns: SVGNS, width, height, viewBox: `0 0 ${width} ${height}`,
    "font-family": font, "data-testid": `fig-${id}`, role: "img", "aria-label": title || id});
  svg.appendChild(svgEl("rect", {x: 0, y: 0, width, height, fill: "#ffffff", class: "fig-bg"}));
  svg.appendChild(svgEl("text", {x: 4, y: 15, "font-size": 13, "font-weight": 600,
    "font-family": "system-ui, sans-serif", fill: "#1b1f24", class: "fig-title"}, title || ""));
  return svg;
}

const label = (attrs, text) => svgEl("text", {"font-size": 11, fill: "#5b6570", class: "fig-label", ...attrs}, text);

// ------------------------------------------------------------------ colours

function lerp(a, b, t) { return a.map((x, i) => Math.round(x + (b[i] - x) * t)); }
const WHITE = [255, 255, 255], BLUE = [33, 102, 172], RED = [178, 24, 43], DEEP = [8, 48, 107];
const MASKED = [200, 200, 200];

// Sequential maps run 0..max; diverging maps run -max..max, white at 0 (max = largest |value|).
export function rgbOf(value, scale, max) {
  if (value === null) return MASKED;
  if (scale === "seq") return lerp(WHITE, DEEP, Math.min(1, Math.max(0, value / max)));
  const t = Math.max(-1, Math.min(1, value / max));
  return t >= 0 ? lerp(WHITE, RED, t) : lerp(WHITE, BLUE, -t);
}
export const css = (rgb) => `rgb(${rgb.join(",")})`;

// WCAG relative luminance, and the ink (black or white) with the higher contrast on rgb.
function luminance(rgb) {
  const [r, g, b] = rgb.map((c) => { c /= 255; return c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4; });
  return 0.2126 * r + 0.7152 * g + 0.0722 * b;
}
export function inkOn(rgb) {
  const L = luminance(rgb);
  return (L + 0.05) / 0.05 >= 1.05 / (L + 0.05) ? "#000000" : "#ffffff";
}

// Every how many labels one is drawn so that labels `need` px apart fit cells `cell` px wide.
const every = (cell, need) => Math.max(1, Math.ceil(need / cell));

// A colour bar at (x, y), height h: the scale's ends and middle, and optional marks
// ({value, text}, e.g. a chance level).
function colourBar(svg, x, y, h, scale, max, marks = []) {
  const lo = scale === "seq" ? 0 : -max, n = 24, w = 12;
  for (let k = 0; k < n; k++) {
    const v = max - (k + 0.5) * (max - lo) / n;
    svg.appendChild(svgEl("rect", {x, y: y + k * h / n, width: w, height: h / n + 0.5, fill: css(rgbOf(v, scale, max))}));
  }
  svg.appendChild(svgEl("rect", {x, y, width: w, height: h, fill: "none", stroke: "#888"}));
  const at = (v) => y + h * (max - v) / (max - lo);
  const ticks = scale === "seq" ? [max, max / 2, 0] : [max, 0, -max];
  const clear = (v) => marks.every((m) => Math.abs(at(m.value) - at(v)) >= 11);  // a mark wins
  ticks.filter(clear).forEach((v) => svg.appendChild(label({x: x + w + 3, y: at(v) + 4, "font-size": 10}, tickText(v))));
  marks.forEach((m) => {
    svg.appendChild(svgEl("line", {x1: x - 3, x2: x + w + 3, y1: at(m.value), y2: at(m.value), stroke: "#f59f00", "stroke-width": 2}));
    svg.appendChild(label({x: x + w + 3, y: at(m.value) + 4, "font-size": 10, "data-testid": "bar-mark"}, m.text));
  });
}
const tickText = (v) => (v === 0 ? "0" : Math.abs(v) >= 100 ? v.toFixed(0) : Number(v.toPrecision(2)).toString());
const BAR_W = 62;  // the colour bar and its labels

// Past this many cells a heatmap shares one <title> (see heatmap): a title per cell made a
// 64 x 64 map several times slower to draw.
const EAGER_TITLES = 1024;

// Past this many cells a heatmap's cells are one bitmap (a canvas, one pixel a cell, put in
// the SVG as an <image>): W_O's 192 x 192 as 36,864 rects took about 1 s a redraw.
export const BITMAP_CELLS = 4096;

// The cells as one <image>, hover read from the pointer's position: one <title> names the
// cell under it (and onHover hears it), as the rect cells' titles do.
function bitmapCells(svg, o, g) {
  const canvas = document.createElement("canvas");
  canvas.width = g.nc;
  canvas.height = g.nr;
  const ctx = canvas.getContext("2d"), img = ctx.createImageData(g.nc, g.nr);
  for (let i = 0; i < g.nr; i++) {
    for (let j = 0; j < g.nc; j++) {
      const rgb = rgbOf(g.values[i][j], g.scale, g.max), at = 4 * (i * g.nc + j);
      img.data[at] = rgb[0]; img.data[at + 1] = rgb[1]; img.data[at + 2] = rgb[2]; img.data[at + 3] = 255;
    }
  }
  ctx.putImageData(img, 0, 0);
  const image = svgEl("image", {x: g.labelW, y: g.top, width: g.nc * g.cell, height: g.nr * g.cellH,
    href: canvas.toDataURL("image/png"), preserveAspectRatio: "none", style: "image-rendering: pixelated",
    "data-cells": `${g.nr}x${g.nc}`, "data-testid": `${o.id}-bitmap`});
  const tip = svgEl("title", {}, `${g.nr} × ${g.nc} cells: hover one for its value`);
  image.appendChild(tip);
  image.addEventListener("pointermove", (e) => {
    const box = image.getBoundingClientRect();
    const i = Math.min(g.nr - 1, Math.floor((e.clientY - box.top) / box.height * g.nr));
    const j = Math.min(g.nc - 1, Math.floor((e.clientX - box.left) / box.width * g.nc));
    tip.textContent = g.describe(i, j);
    image.dataset.hover = `${i},${j}`;
    if (o.onHover) o.onHover(tip.textContent);
  });
  svg.appendChild(image);
}

// A matrix as an SVG heatmap. values: rows of numbers (null = −∞). Each cell carries a
// <title> for hover and, when shown, a text node with data-testid `${id}-${i}-${j}`.
// Labels that would collide are thinned (rows) or turned upright and thinned (columns);
// cells with onClick are buttons a keyboard can reach (Tab, then Enter or Space). `cell` is
// a cell's width; `rowHeight` (default: cell) its height, so a wide matrix of narrow
// columns can keep rows tall enough for every row's label (a token each).
export function heatmap(o) {
  const values = o.values, nr = values.length, nc = values[0].length;
  const cell = o.cell || 40, cellH = o.rowHeight || cell, decimals = o.decimals ?? 2;
  const showValues = o.showValues ?? (Math.min(cell, cellH) >= 30);
  const scale = o.scale || "div";
  const max = o.max || (scale === "seq" ? Math.max(1e-12, ...values.flat().filter((x) => x !== null)) : absMax(values));
  const rows = o.rows || values.map((_, i) => String(i));
  const cols = o.cols || values[0].map((_, j) => String(j));
  const longest = (xs) => Math.max(1, ...xs.map((s) => s.length));
  // Labels shrink with small cells (down to 8 px) before any is left out.
  const font = Math.max(8, Math.min(11, cell - 1)), rowFont = Math.max(8, Math.min(11, cellH - 1));
  const rowStep = every(cellH, rowFont + 1), colLong = longest(cols) * font * CHAR_W + 4;
  const upright = colLong > cell;  // column labels turn 90° once they are wider than a cell
  const colStep = upright ? every(cell, font + 1) : 1;
  const labelW = Math.min(90, 10 + 11 * CHAR_W * longest(rows));
  const showCols = o.showColLabels ?? true;
  const top = 24 + (showCols ? (upright ? Math.min(90, colLong) : 16) : 0);
  const bar = o.colourBar ?? true;
  const width = Math.ceil(Math.max(labelW + nc * cell + 8 + (bar ? BAR_W : 0), 12 + 7.5 * (o.title || "").length));
  const height = top + nr * cellH + 6 + (bar && nr * cellH < 60 ? 60 - nr * cellH : 0);
  const svg = frame(o.id, width, height, o.title, "ui-monospace, Menlo, Consolas, monospace");
  if (o.onClick) svg.setAttribute("role", "group");
  svg.dataset.scale = scale;
  svg.dataset.max = String(max);
  if (showCols) cols.forEach((c, j) => {
    if (j % colStep || c === "") return;
    const x = labelW + j * cell + cell / 2;
    svg.appendChild(upright
      ? label({x, y: top - 4, transform: `rotate(-90 ${x} ${top - 4})`, dy: "0.35em", "font-size": font, "data-col": j}, c)
      : label({x, y: top - 4, "text-anchor": "middle", "font-size": font, "data-col": j}, c));
  });
  rows.forEach((r, i) => { if (i % rowStep === 0 && r !== "") svg.appendChild(label({
    x: labelW - 4, y: top + i * cellH + cellH / 2, dy: "0.35em", "text-anchor": "end", "font-size": rowFont, "data-row": i}, r)); });
  const describe = (i, j) => `${o.rowName || "row"} ${rows[i] || i}, ${o.colName || "col"} ${cols[j] || j}: ` +
    (values[i][j] === null ? "-inf" : Number(values[i][j]).toPrecision(6));
  const lazy = nr * nc > EAGER_TITLES;
  if (lazy) {  // one title, moved into the cell under the pointer
    const tip = svgEl("title");
    svg.addEventListener("pointerover", (e) => {
      const rect = e.target.closest?.("rect[data-cell]");
      if (!rect) return;
      const [i, j] = rect.dataset.cell.split(",").map(Number);
      tip.textContent = describe(i, j);
      rect.appendChild(tip);
      if (o.onHover) o.onHover(tip.textContent);
    });
  }
  if (nr * nc > BITMAP_CELLS && !o.onClick && !o.highlight) {
    bitmapCells(svg, o, {values, nr, nc, scale, max, labelW, top, cell, cellH, describe});
  } else for (let i = 0; i < nr; i++) {
    for (let j = 0; j < nc; j++) {
      const v = values[i][j], rgb = rgbOf(v, scale, max);
      const x = labelW + j * cell, y = top + i * cellH;
      const hl = o.highlight && o.highlight[i][j];
      const rect = svgEl("rect", {x, y, width: cell, height: cellH, fill: css(rgb),
        stroke: hl ? "#f59f00" : "#ffffff", "stroke-width": hl ? 3 : 1, "data-cell": `${i},${j}`});
      const text = lazy && !o.onClick ? null : describe(i, j);
      if (!lazy) rect.appendChild(svgEl("title", {}, text));
      if (o.onHover && !lazy) { rect.addEventListener("mouseenter", () => o.onHover(text)); rect.addEventListener("focus", () => o.onHover(text)); }
      if (o.onClick) {
        Object.entries({tabindex: 0, role: "button", "aria-label": o.cellAction ? o.cellAction(i, j) : text})
          .forEach(([k, val]) => rect.setAttribute(k, val));
        rect.addEventListener("click", () => o.onClick(i, j));
        rect.addEventListener("keydown", (e) => {
          if (e.key === "Enter" || e.key === " ") { e.preventDefault(); o.onClick(i, j); }
        });
      }
      svg.appendChild(rect);
      if (v === null && !showValues && o.labelMasked && Math.min(cell, cellH) >= 12) {  // −∞ said, not only grey
        svg.appendChild(svgEl("text", {x: x + cell / 2, y: y + cellH / 2, dy: "0.35em", "font-size": Math.min(12, (Math.min(cell, cellH) - 2) / 1.3).toFixed(1),
          "text-anchor": "middle", "pointer-events": "none", fill: inkOn(rgb), "data-testid": `${o.id}-${i}-${j}`}, fmt(null)));
      }
      if (showValues) {
        const s = fmt(v, decimals);
        // the number fits its cell: a font no wider than the cell allows (4 px of margin)
        const size = Math.min(12, Math.min(cell, cellH) / 3.4, (cell - 5) / (CHAR_W * s.length));
        svg.appendChild(svgEl("text", {x: x + cell / 2, y: y + cellH / 2, dy: "0.35em",
          "font-size": size.toFixed(1), "text-anchor": "middle", "pointer-events": "none",
          fill: inkOn(rgb), "data-testid": `${o.id}-${i}-${j}`}, s));
      }
    }
  }
  (o.groupCols || []).forEach((j) => svg.appendChild(svgEl("line", {x1: labelW + j * cell,
    x2: labelW + j * cell, y1: top, y2: top + nr * cellH, stroke: "#111", "stroke-width": 2})));
  (o.groupRows || []).forEach((i) => svg.appendChild(svgEl("line", {x1: labelW,
    x2: labelW + nc * cell, y1: top + i * cellH, y2: top + i * cellH, stroke: "#111", "stroke-width": 2})));
  if (o.outlineRow !== undefined) {  // one row picked out (a bitmap's too): drawn over the cells
    svg.appendChild(svgEl("rect", {x: labelW - 1, y: top + o.outlineRow * cellH - 1, width: nc * cell + 2, height: cellH + 2,
      fill: "none", stroke: "#f59f00", "stroke-width": 3, "pointer-events": "none", "data-testid": `${o.id}-outline`, "data-row": o.outlineRow}));
  }
  if (bar) colourBar(svg, labelW + nc * cell + 12, top, Math.max(60, nr * cellH), scale, max, o.marks);
  return svg;
}

// Head h's colour, a CSS variable (style.css: --head-0 .. --head-11, light and dark); a
// model of more heads reuses them.
export const HEAD_COLOURS = 12;
export const headColour = (h) => `var(--head-${h % HEAD_COLOURS})`;

// A colour for a fill or stroke: a CSS variable (`var(--head-0)`, which follows the page's
// theme and is resolved to its light value on export) goes in a style, any other in the
// attribute.
const paint = (prop, colour) => (colour.startsWith("var(") ? {style: `${prop}: ${colour}`} : {[prop]: colour});

// x labels that fit side by side without touching (the first and the last always kept).
function thinned(labels, xOf) {
  const w = (s) => s.length * 10 * CHAR_W, kept = [];
  labels.forEach((s, i) => {
    if (s === "") return;
    const last = kept.at(-1);
    if (last === undefined || xOf(i) - w(s) / 2 >= xOf(last) + w(labels[last]) / 2 + 6) kept.push(i);
  });
  const end = labels.findLastIndex((s) => s !== "");
  if (end >= 0 && kept.at(-1) !== end) {
    while (kept.length > 1 && xOf(end) - w(labels[end]) / 2 < xOf(kept.at(-1)) + w(labels[kept.at(-1)]) / 2 + 6) kept.pop();
    kept.push(end);
  }
  const keep = new Set(kept);
  return labels.map((s, i) => (keep.has(i) ? s : ""));
}

// Round ticks: a step of 1, 2, 2.5 or 5 times a power of ten, about `count` of them over
// `span`.
export function niceStep(span, count = 4) {
  const raw = span / count, p = 10 ** Math.floor(Math.log10(raw)), m = raw / p;
  return p * (m <= 1 ? 1 : m <= 2 ? 2 : m <= 2.5 ? 2.5 : m <= 5 ? 5 : 10);
}

// The y ticks of [ymin, ymax]: every multiple of the round step inside it, written with the
// step's decimals (0.25 -> "0.25", "0.50"), from 10,000 on as 12.0 k, 3.40 M.
function yTicks(ymin, ymax, step, yfmt) {
  let decimals = 0;  // the step's own: 0.25 has 2
  while (decimals < 12 && Math.abs(step * 10 ** decimals - Math.round(step * 10 ** decimals)) > 1e-6) decimals++;
  const fmtY = yfmt || ((y) => (Math.abs(y) >= 1e4 ? human(y) : y.toFixed(decimals)));
  const ticks = [];
  for (let k = Math.ceil(ymin / step - 1e-9); k * step <= ymax + step * 1e-9; k++) {
    const y = Number((k * step).toPrecision(12)) || 0;  // 0.1 * 3 is 0.30000000000000004
    ticks.push([y, fmtY(y)]);
  }
  return ticks;
}

// A simple chart: bars or lines over x, in SVG. series: [{name, values, colour}].
// The legend sits in its own row under the title; x labels turn 90° when they would touch,
// or, with xthin, are thinned out until they do not. The y axis runs from ymin (default 0)
// to ymax (default: the largest value, up to the next round tick), with round ticks and,
// given ytitle, its title.
export function chart(o) {
  const W = o.width || 420;
  const n = o.series[0].values.length;
  const ymin = o.ymin ?? 0;
  let ymax = Math.max(ymin + 1e-12, o.ymax ?? Math.max(1e-12, ...o.series.flatMap((s) => s.values)));
  const step = niceStep(ymax - ymin);
  if (o.ymax === undefined) ymax = Math.ceil(ymax / step - 1e-9) * step;
  const ticks = yTicks(ymin, ymax, step, o.yformat);
  const L = 10 + 10 * CHAR_W * Math.max(...ticks.map(([, t]) => t.length)) + (o.ytitle ? 14 : 0);
  let labs = o.xlabels || [];
  const lastW = 10 * CHAR_W * (labs.filter((s) => s !== "").at(-1) || "").length;
  const R = Math.max(12, lastW / 2 + 4);
  const band = (W - L - R) / (o.kind === "bar" ? n : Math.max(1, n - 1));
  const px = (i) => L + band * (o.kind === "bar" ? i : (n === 1 ? 0.5 : i));
  const lx = (i) => px(i) + (o.kind === "bar" ? band / 2 : 0);
  if (o.xthin) labs = thinned(labs, lx);
  const shown = labs.filter((s) => s !== "");
  const spacing = (W - L - R) / Math.max(1, shown.length);
  const upright = !o.xthin && Math.max(0, ...shown.map((s) => s.length)) * 10 * CHAR_W + 4 > spacing;
  const B = 30 + (upright ? Math.max(0, ...shown.map((s) => s.length)) * 10 * CHAR_W - 10 : 0);
  const T = 26 + 16 * Math.ceil(o.series.length / 2) + 4;
  const H = (o.height || 220) + (T - 26) + (B - 30);
  const svg = frame(o.id, W, H, o.title, "system-ui, sans-serif");
  svg.dataset.ymin = String(ymin);
  svg.dataset.ymax = String(ymax);
  const py = (y) => T + (H - T - B) * (1 - (y - ymin) / (ymax - ymin));
  svg.appendChild(svgEl("line", {x1: L, x2: W - R, y1: H - B, y2: H - B, stroke: "#888"}));
  svg.appendChild(svgEl("line", {x1: L, x2: L, y1: T, y2: H - B, stroke: "#888"}));
  ticks.forEach(([y, t]) => svg.appendChild(label({x: L - 4, y: py(y) + 4, "font-size": 10, "text-anchor": "end", "data-tick": "y",
    "data-value": String(y)}, t)));
  labs.forEach((lab, i) => {
    if (lab === "") return;
    const x = lx(i), y = H - B + 13;
    svg.appendChild(upright
      ? label({x, y: H - B + 4, "font-size": 10, "text-anchor": "end", dy: "0.35em", transform: `rotate(-90 ${x} ${H - B + 4})`, "data-tick": "x"}, lab)
      : label({x, y, "font-size": 10, "text-anchor": "middle", "data-tick": "x"}, lab));
  });
  if (o.xtitle) svg.appendChild(label({x: (L + W) / 2, y: H - 3, "text-anchor": "middle"}, o.xtitle));
  if (o.ytitle) {
    const y = (T + H - B) / 2;
    svg.appendChild(label({x: 11, y, "text-anchor": "middle", transform: `rotate(-90 11 ${y})`, "data-testid": "y-title"}, o.ytitle));
  }
  o.series.forEach((s, k) => {
    if (o.kind === "bar") {
      const bw = band / o.series.length;
      s.values.forEach((v, i) => svg.appendChild(svgEl("rect", {x: px(i) + k * bw, y: py(v),
        width: Math.max(1, bw - 1), height: H - B - py(v), ...paint("fill", s.colour)})));
    } else {
      svg.appendChild(svgEl("polyline", {points: s.values.map((v, i) => `${px(i)},${py(v)}`).join(" "),
        fill: "none", ...paint("stroke", s.colour), "stroke-width": 2}));
      s.values.forEach((v, i) => svg.appendChild(svgEl("circle", {cx: px(i), cy: py(v), r: 2.5, ...paint("fill", s.colour)})));
    }
    // legend: two entries a row, under the title, outside the plot
    const gx = L + (k % 2) * (W - L) / 2, gy = 24 + 16 * Math.floor(k / 2);
    svg.appendChild(svgEl("rect", {x: gx, y: gy, width: 10, height: 10, ...paint("fill", s.colour)}));
    svg.appendChild(svgEl("text", {x: gx + 14, y: gy + 9, "font-size": 11, fill: "#1b1f24", class: "fig-title", "font-weight": 400}, s.name));
  });
  return svg;
}

// A vector as one row of coloured cells (diverging, white at 0), with its largest |value|;
// hovering a cell names its index and value (one <title>, moved under the pointer). With
// sorted, a second row beside it holds the same values sorted, largest first, so the spread
// and the few large entries read at a glance. Cells carry data-i and data-v for the tests.
// groups ({size, outline}): a line between every `size` values (a concatenation's parts)
// and group `outline` outlined.
export function strip(id, title, values, width = 320, sorted = true, groups = null) {
  const n = values.length, max = Math.max(1e-12, ...values.map(Math.abs));
  const cw = (width - 8) / n, H = sorted ? 80 : 46;
  const svg = svgEl("svg", {xmlns: SVGNS, width, height: H, viewBox: `0 0 ${width} ${H}`, "font-family": "system-ui, sans-serif",
    "data-testid": `fig-${id}`, role: "img", "aria-label": `${title}: ${n} values, largest magnitude ${max.toPrecision(3)}`});
  svg.appendChild(svgEl("rect", {x: 0, y: 0, width, height: H, fill: "#ffffff", class: "fig-bg"}));
  svg.appendChild(svgEl("text", {x: 4, y: 13, "font-size": 11, fill: "#1b1f24", class: "fig-title"}, `${title} (${n}; |max| ${max.toPrecision(3)})`));
  const tip = svgEl("title");
  const row = (vals, y, kind, index) => {
    const g = svgEl("g", {"data-row": kind});
    vals.forEach((v, k) => g.appendChild(svgEl("rect", {x: 4 + k * cw, y, width: cw + 0.3, height: 22,
      fill: css(rgbOf(v, "div", max)), "data-i": String(index[k]), "data-v": String(v)})));
    g.appendChild(svgEl("rect", {x: 4, y, width: width - 8, height: 22, fill: "none", stroke: "#888", "pointer-events": "none"}));
    g.addEventListener("pointerover", (e) => {
      const r = e.target.closest("rect[data-i]");
      if (!r) return;
      tip.textContent = `${kind === "sorted" ? "sorted: " : ""}${title}[${r.dataset.i}] = ${Number(r.dataset.v).toPrecision(6)}`;
      r.appendChild(tip);
    });
    svg.appendChild(g);
  };
  row(values, 19, "raw", values.map((_, i) => i));
  if (groups) {
    for (let k = groups.size; k < n; k += groups.size) {
      svg.appendChild(svgEl("line", {x1: 4 + k * cw, x2: 4 + k * cw, y1: 19, y2: 41, stroke: "#1b1f24", "stroke-width": 1.5,
        "data-testid": `${id}-boundary`}));
    }
    svg.appendChild(svgEl("rect", {x: 4 + groups.outline * groups.size * cw, y: 17, width: groups.size * cw, height: 26, fill: "none",
      stroke: "#f59f00", "stroke-width": 3, "data-testid": `${id}-outline`, "data-group": groups.outline}));
  }
  if (sorted) {
    const order = values.map((_, i) => i).sort((a, b) => values[b] - values[a]);
    svg.appendChild(svgEl("text", {x: 4, y: 54, "font-size": 10, fill: "#5b6570", class: "fig-label"}, "sorted, largest first"));
    row(order.map((i) => values[i]), 57, "sorted", order);
  }
  return svg;
}
