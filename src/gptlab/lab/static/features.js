// View 15, features: a model's FFN read through a sparse dictionary instead of its neurons
// (gptlab.interp.sae; `gptlab experiment features` trains them). Pick a dictionary (the one
// gptlab ships, or one of a features experiment in the runs folder), find features by the
// token they promote or fire on, and open one: its top contexts in the reference text
// (the character it fires on marked), the tokens its decoder row promotes and suppresses
// through the final norm and W_U, its activation histogram, and its activation along a
// typed text. Every number is the server's.

import {api, guarded} from "./api.js";
import {$, fmt, htmlEl, tokenLabel} from "./dom.js";

const state = {dictionaries: []};

function fillDictionaries(list) {
  const select = $("feat-dictionary");
  const kept = select.value;
  select.replaceChildren(...list.map((d) => htmlEl("option", {value: d.name}, d.name)));
  if (list.some((d) => d.name === kept)) select.value = kept;
  const d = list.find((x) => x.name === select.value);
  $("feat-about").textContent = !d ? "No dictionary: run `gptlab experiment features --out runs/features`."
    : `${d.d_sae} ${d.architecture} features${d.k ? ` (k = ${d.k})` : ""} on ${d.model}'s ${d.site} of layer ${d.layer} (${d.hook_name})${d.label ? ` — ${d.label}` : ""}.`;
}

// The search's answer: a list of features, each a button that opens it.
function showList(d) {
  const list = $("feat-list");
  list.replaceChildren();
  const what = d.by === "promotes" ? "logit added to" : "mean activation on";
  d.features.forEach((f) => {
    const b = htmlEl("button", {"data-testid": "feat-listed", "data-feature": String(f.feature),
      class: "feat-listed"}, `#${f.feature}: ${what} ${tokenLabel(d.token)} ${fmt(f.score, 3)}, fires on ${fmt(100 * f.density, 2)}%, promotes ${tokenLabel(f.promotes)}`);
    b.addEventListener("click", () => { $("feat-feature").value = f.feature; showFeature(); });
    list.appendChild(htmlEl("li")).appendChild(b);
  });
}

const search = guarded(async () => {
  const d = await api("/api/features/search", {dictionary: $("feat-dictionary").value,
    token: $("feat-token").value.replace(/\\n/g, "\n"), by: $("feat-by").value, count: 12});
  showList(d);
}, ["feat-list"]);

// A context: its text, the last character (where the feature fires) marked.
function contextLine(c) {
  const line = htmlEl("li", {"data-testid": "feat-context", "data-activation": String(c.activation)});
  line.append(htmlEl("span", {class: "feat-act"}, fmt(c.activation, 2) + "  "),
    htmlEl("span", {class: "feat-text"}, c.text.slice(0, -c.token.length || undefined)),
    htmlEl("mark", {}, tokenLabel(c.token)));
  return line;
}

function logitList(id, title, items) {
  const box = $(id);
  box.replaceChildren(htmlEl("h4", {}, title));
  const ol = htmlEl("ol");
  items.forEach((t) => ol.appendChild(htmlEl("li", {"data-testid": `${id}-item`, "data-id": String(t.id),
    "data-logit": String(t.logit)}, `${tokenLabel(t.text)}  ${t.logit >= 0 ? "+" : ""}${fmt(t.logit, 3)}`)));
  box.appendChild(ol);
}

// The histogram of non-zero activations as bars (text, no figure library: counts in titles).
function histogram({edges, counts}) {
  const box = $("feat-histogram");
  box.replaceChildren(htmlEl("h4", {}, "activations where it fires"));
  const top = Math.max(1, ...counts);
  counts.forEach((n, i) => {
    const row = htmlEl("div", {class: "feat-bar-row", "data-testid": "feat-bar", "data-count": String(n)});
    row.append(htmlEl("span", {class: "feat-bar-label"}, `${fmt(edges[i], 1)}–${fmt(edges[i + 1], 1)}`));
    const bar = htmlEl("span", {class: "feat-bar", title: `${n} tokens`});
    bar.style.width = `${Math.round(140 * n / top)}px`;
    row.append(bar, htmlEl("span", {}, String(n)));
    box.appendChild(row);
  });
}

// The typed text, each token shaded by the feature's activation there (the number in its title).
function along(items, max) {
  const box = $("feat-along");
  box.replaceChildren();
  items.forEach((t) => {
    const span = htmlEl("span", {class: "feat-token", "data-testid": "feat-along-token",
      "data-activation": String(t.activation), title: `${tokenLabel(t.token)}: ${fmt(t.activation, 3)}`}, t.token);
    span.style.background = `rgba(214, 39, 40, ${max > 0 ? Math.min(1, t.activation / max) : 0})`;
    box.appendChild(span);
  });
}

const showFeature = guarded(async () => {
  const d = await api("/api/features/feature", {dictionary: $("feat-dictionary").value,
    feature: +$("feat-feature").value, text: $("feat-text").value, contexts: 8});
  $("feat-summary").textContent = `feature ${d.feature} of ${d.d_sae}: fires on ${fmt(100 * d.density, 2)}% of the reference text's tokens, at most ${fmt(d.max_activation, 2)}`;
  const ol = $("feat-contexts");
  ol.replaceChildren(...d.contexts.map(contextLine));
  logitList("feat-promoted", "promotes", d.promoted);
  logitList("feat-suppressed", "suppresses", d.suppressed);
  histogram(d.histogram);
  along(d.along, Math.max(d.max_activation, ...d.along.map((t) => t.activation)));
}, ["feat-contexts", "feat-promoted", "feat-suppressed", "feat-histogram", "feat-along"]);

export const load = guarded(async () => {
  const d = await api("/api/features/dictionaries");
  state.dictionaries = d.dictionaries;
  $("feat-reference").textContent = d.text;
  fillDictionaries(d.dictionaries);
  $("feat-dictionary").addEventListener("change", () => fillDictionaries(state.dictionaries));
  $("feat-search").addEventListener("click", search);
  $("feat-show").addEventListener("click", showFeature);
  if (d.dictionaries.length) { await search(); await showFeature(); }
});
