// View 11, longer than trained: loss by position past the training length, for every
// encoding and scaling of a `gptlab experiment context` (its results.json), or for one run
// live at any context; and one head's attention at a position the model never saw. With no
// full-size context experiment in the runs folder it shows the results gptlab ships,
// labelled, and offers to run the experiment's --quick form here (quickrun.js), listed
// beside them, marked quick.

import {api, guarded, showError} from "./api.js";
import {$, htmlEl, tokenLabel} from "./dom.js";
import {figure} from "./figure.js";
import {offerQuickRun} from "./quickrun.js";
import {svgEl, SVGNS} from "./svg.js";

const COLOURS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
  "#7f7f7f", "#bcbd22", "#17becf"];
const state = {experiments: [], asked: 0};
// an option's value: the folder, or shipped:NAME (a folder may be named as the experiment)
const key = (x) => (x.shipped ? `shipped:${x.name}` : x.name);
const chosen = () => state.experiments.find((x) => key(x) === $("ctx-experiment").value);

// ------------------------------------------------------------------ a line plot with the trained length marked

// series: [{name, points: [[x, y]], colour}]; x in positions, y in nats/token.
function linePlot({id, title, series, trained, xmax, xtitle, ytitle}) {
  const W = 640, T = 26 + 16 * Math.ceil(series.length / 2) + 6, B = 40, L = 52, R = 14, H = T + 230 + B;
  const ys = series.flatMap((s) => s.points.map(([, y]) => y));
  let lo = Math.min(...ys), hi = Math.max(...ys);
  if (hi - lo < 1e-6) { lo -= 0.05; hi += 0.05; }
  const pad = (hi - lo) * 0.08;
  lo -= pad; hi += pad;
  const px = (x) => L + (W - L - R) * x / xmax, py = (y) => T + (H - T - B) * (1 - (y - lo) / (hi - lo));
  const svg = svgEl("svg", {xmlns: SVGNS, width: W, height: H, viewBox: `0 0 ${W} ${H}`,
    "font-family": "system-ui, sans-serif", "data-testid": `fig-${id}`, role: "img", "aria-label": title});
  svg.appendChild(svgEl("rect", {x: 0, y: 0, width: W, height: H, fill: "#ffffff", class: "fig-bg"}));
  svg.appendChild(svgEl("text", {x: 4, y: 15, "font-size": 13, "font-weight": 600, fill: "#1b1f24", class: "fig-title"}, title));
  const text = (attrs, s) => svgEl("text", {"font-size": 10, fill: "#5b6570", class: "fig-label", ...attrs}, s);
  svg.appendChild(svgEl("line", {x1: L, x2: W - R, y1: H - B, y2: H - B, stroke: "#888"}));
  svg.appendChild(svgEl("line", {x1: L, x2: L, y1: T, y2: H - B, stroke: "#888"}));
  [lo, (lo + hi) / 2, hi].forEach((y) => svg.appendChild(text({x: L - 4, y: py(y) + 3, "text-anchor": "end"}, y.toFixed(2))));
  [0, xmax / 4, xmax / 2, 3 * xmax / 4, xmax].forEach((x) => svg.appendChild(text({x: px(x), y: H - B + 13, "text-anchor": "middle"}, String(Math.round(x)))));
  svg.appendChild(text({x: (L + W) / 2, y: H - 6, "text-anchor": "middle", "font-size": 11}, xtitle));
  svg.appendChild(text({x: 12, y: (T + H - B) / 2, "text-anchor": "middle", "font-size": 11,
    transform: `rotate(-90 12 ${(T + H - B) / 2})`}, ytitle));
  // the training length: positions at and past it were never seen in training
  const tx = px(trained);
  svg.appendChild(svgEl("rect", {x: tx, y: T, width: Math.max(0, W - R - tx), height: H - T - B, fill: "#f59f00", opacity: 0.08}));
  svg.appendChild(svgEl("line", {x1: tx, x2: tx, y1: T, y2: H - B, stroke: "#1b1f24", "stroke-dasharray": "4 3",
    "data-testid": "trained-mark", "data-position": String(trained)}));
  svg.appendChild(text({x: tx + 4, y: T + 11, "font-size": 10}, `trained length ${trained}`));
  series.forEach((s, k) => {
    const g = svgEl("g", {"data-testid": "series", "data-name": s.name,
      "data-points": JSON.stringify(s.points)});
    g.appendChild(svgEl("polyline", {points: s.points.map(([x, y]) => `${px(x)},${py(y)}`).join(" "),
      fill: "none", stroke: s.colour, "stroke-width": 2}));
    s.points.forEach(([x, y]) => {
      const c = svgEl("circle", {cx: px(x), cy: py(y), r: 2.5, fill: s.colour});
      c.appendChild(svgEl("title", {}, `${s.name}: positions around ${Math.round(x)}, loss ${y.toFixed(4)}`));
      g.appendChild(c);
    });
    svg.appendChild(g);
    const lx = L + (k % 2) * (W - L) / 2, ly = 24 + 16 * Math.floor(k / 2);
    svg.appendChild(svgEl("rect", {x: lx, y: ly, width: 10, height: 10, fill: s.colour}));
    svg.appendChild(svgEl("text", {x: lx + 14, y: ly + 9, "font-size": 11, fill: "#1b1f24", class: "fig-title"}, s.name));
  });
  return svg;
}

// Bucket midpoints and losses (buckets nobody scored are left out).
const points = (buckets) => buckets.filter((b) => b.loss !== null).map((b) => [(b.first + b.last + 1) / 2, b.loss]);

// ------------------------------------------------------------------ an experiment's models

const showExperiment = guarded(async () => {
  const entry = chosen();
  if (!entry) return;
  const name = entry.name;
  const d = await api("/api/context/experiment", {experiment: name, length: +$("ctx-length").value,
    mode: $("ctx-mode").value, shipped: !!entry.shipped});
  const label = $("ctx-shipped");
  label.hidden = !d.shipped && !d.quick;
  label.dataset.quick = String(d.quick);
  const others = state.experiments.some((x) => x.shipped) ? " The shipped results stay in the list." : "";
  label.textContent = d.shipped ? `These are ${d.shipped}: gptlab experiment context at its default size, run once ` +
    "where gptlab was built. Run the experiment (gptlab experiment context --out RUNS/context) and yours replace them; " +
    "a --quick run (below) is listed beside them."
    : d.quick ? `${name} is a --quick run: ${d.undecided_line || "a small run, too small to decide most claims (each claim says whether it could)"}.${others}` : "";
  const drawn = d.series.filter((s) => !s.refused && s.buckets.some((b) => b.loss !== null));
  const series = drawn.map((s, k) => ({name: s.label, points: points(s.buckets), colour: COLOURS[k % COLOURS.length]}));
  const box = $("ctx-lines");
  box.replaceChildren();
  figure(box, "ctx-experiment", `${d.shipped ? "shipped results" : name}: windows of ${d.length}, ${d.mode}`, linePlot({id: "ctx-experiment",
    title: `loss by position, ${d.mode} windows of ${d.length} (trained at ${d.trained_length})`, series,
    trained: d.trained_length, xmax: d.length, xtitle: "position in the window", ytitle: "loss (nats/token)"}));
  const refused = d.series.filter((s) => s.refused);
  $("ctx-refused").textContent = refused.map((s) => `${s.label}: ${s.refused}`).join(" · ");
  $("ctx-losses").textContent = drawn.map((s) => `${s.label} ${s.loss.toFixed(3)}`).join(" · ");
}, ["ctx-lines", "ctx-refused", "ctx-losses"]);

function fillLengths() {
  const e = chosen();
  const sel = $("ctx-length"), keep = +sel.value;
  if (!e) { sel.replaceChildren(); return; }
  sel.replaceChildren(...e.lengths.map((n) => htmlEl("option", {value: n}, `${n} (${n / e.trained_length}x)`)));
  sel.value = String(e.lengths.includes(keep) ? keep : e.lengths.at(-1));
}

// ------------------------------------------------------------------ one run, live

const runLive = guarded(async () => {
  const run = $("ctx-run").value;
  if (!run) { showError("no run chosen: run `gptlab experiment context` into the runs folder, or train one"); return; }
  const body = {run, rope_scaling: $("ctx-scaling").value || null,
    layer: +$("ctx-layer").value, head: +$("ctx-head").value};
  // blank: the server's default, twice the run's training length (learned positions: it)
  if ($("ctx-context").value !== "") body.context = +$("ctx-context").value;
  if ($("ctx-position").value !== "") body.position = +$("ctx-position").value;
  if ($("ctx-text").value) body.text = $("ctx-text").value;
  const asked = ++state.asked;
  const d = await api("/api/context", body);
  if (asked !== state.asked) return;  // a newer request is on its way
  const scaling = d.rope_scaling ? `, RoPE scaled ${d.rope_scaling}` : "";
  const status = $("ctx-status");
  status.textContent = `${d.run} (${d.pos_encoding}, trained at ${d.block_size}) on ${d.source}: ` +
    `loss ${d.loss.toFixed(4)} over ${d.tokens_scored} tokens in windows of ${d.context}${scaling}.` +
    (d.warning ? ` Note: ${d.warning}.` : "");
  status.dataset.loss = String(d.loss);
  const box = $("ctx-live");
  box.replaceChildren();
  figure(box, "ctx-run-loss", `${d.run}: loss by position`, linePlot({id: "ctx-run-loss",
    title: `loss by position, non-overlapping windows of ${d.context}`, trained: d.block_size, xmax: d.context,
    series: [{name: `${d.pos_encoding}${scaling}`, points: points(d.buckets), colour: COLOURS[0]}],
    xtitle: "position in the window", ytitle: "loss (nats/token)"}));
  figure(box, "ctx-attention", `layer ${d.attention.layer}, head ${d.attention.head}, query at position ${d.attention.position}`,
    attentionBars(d.attention, d.block_size));
}, ["ctx-live", "ctx-status"]);

// One query's attention over the keys 0..position, the trained positions shaded apart.
function attentionBars(a, trained) {
  const n = a.weights.length, W = 640, L = 44, R = 12, T = 30, B = 34, H = 220;
  const max = Math.max(1e-9, ...a.weights), bw = (W - L - R) / n;
  const svg = svgEl("svg", {xmlns: SVGNS, width: W, height: H, viewBox: `0 0 ${W} ${H}`,
    "font-family": "system-ui, sans-serif", "data-testid": "fig-ctx-attention", role: "img",
    "aria-label": `attention of the query at position ${a.position}`});
  svg.appendChild(svgEl("rect", {x: 0, y: 0, width: W, height: H, fill: "#ffffff", class: "fig-bg"}));
  const unseen = a.position >= trained ? ` (never seen in training: it is past ${trained - 1})` : "";
  svg.appendChild(svgEl("text", {x: 4, y: 15, "font-size": 13, "font-weight": 600, fill: "#1b1f24", class: "fig-title"},
    `query ${a.position} ${JSON.stringify(tokenLabel(a.tokens[a.position]))}${unseen}`));
  a.weights.forEach((w, j) => {
    const h = (H - T - B) * w / max;
    const bar = svgEl("rect", {x: L + j * bw, y: H - B - h, width: Math.max(0.6, bw - (bw > 3 ? 1 : 0)), height: h,
      fill: j >= trained ? "#d9480f" : "#1f77b4", "data-testid": "attention-bar", "data-weight": String(w)});
    bar.appendChild(svgEl("title", {}, `key ${j} ${JSON.stringify(tokenLabel(a.tokens[j]))}: ${w.toFixed(4)}`));
    svg.appendChild(bar);
  });
  const text = (attrs, s) => svgEl("text", {"font-size": 10, fill: "#5b6570", class: "fig-label", ...attrs}, s);
  svg.appendChild(svgEl("line", {x1: L, x2: W - R, y1: H - B, y2: H - B, stroke: "#888"}));
  svg.appendChild(text({x: L - 4, y: T + 4, "text-anchor": "end"}, max.toFixed(2)));
  svg.appendChild(text({x: L - 4, y: H - B, "text-anchor": "end"}, "0"));
  if (trained < n) {
    const tx = L + trained * bw;
    svg.appendChild(svgEl("line", {x1: tx, x2: tx, y1: T, y2: H - B, stroke: "#1b1f24", "stroke-dasharray": "4 3"}));
    svg.appendChild(text({x: tx + 3, y: T + 8}, `key positions ≥ ${trained}: never seen in training`));
  }
  svg.appendChild(text({x: (L + W) / 2, y: H - 8, "text-anchor": "middle", "font-size": 11}, `key position (0..${n - 1})`));
  return svg;
}

// ------------------------------------------------------------------ loading

function refresh(prefer) {
  Promise.all([api("/api/context/experiments"), api("/api/runs")]).then(([e, r]) => {
    state.experiments = e.experiments;
    const exp = $("ctx-experiment");
    exp.replaceChildren(...(e.experiments.length ? e.experiments.map((x) => htmlEl("option", {value: key(x)},
      x.shipped ? `${x.name} (shipped results)` : x.quick ? `${x.name} (quick run)` : x.name))
      : [htmlEl("option", {value: ""}, "none: run gptlab experiment context --out RUNS/context")]));
    if (prefer && e.experiments.some((x) => key(x) === prefer)) exp.value = prefer;
    fillLengths();
    // The run picker: the experiments' runs first (RoPE, ALiBi, ...), then every other run.
    const theirs = e.experiments.flatMap((x) => x.runs), others = r.runs.filter((n) => !theirs.includes(n));
    const sel = $("ctx-run");
    sel.replaceChildren(...[...theirs, ...others].map((n) => htmlEl("option", {value: n}, n)));
    const alibi = theirs.find((n) => n.endsWith("/alibi"));
    if (alibi) sel.value = alibi;
    if (e.experiments.length) showExperiment();
  }).catch((err) => showError(err.message));
}

export function load() {
  refresh();
  offerQuickRun({buttonId: "ctx-quick", statusId: "ctx-quick-status", experiment: () => "context",
    onEnd: (e) => { if (e.status === "finished") refresh(e.experiment === "context" ? e.folder : undefined); }});
  $("ctx-experiment").addEventListener("change", () => { fillLengths(); showExperiment(); });
  $("ctx-length").addEventListener("change", showExperiment);
  $("ctx-mode").addEventListener("change", showExperiment);
  $("ctx-go").addEventListener("click", runLive);
}
