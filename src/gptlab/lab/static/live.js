// Watch it learn: start a small training on the server and draw it as it streams
// (Server-Sent Events): the loss, every head's scores over steps, a sample now and then.
// Before it starts, how long it will take (the server's estimate from a short probe of a
// step and an evaluation); while it runs, the time left at the rate of the steps so far.

import {api, guarded} from "./api.js";
import {$} from "./dom.js";
import {figure} from "./figure.js";
import {chart, headColour} from "./svg.js";

const SCORE_NAMES = {previous_token: "previous-token score", induction: "induction score"};
const MIN_WIDTH = 240;  // px: a chart's axes, ticks and legend fit
let source = null, view = null, pending = false;

function reset(start) {
  view = {start, losses: [], evals: []};
  ["live-loss", "live-scores"].forEach((id) => $(id).replaceChildren());
  $("live-sample").textContent = "";
}

const steps = (points) => points.map((p) => String(p.step));  // chart() thins them to fit

function draw() {
  pending = false;
  const v = view;
  if (!v) return;
  // as wide as the page allows, up to 460 px; never under MIN_WIDTH (a window 1 px wide made
  // it -47: "<svg> attribute width: A negative value is not valid")
  const w = Math.max(MIN_WIDTH, Math.min(460, document.documentElement.clientWidth - 48));
  if (v.losses.length) {
    // the y axis spans the losses (not 0..max, which flattens the early fall)
    const values = v.losses.map((p) => p.loss), lo = Math.min(...values), hi = Math.max(...values);
    const pad = 0.05 * (hi - lo || 1), digits = hi - lo < 0.5 ? 3 : 2;
    const svg = chart({id: "live-loss", title: "training loss", kind: "line", width: w, height: 220,
      series: [{name: "loss", values, colour: headColour(0)}], ymin: Math.max(0, lo - pad), ymax: hi + pad,
      yformat: (y) => y.toFixed(digits), xlabels: steps(v.losses), xthin: true, xtitle: "step", ytitle: "loss (nats)"});
    svg.setAttribute("role", "img");
    svg.setAttribute("aria-label", `training loss, ${v.losses.length} points, last ${v.losses.at(-1).loss.toFixed(3)} at step ${v.losses.at(-1).step}`);
    svg.dataset.points = String(v.losses.length);
    $("live-loss").replaceChildren();
    figure($("live-loss"), "live-loss", "loss over the steps", svg);
  }
  if (v.evals.length && v.start) {
    const box = $("live-scores");
    box.replaceChildren();
    for (const [name, title] of Object.entries(SCORE_NAMES)) {
      const series = [];
      for (let l = 0; l < v.start.n_layer; l++) for (let h = 0; h < v.start.n_head; h++) {
        series.push({name: `L${l} H${h}`, colour: headColour(l * v.start.n_head + h),
          values: v.evals.map((e) => e.scores[name][l][h])});
      }
      series.push({name: "chance", colour: "#6b7280", values: v.evals.map(() => v.start.chance[name])});
      const svg = chart({id: `live-${name}`, title, kind: "line", width: w, height: 220, ymax: 1, series,
        xlabels: steps(v.evals), xthin: true, xtitle: "step", ytitle: "score"});
      svg.setAttribute("role", "img");
      const last = v.evals.at(-1);
      svg.setAttribute("aria-label", `${title} per head over steps; at step ${last.step}: ` +
        series.slice(0, -1).map((s) => `${s.name} ${s.values.at(-1).toFixed(2)}`).join(", "));
      figure(box, `live-${name}`, `${title} of every head`, svg);
    }
  }
}

function later() {
  if (!pending) { pending = true; requestAnimationFrame(draw); }
}

function onEvent(e) {
  if (e.kind === "start") {
    reset(e);
    // a page that follows a training started elsewhere shows that training's settings
    $("live-task").value = e.task;
    $("live-steps").value = e.steps;
    $("live-every").value = e.every;
    $("live-status").textContent = `training ${e.run}: ${e.description}, ${e.steps} steps…`;
  }
  else if (e.kind === "train") {
    view.losses.push(e);
    const left = e.step > 0 ? e.elapsed_s * (view.start.steps - e.step) / e.step : null;
    $("live-status").textContent = `step ${e.step} of ${view.start.steps}: loss ${e.loss.toFixed(3)} (${e.elapsed_s.toFixed(0)} s` +
      (left === null ? ")" : `, about ${duration(left)} left at this rate)`);
  }
  else if (e.kind === "eval") {
    view.evals.push(e);
    $("live-sample").textContent = `step ${e.step}, a sample (temperature 0.8) after ${JSON.stringify(e.prompt)}:\n${e.prompt}${e.sample}`;
  } else if (e.kind === "end") {
    $("live-status").textContent = e.message;
    $("live-status").dataset.status = e.status;
    finish();
    document.dispatchEvent(new CustomEvent("gptlab:runs-changed"));  // the run pickers list it
  }
  later();
}

function finish() {
  if (source) { source.close(); source = null; }
  $("live-start").disabled = false;
  $("live-stop").disabled = true;
}

function follow() {
  if (source) source.close();
  $("live-start").disabled = true;
  $("live-stop").disabled = false;
  delete $("live-status").dataset.status;
  source = new EventSource("/api/live/events");
  source.onmessage = (m) => onEvent(JSON.parse(m.data));
  source.onerror = () => { if (source && source.readyState === EventSource.CLOSED) finish(); };
}

// "45 s", "1 min 50 s" (as gptlab.lab.live.estimate.duration says it)
function duration(seconds) {
  if (seconds < 60) return `${Math.max(1, Math.round(seconds))} s`;
  const t = 5 * Math.ceil(seconds / 5), m = Math.floor(t / 60), s = t % 60;
  return `${m} min${s ? ` ${s} s` : ""}`;
}

let asked = 0;
// The estimate for the settings in the form, shown before Start is pressed.
const estimate = guarded(async () => {
  const steps = +$("live-steps").value, every = +$("live-every").value, mine = ++asked;
  if (!(steps >= 10 && every >= 5 && every <= steps)) { $("live-estimate").textContent = ""; return; }
  $("live-estimate").textContent = "estimating how long it will take…";
  const d = await api("/api/live/estimate", {task: $("live-task").value, steps, every});
  if (mine !== asked) return;  // the form changed meanwhile
  const el = $("live-estimate");
  el.textContent = `This training of ${d.steps} steps will take ${d.words}.`;
  el.dataset.seconds = String(d.seconds);
  el.dataset.low = String(d.low);
  el.dataset.high = String(d.high);
}, ["live-estimate"]);

const start = guarded(async () => {
  reset(null);
  await api("/api/live/start", {task: $("live-task").value, steps: +$("live-steps").value,
    every: +$("live-every").value});
  follow();
});

const stop = guarded(async () => {
  $("live-stop").disabled = true;
  $("live-status").textContent = "stopping at the next step (a checkpoint is saved)…";
  await api("/api/live/stop", {});
});

export function load() {
  $("live-start").addEventListener("click", start);
  $("live-stop").addEventListener("click", stop);
  $("live-task").addEventListener("change", () => {
    $("live-steps").value = $("live-task").value === "induction" ? 1500 : 2000;
    estimate();
  });
  $("live-steps").addEventListener("change", estimate);
  $("live-every").addEventListener("change", estimate);
  estimate();
  // A training already running (started before this page was loaded): follow it.
  api("/api/live/status").then((s) => { if (s.running) follow(); }).catch(() => {});
  window.addEventListener("resize", later);
}
