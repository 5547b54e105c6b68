// Views 11 and 14: run an experiment's --quick form from the page (POST /api/experiments/quick,
// gptlab.lab.experiments.quickrun), its progress streamed (Server-Sent Events: each line it
// logs), and the view told when its results are written, so they replace the shipped ones.

import {api, guarded} from "./api.js";
import {$} from "./dom.js";

let source = null;
const followers = [];  // {buttonId, statusId, onEnd} of each view that offers a run

function show(text, status) {
  for (const f of followers) {
    $(f.statusId).textContent = text;
    if (status) $(f.statusId).dataset.status = status; else delete $(f.statusId).dataset.status;
  }
}

function busy(on) {
  for (const f of followers) $(f.buttonId).disabled = on;
}

function follow() {
  if (source) source.close();
  busy(true);
  source = new EventSource("/api/experiments/quick/events");
  let started = null;
  source.onmessage = (m) => {
    const e = JSON.parse(m.data);
    if (e.kind === "start") { started = e; show(`running ${e.command}…`); }
    else if (e.kind === "log") show(`${started ? started.experiment : ""} --quick (${e.elapsed_s.toFixed(0)} s): ${e.line}`);
    else if (e.kind === "end") {
      show(e.message, e.status);
      source.close(); source = null;
      busy(false);
      followers.forEach((f) => f.onEnd(e));
      document.dispatchEvent(new CustomEvent("gptlab:runs-changed"));  // its runs join the pickers
    }
  };
  source.onerror = () => { if (source && source.readyState === EventSource.CLOSED) { source = null; busy(false); } };
}

// Offer the run in a view: its button starts `experiment()`'s --quick form; onEnd(event)
// when any run ends (the view reloads its list).
export function offerQuickRun({buttonId, statusId, experiment, onEnd}) {
  followers.push({buttonId, statusId, onEnd});
  $(buttonId).addEventListener("click", guarded(async () => {
    await api("/api/experiments/quick", {experiment: experiment()});
    follow();
  }));
  if (followers.length === 1) {  // one that runs already (started elsewhere): follow it
    api("/api/experiments/quick/status").then((s) => { if (s.running) follow(); }).catch(() => {});
  }
}
