// Every head at a glance (BertViz's model view): one small attention pattern per layer
// (rows) and head (columns) for the prompt, from one forward pass on the server; a click
// (or Enter) opens that head in view 3, same run, prompt, layer and head.

import {api, fillRuns, guarded, showError} from "./api.js";
import {$, debounce, tokenLabel} from "./dom.js";
import {figure} from "./figure.js";
import {loadHeadView, previewHead, showHeadView} from "./headview.js";
import {SVGNS, css, rgbOf, svgEl} from "./svg.js";

const state = {data: null, asked: 0};
let ready = null, opened = false;  // the run picker filled; opened from another view

const refresh = guarded(async () => {
  const run = $("ah-run").value, prompt = $("ah-prompt").value;
  if (!run) { showError("no run chosen: train one into the runs folder"); return; }
  const asked = ++state.asked;
  const d = await api("/api/all_heads", {run, prompt});
  if (asked !== state.asked) return;
  state.data = d;
  draw(d);
  showHeadView(d);
}, ["ah-grid", "hv-lines", "hv-export"]);

// One pattern as a PNG (a canvas, one pixel per weight, scaled up without smoothing): a
// 64-token prompt on a 12 x 12 model is 590k weights, too many for SVG rectangles.
function patternImage(values) {
  const T = values.length, canvas = document.createElement("canvas");
  canvas.width = canvas.height = T;
  const ctx = canvas.getContext("2d"), img = ctx.createImageData(T, T);
  values.forEach((row, i) => row.forEach((v, j) => {
    const [r, g, b] = rgbOf(v, "seq", 1), k = 4 * (i * T + j);
    img.data.set([r, g, b, 255], k);
  }));
  ctx.putImageData(img, 0, 0);
  return canvas.toDataURL("image/png");
}

function draw(d) {
  const L = d.n_layer, Hn = d.n_head, T = d.tokens.length;
  // thumbnails as large as the page allows (up to 120 px), at least 40 (a wide grid scrolls)
  const room = Math.max(300, Math.min(1100, $("ah-grid").clientWidth - 60));
  const size = Math.max(40, Math.min(120, Math.floor(room / Hn) - 8)), gap = 8, left = 30, top = 40;
  const W = Math.max(330, left + Hn * (size + gap)), H = top + L * (size + gap) + 40;
  const title = `every head: ${L} layers × ${Hn} heads, ${T} tokens`;
  const svg = svgEl("svg", {xmlns: SVGNS, width: W, height: H, viewBox: `0 0 ${W} ${H}`,
    "font-family": "system-ui, sans-serif", "data-testid": "fig-all-heads", role: "group", "aria-label": `${title}; a head opens in view 3`});
  svg.appendChild(svgEl("rect", {x: 0, y: 0, width: W, height: H, fill: "#ffffff", class: "fig-bg"}));
  svg.appendChild(svgEl("text", {x: 4, y: 15, "font-size": 12, "font-weight": 600, fill: "#1b1f24", class: "fig-title"}, title));
  for (let h = 0; h < Hn; h++) {
    svg.appendChild(svgEl("text", {x: left + h * (size + gap) + size / 2, y: top - 6, "text-anchor": "middle", "font-size": 11,
      fill: "#5b6570", class: "fig-label"}, `H${h}`));
  }
  for (let l = 0; l < L; l++) {
    const y = top + l * (size + gap);
    svg.appendChild(svgEl("text", {x: left - 6, y: y + size / 2, dy: "0.35em", "text-anchor": "end", "font-size": 11,
      fill: "#5b6570", class: "fig-label"}, `L${l}`));
    for (let h = 0; h < Hn; h++) {
      const x = left + h * (size + gap);
      const pattern = d.attention[l][h];
      const diag = pattern.reduce((s, row, i) => s + (i > 0 ? row[i - 1] : 0), 0) / Math.max(1, T - 1);
      const g = svgEl("g", {"data-testid": `ah-head-${l}-${h}`, role: "button", tabindex: 0, class: "ah-head",
        "data-prev": String(diag), "aria-label": `layer ${l}, head ${h}: mean weight on the previous token ${diag.toFixed(2)}; open in view 3`});
      const image = svgEl("image", {x, y, width: size, height: size, href: patternImage(pattern), preserveAspectRatio: "none",
        "image-rendering": "pixelated", style: "image-rendering: pixelated"});
      g.appendChild(svgEl("title", {}, `layer ${l}, head ${h}`));
      g.append(image, svgEl("rect", {x: x - 0.5, y: y - 0.5, width: size + 1, height: size + 1, fill: "none", stroke: "#8a949e", class: "ah-frame"}));
      const open = () => document.dispatchEvent(new CustomEvent("gptlab:heads",
        {detail: {run: d.run, prompt: d.tokens.join(""), layer: l, head: h}}));
      g.addEventListener("click", open);
      // a hover or focus previews this head's lines in the head view
      const preview = () => previewHead({layer: l, head: h}), back = () => previewHead(null);
      g.addEventListener("mouseenter", preview);
      g.addEventListener("focus", preview);
      g.addEventListener("mouseleave", back);
      g.addEventListener("blur", back);
      g.addEventListener("keydown", (e) => { if (e.key === "Enter" || e.key === " ") { e.preventDefault(); open(); } });
      svg.appendChild(g);
    }
  }
  // the scale: 0 (white) to 1 (dark)
  const yb = H - 32;
  for (let k = 0; k < 20; k++) svg.appendChild(svgEl("rect", {x: left + k * 6, y: yb, width: 6, height: 10, fill: css(rgbOf(k / 19, "seq", 1))}));
  svg.appendChild(svgEl("text", {x: left + 126, y: yb + 9, "font-size": 10, fill: "#5b6570", class: "fig-label"}, "attention weight, 0 to 1"));
  svg.appendChild(svgEl("text", {x: left, y: yb + 24, "font-size": 10, fill: "#5b6570", class: "fig-label"}, "in each square: a row per query, a column per key"));
  $("ah-grid").replaceChildren();
  figure($("ah-grid"), "all-heads", `${d.run}: ${tokenLabel(d.tokens.join(""))}`, svg);
}

export function load() {
  loadHeadView();
  $("ah-prompt").addEventListener("input", debounce(refresh, 250));
  $("ah-run").addEventListener("change", refresh);
  ready = fillRuns($("ah-run"), () => $("ah-prompt").value);  // a run that encodes the prompt
  ready.then((runs) => { if (runs.length && !opened) refresh(); });
}

// Opened from the whole-model view: its run and text.
export async function open({run, prompt}) {
  opened = true;
  await ready;
  $("ah-run").value = run;
  $("ah-prompt").value = prompt;
  refresh();
}
