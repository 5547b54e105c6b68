// One state across the lab: the run, text, token position, layer and head live in the
// address (?run=&text=&pos=&layer=&head=, the open view in the #hash). What a learner
// types or picks in one view is carried to every other view when it opens; each change is
// a history entry (a burst of typing is one), so Back and Forward walk the states; and any
// address is a link that opens the lab as it was.

import {$, htmlEl} from "./dom.js";

const KEYS = ["run", "text", "pos", "layer", "head"];
// Picks whose default the address leaves out: a view at layer 0, or at view 8's "all heads",
// writes no layer=0 or head=all, and an address without the key shows the default.
const PICKS = ["pos", "layer", "head"];
// The fields that show the state in each view (views 11 and 14 pick runs of an experiment,
// view 4's table needs learned positions and view 6's blank prompt means random tokens:
// they keep their own).
export const FIELDS = {
  heads: {run: "heads-run", text: "heads-prompt", layer: "heads-layer", head: "heads-head"},
  scores: {run: "scores-run"},
  nexttoken: {run: "nt-run", text: "nt-text", layer: "nt-layer", head: "nt-head"},
  lens: {run: "lens-run", text: "lens-text"},
  model: {run: "wm-run", text: "wm-text", pos: "wm-position", layer: "wm-layer", head: "wm-head"},
  allheads: {run: "ah-run", text: "ah-prompt", layer: "hv-layer"},
};
const BURST_MS = 1000;  // typing within this of the last key is one history entry

const state = read(location.search);
let applying = false, typing = null, current = null, followed = false;
// Views to show an address's defaults when they next open: every one after Back / Forward
// (a tab switch keeps what a view holds, an emptied field and its error included).
let restored = new Set();

function read(search) {
  const q = new URLSearchParams(search), s = {};
  for (const k of KEYS) if (q.get(k) !== null) s[k] = q.get(k);
  return s;
}

export const currentState = () => ({...state});

export function stateAddress(s = state, view = current) {
  const q = new URLSearchParams();
  for (const k of KEYS) if (s[k] !== undefined && s[k] !== "") q.set(k, s[k]);
  const search = q.toString();
  return `${location.pathname}${search ? "?" + search : ""}${view ? "#" + view : location.hash}`;
}

// The view an address names: its #hash, else ?view= (a link may say either).
export function viewInAddress() {
  return location.hash.slice(1) || new URLSearchParams(location.search).get("view") || "";
}

function write(push) {
  const url = stateAddress();
  if (url === location.pathname + location.search + location.hash) return;
  if (push) history.pushState(null, "", url);
  else history.replaceState(null, "", url);
}

// What a field shows when the address says nothing of its key: a text field the page's
// value, a run picker the run it chose by itself (api.js's data-default), a token position
// the last token, a layer or head menu its first option (view 8's "all heads").
function defaultOf(el, key) {
  // a hidden field (view 12's layer and head) holds a pick or nothing: its defaultValue
  // follows its value, so it cannot say what the default was
  if (el.type === "hidden") return el.dataset.default ?? "";
  if (el.tagName !== "SELECT") return el.defaultValue;
  if (el.dataset.default !== undefined) return el.dataset.default;
  const option = key === "pos" ? el.options[el.options.length - 1] : el.options[0];
  return option?.value;
}

const atDefault = (el, key) => PICKS.includes(key) && el.value === defaultOf(el, key);

function keyOf(view, id) {
  const f = FIELDS[view] || {};
  return KEYS.find((k) => f[k] === id);
}

function set(key, value) {
  state[key] = value;
  // a token position belongs to its text and run: a new one shows the last token
  if (key === "text" || key === "run") delete state.pos;
}

// A learner's edit in the open view: typing replaces the address within a burst and adds
// an entry at its start; a pick (a select, Enter or leaving a field) adds one.
function edited(e) {
  if (applying || !current) return;
  const key = keyOf(current, e.target.id);
  // an emptied field is not a state to carry (view 13 would answer "prompt must not be empty")
  if (!key || e.target.value === state[key] || e.target.value === "") { if (e.type === "change") typing = null; return; }
  if (atDefault(e.target, key)) {  // the default is the key's absence
    if (state[key] !== undefined) { delete state[key]; typing = null; write(true); }
    return;
  }
  set(key, e.target.value);
  if (e.type === "input" && e.target.tagName === "INPUT") {
    write(typing === null);
    clearTimeout(typing);
    typing = setTimeout(() => { typing = null; }, BURST_MS);
  } else {
    typing = null;
    write(true);
  }
}
document.addEventListener("input", edited, true);
document.addEventListener("change", edited, true);

// A view's fields show the state; after Back / Forward, a key the address lacks shows its
// default (Back to an entry without a layer shows layer 0, not the newer pick). Before the
// view's first load nothing is sent (its loader reads the fields, and its run picker takes
// ?run=); afterwards each changed field gets the event its view listens for, so the view
// recomputes.
export function applyState(view, quiet = false) {
  current = view;
  const f = FIELDS[view];
  if (!f) return;
  const defaults = restored.delete(view);
  applying = true;
  try {
    for (const k of KEYS) {
      const el = f[k] && $(f[k]), v = el && (state[k] ?? (defaults ? defaultOf(el, k) : undefined));
      if (!el || v === undefined || el.value === v) continue;
      if (el.tagName === "SELECT" && ![...el.options].some((o) => o.value === v)) continue;
      el.value = v;
      if (quiet) continue;
      for (const type of ["input", "change"]) el.dispatchEvent(new Event(type, {bubbles: true}));
    }
  } finally { applying = false; }
}

// Selects filled from an answer (layers, heads, token positions) take the state's value
// when they get it.
function watchOptions() {
  for (const [view, f] of Object.entries(FIELDS)) {
    for (const k of ["layer", "head", "pos", "run"]) {
      const el = f[k] && $(f[k]);
      if (!el || el.tagName !== "SELECT") continue;
      new MutationObserver(() => {
        const v = state[k];
        if (view !== current || v === undefined || el.value === v) return;
        if (![...el.options].some((o) => o.value === v)) return;
        applying = true;
        try { el.value = v; el.dispatchEvent(new Event("change", {bubbles: true})); }
        finally { applying = false; }
      }).observe(el, {childList: true});
    }
  }
}

// A view's values as they are now (a view may change them itself: "append greedy", a
// run that vanished), read when the learner leaves it.
export function harvest(view) {
  const f = FIELDS[view];
  if (followed) { followed = false; return; }  // the opening view's choice wins (follow)
  if (!f) return;
  for (const k of KEYS) {  // in order: a new run or text drops the position, then reads it
    const el = f[k] && $(f[k]);
    if (!el || el.value === "" || el.value === state[k]) continue;
    if (atDefault(el, k)) delete state[k];
    else set(k, el.value);
  }
  write(false);
}

// Back / Forward: the address's state, shown by the open view.
export function restoreState() {
  const s = read(location.search);
  for (const k of KEYS) delete state[k];
  Object.assign(state, s);
  restored = new Set(Object.keys(FIELDS));
}

// One view opening another with its run and text (gptlab:heads, gptlab:attribute, ...):
// the state follows before the other view opens.
function follow(e) {
  const d = e.detail || {};
  harvest(current);  // the rest of the leaving view's values, then what it asks for
  followed = true;
  if (d.run !== undefined) set("run", d.run);
  const text = d.text ?? d.prompt;
  if (text !== undefined) set("text", text);
  if (d.layer !== undefined) state.layer = String(d.layer);
  if (d.head !== undefined) state.head = String(d.head);
}
for (const type of ["gptlab:heads", "gptlab:allheads", "gptlab:attribute"]) document.addEventListener(type, follow);

// ?run= naming no run says so (the views fall back to a run that encodes their text).
async function checkRun(note) {
  if (state.run === undefined) return;
  const d = await fetch("/api/runs").then((r) => r.json()).catch(() => null);
  if (!d || d.runs.includes(state.run)) return;
  note.textContent = `The address names the run "${state.run}", which is not in the runs folder ` +
    `(${d.root}); the views show another run.`;
  note.hidden = false;
  delete state.run;
  write(false);
}

// A vocabulary error: offer the text the view's run can encode (the address may carry a
// text from a run with a larger vocabulary).
document.addEventListener("gptlab:error", async (e) => {
  const view = e.detail.view.replace(/^view-/, ""), f = FIELDS[view];
  if (!f?.text || !/not in the vocabulary/.test(e.detail.message)) return;
  const run = $(f.run).value, text = $(f.text).value;
  const d = await fetch("/api/runs/encoding", {method: "POST", headers: {"Content-Type": "application/json"},
    body: JSON.stringify({text, run})}).then((r) => r.json()).catch(() => null);
  const box = $("error");
  if (!d?.offer || box.hidden || box.querySelector("button")) return;
  const use = htmlEl("button", {type: "button", "data-testid": "use-offer"}, `use "${d.offer}" (${run} encodes it)`);
  use.addEventListener("click", () => {
    const el = $(f.text);
    el.value = d.offer;
    for (const type of ["input", "change"]) el.dispatchEvent(new Event(type, {bubbles: true}));
  });
  box.append(" ", use);
});

export function startState() {
  watchOptions();
  checkRun($("state-note"));
}
