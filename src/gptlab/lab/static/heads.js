// View 3: a trained model's attention heads, their concatenation and W_O.

import {api, fillRuns, guarded, showError} from "./api.js";
import {$, htmlEl, tokenLabel} from "./dom.js";
import {figure} from "./figure.js";
import {heatmap} from "./svg.js";

const heads = {data: null, woOpen: "all"};  // woOpen: W_O's block shown, or "all"
const ROW_MIN = 10;  // px: a token's row label at 9 px type, none left out
let ready = null, opened = false;  // the run picker filled; opened from another view

const headsCompute = guarded(async () => {
  const run = $("heads-run").value;
  if (!run) { showError("no run chosen: train one into the runs folder (gptlab train --out runs/NAME)"); return; }
  const layer = +$("heads-layer").value || 0;
  heads.data = null;
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
}, ["heads-figures", "heads-wo", "heads-check"]);

function renderHeads() {
  const d = heads.data, figs = $("heads-figures"), wo = $("heads-wo");
  figs.replaceChildren();
  wo.replaceChildren();
  const T = d.tokens.length;
  const tok = d.tokens.map(tokenLabel);
  const hover = (label) => { $("heads-hover").textContent = label; };
  const choice = $("heads-head").value;
  // The grid, like W_O below it, shows the layer the layer menu names.
  const layers = [d.layer];
  const list = choice === "all" ? [...Array(d.n_head).keys()] : [+choice];
  // 9 px cells at the least: every row's label fits (svg.js shrinks labels to 8 px, no less)
  const cell = choice === "all" ? Math.max(9, Math.min(22, Math.floor(260 / T))) : Math.max(10, Math.min(40, Math.floor(640 / T)));
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
  // rows of 10 px at the least: every token's label shows (svg.js thins labels of smaller rows)
  const rowHeight = (c) => Math.max(c, ROW_MIN);
  figure(wo, "concat", `concat of ${d.n_head} heads (T × ${d.n_head * hs})`, heatmap({id: "concat", values: d.concat,
    rows: tok, cols: headCols, title: "concat(head_0 … head_H−1)", cell: c2, rowHeight: rowHeight(c2), showValues: false, showColLabels: true,
    groupCols: [...Array(d.n_head - 1).keys()].map((h) => (h + 1) * hs), onHover: hover}));
  woBlocks(wo, d, headCols, hover);
  const c3 = Math.max(5, Math.min(10, Math.floor(320 / C)));
  figure(wo, "attn-out", `output = concat·W_O + b (T × ${C})`, heatmap({id: "attn-out", values: d.out, rows: tok,
    cols: [...Array(C).keys()].map(() => ""), title: "attention output", cell: c3, rowHeight: rowHeight(c3),
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

// W_O as one number per head, the Frobenius norm of the head's d_k × n_embd block of rows,
// which opens into the matrix: the whole of it, or the block clicked. Drawn as 36,864 SVG
// rects the 192 x 192 map took about 1 s a redraw; the matrix is now one bitmap (svg.js).
function woBlocks(wo, d, headCols, hover) {
  const hs = d.head_dim, C = d.n_embd;
  const blockOf = (h) => d.w_o.slice(h * hs, (h + 1) * hs);
  const norms = [...Array(d.n_head).keys()].map((h) => Math.sqrt(blockOf(h).flat().reduce((a, x) => a + x * x, 0)));
  const opened = heads.woOpen ?? "all";
  const box = htmlEl("div", {class: "row"});
  wo.appendChild(box);
  figure(box, "w_o-norms", "W_O by head: the norm of each head's block (click one to open it)", heatmap({id: "w_o-norms",
    values: [norms], rows: ["‖W_O,h‖"], cols: norms.map((_, h) => `h${h}`), title: "W_O block norms", scale: "seq", cell: 36,
    decimals: 2, rowName: "", colName: "head", highlight: [norms.map((_, h) => h === opened)],
    onClick: (_, h) => { heads.woOpen = heads.woOpen === h ? "all" : h; renderHeads(); },
    cellAction: (_, h) => (opened === h ? `close head ${h}'s block (show all of W_O)` : `open head ${h}'s block of W_O`)}));
  const values = opened === "all" ? d.w_o : blockOf(opened);
  const rows = opened === "all" ? headCols : values.map((_, j) => (j % 8 === 0 ? `h${opened}:${j}` : ""));
  figure(box, "w_o", opened === "all" ? `W_O (${d.n_head * hs} × ${C})` : `head ${opened}'s block of W_O (${hs} × ${C})`,
    heatmap({id: "w_o", values, rows, cols: [...Array(C).keys()].map(() => ""), title: opened === "all" ? "W_O" : `W_O, head ${opened}`,
      cell: Math.max(2, Math.min(10, Math.floor(320 / C))), showValues: false,
      groupRows: opened === "all" ? [...Array(d.n_head - 1).keys()].map((h) => (h + 1) * hs) : [], onHover: hover}));
}

export function load() {
  ready = fillRuns($("heads-run"), () => $("heads-prompt").value);
  ready.then((runs) => { if (runs.length && !opened) headsCompute(); });
  $("heads-go").addEventListener("click", headsCompute);
  $("heads-layer").addEventListener("change", headsCompute);
  $("heads-run").addEventListener("change", () => { $("heads-layer").value = "0"; headsCompute(); });
  $("heads-head").addEventListener("change", () => heads.data && renderHeads());
  $("heads-prompt").addEventListener("change", headsCompute);
}

// Opened from another view (every head at a glance, the whole model): its run, prompt,
// layer and head ("all": the layer's grid).
export async function open({run, prompt, layer, head}) {
  opened = true;
  await ready;
  $("heads-run").value = run;
  $("heads-prompt").value = prompt;
  const options = (n) => [...Array(n + 1).keys()].map((i) => htmlEl("option", {value: i}, String(i)));
  $("heads-layer").replaceChildren(...options(layer));  // refilled from the answer
  $("heads-layer").value = String(layer);
  $("heads-head").replaceChildren(htmlEl("option", {value: "all"}, "all (grid)"), ...options(head === "all" ? 0 : head));
  $("heads-head").value = String(head);
  await headsCompute();
}
