// View 6: every head scored as a previous-token, duplicate-token and induction head; one ablated.

import {api, fillRuns, guarded, showError} from "./api.js";
import {$, htmlEl, tokenLabel} from "./dom.js";
import {figure} from "./figure.js";
import {heatmap} from "./svg.js";

const SHORT = {previous_token: "previous-token", duplicate_token: "duplicate-token", induction: "induction"};

const scores = {data: null};

const scoresCompute = guarded(async () => {
  const run = $("scores-run").value;
  if (!run) { showError("no run chosen: train one into the runs folder"); return; }
  const prompt = $("scores-prompt").value;
  scores.data = null;
  const d = await api("/api/head_scores", {run, prompt, seed: +$("scores-seed").value});
  scores.data = d;
  $("scores-tokens").textContent = `${prompt ? "prompt" : "random tokens, repeated twice"}: ${JSON.stringify(d.tokens.join(""))}  (loss ${d.loss.toFixed(4)})`;
  const figs = $("scores-figures");
  figs.replaceChildren();
  $("scores-head").replaceChildren();
  $("scores-ablation").textContent = "";
  const L = [...Array(d.n_layer).keys()].map((l) => `L${l}`), H = [...Array(d.n_head).keys()].map((h) => `H${h}`);
  const open = (i, j) => openScoredHead(i, j);
  const action = (i, j) => `open layer ${i} head ${j}`;
  $("scores-chance").textContent = "chance on this input (a head attending evenly): " +
    Object.entries(d.chance).map(([k, v]) => `${SHORT[k] || k} ${v.toFixed(3)}`).join(", ");
  $("scores-best").textContent = "the best head of each kind: " + Object.entries(d.scores).map(([k, values]) => {
    const [v, l, h] = values.flatMap((row, l) => row.map((x, h) => [x, l, h])).reduce((a, b) => (b[0] > a[0] ? b : a));
    return `${SHORT[k] || k} L${l}H${h} ${v.toFixed(3)} (${(v / d.chance[k]).toFixed(1)}× chance)`;
  }).join(", ");
  for (const [name, values] of Object.entries(d.scores)) {
    const label = SHORT[name] || name;
    figure(figs, `scores-${name}`, `${label} score (chance ${d.chance[name].toFixed(3)})`, heatmap({id: `scores-${name}`, values, rows: L, cols: H,
      title: label, scale: "seq", max: 1, cell: 44, onClick: open, cellAction: action, rowName: "layer", colName: "head",
      marks: [{value: d.chance[name], text: "chance"}]}), "clickable");
  }
  // One diverging scale, symmetric around 0, for the whole grid; its bar shows it.
  figure(figs, "scores-ablation", "loss change when the head is zeroed (< 0: the head hurt here)", heatmap({id: "scores-ablation-grid",
    values: d.ablation_deltas, rows: L, cols: H, title: "Δ loss (ablated − clean)", cell: 52, decimals: 3,
    onClick: open, cellAction: action, rowName: "layer", colName: "head"}), "clickable");
}, ["scores-figures", "scores-head", "scores-ablation", "scores-tokens", "scores-chance", "scores-best"]);

// What a loss change says: the head helped (the loss rose without it), or hurt.
const deltaWords = (delta) => (delta > 0 ? "the loss rose without it: here the head helped"
  : delta < 0 ? "the loss fell without it: on this input the head hurt the prediction" : "no change");

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
    $("scores-ablation").textContent = `Zeroing L${layer} H${head}: loss ${a.loss.toFixed(4)} → ${a.ablated_loss.toFixed(4)} ` +
      `(Δ ${a.delta >= 0 ? "+" : ""}${a.delta.toFixed(4)} nats: ${deltaWords(a.delta)}).`;
  }));
  box.appendChild(btn);
});

export function load() {
  fillRuns($("scores-run"), () => $("scores-prompt").value).then((runs) => { if (runs.length) scoresCompute(); });
  $("scores-run").addEventListener("change", scoresCompute);
  $("scores-go").addEventListener("click", scoresCompute);
}
