// DOM helpers and number formatting shared by the views.

export const $ = (id) => document.getElementById(id);
const MINUS_INF = "\u2212\u221e";  // what a masked score shows: −∞

export function debounce(fn, ms) {
  let timer = null;
  return (...args) => { clearTimeout(timer); timer = setTimeout(() => fn(...args), ms); };
}

export function htmlEl(tag, attrs = {}, text) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  if (text !== undefined) node.textContent = text;
  return node;
}

export const fmt = (x, d = 2) => (x === null ? MINUS_INF : Number(x).toFixed(d).replace(/^-(0\.0+)$/, "$1"));
// 1.23 G, 45.6 M, ...; `giga` names 1e9 (parameter counts say "B", FLOPs "G").
export const human = (n, giga = "G") => (n >= 1e12 ? (n / 1e12).toFixed(2) + " T" : n >= 1e9 ? (n / 1e9).toFixed(2) + " " + giga : n >= 1e6 ? (n / 1e6).toFixed(2) + " M" : n >= 1e3 ? (n / 1e3).toFixed(1) + " k" : String(n));
export const humanCount = (n) => human(n, "B");
// A token as a visible label: a space shows as ␣, control characters escaped.
export const tokenLabel = (t) => JSON.stringify(t).slice(1, -1).replace(/ /g, "\u2423");
