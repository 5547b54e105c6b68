// The head view (BertViz's): for one layer, a line from every token (left, the query) to
// every token it attends to (right, the key), one colour per head, its opacity and width
// the weight. Heads toggle on and off, or show one at a time (Transformer Explainer's way);
// hovering or focusing a token isolates its lines (a click or Enter pins them), and names
// the token each head looks at most, with its position. View 8's newest-token lines are
// this figure's last row. Data: the all-heads answer (view 13), attention[layer][head][query][key].

import {$, htmlEl, tokenLabel} from "./dom.js";
import {exportButtons} from "./figure.js";
import {SVGNS, headColour, svgEl} from "./svg.js";

const MIN_WEIGHT = 0.02;  // lighter lines are invisible anyway; long texts stay light
const HINT = "hover, focus or tap a token to isolate its lines";
// off: heads switched off; one: one head at a time, `solo`
const view = {d: null, off: new Set(), one: false, solo: 0, pinned: null, preview: null};

// 't' @12: a token as the page shows it, and its position
const at = (tokens, j) => `'${tokenLabel(tokens[j])}' @${j}`;
const argmax = (xs) => xs.indexOf(Math.max(...xs));

// One layer's lines: the heads in `heads`, each query row's weights above MIN_WEIGHT.
export function linesFigure(d, layer, heads) {
  const T = d.tokens.length, rowH = 24, top = 24, xQ = 110, xK = 290, W = 400, H = top + rowH * T + 8;
  const yOf = (i) => top + i * rowH + rowH / 2;
  const svg = svgEl("svg", {xmlns: SVGNS, viewBox: `0 0 ${W} ${H}`, width: W, height: H, class: "nt-lines hv-lines",
    "data-testid": "hv-lines", role: "group",
    "aria-label": `head view of layer ${layer}: ${heads.length} heads, ${T} tokens; each token's lines on focus`});
  svg.appendChild(svgEl("rect", {x: 0, y: 0, width: W, height: H, class: "fig-bg", fill: "#ffffff"}));
  svg.appendChild(svgEl("text", {x: xQ, y: 14, "text-anchor": "end", class: "nt-axis"}, "token (query)"));
  svg.appendChild(svgEl("text", {x: xK, y: 14, class: "nt-axis"}, "attends to (key)"));
  const lines = svg.appendChild(svgEl("g", {}));
  for (const h of heads) {
    d.attention[layer][h].forEach((row, i) => row.forEach((w, j) => {
      if (w < MIN_WEIGHT) return;
      const line = svgEl("line", {x1: xQ + 6, y1: yOf(i), x2: xK - 6, y2: yOf(j), style: `stroke: ${headColour(h)}`,
        "stroke-width": (0.6 + 3.4 * w).toFixed(2), "stroke-opacity": (0.15 + 0.85 * w).toFixed(2),
        "data-query": i, "data-key": j, "data-head": h, "data-weight": w.toFixed(4)});
      line.appendChild(svgEl("title", {}, `head ${h}: ${JSON.stringify(d.tokens[i])} (${i}) → ${JSON.stringify(d.tokens[j])} (${j}) ${w.toFixed(3)}`));
      lines.appendChild(line);
    }));
  }
  const side = (i, t, query) => {
    const A = d.attention[layer];
    const weights = heads.map((h) => {
      if (query) return `h${h} on ${at(d.tokens, argmax(A[h][i]))}`;
      const column = A[h].map((row) => row[i]), q = argmax(column);
      return `h${h} ${column[q].toFixed(2)} from ${at(d.tokens, q)}`;
    }).join(", ");
    const label = query ? `token ${at(d.tokens, i)} looks most at: ${weights}`
      : `token ${at(d.tokens, i)} as a key, largest weight: ${weights}`;
    const el = svgEl("text", {x: query ? xQ : xK, y: yOf(i) + 4, "text-anchor": query ? "end" : "start",
      class: "nt-token hv-token", tabindex: 0, role: "button", "aria-pressed": "false",
      "data-testid": `hv-${query ? "query" : "key"}-${i}`, "aria-label": label}, tokenLabel(t));
    const mark = {end: query ? "query" : "key", i, label};
    const on = () => isolate(svg, mark);
    const off = () => isolate(svg, view.pinned);
    const pin = () => {
      view.pinned = view.pinned && view.pinned.end === mark.end && view.pinned.i === i ? null : mark;
      svg.querySelectorAll(".hv-token").forEach((k) => k.setAttribute("aria-pressed", String(k === el && view.pinned !== null)));
      off();
    };
    el.addEventListener("mouseenter", on);
    el.addEventListener("focus", on);
    el.addEventListener("mouseleave", off);
    el.addEventListener("blur", off);
    el.addEventListener("click", pin);
    el.addEventListener("keydown", (e) => { if (e.key === "Enter" || e.key === " ") { e.preventDefault(); pin(); } });
    svg.appendChild(el);
  };
  d.tokens.forEach((t, i) => side(i, t, true));
  d.tokens.forEach((t, j) => side(j, t, false));
  return svg;
}

// Only the lines of one token (as a query: its row; as a key: what attends to it).
function isolate(svg, mark) {
  svg.classList.toggle("nt-focus", mark !== null);
  const attr = mark && (mark.end === "query" ? "query" : "key");
  svg.querySelectorAll("line").forEach((l) => l.classList.toggle("on", mark !== null && +l.dataset[attr] === mark.i));
  $("hv-hover").textContent = mark === null ? HINT : mark.label;
}

function shownHeads() {
  const d = view.d;
  if (view.preview) return [view.preview.head];
  if (view.one) return [view.solo];
  return [...Array(d.n_head).keys()].filter((h) => !view.off.has(h));
}

export function drawHeadView() {
  const d = view.d;
  if (!d) return;
  const layer = view.preview ? view.preview.layer : Math.min(+$("hv-layer").value || 0, d.n_layer - 1);
  const svg = linesFigure(d, layer, shownHeads());
  view.pinned = null;
  $("hv-lines").replaceChildren(svg);
  $("hv-export")?.remove();
  const exp = exportButtons(svg, `head-view-layer-${layer}`);
  exp.id = "hv-export";
  $("hv-lines").before(exp);
  $("hv-hover").textContent = view.preview
    ? `preview: layer ${layer}, head ${view.preview.head} (move off the grid to return)` : HINT;
}

// The layer menu and one switch per head, for the answer d (a new run or text).
export function showHeadView(d) {
  view.d = d;
  const layer = $("hv-layer"), keep = layer.value;
  if (layer.options.length !== d.n_layer) {
    layer.replaceChildren(...[...Array(d.n_layer).keys()].map((l) => htmlEl("option", {value: l}, `layer ${l}`)));
    layer.value = keep !== "" && +keep < d.n_layer ? keep : "0";
  }
  view.off = new Set([...view.off].filter((h) => h < d.n_head));
  view.solo = Math.min(view.solo, d.n_head - 1);
  if ($("hv-heads").querySelectorAll("input").length !== d.n_head) headSwitches();
  drawHeadView();
}

// One switch per head: check boxes (any heads), or radio buttons (one head at a time).
function headSwitches() {
  const n = view.d.n_head, type = view.one ? "radio" : "checkbox";
  $("hv-heads").replaceChildren(htmlEl("legend", {}, view.one ? "the head shown" : "heads shown"),
    ...[...Array(n).keys()].map((h) => {
      const label = htmlEl("label", {class: "nt-swatch hv-switch"});
      label.style.setProperty("--swatch", headColour(h));
      const input = htmlEl("input", {type, name: "hv-head", "data-testid": `hv-head-${h}`, "data-head": h});
      input.checked = view.one ? h === view.solo : !view.off.has(h);
      input.addEventListener("change", () => {
        if (view.one) view.solo = h;
        else if (input.checked) view.off.delete(h);
        else view.off.add(h);
        drawHeadView();
      });
      label.append(input, ` head ${h}`);
      return label;
    }));
}

// "one head at a time": the first head shown so far stays; off again, the heads before.
function oneAtATime(on) {
  if (on) view.solo = shownHeads()[0] ?? 0;
  view.one = on;
  if (view.d) { headSwitches(); drawHeadView(); }
}

// Hovering (or focusing) a cell of the every-head grid previews it here; null returns.
export function previewHead(cell) {
  view.preview = cell;
  drawHeadView();
}

export function loadHeadView() {
  $("hv-layer").addEventListener("change", drawHeadView);
  $("hv-one").addEventListener("change", (e) => oneAtATime(e.target.checked));
}
