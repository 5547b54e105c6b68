// Next token: a run's prediction after the text, filter by filter (gptlab.model.decoding.filter_logits,
// on the server), and where the newest token looks (one line per head to each earlier token).

import {api, fillRuns, guarded, showError} from "./api.js";
import {$, debounce, htmlEl, tokenLabel} from "./dom.js";
import {exportButtons} from "./figure.js";
import {SVGNS, headColour, svgEl} from "./svg.js";

const CUT_BY = {greedy: "greedy", top_k: "top-k", top_p: "top-p"};
const state = {data: null, history: [], seed: 0, hover: null, pinned: null};

function settings() {
  const k = +$("nt-topk").value, p = +$("nt-topp").value;
  return {temperature: +$("nt-temp").value, top_k: k > 0 ? k : null, top_p: p < 1 ? p : null};
}

function showSettings() {
  const s = settings();
  $("nt-temp-out").textContent = s.temperature.toFixed(2) + (s.temperature === 0 ? " (greedy)" : "");
  $("nt-topk-out").textContent = s.top_k === null ? "off" : String(s.top_k);
  $("nt-topp-out").textContent = s.top_p === null ? "off" : s.top_p.toFixed(2);
}

const refresh = guarded(async () => {
  showSettings();
  state.data = null;  // a failed request leaves nothing to append to or attribute
  const run = $("nt-run").value, text = $("nt-text").value;
  if (!run) { showError("no run chosen: train one into the runs folder"); return; }
  const d = await api("/api/next_token", {run, text, show: 20, ...settings()});
  state.data = d;
  const full = d.tokens.length >= d.limit;  // appending would pass this run's limit
  $("nt-greedy").disabled = $("nt-sample").disabled = full;
  if (full) $("nt-appended").textContent = `the text is at this run's limit of ${d.limit} tokens`;
  drawBars(d);
  fillPickers(d);
  fillWhy(d);
  drawLines();
}, ["nt-bars", "nt-lines", "nt-lines-export", "nt-summary", "nt-legend", "nt-why"]);

// ------------------------------------------------------------------ the bars

function drawBars(d) {
  const box = $("nt-bars");
  box.replaceChildren();
  const shown = d.candidates.reduce((s, c) => s + c.final, 0);
  // At temperature 0 greedy keeps the argmax alone: top-k and top-p have nothing to cut.
  $("nt-summary").textContent = (d.settings.temperature === 0
    ? `Temperature 0 is greedy: only the likeliest of the ${d.vocab_size} tokens is kept, whatever top-k and top-p say; ` +
      `the light bars show the model's own probabilities (temperature 1) of the ${d.candidates.length} likeliest`
    : `${d.after_top_k} of ${d.vocab_size} tokens pass top-k, ${d.survivors} pass top-p too; ` +
      `the bars show the ${d.candidates.length} likeliest` +
      (shown < 0.9999995 ? ` (they hold ${(100 * shown).toFixed(1)}% of what is sampled)` : "")) + ".";
  const rowH = 22, labelW = 64, barW = 260, W = labelW + barW + 140, H = 22 + rowH * d.candidates.length;
  const svg = svgEl("svg", {xmlns: SVGNS, viewBox: `0 0 ${W} ${H}`, width: W, height: H,
    class: "nt-bars", role: "img", "data-testid": "nt-bars",
    "aria-label": `next-token probabilities of the ${d.candidates.length} likeliest tokens`});
  svg.appendChild(svgEl("text", {x: labelW, y: 14, class: "nt-axis"}, "before the cuts (light) · sampled from (dark)"));
  d.candidates.forEach((c, i) => {
    const y = 22 + i * rowH, kept = c.top_p;
    const g = svgEl("g", {"data-testid": `nt-bar-${i}`, "data-final": String(c.final),
      "data-p": String(c.p), "data-id": String(c.id), "data-kept": String(kept), "data-cut": c.cut || "",
      class: kept ? "kept" : `cut-${c.cut}`});
    g.appendChild(svgEl("title", {}, `${JSON.stringify(c.token)}: p ${c.p.toFixed(4)} → ${c.final.toFixed(4)}` +
      (kept ? "" : ` (cut by ${CUT_BY[c.cut]})`)));
    g.appendChild(svgEl("text", {x: labelW - 6, y: y + 15, "text-anchor": "end", class: "nt-token"}, tokenLabel(c.token)));
    g.appendChild(svgEl("rect", {x: labelW, y: y + 3, width: Math.max(0.5, barW * c.p), height: rowH - 6, class: "nt-before"}));
    if (kept) g.appendChild(svgEl("rect", {x: labelW, y: y + 7, width: Math.max(0.5, barW * c.final), height: rowH - 14, class: "nt-final"}));
    // every row says its probability: a kept token before → after the cuts, a cut one what it had
    const note = !kept ? `${c.p.toFixed(3)} cut: ${CUT_BY[c.cut]}`
      : Math.abs(c.final - c.p) < 5e-4 ? c.final.toFixed(3) : `${c.p.toFixed(3)} → ${c.final.toFixed(3)}`;
    g.appendChild(svgEl("text", {x: labelW + barW + 6, y: y + 15, class: kept ? "nt-value" : "nt-cut", "data-testid": `nt-note-${i}`}, note));
    svg.appendChild(g);
  });
  const caption = htmlEl("div", {class: "caption"});
  caption.append(htmlEl("span", {}, "next-token probabilities"), exportButtons(svg, "nt-bars"));
  box.append(caption, svg);
}

// The token to explain in view 10 (its direct logit attribution): one of the bars.
function fillWhy(d) {
  const why = $("nt-why"), keep = why.value;
  why.replaceChildren(...d.candidates.map((c) =>
    htmlEl("option", {value: c.id}, `${tokenLabel(c.token)} (p ${c.p.toFixed(3)})`)));
  if (d.candidates.some((c) => String(c.id) === keep)) why.value = keep;
}

function attribute() {
  if (!state.data) return;
  document.dispatchEvent(new CustomEvent("gptlab:attribute", {detail: {
    run: $("nt-run").value, text: $("nt-text").value, target: +$("nt-why").value}}));
}

// ------------------------------------------------------------------ where the newest token looks

function fillPickers(d) {
  const layer = $("nt-layer"), head = $("nt-head");
  const keepL = Math.min(+layer.value || 0, d.n_layer - 1), keepH = head.value;
  layer.replaceChildren(...[...Array(d.n_layer).keys()].map((l) => htmlEl("option", {value: l}, `layer ${l}`)));
  layer.value = keepL;
  head.replaceChildren(htmlEl("option", {value: "all"}, "all heads"),
    ...[...Array(d.n_head).keys()].map((h) => htmlEl("option", {value: h}, `head ${h}`)));
  head.value = keepH && (keepH === "all" || +keepH < d.n_head) ? keepH : "all";
}

function drawLines() {
  const d = state.data;
  if (!d) return;
  const box = $("nt-lines");
  box.replaceChildren();
  const layer = +$("nt-layer").value, pick = $("nt-head").value;
  const heads = pick === "all" ? [...Array(d.n_head).keys()] : [+pick];
  // 24 px rows: each token is a target a finger can hit (WCAG 2.5.8)
  const T = d.tokens.length, rowH = 24, top = 24, W = 340, xQ = 70, xK = 250;
  const H = top + rowH * T + 8;
  // a group, not an image: its tokens are buttons (focus or hover shows a token's lines,
  // a click or Enter pins them)
  const svg = svgEl("svg", {xmlns: SVGNS, viewBox: `0 0 ${W} ${H}`, width: W, height: H,
    class: "nt-lines", "data-testid": "nt-lines", role: "group",
    "aria-label": `attention of the newest token, layer ${layer}, ${pick === "all" ? "all heads" : "head " + pick}`});
  svg.appendChild(svgEl("text", {x: xQ, y: 14, "text-anchor": "end", class: "nt-axis"}, "newest"));
  svg.appendChild(svgEl("text", {x: xK, y: 14, class: "nt-axis"}, "looks at"));
  const yOf = (j) => top + j * rowH + rowH / 2;
  const lines = svgEl("g", {});
  // Thickness and opacity relative to the largest weight shown, so diffuse heads (a tiny
  // model's weights of ~1/T) stay visible; each head's ends are nudged apart a little.
  const wmax = Math.max(1e-9, ...heads.flatMap((h) => d.newest_attention[layer][h]));
  heads.forEach((h, k) => d.newest_attention[layer][h].forEach((w, j) => {
    const r = w / wmax;
    if (r < 0.02) return;  // invisible anyway; keeps long texts light
    const nudge = (k - (heads.length - 1) / 2) * 1.5;
    const line = svgEl("line", {x1: xQ + 4, y1: yOf(T - 1) + nudge, x2: xK - 4, y2: yOf(j) + nudge,
      style: `stroke: ${headColour(h)}`, "stroke-width": (0.5 + 6 * r).toFixed(2),
      "stroke-opacity": (0.3 + 0.7 * r).toFixed(2), "data-key": j, "data-head": h});
    line.appendChild(svgEl("title", {}, `head ${h} → ${JSON.stringify(d.tokens[j])} (${j}): ${w.toFixed(3)}`));
    lines.appendChild(line);
  }));
  svg.appendChild(lines);
  svg.appendChild(svgEl("text", {x: xQ, y: yOf(T - 1) + 4, "text-anchor": "end", class: "nt-token nt-newest"},
    tokenLabel(d.tokens[T - 1])));
  state.pinned = null;
  d.tokens.forEach((t, j) => {
    const weights = heads.map((h) => `h${h} ${d.newest_attention[layer][h][j].toFixed(2)}`).join(", ");
    const text = `token ${j} ${JSON.stringify(t)}: ${weights}`;
    const label = svgEl("text", {x: xK, y: yOf(j) + 4, class: "nt-token nt-key", tabindex: 0, role: "button",
      "aria-pressed": "false", "data-testid": `nt-key-${j}`, "aria-label": text}, tokenLabel(t));
    const on = () => highlight(svg, j, text);
    const off = () => (state.pinned === null ? highlight(svg, null) : highlight(svg, state.pinned.j, state.pinned.text));
    const pin = () => {
      state.pinned = state.pinned && state.pinned.j === j ? null : {j, text};
      svg.querySelectorAll(".nt-key").forEach((k) => k.setAttribute("aria-pressed", String(k === label && state.pinned !== null)));
      off();
    };
    label.addEventListener("mouseenter", on);
    label.addEventListener("focus", on);
    label.addEventListener("mouseleave", off);
    label.addEventListener("blur", off);
    label.addEventListener("click", pin);
    label.addEventListener("keydown", (e) => { if (e.key === "Enter" || e.key === " ") { e.preventDefault(); pin(); } });
    svg.appendChild(label);
  });
  box.appendChild(svg);
  $("nt-lines-export")?.remove();
  const exp = exportButtons(svg, "nt-lines");
  exp.id = "nt-lines-export";
  $("nt-legend").after(exp);
  $("nt-hover").title = `thickest line: weight ${wmax.toFixed(3)}`;
  $("nt-legend").replaceChildren(...heads.map((h) => {
    const s = htmlEl("span", {class: "nt-swatch"}, `head ${h}`);
    s.style.setProperty("--swatch", headColour(h));
    return s;
  }));
}

function highlight(svg, key, text) {
  svg.classList.toggle("nt-focus", key !== null);
  svg.querySelectorAll("line").forEach((l) => l.classList.toggle("on", key !== null && +l.dataset.key === key));
  $("nt-hover").textContent = key === null ? "hover, focus or tap a token to see its lines" : text;
}

// ------------------------------------------------------------------ appending

const append = (mode) => guarded(async () => {
  const run = $("nt-run").value, text = $("nt-text").value;
  const body = {run, text, mode, ...settings()};
  if (mode === "sample") body.seed = state.seed;
  const a = await api("/api/next_token/append", body);
  state.history.push(text);
  $("nt-text").value = a.text;
  $("nt-undo").disabled = false;
  $("nt-appended").textContent = mode === "greedy"
    ? `appended the likeliest token ${JSON.stringify(a.token)}`
    : `appended ${JSON.stringify(a.token)}, sampled with seed ${a.seed}`;
  if (mode === "sample") { state.seed += 1; $("nt-seed").value = state.seed; }
  await refresh();
});

const undo = guarded(async () => {
  if (!state.history.length) return;
  $("nt-text").value = state.history.pop();
  $("nt-undo").disabled = !state.history.length;
  $("nt-appended").textContent = "";
  await refresh();
});

export function load() {
  const later = debounce(refresh, 150);
  ["nt-temp", "nt-topk", "nt-topp"].forEach((id) => $(id).addEventListener("input", () => { showSettings(); later(); }));
  $("nt-text").addEventListener("input", later);
  $("nt-run").addEventListener("change", refresh);
  $("nt-layer").addEventListener("change", drawLines);
  $("nt-head").addEventListener("change", drawLines);
  $("nt-seed").addEventListener("change", () => { state.seed = Math.max(0, Math.floor(+$("nt-seed").value) || 0); });
  $("nt-greedy").addEventListener("click", append("greedy"));
  $("nt-sample").addEventListener("click", append("sample"));
  $("nt-undo").addEventListener("click", undo);
  $("nt-attribute").addEventListener("click", attribute);
  // these lines are the last row of view 13's head view: every token's, same run, text and layer
  $("nt-headview").addEventListener("click", () => document.dispatchEvent(new CustomEvent("gptlab:allheads",
    {detail: {run: $("nt-run").value, prompt: $("nt-text").value, layer: +$("nt-layer").value}})));
  showSettings();
  fillRuns($("nt-run"), () => $("nt-text").value).then((runs) => { if (runs.length) refresh(); });
}
