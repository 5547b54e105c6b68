// View 4, beside the sinusoidal and RoPE tables: a run's own learned positions (its wpe
// table), PE·PEᵀ and each position's nearest others by cosine, from the server. It keeps
// its own run: the address's may have RoPE positions, with no table to show.

import {api, fillRuns, guarded, showError} from "./api.js";
import {$, htmlEl} from "./dom.js";
import {figure} from "./figure.js";
import {heatmap, robustMax} from "./svg.js";

const SHOWN = 16;  // positions listed with their neighbours

const refresh = guarded(async () => {
  const run = $("lp-run").value;
  if (!run) { showError("no run chosen: train one into the runs folder"); return; }
  const d = await api("/api/learned_positions", {run, positions: +$("lp-positions").value, neighbours: 3});
  draw(d);
}, ["lp-figures", "lp-table", "lp-summary"]);

function draw(d) {
  const figs = $("lp-figures");
  figs.replaceChildren();
  const P = d.positions, C = d.n_embd;
  const pos = [...Array(P).keys()].map((p) => (p % 8 === 0 ? String(p) : ""));
  const dims = [...Array(C).keys()].map((j) => (j % 16 === 0 ? String(j) : ""));
  // 98th percentile of |W_P|: scaled to its largest entry the table was almost white
  figure(figs, "learned-table", `W_P of ${d.run} (${P} of ${d.block_size} positions × ${C} dims; colours end at the 98th percentile of |value|)`,
    heatmap({id: "learned-table", values: d.table, rows: pos, cols: dims, title: "learned PE", max: robustMax(d.table), cell: Math.max(2, Math.min(10, Math.floor(400 / Math.max(P, C)))),
    showValues: false, showColLabels: true, rowName: "position", colName: "dim"}));
  figure(figs, "learned-sim", "PE·PEᵀ: what the model learned about distance", heatmap({id: "learned-sim",
    values: d.similarity, rows: pos, cols: pos, title: "PE[m]·PE[n]", cell: Math.max(2, Math.min(10, Math.floor(400 / P))),
    showValues: false, scale: "div", showColLabels: true, rowName: "m", colName: "n"}));
  const near = d.distant_cosine === null ? "" : `, positions 8 or more apart ${d.distant_cosine.toFixed(2)}`;
  const summary = $("lp-summary");
  summary.textContent = `Mean cosine of neighbouring positions (p, p+1): ${d.adjacent_cosine.toFixed(2)}${near}. ` +
    "Nothing told the model that 5 is next to 6: training did.";
  summary.dataset.adjacent = String(d.adjacent_cosine);
  const t = htmlEl("table", {class: "stats"});
  const head = htmlEl("tr");
  ["position", "nearest (cosine)", "2nd", "3rd"].forEach((h) => head.appendChild(htmlEl("th", {}, h)));
  t.appendChild(head);
  d.neighbours.slice(0, SHOWN).forEach((list, p) => {
    const tr = htmlEl("tr", {"data-testid": `lp-row-${p}`});
    tr.appendChild(htmlEl("td", {}, String(p)));
    list.forEach((n) => tr.appendChild(htmlEl("td", {"data-position": String(n.position), "data-cosine": String(n.cosine)},
      `${n.position} (${n.cosine.toFixed(2)})`)));
    t.appendChild(tr);
  });
  $("lp-table").replaceChildren(htmlEl("p", {}, `Each position's nearest others by cosine (the first ${Math.min(SHOWN, P)}):`), t);
}

export function load() {
  $("lp-run").addEventListener("change", refresh);
  $("lp-positions").addEventListener("change", refresh);
  fillRuns($("lp-run"), undefined, {address: false}).then((runs) => { if (runs.length) refresh(); });
}
