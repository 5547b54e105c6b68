// gptlab lab: the page. Vanilla JS + SVG in ES modules, one per view; every number comes
// from the server (gptlab).

import {load as allheads, open as openAllHeads} from "./allheads.js";
import {refreshRuns, renderError} from "./api.js";
import {load as calc} from "./calc.js";
import {load as context} from "./context.js";
import {load as experiments} from "./experiments.js";
import {load as features} from "./features.js";
import {load as heads, open as openHeads} from "./heads.js";
import {load as learnedpos} from "./learnedpos.js";
import {load as lens, open as openLens} from "./lens.js";
import {load as live} from "./live.js";
import {load as nexttoken} from "./nexttoken.js";
import {load as params} from "./params.js";
import {load as positions} from "./positions.js";
import {load as quiz} from "./quiz.js";
import {load as scaling} from "./scaling.js";
import {load as scores} from "./scores.js";
import {applyState, harvest, restoreState, startState, stateAddress, viewInAddress} from "./state.js";
import {startTour} from "./tour.js";
import {load as wholemodel} from "./wholemodel.js";

// Each view loads the first time its tab opens.
const loaders = {calc, scaling, heads, positions, params, scores, quiz, nexttoken, live, lens,
  context, model: wholemodel, allheads, experiments, features};
loaders.positions = () => { positions(); learnedpos(); };
const loaded = new Set();
let current = null;

const tabs = () => [...document.querySelectorAll("#tabs button[data-view]")];
// Own keys only: a hash such as #toString names an inherited property, not a view.
// The address may name it as ?view=NAME too (state.js keeps run, text, ... in its query).
const viewOf = (name) => (Object.hasOwn(loaders, name) ? name : "calc");

function showView(name, focus = false) {
  for (const b of tabs()) {
    const on = b.dataset.view === name;
    b.classList.toggle("active", on);
    b.setAttribute("aria-selected", String(on));
    b.tabIndex = on ? 0 : -1;  // roving tabindex: Tab enters the tab list at the open tab
    if (on && focus) b.focus();
    if (on) b.scrollIntoView({block: "nearest", inline: "nearest"});  // a phone's tab row scrolls
  }
  if (location.hash !== `#${name}`) history.replaceState(null, "", `#${name}`);
  if (name === current) { applyState(name); return; }  // Back within a view: its state
  current = name;
  document.querySelectorAll(".view").forEach((s) => { s.hidden = s.id !== `view-${name}`; });
  renderError();  // the view's own error, not the last view's
  const first = !loaded.has(name) && loaders[name];
  applyState(name, first);  // the run, text, ... typed in another view (or the address)
  if (first) { loaded.add(name); loaders[name](); }
  else refreshRuns(document.getElementById(`view-${name}`));  // runs trained meanwhile
}

// The address names the open view (#lens). Opening one adds a history entry, so Back
// steps through the views; a link, a typed address or Back / Forward opens its view. The
// entry is the state the view opens with: a link from another view (L1H3 in view 13) has
// set its run, text, layer and head, and the address says so at once.
function openView(name, focus = false) {
  if (current) harvest(current);  // what the view changed itself (an appended token)
  const address = stateAddress(undefined, name);
  if (address !== location.pathname + location.search + location.hash) history.pushState(null, "", address);
  showView(name, focus);
}
window.addEventListener("hashchange", () => showView(viewOf(viewInAddress())));
window.addEventListener("popstate", () => { restoreState(); showView(viewOf(viewInAddress())); });

// The tabs as an ARIA tab list: roles set here so that every view's tab gets them; the
// arrow keys (and Home / End) move between tabs, as in the WAI-ARIA tabs pattern.
const nav = document.getElementById("tabs");
nav.setAttribute("role", "tablist");
nav.setAttribute("aria-label", "views");
for (const b of tabs()) {
  const panel = document.getElementById(`view-${b.dataset.view}`);
  b.setAttribute("role", "tab");
  b.setAttribute("aria-controls", panel.id);
  panel.setAttribute("role", "tabpanel");
  panel.setAttribute("aria-labelledby", b.id);
  b.addEventListener("click", () => openView(b.dataset.view));
}
nav.addEventListener("keydown", (e) => {
  const all = tabs(), i = all.indexOf(document.activeElement);
  const to = {ArrowRight: i + 1, ArrowLeft: i - 1, Home: 0, End: all.length - 1}[e.key];
  if (i < 0 || to === undefined) return;
  e.preventDefault();
  openView(all[(to + all.length) % all.length].dataset.view, true);
});
// The next-token view asks why a token: view 10 attributes it for the same run and text.
document.addEventListener("gptlab:attribute", (e) => { openView("lens"); openLens(e.detail); });
// The whole model and the all-heads grid open a head in view 3, or every head in view 13.
document.addEventListener("gptlab:heads", (e) => { openView("heads"); openHeads(e.detail); });
document.addEventListener("gptlab:allheads", (e) => { openView("allheads"); openAllHeads(e.detail); });
// A prepared state (a tour's step): its address, then its view.
function goTo(address) {
  history.pushState(null, "", address);
  restoreState();
  showView(viewOf(viewInAddress()));
}
// The sticky header's height, for style.css's scroll-padding-top: Tab scrolls a focused
// control below the header, never under it (WCAG 2.4.11, focus not obscured).
const header = document.querySelector("header");
new ResizeObserver(() => document.documentElement.style.setProperty("--header-height", `${header.offsetHeight}px`))
  .observe(header);
startState();
showView(viewOf(viewInAddress()));
startTour(goTo);
