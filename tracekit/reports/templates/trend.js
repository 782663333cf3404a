/* tracekit trend page: draws every figure from the embedded JSON payload (see
 * tracekit/reports/trend_html.py). Trace text (run labels, sources, kernel names, change
 * texts) is inserted only as DOM text (textContent, append(string)) or, for plotly labels,
 * with <, > and & written as entities by esc() (plotly renders a subset of HTML). */
(function () {
  "use strict";
  const DATA = JSON.parse(document.getElementById("tracekit-data").textContent);
  const RUNS = DATA.runs, MOVES = DATA.moves, CATS = DATA.categories;
  const CONFIG = { displaylogo: false, responsive: true };
  const CAT_COLOURS = {
    gemm: "#4c78a8", attention: "#72b7b2", moe: "#54a24b", comm: "#e45756", elementwise: "#ff9da6",
    norm: "#9d755d", activation: "#eeca3b", quant: "#79706e", memory: "#bab0ac", sampling: "#d67195",
    other: "#c7c7c7",
  };
  const EXTRA_COLOURS = ["#f58518", "#b279a2", "#17becf", "#8c564b", "#bcbd22"];
  const MOVE_STYLE = { regression: ["#c0392b", "triangle-up"], improvement: ["#2e7d32", "triangle-down"] };
  const MAX_TICK = 28;  // characters of a run label on the x axis (the hover has it whole)
  const MAX_TICKS = 40;  // labelled runs on the x axis; more runs: every k-th is labelled
  const MAX_HOVER = 140;  // characters of a change text in a marker's hover
  const HOVER_CHANGES = 3;  // changes named in a marker's hover
  const POS = new Map(RUNS.map((r, i) => [r.index, i]));  // run index -> x position
  const STILL = window.matchMedia && window.matchMedia("(prefers-reduced-motion: reduce)").matches;

  // ---------- helpers ----------
  function ms(ns) { return ns === null || ns === undefined ? null : ns / 1e6; }
  function cut(text, n) { text = String(text ?? ""); return text.length > n ? text.slice(0, n - 1) + "…" : text; }
  function signedNs(ns) { return ns === null || ns === undefined ? "-" : (ns > 0 ? "+" : ns < 0 ? "−" : "") + fmtNs(Math.abs(ns)); }
  function signedPct(r) { return r === null || r === undefined ? "-" : (r > 0 ? "+" : r < 0 ? "−" : "") + fmtPct(Math.abs(r)); }
  function median(run) { return run && run.step_ns ? run.step_ns.median : null; }
  function runLabel(index) { const p = POS.get(index); return p === undefined ? "run " + index : String(RUNS[p].label); }
  function moveName(m) { return runLabel(m.from) + " → " + runLabel(m.to); }
  function plural(n, word) { return fmtInt(n) + " " + word + (n === 1 ? "" : "s"); }
  function table(head, classes) {
    const t = el("table", {});
    t.append(el("tr", {}, ...head.map((h, i) => el("th", { class: (classes || [])[i] || "", text: h }))));
    return t;
  }
  function cell(content, cls) {
    const td = el("td", { class: cls || "" });
    if (content instanceof Node) td.append(content); else td.textContent = content;
    return td;
  }
  function status(text) { return el("span", { class: "status status-" + String(text).replace(/\W+/g, "-"), text }); }
  function names(list, more) {  // kernel names as code elements (text only)
    const box = el("span", {});
    for (const n of list || []) box.append(el("code", { text: n }));
    if (more) box.append(el("span", { class: "note", text: "+" + fmtInt(more) + " more" }));
    return box;
  }
  function roleNames(row) {  // base names → head names
    const box = el("span", {}, names(row.base_names, row.base_more));
    const same = JSON.stringify(row.base_names) === JSON.stringify(row.head_names) && !row.base_more && !row.head_more;
    if (!same && (row.head_names || []).length) box.append(" → ", names(row.head_names, row.head_more));
    return box;
  }

  // ---------- header ----------
  function buildHeader() {
    const base = RUNS[POS.get(DATA.baseline)];
    const parts = [plural(DATA.runs_total, "run")];
    if (base) parts.push("baseline: " + base.label);
    if (DATA.ordered_by) parts.push("ordered by " + DATA.ordered_by);
    if (DATA.threshold !== null && DATA.threshold !== undefined) parts.push("threshold " + fmtPct(DATA.threshold));
    if (DATA.min_impact !== null && DATA.min_impact !== undefined) parts.push("min impact " + fmtPct(DATA.min_impact));
    if (DATA.confidence) parts.push("confidence " + fmtPct(DATA.confidence));
    document.getElementById("subtitle").textContent = parts.join(" · ");
    const alerts = document.getElementById("alerts");
    for (const w of DATA.warnings || []) alerts.append(el("div", { class: "alert", text: "⚠ " + w }));
    const o = DATA.omitted;
    if (o) {
      document.getElementById("omitted-note").textContent = "The page draws " + fmtInt(RUNS.length) + " of " +
        fmtInt(DATA.runs_total) + " runs: the baseline and the most recent. The " + plural(o.runs, "older run") +
        " (" + o.first + " … " + o.last + ") are aggregated: their median step time ranged " + fmtNs(o.median_min) +
        " – " + fmtNs(o.median_max) + ", with " + plural(o.significant, "significant move") + " (listed below the moves).";
    }
  }

  // ---------- the chart ----------
  function explanation(m) {  // the hover of a move's marker (entity-escaped)
    const lines = [esc(moveName(m)) + ": <b>" + esc(m.status) + "</b> " + signedNs(m.delta_ns) + " (" + signedPct(m.rel) + ")"];
    for (const c of (m.changes || []).slice(0, HOVER_CHANGES)) lines.push("• " + esc(cut(c.text, MAX_HOVER)));
    const rest = (m.changes || []).length - HOVER_CHANGES + (m.changes_more || 0);
    if (rest > 0) lines.push("… " + plural(rest, "more change"));
    if (m.explained_share !== null && m.explained_share !== undefined) lines.push("explained: " + fmtPct(m.explained_share) + " of the move");
    lines.push("<i>click for details</i>");
    return lines.join("<br>");
  }
  function xAxis() {
    const every = Math.max(1, Math.ceil(RUNS.length / MAX_TICKS));
    const vals = RUNS.map((_, i) => i).filter((i) => i % every === 0 || i === POS.get(DATA.baseline));
    return { tickmode: "array", tickvals: vals, ticktext: vals.map((i) => esc(cut(RUNS[i].label, MAX_TICK))),
      range: [-0.6, Math.max(0, RUNS.length - 1) + 0.6], zeroline: false, anchor: "y2", automargin: true,
      title: { text: "run" } };
  }
  function lineTrace() {
    const x = [], y = [], up = [], down = [], custom = [];
    RUNS.forEach((r, i) => {
      if (i > 0 && r.index !== RUNS[i - 1].index + 1 && i === 1 && DATA.omitted) {  // the baseline drawn apart
        x.push(0.5); y.push(null); up.push(null); down.push(null); custom.push(null);
      }
      const s = r.step_ns || {}, mid = s.median ?? null;
      x.push(i); y.push(ms(mid));
      up.push(mid !== null && s.hi !== null && s.hi !== undefined ? ms(s.hi - mid) : null);
      down.push(mid !== null && s.lo !== null && s.lo !== undefined ? ms(mid - s.lo) : null);
      const vs = r.vs_baseline || {};
      custom.push([esc(r.label), fmtNs(mid), fmtNs(s.lo), fmtNs(s.hi),
        r.index === DATA.baseline ? "the baseline" : signedNs(vs.delta_ns) + " (" + signedPct(vs.rel) + ") vs baseline",
        fmtInt(r.steps)]);
    });
    return { type: "scatter", mode: "lines+markers", name: "median step", meta: "median", x, y, customdata: custom,
      line: { color: "#1d2330", width: 1.5 }, marker: { size: 7, color: "#1d2330" }, xaxis: "x", yaxis: "y",
      error_y: { type: "data", symmetric: false, array: up, arrayminus: down, color: "#5b6474", thickness: 1.2, width: 4 },
      hovertemplate: "<b>%{customdata[0]}</b><br>median %{customdata[1]} [%{customdata[2]} – %{customdata[3]}]" +
        "<br>%{customdata[4]} · %{customdata[5]} steps<extra></extra>" };
  }
  function baselineTrace() {
    const i = POS.get(DATA.baseline);
    if (i === undefined) return null;
    return { type: "scatter", mode: "markers", name: "baseline", meta: "baseline", x: [i], y: [ms(median(RUNS[i]))],
      marker: { symbol: "star", size: 17, color: "#f5b800", line: { color: "#1d2330", width: 1 } }, xaxis: "x", yaxis: "y",
      customdata: [esc(RUNS[i].label)], hovertemplate: "baseline: %{customdata}<extra></extra>" };
  }
  function moveTraces() {
    const out = [];
    for (const [name, [color, symbol]] of Object.entries(MOVE_STYLE)) {
      const idx = MOVES.map((_, k) => k).filter((k) => MOVES[k].significant && MOVES[k].status === name &&
        POS.has(MOVES[k].from) && POS.has(MOVES[k].to));
      if (!idx.length) continue;
      const at = (k) => {
        const a = ms(median(RUNS[POS.get(MOVES[k].from)])), b = ms(median(RUNS[POS.get(MOVES[k].to)]));
        return a === null ? b : b === null ? a : (a + b) / 2;
      };
      out.push({ type: "scatter", mode: "markers", name: name + " (" + idx.length + ")", meta: "move",
        x: idx.map((k) => (POS.get(MOVES[k].from) + POS.get(MOVES[k].to)) / 2), y: idx.map(at),
        marker: { symbol, size: 15, color, line: { color: "#fff", width: 1.5 } }, xaxis: "x", yaxis: "y",
        customdata: idx.map((k) => [k, explanation(MOVES[k])]), hovertemplate: "%{customdata[1]}<extra></extra>",
        hoverlabel: { align: "left" } });
    }
    return out;
  }
  function barTraces() {
    return CATS.map((cat, j) => ({
      type: "bar", name: esc(cat), meta: "category", x: RUNS.map((_, i) => i),
      y: RUNS.map((r) => ms((r.categories || {})[cat] || 0)), xaxis: "x", yaxis: "y2",
      marker: { color: CAT_COLOURS[cat] || EXTRA_COLOURS[j % EXTRA_COLOURS.length] },
      customdata: RUNS.map((r) => esc(r.label)),
      hovertemplate: "%{customdata}<br>" + esc(cat) + ": %{y:.3f} ms per step<extra></extra>",
    }));
  }
  function drawChart() {
    const div = document.getElementById("plot-trend");
    if (!RUNS.length) {
      return Plotly.newPlot(div, [], { height: 160, xaxis: { visible: false }, yaxis: { visible: false },
        annotations: [{ text: "no run", showarrow: false, xref: "paper", yref: "paper", x: 0.5, y: 0.5 }] }, CONFIG);
    }
    const base = median(RUNS[POS.get(DATA.baseline)]);
    const shapes = base === null || base === undefined ? [] : [{ type: "line", xref: "paper", x0: 0, x1: 1, yref: "y",
      y0: ms(base), y1: ms(base), line: { color: "#f5b800", dash: "dot", width: 1.5 } }];
    const data = [...barTraces(), lineTrace(), baselineTrace(), ...moveTraces()].filter((t) => t);
    const layout = { height: 640, margin: { t: 40, r: 10, b: 60, l: 70 }, barmode: "stack", hovermode: "closest",
      legend: { orientation: "h", x: 0, y: 1.02, yanchor: "bottom", traceorder: "normal" }, shapes, xaxis: xAxis(),
      yaxis: { domain: [0.44, 1], title: { text: "median step (ms)" }, anchor: "x" },
      yaxis2: { domain: [0, 0.36], title: { text: "category (ms / step)" }, anchor: "x", rangemode: "tozero" } };
    return Plotly.newPlot(div, data, layout, CONFIG).then((gd) => {
      gd.on("plotly_click", (ev) => {
        const p = ev.points && ev.points.find((q) => q.data.meta === "move");
        if (p) openMove(p.customdata[0], null);
      });
      return gd;
    });
  }

  // ---------- the details panel ----------
  let opener = null;
  function changesTable(m) {
    const t = table(["kind", "change", "Δ per step", "share", "matched by", "kernels"], ["text", "text", "", "", "text", "text"]);
    for (const c of m.changes) {
      t.append(el("tr", {}, cell(c.kind || "-", "text"), cell(c.text || "-", "text"), cell(signedNs(c.delta_ns)),
        cell(fmtPct(c.share)), cell(c.matched_by || "-", "text"), cell(roleNames(c), "text")));
    }
    return t;
  }
  function matchedTable(m) {
    const t = table(["role", "matched by", "kernels (before → after)", "Δ per step"], ["text", "text", "text", ""]);
    for (const r of m.matched) {
      t.append(el("tr", {}, cell(r.label || "-", "text"), cell(r.matched_by || "-", "text"), cell(roleNames(r), "text"),
        cell(signedNs(r.delta_ns))));
    }
    return t;
  }
  function openMove(k, from) {
    const m = MOVES[k], box = document.getElementById("move-detail");
    if (!m) return;
    opener = from;
    box.hidden = false;
    box.className = m.significant ? m.status : "";
    box.dataset.move = String(k);
    document.getElementById("move-title").textContent = moveName(m) + ": " + m.status;
    const a = median(RUNS[POS.get(m.from)]), b = median(RUNS[POS.get(m.to)]);
    let text = "Median step time " + fmtNs(a) + " → " + fmtNs(b) + ": " + signedNs(m.delta_ns) + " (" + signedPct(m.rel) + ")";
    if (m.lo !== null && m.lo !== undefined) text += ", confidence interval " + signedNs(m.lo) + " … " + signedNs(m.hi);
    if (m.explained_share !== null && m.explained_share !== undefined) text += "; the changes below explain " + fmtPct(m.explained_share) + " of it";
    document.getElementById("move-summary").textContent = text + ".";
    const changes = document.getElementById("move-changes");
    changes.replaceChildren(el("h4", { text: "Changes, by share of the move" }));
    if (m.changes.length) changes.append(changesTable(m));
    else changes.append(el("p", { text: "No change above the floor." }));
    if (m.changes_more) changes.append(el("p", { class: "note", text: plural(m.changes_more, "smaller change") + " not shown." }));
    if (!m.detailed) {
      changes.append(el("p", { class: "note", text: "This page carries the kernel names and matched roles of the significant " +
        "and the most recent moves only" + (m.matched_more ? " (this move matched " + plural(m.matched_more, "role") + " by other names)" : "") +
        "; the trend's JSON output (--format json) has every move in full." }));
    }
    const matched = document.getElementById("move-matched");
    matched.replaceChildren();
    if (m.matched.length) {
      matched.append(el("h4", { text: "Kernels matched by role (other names on the two sides)" }), matchedTable(m));
      if (m.matched_more) matched.append(el("p", { class: "note", text: plural(m.matched_more, "more role") + " not shown." }));
    }
    const warnings = document.getElementById("move-warnings");
    warnings.replaceChildren();
    if (m.warnings.length) warnings.append(el("ul", {}, ...m.warnings.map((w) => el("li", { text: "⚠ " + w }))));
    document.querySelectorAll("#moves-table tr.selected").forEach((r) => r.classList.remove("selected"));
    document.querySelectorAll("#moves-table tr[data-move='" + k + "']").forEach((r) => r.classList.add("selected"));
    box.scrollIntoView({ behavior: STILL ? "auto" : "smooth", block: "nearest" });
    document.getElementById("move-title").focus({ preventScroll: true });
  }
  function closeMove() {
    document.getElementById("move-detail").hidden = true;
    document.querySelectorAll("#moves-table tr.selected").forEach((r) => r.classList.remove("selected"));
    if (opener) opener.focus();
  }

  // ---------- tables ----------
  function buildMoves() {
    const box = document.getElementById("moves-table");
    if (!MOVES.length) { box.append(el("p", { text: "No moves: fewer than two runs." })); return; }
    const t = table(["move", "status", "Δ median", "confidence interval", "explained", "change", "Δ per step", "share",
      "matched by", ""], ["text", "text", "", "", "", "text", "", "", "text", ""]);
    t.classList.add("moves");
    MOVES.forEach((m, k) => {
      const rows = m.changes.length ? m.changes : [null];
      const span = String(rows.length + (m.changes_more ? 1 : 0));
      rows.forEach((c, j) => {
        const tr = el("tr", { "data-move": String(k), class: (j ? "" : "move-first") + (m.significant ? " significant" : "") });
        if (!j) {
          const button = el("button", { type: "button", class: "open-move", "data-move": String(k), text: "Details",
            "aria-label": "Details of the move " + moveName(m) });
          button.addEventListener("click", () => openMove(k, button));
          const ci = m.lo === null || m.lo === undefined ? "-" : signedNs(m.lo) + " … " + signedNs(m.hi);
          for (const td of [cell(moveName(m), "text move"), cell(status(m.status), "text"),
            cell(signedNs(m.delta_ns) + " (" + signedPct(m.rel) + ")"), cell(ci), cell(fmtPct(m.explained_share))]) {
            td.setAttribute("rowspan", span);
            tr.append(td);
          }
          tr.dataset.first = "1";
          tr.append(...(c ? changeCells(c) : [cell("no change above the floor", "text note"), cell(""), cell(""), cell("")]));
          const last = cell(button);
          last.setAttribute("rowspan", span);
          tr.append(last);
        } else tr.append(...changeCells(c));
        t.append(tr);
      });
      if (m.changes_more) {
        t.append(el("tr", { "data-move": String(k) }, el("td", { class: "text note", colspan: "4",
          text: plural(m.changes_more, "smaller change") + " not shown" })));
      }
    });
    box.append(t);
  }
  function changeCells(c) {
    return [cell(c.text || "-", "text"), cell(signedNs(c.delta_ns)), cell(fmtPct(c.share)), cell(c.matched_by || "-", "text")];
  }
  function buildOmittedMoves() {
    const o = DATA.omitted;
    if (!o || !o.moves.length) return;
    const box = document.getElementById("omitted-moves");
    box.append(el("h3", { text: "Significant moves among the " + plural(o.runs, "older run") + " (not drawn)" }));
    const t = table(["move", "status", "Δ median", "top change"], ["text", "text", "", "text"]);
    for (const m of o.moves) {
      t.append(el("tr", {}, cell(m.from_label + " → " + m.to_label, "text"), cell(status(m.status), "text"),
        cell(signedNs(m.delta_ns) + " (" + signedPct(m.rel) + ")"), cell(m.text || "-", "text")));
    }
    box.append(t);
    if (o.significant > o.moves.length) box.append(el("p", { class: "note", text: "The " + o.moves.length + " largest of " + fmtInt(o.significant) + "." }));
  }
  function buildRuns() {
    const box = document.getElementById("runs-table");
    if (!RUNS.length) { box.append(el("p", { text: "No run." })); return; }
    const t = table(["#", "run", "date", "format", "vendor", "steps", "phase", "median step", "confidence interval",
      "vs baseline", "fallback", "exposed comm", "efficiency", "warnings"],
    ["", "text", "text", "text", "text", "", "text", "", "", "", "", "", "", "text"]);
    t.classList.add("runs");
    for (const r of RUNS) {
      const s = r.step_ns || {}, vs = r.vs_baseline || {}, isBase = r.index === DATA.baseline;
      const label = el("span", {}, el("span", { text: r.label }));
      if (isBase) label.append(el("span", { class: "note", text: " (baseline)" }));
      if (r.source && r.source !== r.label) label.append(el("div", { class: "note", text: r.source }));
      const warn = r.warnings.length ? el("ul", {}, ...r.warnings.map((w) => el("li", { text: w }))) : "-";
      t.append(el("tr", { "data-run": String(r.index), class: isBase ? "baseline" : "" }, cell(String(r.index)), cell(label, "text"),
        cell(r.date || "-", "text"), cell(r.format || "-", "text"), cell(r.vendor || "-", "text"), cell(fmtInt(r.steps)),
        cell((r.phase || "-") + (r.steps_by ? " · by " + r.steps_by : ""), "text"), cell(fmtNs(s.median)),
        cell(fmtNs(s.lo) + " – " + fmtNs(s.hi)), cell(isBase ? "-" : signedNs(vs.delta_ns) + " (" + signedPct(vs.rel) + ")"),
        cell(fmtNs(r.fallback_ns)), cell(fmtNs(r.exposed_comm_ns)), cell(fmtPct(r.efficiency)), cell(warn, "text")));
    }
    box.append(t);
  }

  // ---------- start ----------
  buildHeader();
  buildMoves();
  buildOmittedMoves();
  buildRuns();
  document.getElementById("move-close").addEventListener("click", closeMove);
  document.getElementById("move-detail").addEventListener("keydown", (ev) => { if (ev.key === "Escape") closeMove(); });
  drawChart().then(() => document.body.setAttribute("data-ready", "1"));
})();
