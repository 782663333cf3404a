/* Helpers shared by the report and the cluster page: tracekit/reports/html.py puts this
 * file in front of each page's script, in the same script element. */
function esc(value) {  // text for plotly labels: no markup
  return String(value === null || value === undefined ? "" : value)
    .replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
}
function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (key === "class") node.className = value;
    else if (key === "text") node.textContent = value;
    else node.setAttribute(key, value);
  }
  for (const child of children) if (child !== null && child !== undefined) node.append(child);
  return node;
}
function fmtNs(ns) {
  if (ns === null || ns === undefined || Number.isNaN(ns)) return "-";
  const a = Math.abs(ns);
  if (a < 1e3) return ns.toFixed(0) + " ns";
  if (a < 1e6) return (ns / 1e3).toFixed(2) + " µs";
  if (a < 1e9) return (ns / 1e6).toFixed(2) + " ms";
  return (ns / 1e9).toFixed(3) + " s";
}
function fmtPct(r) { return r === null || r === undefined ? "-" : (100 * r).toFixed(1) + "%"; }
function fmtInt(n) { return n === null || n === undefined ? "-" : Number(n).toLocaleString("en-US"); }
