// View 1: self-attention step by step, with editable inputs and the causal mask.

import {api, guarded, showError} from "./api.js";
import {$, fmt, htmlEl} from "./dom.js";
import {figure} from "./figure.js";
import {heatmap} from "./svg.js";

const transpose = (m) => m[0].map((_, j) => m.map((row) => row[j]));

const STAGES = [
  {title: "Stage 1 of 5 · Q, K, V projections",
   formula: "Q = X·W_Q,   K = X·W_K,   V = X·W_V",
   changed: (d) => `Each token's embedding (a row of X, d = ${d.d}) is projected three ways: into a query (what it looks for), a key (what it offers) and a value (what it passes on). Edit any input cell and everything downstream recomputes.`},
  {title: "Stage 2 of 5 · scores = QKᵀ / √d_k",
   formula: "scores = Q·Kᵀ / √d_k",
   changed: (d) => `Row i, column j is how well query i matches key j, divided by √d_k = ${fmt(d.sqrt_d_k)} so the spread stays near 1 whatever d_k is.`},
  {title: "Stage 3 of 5 · the causal mask",
   formula: (d) => (d.causal ? "masked[i, j] = scores[i, j] if j ≤ i, else −∞" : "masked = scores   (mask off: nothing is hidden)"),
   changed: (d) => d.causal
     ? "The upper triangle (a token looking at later tokens) is set to −∞: a GPT predicts the next token, so it must not see it. Outlined cells are the ones the mask changed."
     : "Mask off: masked = scores, every token sees every token (BERT-style, bidirectional). Switch it on to hide the future."},
  {title: "Stage 4 of 5 · softmax weights",
   formula: "weights[i, :] = softmax(masked[i, :]),  each row sums to 1",
   changed: (d) => d.causal
     ? `exp(−∞) = 0, so masked keys get weight 0. Row 0 ("${d.tokens[0]}") has one allowed key, itself: its weight is exactly ${fmt(d.weights[0][0])}.`
     : `Without the mask every row spreads its weight over all ${d.tokens.length} tokens; row 0 ("${d.tokens[0]}") now gives itself only ${fmt(d.weights[0][0])}.`},
  {title: "Stage 5 of 5 · output = weights · V",
   formula: "out = weights · V",
   changed: (d) => "Each output row is a weighted average of the value rows: what the token gathers from the tokens it attends to. This is one head's output, before concatenation and W_O." +
     (d.causal ? " With the causal mask, row i averages only the values of tokens 0..i."
       : " The mask is off: every row averages the values of all tokens, later ones included (switch it on above).")},
];

// edits: the edited matrices sent to the server; editedCells: which cells the learner typed;
// bad: the cell whose value was refused ({key, text, message}), kept and marked until fixed
const calc = {stage: 0, data: null, edits: {}, editedCells: new Set(), bad: null, playing: null,
  editor: {name: "x", i: 0, j: 0}};
const cellKey = (name, i, j) => `${name}:${i}:${j}`;
// Past this many input cells (X and the three W's together) the inputs are drawn as heatmaps
// and edited one cell at a time: d = 64 with 64 tokens made 16,384 fields, drawn in seconds.
const MAX_EDIT_CELLS = 1024;
const MATRICES = {x: "X", w_q: "W_Q", w_k: "W_K", w_v: "W_V"};
// The server names a refused cell first: "w_q[0][0] = 1e+07 is beyond +-1e+06".
const CELL_ERROR = /^(x|w_q|w_k|w_v)\[(\d+)\]\[(\d+)\]/;

function calcBody() {
  const body = {tokens: $("calc-tokens").value, d: +$("calc-d").value, seed: +$("calc-seed").value,
    causal: $("mask-toggle").checked};
  for (const [k, v] of Object.entries(calc.edits)) body[k] = v;
  return body;
}

// A refused cell keeps the grids: the cell is marked and the figures, which no longer
// match the inputs, are cleared until it is fixed. Any other error clears the view.
async function calcCompute() {
  try {
    calc.data = await api("/api/attention", calcBody());
    calc.bad = null;
  } catch (e) {
    showError(e.message);
    const at = CELL_ERROR.exec(e.message), m = at && calc.edits[at[1]];
    if (!m || !calc.data) {
      calc.data = calc.bad = null;  // nothing stale to step through
      for (const id of ["calc-inputs", "calc-figures", "calc-changed"]) $(id).replaceChildren();
      return;
    }
    calc.bad = {key: cellKey(at[1], +at[2], +at[3]), text: String(m[+at[2]][+at[3]]), message: e.message};
  }
  renderCalc();
}

// An edited cell: a number is sent (the server checks its range); anything else is marked.
function setCell(name, i, j, text) {
  const value = Number(text), key = cellKey(name, i, j);
  if (text.trim() === "" || !Number.isFinite(value)) {
    calc.bad = {key, text, message: `${name}[${i}][${j}] must be a number`};
    showError(calc.bad.message);
    renderCalc();
    return;
  }
  const m = (calc.edits[name] || calc.data[name]).map((r) => r.slice());
  m[i][j] = value;
  calc.edits[name] = m;
  calc.editedCells.add(key);
  calcCompute();
}

function markBad(input) {
  input.setAttribute("aria-invalid", "true");
  input.setAttribute("aria-describedby", "error");
}

function editGrid(name, short, title, matrix, rows, cols) {
  const box = htmlEl("div", {class: "figure"});
  box.appendChild(htmlEl("div", {class: "caption"}, `${title} (editable)`));
  const table = htmlEl("table", {class: "editgrid", "data-testid": `grid-${name}`});
  const head = htmlEl("tr");
  head.appendChild(htmlEl("td"));
  cols.forEach((c) => head.appendChild(htmlEl("th", {}, c)));
  table.appendChild(head);
  matrix.forEach((row, i) => {
    const tr = htmlEl("tr");
    tr.appendChild(htmlEl("th", {}, rows[i]));
    row.forEach((v, j) => {
      const td = htmlEl("td"), key = cellKey(name, i, j), bad = calc.bad && calc.bad.key === key;
      const input = htmlEl("input", {type: "number", step: "0.01", value: bad ? calc.bad.text : v,
        id: `${name}-${i}-${j}`, "data-testid": `${name}-cell-${i}-${j}`,
        "aria-label": `${short} row ${i} column ${j}`});
      if (calc.editedCells.has(key)) input.classList.add("edited");
      if (bad) markBad(input);
      input.addEventListener("change", () => setCell(name, i, j, input.value));
      td.appendChild(input);
      tr.appendChild(td);
    });
    table.appendChild(tr);
  });
  box.appendChild(table);
  return box;
}

// Past MAX_EDIT_CELLS: one cell at a time (matrix, row, column, value), the inputs as heatmaps.
function cellEditor(tok, d, count) {
  const e = calc.editor, box = htmlEl("div", {class: "controls", "data-testid": "calc-cell-editor"});
  const field = (label, node) => { const l = htmlEl("label", {}, label + " "); l.appendChild(node); return l; };
  const which = htmlEl("select", {"data-testid": "calc-edit-matrix"});
  Object.entries(MATRICES).forEach(([k, v]) => which.appendChild(htmlEl("option", {value: k}, v)));
  which.value = e.name;
  const row = htmlEl("input", {type: "number", min: 0, value: e.i, "data-testid": "calc-edit-row"});
  const col = htmlEl("input", {type: "number", min: 0, max: d - 1, value: e.j, "data-testid": "calc-edit-col"});
  const limits = () => { row.max = which.value === "x" ? tok.length - 1 : d - 1; };
  limits();
  which.addEventListener("change", limits);
  const bad = calc.bad && calc.bad.key === cellKey(e.name, e.i, e.j);
  const value = htmlEl("input", {type: "number", step: "0.01", "data-testid": "calc-edit-value",
    value: bad ? calc.bad.text : (calc.edits[e.name] || calc.data[e.name])[e.i]?.[e.j] ?? ""});
  if (bad) markBad(value);
  const set = htmlEl("button", {"data-testid": "calc-edit-set"}, "set");
  set.addEventListener("click", () => {
    const name = which.value, i = +row.value, j = +col.value;
    if (!(Number.isInteger(i) && Number.isInteger(j) && i >= 0 && j >= 0 && i <= +row.max && j <= +col.max)) {
      showError(`row must be 0 to ${row.max} and column 0 to ${col.max} for ${MATRICES[name]}`);
      return;
    }
    calc.editor = {name, i, j};
    setCell(name, i, j, value.value);
  });
  box.append(htmlEl("span", {}, `${count.toLocaleString("en-US")} input cells, too many to edit in place: edit one`),
    field("matrix", which), field("row", row), field("column", col), field("value", value), set);
  return box;
}

function renderCalc() {
  const d = calc.data, s = calc.stage, stage = STAGES[s];
  if (!d) return;
  $("calc-stage").textContent = stage.title;
  $("calc-formula").textContent = typeof stage.formula === "function" ? stage.formula(d) : stage.formula;
  $("calc-changed").textContent = stage.changed(d);
  $("calc-back").disabled = s === 0;
  $("calc-next").disabled = s === STAGES.length - 1;
  // live from the mask on: the weights and the output (stage 5) both depend on it
  const maskLive = s >= 2;
  $("mask-toggle").disabled = !maskLive;
  $("mask-toggle").parentElement.title = maskLive ? "switch the causal mask" : "live from stage 3 (the mask) on";
  const tok = d.tokens, dims = [...Array(d.d).keys()].map((j) => `d${j}`);
  const inputs = $("calc-inputs"), figs = $("calc-figures");
  const focused = document.activeElement && inputs.contains(document.activeElement) ? document.activeElement.id : null;
  inputs.replaceChildren();
  figs.replaceChildren();
  // Cells shrink as the matrices grow (up to 64 x 64); numbers show while they fit.
  const cell = Math.max(12, Math.min(40, Math.floor(560 / Math.max(tok.length, d.d))));
  const hm = (name, caption, values, extra) => figure(figs, name, caption, heatmap({id: name,
    values, rows: tok, cols: dims, title: caption, cell, ...extra}));
  const tt = {rows: tok, cols: tok, rowName: "query", colName: "key"};
  if (s === 0) {
    const count = tok.length * d.d + 3 * d.d * d.d, editable = count <= MAX_EDIT_CELLS;
    inputs.dataset.mode = editable ? "edit" : "read-only";
    if (!editable) inputs.appendChild(cellEditor(tok, d.d, count));
    const grids = htmlEl("div", {class: "row"});
    inputs.appendChild(grids);
    for (const [name, short] of Object.entries(MATRICES)) {
      const matrix = calc.edits[name] || d[name], rows = name === "x" ? tok : dims;
      const title = name === "x" ? "X (embeddings)" : short;
      if (editable) grids.appendChild(editGrid(name, short, title, matrix, rows, dims));
      else figure(grids, name, title, heatmap({id: name, values: matrix, rows, cols: dims, title, cell}));
    }
    if (focused && $(focused)) $(focused).focus();
  }
  if (calc.bad) {  // the figures would not match the inputs
    $("calc-changed").textContent = "";
    figs.appendChild(htmlEl("p", {class: "note", "data-testid": "calc-stale"},
      "The figures return once the marked cell holds a number in range."));
    return;
  }
  if (s === 0) {
    hm("q", "Q = X·W_Q", d.q);
    hm("k", "K = X·W_K", d.k);
    hm("v", "V = X·W_V", d.v);
  } else if (s === 1) {
    hm("q", "Q", d.q);
    figure(figs, "kt", "Kᵀ", heatmap({id: "kt", values: transpose(d.k), rows: dims, cols: tok, title: "Kᵀ", cell}));
    hm("scores", "scores = QKᵀ/√d_k", d.scores, tt);
  } else if (s === 2) {
    hm("scores", "scores", d.scores, tt);
    const changed = d.masked.map((row, i) => row.map((v, j) => v !== d.scores[i][j]));
    hm("masked", d.causal ? "masked (causal)" : "masked (no mask)", d.masked, {...tt, highlight: changed});
    hm("other-masked", d.causal ? "for comparison: mask off" : "for comparison: mask on", d.other.masked, tt);
  } else if (s === 3) {
    hm("weights", d.causal ? "weights (causal)" : "weights (no mask)", d.weights, {...tt, scale: "seq", max: 1});
    hm("other-weights", d.causal ? "for comparison: mask off" : "for comparison: mask on", d.other.weights, {...tt, scale: "seq", max: 1});
    const diff = d.weights.map((row, i) => row.map((v, j) => v - d.other.weights[i][j]));
    hm("weights-diff", "difference (this − other)", diff, tt);
    figure(figs, "rowsums", "row sums", heatmap({id: "rowsums", values: d.weights.map((r) => [r.reduce((a, b) => a + b, 0)]),
      rows: tok, cols: ["Σ"], title: "row sums", scale: "seq", max: 1, cell: Math.max(cell, 30)}));
  } else {
    hm("weights", "weights", d.weights, {...tt, scale: "seq", max: 1});
    hm("v", "V", d.v);
    hm("out", "out = weights·V", d.out);
  }
}

// A short fade between stages, so the change from one matrix to the next is visible.
function goTo(stage) {
  const next = Math.max(0, Math.min(STAGES.length - 1, stage));
  if (next === calc.stage) return;
  calc.stage = next;
  renderCalc();
  for (const id of ["calc-inputs", "calc-figures"]) {
    const el = $(id);
    el.classList.remove("stage-enter");
    void el.offsetWidth;  // restart the animation
    el.classList.add("stage-enter");
  }
}

// Play: from the first stage (or the current one) to the last, one stage every 1.6 s.
function play() {
  if (calc.playing) { stopPlaying(); return; }
  if (calc.stage === STAGES.length - 1) goTo(0);
  $("calc-play").textContent = "Pause";
  $("calc-play").setAttribute("aria-pressed", "true");
  calc.playing = setInterval(() => {
    goTo(calc.stage + 1);
    if (calc.stage === STAGES.length - 1) stopPlaying();
  }, 1600);
}

function stopPlaying() {
  clearInterval(calc.playing);
  calc.playing = null;
  $("calc-play").textContent = "Play";
  $("calc-play").setAttribute("aria-pressed", "false");
}

// The d field's range is the server's (the request schema's), so the two cannot disagree.
const dRange = guarded(async () => {
  const d = (await api("/openapi.json")).components.schemas.AttentionRequest.properties.d;
  $("calc-d").min = d.minimum;
  $("calc-d").max = d.maximum;
  $("calc-d").title = `${d.minimum} to ${d.maximum}`;
});

export function load() {
  const restart = () => { calc.edits = {}; calc.editedCells.clear(); calc.bad = null; calcCompute(); };
  $("calc-next").addEventListener("click", () => { stopPlaying(); goTo(calc.stage + 1); });
  $("calc-back").addEventListener("click", () => { stopPlaying(); goTo(calc.stage - 1); });
  $("calc-play").addEventListener("click", play);
  // ← / → step the stages, unless the key is meant for a field being edited
  document.addEventListener("keydown", (e) => {
    if ($("view-calc").hidden || e.altKey || e.ctrlKey || e.metaKey) return;
    if (e.target.closest("input, select, textarea, [role=tab]")) return;
    const step = {ArrowLeft: -1, ArrowRight: 1}[e.key];
    if (!step) return;
    e.preventDefault();
    stopPlaying();
    goTo(calc.stage + step);
  });
  $("mask-toggle").addEventListener("change", calcCompute);
  $("calc-reset").addEventListener("click", restart);
  for (const id of ["calc-tokens", "calc-d", "calc-seed"]) $(id).addEventListener("change", restart);
  dRange();
  calcCompute();
}
