// Talking to the server: JSON calls, the one-line error box, and the list of runs.

import {$, htmlEl} from "./dom.js";

export async function api(path, body) {
  const opts = body === undefined ? {} : {
    method: "POST", headers: {"Content-Type": "application/json"}, body: JSON.stringify(body)};
  const res = await fetch(path, opts);
  const data = await res.json().catch(() => ({error: `HTTP ${res.status}`}));
  if (!res.ok) throw new Error(data.error || `HTTP ${res.status}`);
  showError(null);
  return data;
}

export function showError(message) {
  const box = $("error");
  box.hidden = !message;
  box.textContent = message || "";
}

// Run an async view update; a bad input shows its one-line message instead of failing,
// and empties the elements (ids) in `stale`, whose figures no longer match the inputs.
export function guarded(fn, stale = []) {
  return async (...args) => {
    try { await fn(...args); } catch (e) {
      showError(e.message);
      for (const id of stale) $(id).replaceChildren();
    }
  };
}

// The runs folder's contents, fetched once for the views that pick a run (3 and 6). The
// first is picked (the shipped model, listed first), or the page address's ?run=NAME.
let runsPromise = null;
export function fillRuns(select) {
  runsPromise = runsPromise || api("/api/runs");
  return runsPromise.then((d) => {
    select.replaceChildren();
    if (!d.runs.length) select.appendChild(htmlEl("option", {value: ""}, `no runs in ${d.root}`));
    d.runs.forEach((r) => select.appendChild(htmlEl("option", {value: r}, r)));
    const wanted = new URLSearchParams(location.search).get("run");
    if (d.runs.includes(wanted)) select.value = wanted;
    return d.runs;
  });
}
