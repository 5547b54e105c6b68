// View 2: why the scores are divided by sqrt(d_k).

import {api, guarded} from "./api.js";
import {$, fmt, htmlEl} from "./dom.js";
import {figure} from "./figure.js";
import {chart} from "./svg.js";

// CSS variables (style.css): the page's theme picks the colours, an export the light ones.
const RED = "var(--fig-red)", BLUE = "var(--fig-blue)";

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
    r.forEach((c, j) => tr.appendChild(htmlEl(i === 0 && j ? "th" : "td", j ? {"data-testid": `scaling-${i}-${j}`} : {}, c)));
    t.appendChild(tr);
  });
  st.appendChild(t);
  const figs = $("scaling-figures");
  figs.replaceChildren();
  const [lo, hi] = d.hist_range, step = (hi - lo) / d.bins;
  const xl = d.hist_raw.map((_, i) => (i % 10 === 0 ? (lo + i * step).toFixed(0) : ""));
  figure(figs, "scaling-hist", "spread of the scores", chart({id: "scaling-hist", kind: "bar",
    title: `scores over ${d.n_queries}×${d.n_keys} pairs, d_k = ${d.d_k}`, xlabels: xl, xtitle: "score", ytitle: "pairs",
    series: [{name: "unscaled q·k", values: d.hist_raw, colour: RED},
             {name: "scaled q·k/√d_k", values: d.hist_scaled, colour: BLUE}]}));
  figure(figs, "scaling-row", "one query's softmax weights", chart({id: "scaling-row", kind: "bar",
    title: "softmax over the keys of query 0", ymax: 1, xlabels: d.example_row_scaled.map((_, i) => String(i)),
    xtitle: "key", ytitle: "softmax weight", series: [{name: "unscaled", values: d.example_row_unscaled, colour: RED},
                            {name: "scaled", values: d.example_row_scaled, colour: BLUE}]}));
  figure(figs, "scaling-sweep", "saturation as d_k grows", chart({id: "scaling-sweep", kind: "line",
    title: "mean max softmax weight vs d_k", ymax: 1, xlabels: d.sweep.map((s) => String(s.d_k)), xtitle: "d_k",
    ytitle: "max weight",
    series: [{name: "unscaled", values: d.sweep.map((s) => s.unscaled.max_weight), colour: RED},
             {name: "scaled", values: d.sweep.map((s) => s.scaled.max_weight), colour: BLUE}]}));
}, ["scaling-stats", "scaling-figures"]);

export function load() {
  const sel = $("scaling-dk");
  for (let k = 0; k <= 12; k++) sel.appendChild(htmlEl("option", {value: 2 ** k}, String(2 ** k)));
  sel.value = "64";
  for (const id of ["scaling-dk", "scaling-keys", "scaling-seed"]) $(id).addEventListener("change", scalingCompute);
  scalingCompute();
}
