// Logit lens: the likeliest next token after each block (rows) at each position (columns),
// read through the model's final norm and unembedding on the server (gptlab.interp.lens); and the
// direct logit attribution of one next token (gptlab.interp.attribution): what the embeddings,
// each head, each MLP and the biases write toward its logit.

import {api, fillRuns, guarded, showError} from "./api.js";
import {$, debounce, htmlEl, tokenLabel} from "./dom.js";
import {exportButtons} from "./figure.js";
import {SVGNS, svgEl} from "./svg.js";

const TOP = 10;  // tokens listed per cell
const state = {data: null, target: null, cell: null, asked: 0};
let ready = null;  // resolves once the run picker is filled

// Probability -> background: light to mid blue, dark enough to read, light enough for dark
// text at every p (the cells set their own text colour, so the theme does not matter).
const shade = (p) => `hsl(215, 75%, ${(97 - 35 * p).toFixed(1)}%)`;

const refresh = guarded(async () => {
  const run = $("lens-run").value, text = $("lens-text").value;
  if (!run) { showError("no run chosen: train one into the runs folder"); return; }
  const asked = ++state.asked;
  state.data = null;
  const d = await api("/api/lens", {run, text, top: TOP, target: state.target});
  if (asked !== state.asked) return;  // a later request (newer text or token) is on its way
  state.data = d;
  fillTargets(d);
  drawGrid(d);
  const [r, t] = state.cell || [d.rows.length - 1, d.tokens.length - 1];
  showCell(Math.min(r, d.rows.length - 1), Math.min(t, d.tokens.length - 1));
  drawAttribution(d.attribution);
}, ["lens-grid", "lens-embed-note", "lens-cell-title", "lens-topk", "lens-target", "lens-sum", "lens-dla"]);

// ------------------------------------------------------------------ the grid

function drawGrid(d) {
  const table = htmlEl("table", {class: "lens-grid", "data-testid": "lens-grid"});
  table.appendChild(htmlEl("caption", {}, "top next token by depth (rows) and position (columns)"));
  const head = htmlEl("tr", {});
  head.appendChild(htmlEl("th", {scope: "col"}, "after"));
  d.tokens.forEach((t, j) => head.appendChild(htmlEl("th", {scope: "col", title: `position ${j}`}, tokenLabel(t))));
  table.appendChild(htmlEl("thead", {})).appendChild(head);
  const body = table.appendChild(htmlEl("tbody", {}));
  d.rows.forEach((name, r) => {
    const tr = body.appendChild(htmlEl("tr", {}));
    tr.appendChild(htmlEl("th", {scope: "row"}, name));
    d.tokens.forEach((t, j) => {
      const p = d.top_probs[r][j][0], top = d.top_tokens[r][j][0];
      const cell = htmlEl("button", {class: "lens-cell", "data-testid": `lens-cell-${r}-${j}`,
        "data-p": String(p), "data-id": String(d.top_ids[r][j][0]),
        "aria-label": `${name}, after ${JSON.stringify(t)} (position ${j}): top ${JSON.stringify(top)}, p ${p.toFixed(3)}`});
      cell.style.background = shade(p);
      cell.append(htmlEl("span", {class: "lens-token"}, tokenLabel(top)), htmlEl("span", {class: "lens-p"}, p.toFixed(2)));
      cell.addEventListener("click", () => showCell(r, j));
      tr.appendChild(htmlEl("td", {})).appendChild(cell);
    });
  });
  // Why the first row so often "predicts" the token it sits on.
  // (outside the scroller: inside, it sat in a blank band on a phone)
  $("lens-embed-note").textContent = d.tie_embeddings
    ? "The embed row reads the stream before any block: the token and position embeddings, through the final norm and the unembedding. " +
      "This run ties the two (its unembedding is the token-embedding matrix), so a token's embedding scores highest against its own column: " +
      "the embed row mostly predicts the current token, not the next. The rows below show the blocks turning it into a prediction."
    : "The embed row reads the stream before any block: the token and position embeddings, through the final norm and the unembedding. " +
      "No block has looked at the context yet, so it can only guess from the current token.";
  $("lens-grid").replaceChildren(table);
}

function showCell(r, j) {
  const d = state.data;
  state.cell = [r, j];
  document.querySelectorAll(".lens-cell.on").forEach((c) => c.classList.remove("on"));
  const on = $("lens-grid").querySelector(`[data-testid=lens-cell-${r}-${j}]`);
  if (on) {
    on.classList.add("on");
    // the grid scrolls sideways (a phone shows a few columns): bring the cell into it
    // (the row labels stay at the left: sticky, so the cell must clear them)
    const grid = $("lens-grid"), g = grid.getBoundingClientRect(), c = on.getBoundingClientRect();
    const labels = grid.querySelector("tbody th")?.getBoundingClientRect().width || 0;
    if (c.left < g.left + labels || c.right > g.right) {
      grid.scrollLeft += c.left - g.left - labels - (g.width - labels - c.width) / 2;
    }
  }
  $("lens-cell-title").textContent = `${d.rows[r]}, after ${JSON.stringify(d.tokens[j])} (position ${j}): ` +
    `the ${d.top_ids[r][j].length} likeliest next tokens`;
  $("lens-topk").replaceChildren(...d.top_ids[r][j].map((id, i) => {
    const p = d.top_probs[r][j][i];
    const li = htmlEl("li", {"data-id": String(id), "data-p": String(p)});
    const bar = htmlEl("span", {class: "lens-bar"});
    bar.style.width = `${(100 * p).toFixed(1)}%`;
    li.append(htmlEl("code", {}, tokenLabel(d.top_tokens[r][j][i])), htmlEl("span", {class: "lens-barbox"}), ` ${p.toFixed(4)}`);
    li.children[1].appendChild(bar);
    return li;
  }));
}

// ------------------------------------------------------------------ the attribution

function fillTargets(d) {
  const select = $("lens-target");
  const chosen = d.attribution.target;
  const options = d.choices.map((c) => htmlEl("option", {value: c.id}, `${tokenLabel(c.token)}  (p ${c.p.toFixed(3)})`));
  if (!d.choices.some((c) => c.id === chosen)) options.push(htmlEl("option", {value: chosen}, tokenLabel(d.attribution.token)));
  select.replaceChildren(...options);
  select.value = String(chosen);
}

function drawAttribution(a) {
  const box = $("lens-dla");
  box.replaceChildren();
  const rowH = 20, labelW = 124, half = 150, valueW = 76, W = labelW + 2 * half + valueW;
  const H = 24 + rowH * a.values.length;
  const top = Math.max(1e-9, ...a.values.map(Math.abs));
  const zero = labelW + half;
  const svg = svgEl("svg", {xmlns: SVGNS, viewBox: `0 0 ${W} ${H}`, width: W, height: H,
    class: "lens-dla", role: "img", "data-testid": "lens-dla",
    "aria-label": `direct logit attribution of ${JSON.stringify(a.token)}: ${a.values.length} parts`});
  svg.appendChild(svgEl("text", {x: zero, y: 14, "text-anchor": "middle", class: "lens-axis"}, "← lowers · raises →"));
  svg.appendChild(svgEl("line", {x1: zero, y1: 20, x2: zero, y2: H, class: "lens-zero"}));
  a.labels.forEach((label, i) => {
    const v = a.values[i], y = 22 + i * rowH, w = Math.max(0.5, half * Math.abs(v) / top);
    const g = svgEl("g", {"data-testid": `lens-part-${i}`, "data-label": label, "data-value": String(v)});
    g.appendChild(svgEl("title", {}, `${label}: ${v >= 0 ? "+" : ""}${v.toFixed(4)}`));
    g.appendChild(svgEl("text", {x: labelW - 6, y: y + 14, "text-anchor": "end"}, label));
    g.appendChild(svgEl("rect", {x: v >= 0 ? zero : zero - w, y: y + 3, width: w, height: rowH - 6,
      class: v >= 0 ? "lens-up" : "lens-down"}));
    g.appendChild(svgEl("text", {x: labelW + 2 * half + 6, y: y + 14}, (v >= 0 ? "+" : "") + v.toFixed(4)));
    svg.appendChild(g);
  });
  const caption = htmlEl("div", {class: "caption"});
  caption.append(htmlEl("span", {}, "direct logit attribution"), exportButtons(svg, "lens-dla"));
  box.append(caption, svg);
  const sum = $("lens-sum");
  sum.dataset.sum = String(a.sum);
  sum.dataset.logit = String(a.logit);
  sum.textContent = `logit of ${JSON.stringify(a.token)} after the text: the parts sum to ${a.sum.toFixed(4)}; ` +
    `the model's logit is ${a.logit.toFixed(4)}`;
}

export function load() {
  const later = debounce(() => { state.target = null; refresh(); }, 200);
  $("lens-text").addEventListener("input", later);
  $("lens-run").addEventListener("change", () => { state.target = null; state.cell = null; refresh(); });
  $("lens-target").addEventListener("change", () => { state.target = +$("lens-target").value; refresh(); });
  ready = fillRuns($("lens-run"), () => $("lens-text").value);
  ready.then((runs) => { if (runs.length) refresh(); });
}

// Opened from the next-token view: its run and text, attributing the token chosen there.
export async function open({run, text, target}) {
  await ready;
  $("lens-run").value = run;
  $("lens-text").value = text;
  state.target = target;
  state.cell = null;
  refresh();
}
