// A figure on the page: its caption box and export to SVG or PNG, all in the browser.

import {showError} from "./api.js";
import {htmlEl} from "./dom.js";
import {SVGNS} from "./svg.js";

// A figure box: caption, the SVG, and SVG / PNG export buttons.
export function figure(parent, name, caption, svg, extraClass) {
  const box = htmlEl("div", {class: "figure" + (extraClass ? " " + extraClass : ""), id: `figure-${name}`});
  const cap = htmlEl("div", {class: "caption"});
  cap.appendChild(htmlEl("span", {}, caption));
  const exp = htmlEl("span", {class: "export"});
  const bs = htmlEl("button", {"data-testid": `export-svg-${name}`, title: "download as SVG"}, "SVG");
  const bp = htmlEl("button", {"data-testid": `export-png-${name}`, title: "download as PNG"}, "PNG");
  bs.addEventListener("click", () => exportSVG(svg, name));
  bp.addEventListener("click", () => exportPNG(svg, name));
  exp.append(bs, bp);
  cap.appendChild(exp);
  box.append(cap, svg);
  parent.appendChild(box);
  return box;
}

function download(blob, filename) {
  const a = htmlEl("a", {href: URL.createObjectURL(blob), download: filename});
  document.body.appendChild(a);
  a.click();
  setTimeout(() => { URL.revokeObjectURL(a.href); a.remove(); }, 1000);
}

function svgText(svg) {
  const copy = svg.cloneNode(true);
  copy.setAttribute("xmlns", SVGNS);
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
