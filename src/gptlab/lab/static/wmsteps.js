// View 12's attention stage, opened into view 1's stages on the run's own model: for the
// walked token, a layer and a head, q, the keys of every token, q·k, q·k/√d_k, the mask
// (−∞ after this token; the switch shows what it would read bidirectionally), the softmax,
// the weighted sum of values, every head's output concatenated and W_O (as per-head block
// norms that open into the block), then the residual add. The score stages show the head's
// whole T × T matrices, the followed query's row outlined, beside that row. Every number
// from the server (POST /api/walk/layer, float64, checked against the library's capture),
// the stages after the mask with it and without it. The FFN stage gets its top units
// (key-value memories) and the activation's curve from the same answer. "Next step" (or →)
// walks the stages with view 1's header (stage, formula, what changed).

import {api, showError} from "./api.js";
import {$, fmt, htmlEl, tokenLabel} from "./dom.js";
import {figure} from "./figure.js";
import {SVGNS, chart, heatmap, strip, svgEl} from "./svg.js";

const steps = {stage: 0, head: 0, causal: true, cache: new Map(), redraw: null};

// one answer per (run, text, position, layer, head): stepping and the mask switch refetch nothing
async function layerSteps(q) {
  const key = JSON.stringify(q);
  if (!steps.cache.has(key)) {
    if (steps.cache.size > 32) steps.cache.clear();
    steps.cache.set(key, api("/api/walk/layer", q).catch((e) => { steps.cache.delete(key); throw e; }));
  }
  return steps.cache.get(key);
}

const range = (xs) => { const v = xs.flat().filter((x) => x !== null); return [Math.min(...v), Math.max(...v)]; };
const rangeText = (xs) => { const [a, b] = range(xs); return `[${fmt(a, 3)}, ${fmt(b, 3)}]`; };
const absMax = (m) => Math.max(1e-12, ...m.flat().filter((x) => x !== null).map(Math.abs));

// The numbers a figure shows, on its SVG, for the browser test (and anyone exporting it).
function carrying(svg, values) {
  svg.dataset.values = JSON.stringify(values);
  return svg;
}

// A field of the page set as a learner would set it: its view listens, and state.js writes
// the address (#wm-head, #wm-layer, #wm-position).
export function pickField(id, value) {
  const el = $(id);
  if (!el || el.value === String(value)) return;
  el.value = String(value);
  el.dispatchEvent(new Event("change", {bubbles: true}));
}

// The stages' text, from the answer s and whether the mask is on (c): the row stages are
// row `position` of the matrices.
const later = (s) => s.tokens.length - 1 - s.position;
const STAGES = [
  {title: "q, k, v for this head", formula: (s) => `q = x·W_Q[h${s.head}],   k_j = x_j·W_K[h${s.head}],   v_j = x_j·W_V[h${s.head}]   (d_k = ${s.head_dim})`,
   changed: (s) => `The stream this token brings to attention, x (${s.x.length} numbers), is projected to a query of ${s.head_dim}; every token j of the text, this one included, has a key and a value. Only tokens 0..${s.position} will be allowed.`},
  {title: "scores = q·k, then ÷ √d_k", formula: (s) => `score_ij = q_i·k_j / √d_k,   √d_k = ${fmt(s.sqrt_d_k, 3)}`,
   changed: (s) => `Every query i against every key j: the whole matrix, this token's row outlined. Raw q·k ranges over ${rangeText(s.matrices.raw)}; multiplied by ${fmt(s.scale, 4)} it ranges over ${rangeText(s.matrices.scaled)}, the spread the softmax was trained on. Both share one colour scale, so the scaled scores are paler.`},
  {title: "the causal mask", formula: (s, c) => (c ? "masked_ij = score_ij if j ≤ i, else −∞" : "masked = scores   (mask off: nothing hidden)"),
   changed: (s, c) => (!c ? "Mask off: every token reads every token, later ones too (BERT-style); every stage from here on is recomputed without the mask. The model itself always masks."
     : later(s) > 0 ? `Above the diagonal, −∞: each token may read only itself and the tokens before it. In this token's row ${later(s)} later token(s) are set to −∞: the model predicts the next token, so it must not read it. Switch the mask off to see what this token would read bidirectionally.`
       : `Above the diagonal, −∞: each token may read only itself and the tokens before it. This token, ${s.position}, is the last: its row has no later token to mask, and the switch has nothing to change. Pick an earlier token (the token menu above, or the button by the switch) to see the mask at work in its row.`)},
  {title: "softmax", formula: () => "weights_ij = exp(masked_ij) / Σ_j exp(masked_ij)   (each row sums to 1)",
   changed: (s, c) => { const w = weightsOf(s, c); const j = w.indexOf(Math.max(...w)); return `exp(−∞) = 0: masked keys get weight 0. In this token's row the largest weight, ${fmt(w[j], 3)}, goes to token ${j} '${tokenLabel(s.tokens[j])}'.`; }},
  {title: "weighted sum of values", formula: () => "out_h = Σ_j weights_j · v_j",
   changed: (s, c) => `This head's output: an average of the value rows, weighted by the softmax row. ${c ? "" : "(Mask off: later tokens' values mixed in.)"}`},
  {title: "every head, concatenated", formula: (s) => `concat = [out_0 | … | out_${s.n_head - 1}]   (${s.n_head} × ${s.head_dim} = ${s.concat.length})`,
   changed: (s, c) => `Every head does the same with its own W_Q, W_K, W_V; their outputs sit side by side, a line between heads, head ${s.head}'s outlined${c ? "" : " (mask off: every head reads every token)"}. W_O's blocks, one per head, say how strongly each head can write: click one to open it.`},
  {title: "W_O, then the residual add", formula: () => "attn(x) = W_O·concat (+ b);   stream ⊕ attn(x)",
   changed: (s, c) => `W_O mixes the heads back to the stream's width; the residual stream runs beside the sublayer and the output is added to it at ⊕.${c ? "" : " Mask off: the output and the stream after the add are what the block would write without the mask."}`},
];
const weightsOf = (s, c) => (c ? s.weights : s.weights_bidirectional);
const MASK_FROM = 2;  // the stage the mask acts at; the stages before it do not depend on it

// The address's head (state.js, #wm-head): the stepper shows it, redrawn if it is open.
export function setHead(h) {
  if (!Number.isInteger(h) || h < 0 || h === steps.head) return;
  steps.head = h;
  if (steps.redraw) steps.redraw();
}

// A tour's step opens the stepper at its first stage.
export function restartSteps() { steps.stage = 0; }

// ← / → step the stages as in view 1, unless the key is meant for a field.
document.addEventListener("keydown", (e) => {
  const view = $("view-model");
  if (!view || view.hidden || e.altKey || e.ctrlKey || e.metaKey) return;
  if (e.target.closest?.("input, select, textarea, [role=tab]")) return;
  const to = {ArrowLeft: "wm-steps-back", ArrowRight: "wm-steps-next"}[e.key];
  const button = to && view.querySelector(`[data-testid=${to}]`);
  if (!button) return;
  e.preventDefault();
  if (!button.disabled) button.click();
});

// The attention stage: a head picker, view 1's stepper and the stage's figures.
export async function showAttention(box, d, text, l) {
  const controls = htmlEl("div", {class: "controls", "data-testid": "wm-steps-controls"});
  const head = htmlEl("select", {"data-testid": "wm-steps-head", id: "wm-steps-head"});
  for (let h = 0; h < d.n_head; h++) head.appendChild(htmlEl("option", {value: h}, `head ${h}`));
  head.value = String(steps.head);
  const headLabel = htmlEl("label", {for: "wm-steps-head"}, "head ");
  const back = htmlEl("button", {"data-testid": "wm-steps-back"}, "◀ Back");
  const label = htmlEl("span", {"data-testid": "wm-steps-label", "aria-live": "polite"});
  const next = htmlEl("button", {"data-testid": "wm-steps-next"}, "Next step ▶");
  const mask = htmlEl("input", {type: "checkbox", "data-testid": "wm-steps-mask", id: "wm-steps-mask", "aria-describedby": "wm-steps-mask-why"});
  mask.checked = steps.causal;
  const maskLabel = htmlEl("label", {for: "wm-steps-mask"});
  maskLabel.append(mask, " causal mask");
  const why = htmlEl("span", {class: "note", id: "wm-steps-mask-why", "data-testid": "wm-steps-mask-why"});
  controls.append(headLabel, head, back, label, next, maskLabel, why);
  const formula = htmlEl("p", {class: "formula", "data-testid": "wm-steps-formula"});
  const changed = htmlEl("p", {class: "changed", "data-testid": "wm-steps-changed"});
  const figs = htmlEl("div", {class: "row", "data-testid": "wm-steps-figures"});
  box.append(controls, formula, changed, figs);
  const render = async () => {
    let s;
    steps.head = Math.min(steps.head, d.n_head - 1);  // the address may name a head this run lacks
    try {
      s = await layerSteps({run: d.run, text, position: d.position, layer: l, head: steps.head});
    } catch (e) { showError(e.message); figs.replaceChildren(); return; }
    if (!figs.isConnected) return;  // another stage was chosen meanwhile
    const n = steps.stage, stage = STAGES[n], last = later(s) === 0;
    const c = steps.causal || last;  // the last token: masked or not, its row is the same
    head.value = String(s.head);
    label.textContent = `Stage ${n + 1} of ${STAGES.length} · ${stage.title}`;
    const focused = document.activeElement;
    back.disabled = n === 0;
    next.disabled = n === STAGES.length - 1;
    mask.disabled = n < MASK_FROM || last;
    mask.checked = c;
    // a button that is now disabled hands the focus on instead of dropping it to the page
    if (focused === next && next.disabled) back.focus();
    if (focused === back && back.disabled) next.focus();
    maskReason(why, n, s, d);
    formula.textContent = stage.formula(s, c);
    changed.textContent = stage.changed(s, c);
    const cellFocus = focusedCell(figs);
    figs.replaceChildren();
    figs.dataset.stage = String(n);
    figs.dataset.causal = String(c);
    drawStage(figs, n, s, c, d.norm_position === "pre");
    refocus(figs, cellFocus);
    figs.classList.remove("stage-enter");
    void figs.offsetWidth;  // restart view 1's fade
    figs.classList.add("stage-enter");
  };
  steps.redraw = () => { if (figs.isConnected) render(); };
  head.addEventListener("change", () => { steps.head = +head.value; pickField("wm-head", head.value); render(); });
  back.addEventListener("click", () => { steps.stage = Math.max(0, steps.stage - 1); render(); });
  next.addEventListener("click", () => { steps.stage = Math.min(STAGES.length - 1, steps.stage + 1); render(); });
  mask.addEventListener("change", () => { steps.causal = mask.checked; render(); });
  await render();
}

// Why the switch is off where it is: before the mask nothing depends on it; at the last
// token nothing comes after it (a button follows an earlier token instead).
function maskReason(why, n, s, d) {
  why.replaceChildren();
  const T = s.tokens.length;
  if (n < MASK_FROM) {
    why.textContent = `the mask acts from stage ${MASK_FROM + 1}: q, k, v and the scores do not depend on it`;
  } else if (later(s) === 0) {
    why.textContent = T > 1 ? `token ${s.position} is the last: no later token to mask. ` : "one token: nothing to mask";
    if (T > 1) {
      const earlier = Math.floor((T - 1) / 2);
      const b = htmlEl("button", {"data-testid": "wm-steps-earlier"}, `follow token ${earlier} '${tokenLabel(d.tokens[earlier])}'`);
      b.addEventListener("click", () => pickField("wm-position", earlier));
      why.appendChild(b);
    }
  } else {
    why.textContent = `stages ${MASK_FROM + 1} to ${STAGES.length} follow it`;
  }
}

// The focused cell of a figure (a W_O block's norm), found again after the redraw.
function focusedCell(figs) {
  const el = document.activeElement;
  if (!el || !figs.contains(el) || !el.dataset?.cell) return null;
  return {figure: el.closest("svg")?.dataset.testid, cell: el.dataset.cell};
}
function refocus(figs, at) {
  if (at) figs.querySelector(`[data-testid="${at.figure}"] [data-cell="${at.cell}"]`)?.focus();
}

function row(id, title, values, tokens, extra = {}) {
  const cell = Math.max(12, Math.min(40, Math.floor(Math.min(480, innerWidth - 150) / tokens.length)));
  return carrying(heatmap({id, values: [values], rows: [title.split(" ")[0]], cols: tokens.map(tokenLabel), title,
    cell, showValues: cell >= 30, labelMasked: true, rowName: "", colName: "key", ...extra}), values);
}

// A head's T × T matrix, a row per query, the followed query's outlined; numbers in the
// cells where they fit (masked cells say −∞), one bitmap past svg.js's BITMAP_CELLS.
function square(figs, id, caption, m, s, extra = {}) {
  const labels = s.tokens.map(tokenLabel);
  const cell = Math.max(6, Math.min(40, Math.floor((figs.clientWidth - 110) / m.length)));
  figure(figs, id, caption, carrying(heatmap({id, values: m, rows: labels, cols: labels, title: caption, cell,
    showValues: cell >= 28, decimals: 1, labelMasked: true, outlineRow: s.position, rowName: "query", colName: "key", ...extra}), m));
}

function drawStage(figs, n, s, c, pre) {
  const tok = s.tokens, t = s.position, h = s.head, m = s.matrices;
  const matrix = (id, caption, values) => figure(figs, id, caption, carrying(heatmap({id, values, rows: tok.map(tokenLabel),
    cols: values[0].map((_, j) => (j % 8 === 0 ? String(j) : "")), title: caption, showValues: false, rowName: "token", colName: "dim",
    cell: Math.max(6, Math.min(14, Math.floor(300 / Math.max(tok.length, values[0].length)))),
    highlight: values.map((_, i) => values[0].map(() => i === t))}), values));
  const vec = (id, caption, values, groups) => figure(figs, id, caption, carrying(strip(id, caption, values, groups ? 480 : 320, true, groups), values));
  if (n === 0) {
    vec("wm-steps-x", "x: what attention reads", s.x);
    vec("wm-steps-q", `q (head ${h})`, s.q);
    matrix("wm-steps-keys", "K: every token's key", s.keys);
    matrix("wm-steps-values", "V: every token's value", s.values);
  } else if (n === 1) {
    const max = absMax(m.raw);  // one scale for both: ÷ √d_k shows as paler cells
    square(figs, "wm-steps-raw-matrix", `q·k, every query, range ${rangeText(m.raw)}`, m.raw, s, {max});
    square(figs, "wm-steps-scaled-matrix", `q·k/√d_k, range ${rangeText(m.scaled)}`, m.scaled, s, {max});
    figure(figs, "wm-steps-raw", `this token's q·k, range ${rangeText(s.raw)}`, row("wm-steps-raw", "q·k (raw)", s.raw, tok, {max}));
    figure(figs, "wm-steps-scaled", `this token's q·k/√d_k, range ${rangeText(s.scaled)} (same scale)`, row("wm-steps-scaled", "q·k/√d_k", s.scaled, tok, {max}));
  } else if (n === 2) {
    square(figs, "wm-steps-masked-matrix", c ? "masked: −∞ above the diagonal" : "no mask: the scores", c ? m.masked : m.scaled, s);
    const shown = c ? s.masked : s.scaled;
    figure(figs, "wm-steps-masked", c ? "this token's row, masked (causal): −∞ after it" : "this token's row, no mask", row("wm-steps-masked",
      c ? "masked" : "unmasked", shown, tok, {highlight: [shown.map((v) => v === null)]}));
  } else if (n === 3) {
    const w = weightsOf(s, c);
    square(figs, "wm-steps-weights-matrix", c ? "softmax of every row" : "softmax of every row, no mask", c ? m.weights : m.weights_bidirectional, s,
      {scale: "seq", max: 1, decimals: 2});
    figure(figs, "wm-steps-weights", `this token's softmax row (sum ${fmt(w.reduce((a, b) => a + b, 0), 4)})`,
      row("wm-steps-weights", c ? "weights" : "weights (no mask)", w, tok, {scale: "seq", max: 1}));
    const other = c ? s.weights_bidirectional : s.weights;
    figure(figs, "wm-steps-other", c ? "for comparison: mask off" : "for comparison: the model's (causal)",
      row("wm-steps-other", "other", other, tok, {scale: "seq", max: 1}));
  } else if (n === 4) {
    figure(figs, "wm-steps-weights", "weights", row("wm-steps-weights", "weights", weightsOf(s, c), tok, {scale: "seq", max: 1}));
    matrix("wm-steps-values", "V", s.values);
    vec("wm-steps-head-out", `out_${h} = weights·V`, c ? s.head_out : s.head_out_bidirectional);
  } else if (n === 5) {
    vec("wm-steps-concat", `concat of ${s.n_head} heads${c ? "" : ", no mask"}`, c ? s.concat : s.concat_bidirectional, {size: s.head_dim, outline: h});
    woNorms(figs, s, c);
  } else {
    vec("wm-steps-out", c ? "attn(x) = W_O·concat" : "attn(x) = W_O·concat, no mask", c ? s.out : s.out_bidirectional);
    bypass(figs, s, c, pre);
  }
}

// W_O as one number per head (the Frobenius norm of its n_embd × d_k block, and the norm of
// what the head wrote here); a block opens into its matrix, d_k × n_embd as view 3 draws W_O,
// one bitmap, with a zoom that makes its cells large enough to point at.
function woNorms(figs, s, c) {
  const heads = s.w_o_norms.map((_, h) => `h${h}`);
  const written = c ? s.written_norms : s.written_norms_bidirectional;
  const open = (h) => {  // the head picker redraws, as if the head were picked there
    const picker = document.querySelector("[data-testid=wm-steps-head]");
    picker.value = String(h);
    picker.dispatchEvent(new Event("change"));
  };
  figure(figs, "wm-steps-wo-norms", "W_O by head: ‖block‖ and ‖what it wrote here‖ (click a head to open its block)",
    carrying(heatmap({id: "wm-steps-wo-norms", values: [s.w_o_norms, written], rows: ["‖W_O,h‖", "‖W_O,h·out_h‖"], cols: heads,
      title: "W_O block norms", scale: "seq", cell: 34, decimals: 2, rowName: "", colName: "head",
      onClick: (_, h) => open(h), cellAction: (i, h) => `open head ${h}'s block of W_O`,
      highlight: [heads.map((_, h) => h === s.head), heads.map((_, h) => h === s.head)]}), s.w_o_norms))
    .querySelector("svg").dataset.written = JSON.stringify(written);
  const block = s.w_o_block[0].map((_, j) => s.w_o_block.map((r) => r[j]));  // (d_k, n_embd)
  const C = block[0].length, fit = Math.max(2, Math.min(8, Math.floor((figs.clientWidth - 110) / C)));
  const draw = (cell) => carrying(heatmap({id: "wm-steps-wo-block", values: block, rows: block.map((_, i) => (i % 8 === 0 ? `d${i}` : "")),
    cols: block[0].map((_, j) => (j % 32 === 0 ? String(j) : "")), title: `W_O, head ${s.head}'s block`, showValues: false,
    cell, rowName: "head dim", colName: "stream dim"}), block);
  const box = figure(figs, "wm-steps-wo-block", `head ${s.head}'s block of W_O (${block.length} × ${C}); hover a cell for its value`, draw(fit));
  const zoom = htmlEl("button", {"data-testid": "wm-steps-wo-zoom", "aria-pressed": "false"}, "zoom");
  zoom.addEventListener("click", () => {
    const on = zoom.getAttribute("aria-pressed") !== "true";
    zoom.setAttribute("aria-pressed", String(on));
    box.classList.toggle("zoomed", on);
    box.querySelector("svg").replaceWith(draw(on ? 14 : fit));
  });
  box.querySelector(".caption").insertBefore(zoom, box.querySelector(".caption .export"));
}

// The residual as the bypass it is: the stream runs beside the sublayer and meets its
// output at ⊕; the norms from the layer's answer (the mask on or off).
function bypass(figs, s, c, pre) {
  const W = 340, H = 150, n = (v) => Math.hypot(...v).toFixed(2);
  const out = c ? s.out : s.out_bidirectional, added = c ? s.added : s.added_bidirectional;
  const svg = svgEl("svg", {xmlns: SVGNS, width: W, height: H, viewBox: `0 0 ${W} ${H}`, "font-family": "system-ui, sans-serif",
    "data-testid": "fig-wm-bypass", role: "img", "aria-label": `the residual bypass: stream ‖x‖ ${n(s.stream)} plus attention's output ‖${n(out)}‖ gives ‖${n(added)}‖`});
  svg.dataset.values = JSON.stringify([s.stream, out, added]);
  svg.appendChild(svgEl("rect", {x: 0, y: 0, width: W, height: H, fill: "#ffffff", class: "fig-bg"}));
  const ink = {fill: "#1b1f24", class: "fig-title", "font-size": 11};
  const stroke = {stroke: "#5b6570", "stroke-width": 2, fill: "none"};
  // the stream: straight down the left; the sublayer: a detour on the right, back at ⊕
  svg.appendChild(svgEl("path", {d: "M 40 14 L 40 112", ...stroke, "data-testid": "wm-bypass-stream"}));
  svg.appendChild(svgEl("path", {d: "M 40 30 L 150 30 L 150 48 M 150 84 L 150 120 L 52 120", ...stroke, "data-testid": "wm-bypass-detour"}));
  svg.appendChild(svgEl("rect", {x: 100, y: 48, width: 100, height: 36, rx: 5, fill: "#f3f4f6", stroke: "#5b6570"}));
  svg.appendChild(svgEl("text", {x: 150, y: 66, dy: "0.35em", "text-anchor": "middle", ...ink}, pre ? "attn(norm(x))" : "attn(x)"));
  svg.appendChild(svgEl("circle", {cx: 40, cy: 120, r: 12, fill: "#e8f5ee", stroke: "#5b6570"}));
  svg.appendChild(svgEl("text", {x: 40, y: 120, dy: "0.35em", "text-anchor": "middle", ...ink, "font-size": 14}, "⊕"));
  svg.appendChild(svgEl("path", {d: "M 40 132 L 40 146", ...stroke}));
  svg.appendChild(svgEl("text", {x: 46, y: 18, ...ink}, `stream x, ‖x‖ = ${n(s.stream)}`));
  svg.appendChild(svgEl("text", {x: 206, y: 100, ...ink}, `‖attn‖ = ${n(out)}`));
  svg.appendChild(svgEl("text", {x: 58, y: 144, ...ink}, `x + attn: ‖·‖ = ${n(added)}`));
  figure(figs, "wm-bypass", c ? "the residual: a bypass joined at ⊕" : "the residual: a bypass joined at ⊕ (mask off)", svg);
}

// ------------------------------------------------------------------ the FFN's memories

// The FFN stage's key-value reading: the units with the largest coefficients for this token,
// each with its value's top tokens through W_U, and the activation with every unit's
// pre-activation marked (the top units in orange).
export async function showMemories(box, d, text, l) {
  let s;
  try {
    s = await layerSteps({run: d.run, text, position: d.position, layer: l, head: Math.min(steps.head, d.n_head - 1)});
  } catch (e) { showError(e.message); return; }
  const f = s.ffn;
  box.appendChild(htmlEl("h3", {}, "The units that fire: keys and values"));
  box.appendChild(htmlEl("p", {}, `A unit is a memory: its key (a row of the expansion) decides its coefficient for this token, its value (a column of proj) is what it writes. The ${f.top.length} largest coefficients of ${f.units}, each value read through the final norm's gain and W_U:`));
  const table = htmlEl("table", {class: "stats", "data-testid": "wm-ffn-units"});
  const headRow = htmlEl("tr");
  ["unit", "coefficient", "pre-activation", "its value's top tokens"].forEach((c) => headRow.appendChild(htmlEl("th", {}, c)));
  table.appendChild(headRow);
  f.top.forEach((u) => {
    const tr = htmlEl("tr", {"data-unit": String(u.unit), "data-coef": String(u.coef), "data-pre": String(u.pre)});
    tr.append(htmlEl("td", {}, String(u.unit)), htmlEl("td", {}, fmt(u.coef, 3)), htmlEl("td", {}, fmt(u.pre, 3)),
      htmlEl("td", {"data-ids": JSON.stringify(u.tokens.map((c) => c.id))}, u.tokens.map((c) => `'${tokenLabel(c.token)}'`).join(" ")));
    table.appendChild(tr);
  });
  box.appendChild(table);
  const act = f.kind === "swiglu" ? "silu (the gate)" : f.kind === "gelu_tanh" ? "GELU (tanh)" : "GELU";
  const svg = chart({id: "wm-ffn-curve", kind: "line", title: `${act}, this token's ${f.units} pre-activations marked`, width: 340, height: 180,
    ymin: Math.min(...f.curve.y), ymax: Math.max(...f.curve.y), series: [{name: act, values: f.curve.y, colour: "#0072b2"}],
    xlabels: f.curve.x.map((x, i) => (i % 20 === 0 ? x.toFixed(1) : "")), xthin: true, xtitle: "pre-activation"});
  markPre(svg, f);
  figure(box, "wm-ffn-curve", `the activation with this token's pre-activations (top ${f.top.length} in orange)`, svg);
}

// Ticks under the curve's axis at every unit's pre-activation: where on the curve each sits.
function markPre(svg, f) {
  const line = svg.querySelector("polyline"), pts = line.getAttribute("points").split(" ").map((p) => p.split(",").map(Number));
  const [x0, x1] = [pts[0][0], pts.at(-1)[0]], [lo, hi] = [f.curve.x[0], f.curve.x.at(-1)];
  const axisY = Math.max(...[...svg.querySelectorAll("line")].map((l) => +l.getAttribute("y1")));
  const at = (v) => x0 + (x1 - x0) * (v - lo) / (hi - lo);
  const top = new Set(f.top.map((u) => u.unit));
  const g = svgEl("g", {"data-testid": "wm-ffn-marks"});
  f.pre.forEach((v, i) => g.appendChild(svgEl("line", {x1: at(v), x2: at(v), y1: axisY - (top.has(i) ? 14 : 6), y2: axisY,
    stroke: top.has(i) ? "#d55e00" : "#8a949e", "stroke-width": top.has(i) ? 2 : 1, "stroke-opacity": top.has(i) ? 1 : 0.5})));
  svg.appendChild(g);
}
