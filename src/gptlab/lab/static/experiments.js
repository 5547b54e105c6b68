// View 14, experiments: any `gptlab experiment NAME`'s report from its results.json, the
// tables it printed and the figures it drew (as the server reads them), and the runs of
// its grid, each a link that opens it in the heads or next-token view.

import {api, guarded} from "./api.js";
import {$, htmlEl} from "./dom.js";

function table({title, header, rows}, k) {
  const t = htmlEl("table", {class: "stats", "data-testid": `exp-table-${k}`});
  t.appendChild(htmlEl("caption", {}, title));
  const head = htmlEl("tr");
  header.forEach((h) => head.appendChild(htmlEl("th", {scope: "col"}, h)));
  t.appendChild(head);
  rows.forEach((row) => {
    const tr = htmlEl("tr");
    row.forEach((c, i) => tr.appendChild(htmlEl(i === 0 ? "th" : "td", i === 0 ? {scope: "row"} : {}, c)));
    t.appendChild(tr);
  });
  const region = htmlEl("div", {class: "scroll", tabindex: "0", role: "region", "aria-label": title});
  region.appendChild(t);
  return region;
}

const runLink = (run, view, label) => htmlEl("a", {href: `?run=${encodeURIComponent(run)}#${view}`}, label);

const show = guarded(async () => {
  const name = $("exp-experiment").value;
  if (!name) return;
  const d = await api("/api/experiments/report", {experiment: name});
  $("exp-title").textContent = `${d.title} (gptlab experiment ${d.experiment})`;
  $("exp-tables").replaceChildren(...d.tables.map(table));
  $("exp-figures").replaceChildren(...d.figures.map((f) => htmlEl("img", {
    src: f.png, alt: `${d.title}: the figure ${f.file} the experiment drew`, class: "exp-figure",
    "data-testid": "exp-figure", "data-file": f.file})));
  $("exp-timing").textContent = d.timing;
  const list = htmlEl("ul", {"data-testid": "exp-runs"});
  d.runs.forEach((run) => {
    const li = htmlEl("li", {}, `${run}: `);
    li.append(runLink(run, "heads", "heads"), " · ", runLink(run, "nexttoken", "next token"));
    list.appendChild(li);
  });
  $("exp-runs").replaceChildren(list);
}, ["exp-tables", "exp-figures", "exp-runs"]);

export async function load() {
  const d = await api("/api/experiments");
  const select = $("exp-experiment");
  select.replaceChildren(...(d.experiments.length
    ? d.experiments.map((e) => htmlEl("option", {value: e.name}, `${e.name} (${e.experiment})`))
    : [htmlEl("option", {value: ""}, "no experiments in the runs folder")]));
  $("exp-status").textContent = d.experiments.length ? "" :
    "Run one into the runs folder: gptlab experiment norm --out runs/norm";
  select.addEventListener("change", show);
  if (d.experiments.length) show();
}
