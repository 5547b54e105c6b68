// The whole model, as the chapter draws it: tokens → embedding (+ position) → [block] × L →
// final norm → lm_head → next-token probabilities, for one token of a text, every number from
// one forward pass of the run's model on the server (gptlab.interp.walk). The diagram's levels
// open like Transformer Explainer's: a block opens into its norms, attention, adds and FFN;
// any stage opens its numbers beside the diagram. The address's layer (#wm-layer, state.js)
// opens that block's attention, its head (#wm-head) the stepper's head; a stage inside a
// block writes its layer back.

import {api, fillRuns, guarded, showError} from "./api.js";
import {$, debounce, htmlEl, tokenLabel} from "./dom.js";
import {figure} from "./figure.js";
import {SVGNS, heatmap, strip, svgEl} from "./svg.js";
import {pickField, restartSteps, setHead, showAttention, showMemories} from "./wmsteps.js";

const TOP = 5;
// stage null: not chosen yet (the address's layer, else the output, once the walk is in)
const state = {data: null, text: "", open: new Set(), stage: null, asked: 0, prenormReading: false, temperature: 1};
const W = 340, BOX_W = 176, ROW = 34, X0 = 8;  // the diagram fits a 390 px phone unscaled

const pct = (p) => `${(100 * p).toFixed(p >= 0.1 ? 0 : 1)}%`;
const quoted = (t) => `'${tokenLabel(t)}'`;

const refresh = guarded(async () => {
  const run = $("wm-run").value, text = $("wm-text").value;
  if (!run) { showError("no run chosen: train one into the runs folder"); return; }
  const raw = $("wm-position").value;
  const asked = ++state.asked;
  const d = await api("/api/walk", {run, text, top: TOP, position: raw === "" ? null : +raw});
  if (asked !== state.asked) return;  // a newer text or token is on its way
  state.data = d;
  state.text = text;
  fillPositions(d);
  $("wm-reading-box").hidden = d.norm_position !== "post";
  if (d.norm_position !== "post") state.prenormReading = false;
  draw();
}, ["wm-diagram", "wm-detail", "wm-params"]);

function fillPositions(d) {
  const sel = $("wm-position");
  sel.replaceChildren(...d.tokens.map((t, i) => htmlEl("option", {value: i}, `${i}: ${tokenLabel(t)}`)));
  sel.value = String(d.position);
}

// The stage the address asks for: its layer's attention; a stage of a block the run lacks
// falls back to the output.
function stageFor(d) {
  const layer = $("wm-layer").value, l = +layer;
  if (state.stage === null) state.stage = layer !== "" && Number.isInteger(l) && l < d.blocks.length ? `attn-${l}` : "output";
  const inBlock = /^[a-z0-9]+-(\d+)$/.exec(state.stage);
  if (inBlock && +inBlock[1] >= d.blocks.length) state.stage = "output";
  else if (inBlock && !state.stage.startsWith("block-")) state.open.add(+inBlock[1]);
}

function draw() {
  const d = state.data;
  stageFor(d);
  $("wm-diagram").replaceChildren();
  const box = figure($("wm-diagram"), "whole-model", `${d.run}: token ${quoted(d.token)} at position ${d.position}`, diagram(d));
  box.classList.add("wm-figure");
  showStage(state.stage);
  drawParams(d);
}

// ------------------------------------------------------------------ the diagram

// The stages the diagram lists, top to bottom, for the blocks that are open.
function rows(d) {
  const out = [{id: "tokens", label: `token ${quoted(d.token)} (id ${d.ids[d.position]})`, kind: "io"},
    {id: "embed", label: d.pos_embed ? "embedding + position" : "embedding", reading: d.embedded}];
  const pre = d.norm_position === "pre" || state.prenormReading;
  d.blocks.forEach((b, l) => {
    if (!state.open.has(l)) {
      out.push({id: `block-${l}`, label: `GPT block ${l}`, block: l, reading: b.add_2, kind: "block"});
      return;
    }
    out.push({id: `block-${l}`, label: `GPT block ${l} ▾`, block: l, kind: "block-open"});
    const n = (k) => ({id: `norm${k}-${l}`, label: `${d.norm === "rmsnorm" ? "RMSNorm" : "LayerNorm"} ${k}`, sub: true});
    const attn = {id: `attn-${l}`, label: `attention, ${d.n_head} heads`, sub: true};
    const ffn = {id: `ffn-${l}`, label: d.mlp === "swiglu" ? `FFN: gate·up → ${d.ffn_hidden}` : `FFN: ${d.n_embd} → ${d.ffn_hidden} → ${d.n_embd}`, sub: true};
    const add = (k, r) => ({id: `add${k}-${l}`, label: "⊕ residual add", reading: r, sub: true, kind: "add"});
    if (pre) out.push(n(1), attn, add(1, b.add_1), n(2), ffn, add(2, b.add_2));
    else out.push(attn, add(1, b.add_1), n(1), ffn, add(2, b.add_2), n(2));
  });
  if (d.final_norm || state.prenormReading) out.push({id: "final", label: `final ${d.norm === "rmsnorm" ? "RMSNorm" : "LayerNorm"}`});
  out.push({id: "head", label: `lm_head: ${d.n_embd} → ${d.vocab_size}`},
    {id: "output", label: `next: ${quoted(d.top[0].token)} ${pct(d.top[0].p)}`, kind: "io"});
  return out;
}

function diagram(d) {
  const list = rows(d);
  const H = 30 + list.length * ROW;
  const reading = state.prenormReading;
  const title = reading ? "the same model read as pre-norm (no numbers: the run is post-norm)" : "the whole model, one token";
  const svg = svgEl("svg", {xmlns: SVGNS, width: W, height: H, viewBox: `0 0 ${W} ${H}`, "font-family": "system-ui, sans-serif",
    "data-testid": "fig-whole-model", role: "toolbar", "aria-orientation": "vertical",
    "aria-label": `${title}: ${list.length} stages; up and down arrows move between them, Enter opens one's numbers`});
  // one Tab stop (the chosen stage), ↑ ↓ Home End between stages: the numbers a Tab away
  const roving = list.some((r) => r.id === state.stage) ? state.stage : list[0].id;
  svg.appendChild(svgEl("rect", {x: 0, y: 0, width: W, height: H, fill: "#ffffff", class: "fig-bg"}));
  svg.appendChild(svgEl("text", {x: 4, y: 15, "font-size": 12, "font-weight": 600, fill: "#1b1f24", class: "fig-title"}, title));
  const cx = X0 + BOX_W / 2;
  svg.appendChild(svgEl("line", {x1: cx, x2: cx, y1: 30 + ROW / 2, y2: H - ROW / 2, stroke: "#8a949e", "stroke-width": 2}));
  list.forEach((r, i) => {
    const y = 26 + i * ROW, x = r.sub ? X0 + 14 : X0, w = r.sub ? BOX_W - 28 : BOX_W;
    const g = svgEl("g", {"data-testid": `wm-stage-${r.id}`, "data-stage": r.id, tabindex: r.id === roving ? 0 : -1, role: "button",
      class: "wm-stage" + (state.stage === r.id ? " on" : ""), "aria-label": ariaFor(r)});
    if (r.block !== undefined) g.setAttribute("aria-expanded", String(state.open.has(r.block)));
    const round = r.kind === "add" ? 14 : 5;
    g.appendChild(svgEl("rect", {x, y, width: w, height: ROW - 6, rx: round, fill: fillFor(r), stroke: "#5b6570",
      "stroke-dasharray": reading && r.sub ? "4 3" : "none", class: `wm-box wm-${r.kind || "plain"}`}));
    g.appendChild(svgEl("text", {x: x + w / 2, y: y + (ROW - 6) / 2, dy: "0.35em", "text-anchor": "middle", "font-size": 12,
      fill: "#1b1f24", class: "fig-title", "font-weight": r.kind === "block" || r.kind === "block-open" ? 600 : 400}, r.label));
    g.addEventListener("click", () => choose(r));
    g.addEventListener("keydown", (e) => {
      if (e.key === "Enter" || e.key === " ") { e.preventDefault(); choose(r); return; }
      const to = {ArrowDown: i + 1, ArrowUp: i - 1, Home: 0, End: list.length - 1}[e.key];
      if (to === undefined) return;
      e.preventDefault();
      const all = [...svg.querySelectorAll("[data-stage]")], target = all[Math.max(0, Math.min(all.length - 1, to))];
      all.forEach((el) => el.setAttribute("tabindex", el === target ? 0 : -1));
      target.focus();
    });
    svg.appendChild(g);
    if (r.reading && !reading) svg.appendChild(readingText(r.reading, X0 + BOX_W + 8, y + (ROW - 6) / 2, r.id));
  });
  if (!reading) bypasses(svg, list);
  return svg;
}

// An open block's residual stream drawn as the bypass it is: a line beside each sublayer,
// from where the stream leaves (the block's input; post-norm: the norm after the first add)
// to the ⊕ that adds the sublayer's output back.
function bypasses(svg, list) {
  const at = (id) => list.findIndex((r) => r.id === id), mid = (i) => 26 + i * ROW + (ROW - 6) / 2;
  state.open.forEach((l) => {
    const add1 = at(`add1-${l}`), add2 = at(`add2-${l}`);
    if (add1 < 0) return;
    const from2 = state.data.norm_position === "pre" ? add1 : at(`norm1-${l}`);
    [[at(`block-${l}`), add1], [from2, add2]].forEach(([a, b], k) => {
      svg.appendChild(svgEl("path", {d: `M ${X0 + 14} ${mid(a)} L ${X0 + 5} ${mid(a)} L ${X0 + 5} ${mid(b)} L ${X0 + 14} ${mid(b)}`,
        fill: "none", stroke: "#2f7a52", "stroke-width": 2, "data-testid": `wm-bypass-${l}-${k + 1}`, class: "wm-bypass"}));
    });
  });
}

function fillFor(r) {
  return {io: "#e7eef9", block: "#fff3cd", "block-open": "#fde7a8", add: "#e8f5ee"}[r.kind] || "#f3f4f6";
}

function ariaFor(r) {
  const what = r.reading ? `; stream norm ${r.reading.norm.toFixed(2)}, lens ${JSON.stringify(r.reading.lens[0].token)}` : "";
  const open = r.block !== undefined ? (state.open.has(r.block) ? ": close it" : ": open it") : ": show its numbers";
  return `${r.label}${what}${open}`;
}

// Beside an add: the stream's norm and its logit-lens token (what the model would say now).
function readingText(r, x, y, id) {
  const top = r.lens[0];
  const t = svgEl("text", {x, y, dy: "0.35em", "font-size": 11, fill: "#5b6570", class: "fig-label wm-reading",
    "data-testid": `wm-reading-${id}`, "data-norm": String(r.norm), "data-lens-id": String(top.id), "data-lens-p": String(top.p)});
  t.textContent = `‖x‖ ${r.norm.toFixed(1)} → ${quoted(top.token)} ${pct(top.p)}`;
  return t;
}

function choose(r) {
  if (r.block !== undefined) {
    if (state.open.has(r.block)) state.open.delete(r.block); else state.open.add(r.block);
  }
  state.stage = r.id;
  const inBlock = /^(attn|ffn|norm1|norm2|add1|add2)-(\d+)$/.exec(r.id);
  if (inBlock) pickField("wm-layer", inBlock[2]);  // the address's layer: the block shown
  draw();
  document.querySelector(`[data-stage="${r.id}"]`)?.focus();
}

// ------------------------------------------------------------------ a stage's numbers

function line(parent, text, testid) {
  const p = htmlEl("p", testid ? {"data-testid": testid} : {}, text);
  parent.appendChild(p);
  return p;
}

function lensList(parent, lens, testid) {
  const ol = htmlEl("ol", {class: "lens-topk", "data-testid": testid});
  lens.forEach((c) => {
    const li = htmlEl("li", {"data-id": String(c.id), "data-p": String(c.p)});
    const barbox = htmlEl("span", {class: "lens-barbox"}), bar = htmlEl("span", {class: "lens-bar"});
    bar.style.width = `${(100 * c.p).toFixed(1)}%`;
    barbox.appendChild(bar);
    li.append(htmlEl("code", {}, tokenLabel(c.token)), barbox, ` ${c.p.toFixed(4)}`);
    ol.appendChild(li);
  });
  parent.appendChild(ol);
}

function normDetail(box, n, name) {
  const mean = n.mean === null ? "" : `mean μ = ${n.mean.toFixed(4)} removed, `;
  line(box, n.kind === "rmsnorm"
    ? `x̂ = x / rms(x), rms = √(mean(x²) + ε) = ${n.scale.toFixed(4)}; then y = x̂ ⊙ g (the gain).`
    : `x̂ = (x − μ) / σ: ${mean}scale σ = √(var + ε) = ${n.scale.toFixed(4)}; then ${n.bias ? "y = x̂ ⊙ γ + β (gain and bias)" : "y = x̂ ⊙ γ (the gain; this model has no bias)"}.`, "wm-norm-formula");
  const row = htmlEl("div", {class: "row"});
  box.appendChild(row);
  figure(row, `${name}-in`, "input x", strip(`${name}-in`, "x", n.input));
  figure(row, `${name}-hat`, "normalized x̂ (mean 0, scale 1)", strip(`${name}-hat`, "x̂", n.normalized));
  figure(row, `${name}-gain`, "gain γ", strip(`${name}-gain`, "γ", n.weight));
  if (n.bias) figure(row, `${name}-bias`, "bias β", strip(`${name}-bias`, "β", n.bias));
  figure(row, `${name}-out`, "output y", strip(`${name}-out`, "y", n.output));
}

function showStage(id) {
  const d = state.data, box = $("wm-detail");
  box.replaceChildren();
  const [kind, layerText] = id.split("-");
  const l = +layerText, b = d.blocks[l];
  const h = (text) => box.appendChild(htmlEl("h2", {"data-testid": "wm-detail-title"}, text));
  if (state.prenormReading && kind !== "tokens") {
    h("Read as pre-norm");
    line(box, "This run is post-norm: each block computes norm(x + f(x)), so the stream is normalized after every add and the last block's norm feeds lm_head. " +
      "A pre-norm block computes x + f(norm(x)) instead: the norm moves in front of each sublayer, the stream itself is never normalized, and a final norm comes before lm_head. " +
      "The dashed boxes show where the norms would sit; the numbers belong to the run's own order (untick the switch).");
    return;
  }
  if (kind === "tokens") {
    h(`The input: ${d.tokens.length} tokens`);
    line(box, `The text ${JSON.stringify(d.tokens.join(""))} is ${d.tokens.length} tokens; this walk follows token ${d.position}, ${quoted(d.token)} (id ${d.ids[d.position]}). ` +
      "Attention lets it read the tokens before it; the model predicts the token after it. The token menu above follows another.");
    tokenList(box, d);
  } else if (kind === "embed") {
    h(d.pos_embed ? "Embedding + position" : "Embedding");
    line(box, d.pos_embed ? `x = W_E[${d.ids[d.position]}] + W_P[${d.position}]: the token's row plus its position's (${d.pos_encoding}).`
      : `x = W_E[${d.ids[d.position]}]: the token's row (${d.pos_encoding === "rope" ? "RoPE adds no vector: it rotates q and k inside attention" : "no position signal"}).`);
    const row = htmlEl("div", {class: "row"});
    box.appendChild(row);
    figure(row, "wm-embed", "token embedding", strip("wm-embed", "W_E row", d.embed));
    if (d.pos_embed) figure(row, "wm-pos", "position", strip("wm-pos", "W_P row", d.pos_embed));
    figure(row, "wm-x0", "the stream starts", strip("wm-x0", "x", d.embedded.vector));
    readingDetail(box, d.embedded);
  } else if (kind === "block") {
    h(`GPT block ${l}`);
    // the click that chose the block also opened or closed it: the hint says which it is now
    const how = state.open.has(l) ? "its stages are listed under it in the diagram (click it again to close it)"
      : "click it to open it into its stages";
    line(box, (d.norm_position === "pre" ? "x + attn(norm(x)), then x + ffn(norm(x)): " : "norm(x + attn(x)), then norm(x + ffn(x)) (post-norm): ") + how + ".",
      "wm-block-hint");
    readingDetail(box, b.add_2);
  } else if (kind === "norm1" || kind === "norm2") {
    h(`Block ${l}, ${d.norm === "rmsnorm" ? "RMSNorm" : "LayerNorm"} ${kind.at(-1)}`);
    normDetail(box, kind === "norm1" ? b.norm_1 : b.norm_2, `wm-${kind}-${l}`);
  } else if (kind === "attn") {
    h(`Block ${l}, attention`);
    line(box, `Each of the ${d.n_head} heads mixes the tokens up to this one by its weights (every head's row under the steps, each sums to 1); their outputs are concatenated and projected back to ${d.n_embd}.`);
    box.appendChild(htmlEl("h3", {}, "Step by step: view 1's calculator on this model (← → step)"));
    showAttention(box, d, state.text, l);  // its controls first: "Next step" a few Tabs from the diagram
    box.appendChild(htmlEl("h3", {}, "Every head at once"));
    const cols = d.tokens.map(tokenLabel);
    figure(box, `wm-attn-${l}`, `where ${quoted(d.token)} looks, by head`, heatmap({id: `wm-attn-${l}`, values: b.attention,
      rows: b.attention.map((_, hd) => `head ${hd}`), cols, scale: "seq", max: 1, cell: Math.max(8, Math.min(22, Math.floor(Math.min(480, innerWidth - 140) / cols.length))),
      showValues: false, title: `layer ${l}: this token's attention`, rowName: "head", colName: "key"}));
    const links = htmlEl("div", {class: "controls"});
    const heads = htmlEl("button", {"data-testid": "wm-open-heads"}, `open layer ${l} in view 3 (heads)`);
    // the stepper's head goes with the layer (the address view 3 opens carries both)
    heads.addEventListener("click", () => document.dispatchEvent(new CustomEvent("gptlab:heads",
      {detail: {run: d.run, prompt: d.tokens.join(""), layer: l, head: +($("wm-steps-head")?.value ?? 0)}})));
    const grid = htmlEl("button", {"data-testid": "wm-open-allheads"}, "every head (view 13)");
    grid.addEventListener("click", () => document.dispatchEvent(new CustomEvent("gptlab:allheads",
      {detail: {run: d.run, prompt: d.tokens.join(""), layer: l}})));
    links.append(heads, grid);
    box.appendChild(links);
    figure(box, `wm-attn-out-${l}`, "attention's output", strip(`wm-attn-out-${l}`, "attn(x)", b.attn_out));
  } else if (kind === "add1" || kind === "add2") {
    const r = kind === "add1" ? b.add_1 : b.add_2;
    h(`Block ${l}: ${kind === "add1" ? "x + attention" : "x + FFN"}`);
    line(box, "The residual stream keeps what came before and adds the sublayer's output to it.");
    figure(box, `wm-${kind}-${l}`, "the stream after the add", strip(`wm-${kind}-${l}`, "x", r.vector));
    readingDetail(box, r);
  } else if (kind === "ffn") {
    const f = b.ffn;
    h(`Block ${l}, feed-forward`);
    line(box, f.kind === "swiglu"
      ? `SwiGLU: gate(x) and up(x) expand ${d.n_embd} to ${f.units}; silu(gate) ⊙ up; proj back to ${d.n_embd}. ${f.fired} of ${f.units} gates open (gate > 0).`
      : `fc expands ${d.n_embd} to ${f.units} (${(f.units / d.n_embd).toFixed(1)}d), ${f.kind === "gelu_tanh" ? "GELU (tanh)" : "GELU"}, proj back to ${d.n_embd}. ${f.fired} of ${f.units} units fire (fc > 0).`,
      "wm-ffn-fired").dataset.fired = String(f.fired);
    figure(box, `wm-ffn-expand-${l}`, f.kind === "swiglu" ? "gate(x)" : "fc(x): the expansion", strip(`wm-ffn-expand-${l}`, f.kind === "swiglu" ? "gate" : "fc", f.expand));
    if (f.up) figure(box, `wm-ffn-up-${l}`, "up(x)", strip(`wm-ffn-up-${l}`, "up", f.up));
    figure(box, `wm-ffn-act-${l}`, "the activation", strip(`wm-ffn-act-${l}`, "act", f.activation));
    figure(box, `wm-ffn-out-${l}`, "proj: back to the stream", strip(`wm-ffn-out-${l}`, "ffn(x)", f.output));
    showMemories(box, d, state.text, l);
  } else if (kind === "final") {
    h("The final norm");
    normDetail(box, d.final_norm, "wm-final");
  } else if (kind === "head") {
    h("lm_head (W_U)");
    line(box, `logits = W_U · y: one score per token of the vocabulary (${d.vocab_size})${d.tie_embeddings ? "; W_U is W_E, tied" : ""}. The likeliest:`);
    const ul = htmlEl("ul", {"data-testid": "wm-logits"});
    d.top.forEach((c, i) => ul.appendChild(htmlEl("li", {"data-logit": String(d.logits[i])}, `${quoted(c.token)}: logit ${d.logits[i].toFixed(3)}`)));
    box.appendChild(ul);
  } else {
    h("Next-token probabilities");
    line(box, `p = softmax(logits): the model's own distribution for the token after ${quoted(d.token)}.`);
    lensList(box, d.top, "wm-top");
    temperature(box, d);
  }
}

// The last stage's temperature: p = softmax(logits / T) over the whole vocabulary (the walk
// sends every logit), recomputed in the page as the slider moves; T = 1 is the model's own.
function temperature(box, d) {
  const controls = htmlEl("div", {class: "controls"});
  const slider = htmlEl("input", {type: "range", min: "0.1", max: "3", step: "0.05", value: String(state.temperature),
    id: "wm-temperature", "data-testid": "wm-temperature"});
  const shown = htmlEl("output", {for: "wm-temperature", "data-testid": "wm-temperature-value"});
  controls.append(htmlEl("label", {for: "wm-temperature"}, "temperature T "), slider, shown);
  box.appendChild(controls);
  const list = htmlEl("div");
  box.appendChild(list);
  const draw = () => {
    const T = +slider.value, z = d.all_logits.map((x) => x / T), m = Math.max(...z);
    const e = z.map((x) => Math.exp(x - m)), sum = e.reduce((a, b) => a + b, 0);
    // dividing by T > 0 keeps the order: the likeliest tokens stay the model's, only p moves
    const top = d.top.map((c) => ({...c, p: e[c.id] / sum}));
    state.temperature = T;
    shown.textContent = T.toFixed(2);
    list.replaceChildren(htmlEl("p", {}, `At T = ${T.toFixed(2)} (${T < 1 ? "sharper" : T > 1 ? "flatter" : "the model's own"}):`));
    lensList(list, top, "wm-top-t");
  };
  slider.addEventListener("input", draw);
  draw();
}

// The tokens in order, each with its id; the followed one marked.
function tokenList(box, d) {
  const ol = htmlEl("ol", {class: "wm-tokens", start: "0", "data-testid": "wm-tokens"});
  d.tokens.forEach((t, i) => {
    const li = htmlEl("li", {"data-id": String(d.ids[i]), class: i === d.position ? "on" : ""});
    li.append(htmlEl("code", {}, tokenLabel(t)), ` ${d.ids[i]}`);
    if (i === d.position) li.setAttribute("aria-current", "true");
    ol.appendChild(li);
  });
  box.appendChild(ol);
}

function readingDetail(box, r) {
  line(box, `The stream's norm ‖x‖ = ${r.norm.toFixed(3)}. Read through the final norm and W_U (the logit lens), it would predict:`);
  lensList(box, r.lens, "wm-lens");
}

// ------------------------------------------------------------------ where the parameters are

function drawParams(d) {
  const p = d.params, box = $("wm-params");
  box.replaceChildren();
  const parts = [["embeddings", p.embeddings, "#9cc9e8"], ["attention", p.attention, "#0072b2"], ["FFN", p.ffn, "#d55e00"],
    ["norms", p.norms, "#bbbbbb"], ["lm_head", p.lm_head, "#8a6d00"]].filter(([, n]) => n > 0);
  // the legend's rows start below the bar (LEGEND0: the first row's baseline; its square
  // and its text's ascenders reach ~11 px above it, clear of the bar's bottom at 32)
  const Wp = 340, LEGEND0 = 50, H = LEGEND0 + 18 * parts.length - 4;
  const svg = svgEl("svg", {xmlns: SVGNS, width: Wp, height: H, viewBox: `0 0 ${Wp} ${H}`, "font-family": "system-ui, sans-serif",
    "data-testid": "fig-wm-params", role: "img", "aria-label": `parameters by part: FFN ${pct(p.ffn_share_of_total)} of ${p.total}`});
  svg.appendChild(svgEl("rect", {x: 0, y: 0, width: Wp, height: H, fill: "#ffffff", class: "fig-bg"}));
  svg.appendChild(svgEl("text", {x: 4, y: 14, "font-size": 12, "font-weight": 600, fill: "#1b1f24", class: "fig-title"}, `${p.total.toLocaleString("en-US")} parameters`));
  let x = 4;
  parts.forEach(([name, n, colour], i) => {
    const w = (Wp - 8) * n / p.total;
    svg.appendChild(svgEl("rect", {x, y: 20, width: w, height: 12, fill: colour, "data-testid": "wm-params-bar"}));
    x += w;
    svg.appendChild(svgEl("rect", {x: 4, y: LEGEND0 + 18 * i - 9, width: 10, height: 10, fill: colour}));
    svg.appendChild(svgEl("text", {x: 18, y: LEGEND0 + 18 * i, "font-size": 11, fill: "#1b1f24", class: "fig-title", "data-testid": "wm-params-legend"},
      `${name}: ${n.toLocaleString("en-US")} (${pct(n / p.total)})`));
  });
  figure(box, "wm-params", "where the parameters are", svg);
  line(box, `FFN ≈ 2/3 of each block: here ${(100 * p.ffn_share_of_block).toFixed(1)}% of a block's parameters ` +
    `(${(100 * p.ffn_share_of_total).toFixed(1)}% of the whole model), counted by gptlab.model.params.`, "wm-ffn-share")
    .dataset.share = String(p.ffn_share_of_block);
}

// A tour's step names the stage it shows (its layer and head come in its address); the
// attention's stepper starts at its first stage.
document.addEventListener("gptlab:stage", (e) => {
  if (e.detail.view !== "model") return;
  state.stage = e.detail.stage;
  if (state.stage.startsWith("attn-")) restartSteps();
  if (state.data) draw();
});

export function load() {
  if ($("wm-head").value !== "") setHead(+$("wm-head").value);  // the address's head (state.js set it)
  const later = debounce(() => { $("wm-position").value = ""; refresh(); }, 200);
  $("wm-text").addEventListener("input", later);
  $("wm-run").addEventListener("change", () => { $("wm-position").value = ""; state.open.clear(); refresh(); });
  $("wm-position").addEventListener("change", refresh);
  $("wm-expand").addEventListener("click", () => {
    if (!state.data) return;
    const all = state.open.size === state.data.blocks.length;
    state.open = all ? new Set() : new Set(state.data.blocks.map((_, l) => l));
    $("wm-expand").textContent = all ? "open every block" : "close every block";
    draw();
  });
  $("wm-reading").addEventListener("change", () => { state.prenormReading = $("wm-reading").checked; if (state.data) draw(); });
  // the address's layer and head (state.js sets the fields): that block's attention, that head
  $("wm-layer").addEventListener("change", () => {
    const l = +$("wm-layer").value;
    if ($("wm-layer").value === "" || !Number.isInteger(l) || (state.data && l >= state.data.blocks.length)) return;
    if (state.stage?.endsWith(`-${l}`) && !state.stage.startsWith("block-")) return;  // a stage of that block is shown
    state.stage = `attn-${l}`;
    if (state.data) draw();
  });
  $("wm-head").addEventListener("change", () => { if ($("wm-head").value !== "") setHead(+$("wm-head").value); });
  fillRuns($("wm-run")).then((runs) => { if (runs.length) refresh(); });
}
