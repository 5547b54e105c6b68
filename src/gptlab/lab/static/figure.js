// A figure on the page: its caption box and export to SVG or PNG, all in the browser.

import {showError} from "./api.js";
import {htmlEl} from "./dom.js";
import {SVGNS} from "./svg.js";

// A figure box: caption, the SVG, and SVG / PNG export buttons. A caption that says what the
// figure's own title says (which an export keeps) is not printed a second time.
export function figure(parent, name, caption, svg, extraClass) {
  const box = htmlEl("div", {class: "figure" + (extraClass ? " " + extraClass : ""), id: `figure-${name}`});
  const cap = htmlEl("div", {class: "caption"});
  const title = svg.querySelector(":scope > .fig-title")?.textContent;
  cap.append(htmlEl("span", {}, caption === title ? "" : caption), exportButtons(svg, name));
  box.append(cap, svg);
  parent.appendChild(box);
  return box;
}

// The SVG and PNG buttons alone, for a figure laid out by its view.
export function exportButtons(svg, name) {
  const exp = htmlEl("span", {class: "export"});
  const bs = htmlEl("button", {"data-testid": `export-svg-${name}`, title: "download as SVG"}, "SVG");
  const bp = htmlEl("button", {"data-testid": `export-png-${name}`, title: "download as PNG"}, "PNG");
  bs.addEventListener("click", () => exportSVG(svg, name));
  bp.addEventListener("click", () => exportPNG(svg, name));
  exp.append(bs, bp);
  return exp;
}

function download(blob, filename) {
  const a = htmlEl("a", {href: URL.createObjectURL(blob), download: filename});
  document.body.appendChild(a);
  a.click();
  setTimeout(() => { URL.revokeObjectURL(a.href); a.remove(); }, 1000);
}

// What the stylesheet decides about a figure's look, written onto the exported copy.
const INHERITED = ["fill", "stroke", "fill-opacity", "stroke-opacity", "font-family", "font-size", "font-weight"];
const OWN = {"opacity": "1", "text-decoration-line": "none"};  // not inherited: kept unless the default

// An exported figure is drawn in the light theme whatever the page's: a copy is styled inside
// an `.export-light` box (style.css gives it the light colours), and what the stylesheet
// says (classes, CSS variables such as the heads' colours) is written onto the copy as
// plain styles, so the file, or the PNG drawn from it, needs no stylesheet.
function svgText(svg) {
  const box = htmlEl("div", {class: "figure export-light", "aria-hidden": "true"});
  box.style.cssText = "position: absolute; left: -100000px; top: 0; visibility: hidden";
  const copy = svg.cloneNode(true);
  copy.setAttribute("xmlns", SVGNS);
  box.appendChild(copy);
  document.body.appendChild(box);
  try {
    const all = [copy, ...copy.querySelectorAll("*")].filter((el) => el.tagName !== "title");
    const read = (el) => { const cs = getComputedStyle(el); return Object.fromEntries([...INHERITED, ...Object.keys(OWN)].map((p) => [p, cs.getPropertyValue(p)])); };
    const styles = new Map(all.map((el) => [el, read(el)]));  // read everything, then write
    for (const [el, st] of styles) {
      const parent = el === copy ? null : styles.get(el.parentNode);
      const keep = INHERITED.filter((p) => !parent || st[p] !== parent[p])
        .concat(Object.keys(OWN).filter((p) => st[p] !== OWN[p]));
      if (keep.length) el.setAttribute("style", keep.map((p) => `${p}: ${st[p]}`).join("; "));
      else el.removeAttribute("style");
    }
  } finally {
    box.remove();
  }
  return '<?xml version="1.0" encoding="UTF-8"?>\n' + new XMLSerializer().serializeToString(copy);
}

function exportSVG(svg, name) {
  download(new Blob([svgText(svg)], {type: "image/svg+xml"}), `gptlab-${name}.svg`);
}

// PNG without a server: draw the SVG (as a blob image) onto a canvas at 2x.
function exportPNG(svg, name) {
  const w = +svg.getAttribute("width"), h = +svg.getAttribute("height"), k = 2;
  const url = URL.createObjectURL(new Blob([svgText(svg)], {type: "image/svg+xml"}));
  const img = new Image();
  img.onload = () => {
    const canvas = htmlEl("canvas", {width: w * k, height: h * k});
    const ctx = canvas.getContext("2d");
    ctx.fillStyle = "#ffffff";
    ctx.fillRect(0, 0, w * k, h * k);
    ctx.drawImage(img, 0, 0, w * k, h * k);
    URL.revokeObjectURL(url);
    canvas.toBlob((blob) => download(blob, `gptlab-${name}.png`), "image/png");
  };
  img.onerror = () => showError("PNG export failed: the browser could not draw the SVG");
  img.src = url;
}
