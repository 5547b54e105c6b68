// View 5: where a configuration's parameters, FLOPs and memory go.

import {api, guarded} from "./api.js";
import {$, debounce, htmlEl, human, humanCount} from "./dom.js";
import {figure} from "./figure.js";
import {chart} from "./svg.js";

const humanBytes = (n) => { const u = ["B", "KiB", "MiB", "GiB", "TiB"]; let i = 0; while (n >= 1024 && i < 4) { n /= 1024; i++; } return `${n.toFixed(i ? 2 : 0)} ${u[i]}`; };

// The form's fields; a "choice" field's options come from the server (/api/presets).
const PARAM_FIELDS = [
  ["vocab_size", "number"], ["block_size", "number"], ["n_layer", "number"], ["n_head", "number"],
  ["n_kv_head", "number"], ["n_embd", "number"], ["ffn_hidden", "number"],
  ["pos_encoding", "choice"], ["norm", "choice"], ["mlp", "choice"],
  ["bias", "bool"], ["tie_embeddings", "bool"]];
let presets = {}, choices = {};

function fillParamsForm(cfg) {
  const form = $("params-form");
  form.replaceChildren();
  for (const [name, kind] of PARAM_FIELDS) {
    const label = htmlEl("label", {}, name + " ");
    let input;
    if (kind === "choice") {
      input = htmlEl("select");
      choices[name].forEach((k) => input.appendChild(htmlEl("option", {value: k}, k)));
      input.value = cfg[name];
    } else if (kind === "bool") {
      input = htmlEl("input", {type: "checkbox"});
      input.checked = !!cfg[name];
    } else {
      input = htmlEl("input", {type: "number", min: 1, value: cfg[name]});
    }
    input.id = `param-${name}`;
    input.setAttribute("data-testid", `param-${name}`);
    input.addEventListener("input", paramsComputeSoon);
    label.appendChild(input);
    form.appendChild(label);
  }
}

function paramsConfig() {
  const cfg = {...presets[$("params-preset").value]};
  for (const [name, kind] of PARAM_FIELDS) {
    const input = $(`param-${name}`);
    if (kind === "bool") cfg[name] = input.checked;
    else if (kind === "choice") cfg[name] = input.value;
    else cfg[name] = input.value === "" ? null : Number(input.value);
  }
  return cfg;
}


const paramsCompute = guarded(async () => {
  const d = await api("/api/params", {config: paramsConfig()});
  $("params-summary").innerHTML = "";
  const p = htmlEl("p");
  p.innerHTML = `total <b data-testid="params-total">${d.total.toLocaleString("en-US")}</b> parameters (${humanCount(d.total)}); ` +
    `12·L·d² = <b data-testid="params-estimate">${d.estimate_12Ld2.toLocaleString("en-US")}</b> ` +
    `(${(100 * d.estimate_error).toFixed(1)}% vs the total, ${(100 * d.estimate_error_blocks).toFixed(1)}% vs the blocks alone: ` +
    `12·L·d² counts only the blocks' matrices). Forward ≈ ${human(d.flops.forward_per_token)}FLOP per token at ${d.seq_len} tokens; ` +
    `training with AdamW in fp32 ≈ ${humanBytes(d.memory.training_adamw_fp32)} (weights, grads, 2 moments).`;
  $("params-summary").appendChild(p);
  const t = $("params-table");
  t.replaceChildren();
  const head = htmlEl("tr");
  ["part", "parameters", "× count", "note"].forEach((h) => head.appendChild(htmlEl("th", {}, h)));
  t.appendChild(head);
  d.rows.forEach((r) => {
    const tr = htmlEl("tr");
    tr.append(htmlEl("td", {}, r.name), htmlEl("td", {class: "num"}, r.params.toLocaleString("en-US")),
      htmlEl("td", {class: "num"}, String(r.count)), htmlEl("td", {}, r.note));
    t.appendChild(tr);
  });
  const figs = $("params-figures");
  figs.replaceChildren();
  figure(figs, "params-breakdown", "where the parameters are", chart({id: "params-breakdown", kind: "bar",
    width: 560, title: `parameters by part (total ${humanCount(d.total)})`, ytitle: "parameters",
    yformat: (y) => humanCount(y).replace(/\.0+ /, " "),  // round ticks: 20 M, not 20.00 M
    xlabels: d.rows.map((r) => r.name.split(" (")[0]),
    series: [{name: "params × count", values: d.rows.map((r) => r.params * r.count), colour: "var(--fig-blue)"}]}));
}, ["params-summary", "params-figures", "params-table"]);
const paramsComputeSoon = debounce(paramsCompute, 120);

export const load = guarded(async () => {
  ({presets, choices} = await api("/api/presets"));
  const sel = $("params-preset");
  Object.keys(presets).forEach((n) => sel.appendChild(htmlEl("option", {value: n}, n)));
  sel.value = "gpt2";
  sel.addEventListener("change", () => { fillParamsForm(presets[sel.value]); paramsCompute(); });
  fillParamsForm(presets.gpt2);
  paramsCompute();
});
