// gptlab lab: the page. Vanilla JS + SVG in ES modules, one per view; every number comes
// from the server (gptlab).

import {load as calc} from "./calc.js";
import {load as heads} from "./heads.js";
import {load as lens} from "./lens.js";
import {load as live} from "./live.js";
import {load as nexttoken} from "./nexttoken.js";
import {load as params} from "./params.js";
import {load as positions} from "./positions.js";
import {load as quiz} from "./quiz.js";
import {load as scaling} from "./scaling.js";
import {load as scores} from "./scores.js";

// Each view loads the first time its tab opens.
const loaders = {calc, scaling, heads, positions, params, scores, quiz, nexttoken, live, lens};
const loaded = new Set();

function showView(name) {
  document.querySelectorAll("#tabs button").forEach((b) => b.classList.toggle("active", b.dataset.view === name));
  document.querySelectorAll(".view").forEach((s) => { s.hidden = s.id !== `view-${name}`; });
  if (location.hash !== `#${name}`) history.replaceState(null, "", `#${name}`);
  if (!loaded.has(name) && loaders[name]) { loaded.add(name); loaders[name](); }
}

document.querySelectorAll("#tabs button").forEach((b) => b.addEventListener("click", () => showView(b.dataset.view)));
// Own keys only: a hash such as #toString names an inherited property, not a view.
const wanted = location.hash.slice(1);
showView(Object.hasOwn(loaders, wanted) ? wanted : "calc");
