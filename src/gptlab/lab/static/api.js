// Talking to the server: JSON calls, the one-line error box, and the list of runs.

import {$, htmlEl} from "./dom.js";

// A JSON call (GET, or POST with a body); a failure throws its one-line message.
async function request(path, body) {
  const opts = body === undefined ? {} : {
    method: "POST", headers: {"Content-Type": "application/json"}, body: JSON.stringify(body)};
  const res = await fetch(path, opts);
  const data = await res.json().catch(() => ({error: `HTTP ${res.status}`}));
  if (!res.ok) throw new Error(data.error || `HTTP ${res.status}`);
  return data;
}

// Each view keeps its own error: a message belongs to the view open when its call started,
// and the one box shows the open view's (view 12's "text must not be empty" is not shown
// in view 13 after a tab switch). app.js calls renderError when a view opens.
const errors = new Map();
const openView = () => document.querySelector(".view:not([hidden])")?.id || "";

// A view's call: its success clears that view's error.
export async function api(path, body) {
  const view = openView();
  const data = await request(path, body);
  showError(null, view);
  return data;
}

export function showError(message, view = openView()) {
  if (message) errors.set(view, message);
  else errors.delete(view);
  if (view === openView()) renderError();
}

export function renderError() {
  const box = $("error"), view = openView(), message = errors.get(view) || "";
  box.hidden = !message;
  box.textContent = message;
  // state.js offers a text the run encodes when the message is a vocabulary error
  if (message) document.dispatchEvent(new CustomEvent("gptlab:error", {detail: {view, message}}));
}

// Run an async view update; a bad input shows its one-line message instead of failing,
// and empties the elements (ids) in `stale`, whose figures no longer match the inputs.
export function guarded(fn, stale = []) {
  return async (...args) => {
    const view = openView();
    try { await fn(...args); } catch (e) {
      showError(e.message, view);
      for (const id of stale) $(id)?.replaceChildren();
    }
  };
}

// The run pickers (views 3, 4, 6, 8, 10, 11, 12 and 13). Each is filled again when its view
// opens, when it gets focus and when a training ends (live.js sends gptlab:runs-changed), so
// a run trained in view 9 appears without a reload. A picker keeps its run while it exists; otherwise it
// takes the page address's ?run=NAME (unless its view keeps its own: `address` false), else
// the first run whose tokenizer encodes the view's text (`text()`, e.g. not a run whose
// vocabulary has no space for "the cat sat"), else the first run (the shipped model is
// listed first), and tells its view (a change event).
const pickers = [];

export function fillRuns(select, text, {address = true} = {}) {
  const picker = {select, text, address};
  pickers.push(picker);
  select.addEventListener("focus", () => refill(picker));
  return refill(picker, true);
}

async function refill({select, text, address}, first = false) {
  const d = await request("/api/runs");  // a picker's refresh leaves the error box alone
  const names = d.runs, before = select.value;
  const same = names.length === select.options.length && names.every((r, i) => select.options[i].value === r);
  if (!same) {
    select.replaceChildren(...(names.length ? names.map((r) => htmlEl("option", {value: r}, r))
      : [htmlEl("option", {value: ""}, `no runs in ${d.root}`)]));
  }
  const wanted = address ? new URLSearchParams(location.search).get("run") : null;
  const byText = async () => {
    const value = text && text() ? (await request("/api/runs/encoding", {text: text()})).runs : [];
    return value.find((r) => names.includes(r)) || names[0];
  };
  if (names.includes(before) && !first) select.value = before;
  else if (first && names.includes(wanted)) select.value = wanted;
  else if (names.length) select.value = await byText();
  // the run this picker takes by itself: what an address without ?run= shows (state.js)
  if (first && names.length) select.dataset.default = select.value === wanted ? await byText() : select.value;
  if (!first && select.value !== before) select.dispatchEvent(new Event("change"));
  return names;
}

// Fill the pickers inside `within` (default: every picker) again.
export function refreshRuns(within = document) {
  return Promise.all(pickers.filter((p) => within.contains(p.select)).map((p) => refill(p).catch(() => {})));
}
document.addEventListener("gptlab:runs-changed", () => refreshRuns());
