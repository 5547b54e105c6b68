// View 14, experiments: any `gptlab experiment NAME`'s report from its results.json, the
// tables it printed and the figures it drew (as the server reads them), and the runs of
// its grid, each a link that opens it in the heads or next-token view. An experiment the
// runs folder has no full-size results of is listed with the results gptlab ships,
// labelled; its --quick form runs from here (quickrun.js) and is listed beside them,
// marked quick, with the line that says what so small a run cannot decide.

import {api, guarded} from "./api.js";
import {$, htmlEl} from "./dom.js";
import {offerQuickRun} from "./quickrun.js";

let entries = [];
// an option's value: the folder, or shipped:NAME (a folder may be named as an experiment)
const key = (e) => (e.shipped ? `shipped:${e.name}` : e.name);
const chosen = () => entries.find((e) => key(e) === $("exp-experiment").value);

// A cell of words (a word: two letters in a row; "1e-3" and "+0.41 ± 0.02" are numbers)
// reads from the left, a number from the right.
const prose = (text) => /[A-Za-z]{2}/.test(text);

function table({title, header, rows}, k) {
  const t = htmlEl("table", {class: "stats", "data-testid": `exp-table-${k}`});
  t.appendChild(htmlEl("caption", {}, title));
  const head = htmlEl("tr");
  header.forEach((h) => head.appendChild(htmlEl("th", {scope: "col"}, h)));
  t.appendChild(head);
  rows.forEach((row) => {
    const tr = htmlEl("tr");
    row.forEach((c, i) => tr.appendChild(htmlEl(i === 0 ? "th" : "td",
      i === 0 ? {scope: "row"} : prose(c) ? {class: "text"} : {}, c)));
    t.appendChild(tr);
  });
  const region = htmlEl("div", {class: "scroll", tabindex: "0", role: "region", "aria-label": title});
  region.appendChild(t);
  return region;
}

// A claim's verdict cell: results.json's verdict line as written ("not seen: +0.032 (needs
// > 0.029 and ≥ 0.04)"), its first word in bold; a file from before verdict lines, the
// verdict with the mean effect and the seeds it was judged on. The rule is the cell's title.
function verdictCell(c) {
  const cell = htmlEl("td", {title: c.rule, "data-testid": "exp-verdict"});
  if (c.verdict_line) {
    const rest = c.verdict_line.startsWith(c.verdict) ? c.verdict_line.slice(c.verdict.length) : null;
    if (rest === null) cell.textContent = c.verdict_line;
    else cell.append(htmlEl("strong", {}, c.verdict), rest);
    return cell;
  }
  const mean = c.mean === null ? "" : ` (${c.mean >= 0 ? "+" : ""}${c.mean.toPrecision(3)}, seeds ${c.seeds.join(", ")})`;
  cell.append(htmlEl("strong", {}, c.verdict), mean);
  return cell;
}

// "met: the model learned the task (...)", "not met: ...", or — for a claim that needs none.
const preconditionText = (p) => (p ? `${p.met ? "met" : "not met"}: ${p.text}` : "—");

// The claims table: the claim | the paper | this run (over its units) | precondition (where
// results.json records them) | verdict.
function claimsTable(claims) {
  if (!claims.length) return htmlEl("p", {class: "note"}, "This results.json judged no claims (written before verdicts were computed).");
  const t = htmlEl("table", {class: "stats prose", "data-testid": "exp-claims"});
  t.appendChild(htmlEl("caption", {}, "the claims, judged"));
  const gated = claims.some((c) => "precondition" in c);
  const head = htmlEl("tr");
  ["the claim", "the paper", "this run", ...(gated ? ["precondition"] : []), "verdict"]
    .forEach((h) => head.appendChild(htmlEl("th", {scope: "col"}, h)));
  t.appendChild(head);
  claims.forEach((c) => {
    const tr = htmlEl("tr", {"data-verdict": c.verdict});
    tr.appendChild(htmlEl("th", {scope: "row"}, c.sentence));
    tr.appendChild(htmlEl("td", {}, c.paper));
    tr.appendChild(htmlEl("td", {}, c.units ? `${c.units}: ${c.this_run}` : c.this_run));
    if (gated) {
      tr.appendChild(htmlEl("td", {"data-testid": "exp-precondition",
        "data-met": c.precondition ? String(c.precondition.met) : ""}, preconditionText(c.precondition)));
    }
    tr.appendChild(verdictCell(c));
    t.appendChild(tr);
  });
  const region = htmlEl("div", {class: "scroll", tabindex: "0", role: "region", "aria-label": "the claims, judged"});
  region.appendChild(t);
  return region;
}

const runLink = (run, view, label) => htmlEl("a", {href: `?run=${encodeURIComponent(run)}#${view}`}, label);

const show = guarded(async () => {
  const entry = chosen();
  if (!entry) return;
  const d = await api("/api/experiments/report", {experiment: entry.name, shipped: !!entry.shipped});
  const label = $("exp-shipped");
  label.hidden = !d.shipped;
  label.textContent = d.shipped ? `These are ${d.shipped}: gptlab experiment ${d.experiment} at its default size, ` +
    `run once where gptlab was built. Run it (the button above, or gptlab experiment ${d.experiment} --out RUNS/${d.experiment}) ` +
    "and your results replace them." : "";
  $("exp-quick").textContent = `Run gptlab experiment ${d.experiment} --quick here`;
  $("exp-title").textContent = `${d.title} (gptlab experiment ${d.experiment})${d.quick ? ", a --quick run" : ""}`;
  const quick = $("exp-quick-note");
  quick.hidden = !d.quick;
  quick.textContent = d.quick ? `${d.undecided_line || "This --quick run is small: too small to decide most claims (each claim says whether it could)."}` +
    (entries.some((e) => e.shipped && e.experiment === d.experiment)
      ? ` The shipped results of gptlab experiment ${d.experiment} stay in the list.` : "") : "";
  $("exp-claims").replaceChildren(claimsTable(d.claims));
  $("exp-tables").replaceChildren(...d.tables.map(table));
  $("exp-figures").replaceChildren(...d.figures.map((f) => htmlEl("img", {
    src: f.png, alt: `${d.title}: the figure ${f.file} the experiment drew`, class: "exp-figure",
    "data-testid": "exp-figure", "data-file": f.file})));
  $("exp-timing").textContent = d.timing + (d.threads ? ` Its models trained at ${d.threads} torch thread${d.threads === 1 ? "" : "s"}.` : "");
  const list = htmlEl("ul", {"data-testid": "exp-runs"});
  if (d.shipped) list.appendChild(htmlEl("li", {}, "none shipped: run the experiment to train them"));
  d.runs.forEach((run) => {
    const li = htmlEl("li", {}, `${run}: `);
    li.append(runLink(run, "heads", "heads"), " · ", runLink(run, "nexttoken", "next token"));
    list.appendChild(li);
  });
  $("exp-runs").replaceChildren(list);
}, ["exp-claims", "exp-tables", "exp-figures", "exp-runs"]);

async function refresh(prefer) {
  const d = await api("/api/experiments");
  entries = d.experiments;
  const select = $("exp-experiment"), keep = prefer || select.value;
  select.replaceChildren(...(entries.length
    ? entries.map((e) => htmlEl("option", {value: key(e)}, e.shipped ? `${e.name} (shipped results)`
      : `${e.name} (${e.experiment}${e.quick ? ", quick run" : ""})`))
    : [htmlEl("option", {value: ""}, "no experiments in the runs folder")]));
  if (entries.some((e) => key(e) === keep)) select.value = keep;
  const own = entries.filter((e) => !e.shipped && !e.quick).length;
  $("exp-status").textContent = own ? "" : "No full-size experiment in the runs folder yet: these are the results gptlab ships.";
  if (entries.length) show();
}

export async function load() {
  $("exp-experiment").addEventListener("change", show);
  offerQuickRun({buttonId: "exp-quick", statusId: "exp-quick-status", experiment: () => chosen()?.experiment || "norm",
    onEnd: (e) => { if (e.status === "finished") refresh(e.folder); }});
  await refresh();
}
