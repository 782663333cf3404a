/* tracekit report: draws every figure from the embedded JSON payload (see tracekit/reports/html.py).
 * Trace text is inserted only as DOM text (textContent, append(string), setAttribute) or,
 * for plotly labels, with <, > and & written as entities (plotly renders a subset of HTML). */
(function () {
  "use strict";
  const DATA = JSON.parse(document.getElementById("tracekit-data").textContent);
  const TRACES = DATA.traces;
  const MAX_PANELS = 8;
  const MAX_BARS = 400;  // more steps than this: stacked areas (one path) instead of bars
  const CONFIG = { displaylogo: false, responsive: true };
  const CLASS_STYLE = {
    "fallback": ["#f58518", "x"], "fused comm": ["#8e44ad", "/"], "communication": ["#e45756", ""],
    gemm: ["#4c78a8", ""], attention: ["#72b7b2", ""], moe: ["#54a24b", ""],
    elementwise: ["#ff9da6", ""], norm: ["#9d755d", ""], activation: ["#eeca3b", ""],
    quant: ["#79706e", ""], memory: ["#bab0ac", ""], sampling: ["#d67195", ""], other: ["#c7c7c7", ""],
    comm: ["#e45756", ""],
  };
  const TIME_PARTS = [
    ["compute", "#4c78a8"], ["exposed communication", "#e45756"],
    ["other busy", "#bab0ac"], ["idle", "#e8e8e8"],
  ];
  const SEVERITY_ORDER = { error: 0, warning: 1, info: 2 };

  // ---------- helpers ----------
  function table(head, rows, classes) {
    const t = el("table", {});
    t.append(el("tr", {}, ...head.map((h, i) => el("th", { class: (classes || [])[i] || "", text: h }))));
    for (const row of rows) {
      t.append(el("tr", {}, ...row.map((cell, i) => {
        const td = el("td", { class: (classes || [])[i] || "" });
        if (cell instanceof Node) td.append(cell); else td.textContent = cell;
        return td;
      })));
    }
    return t;
  }
  function column(trace, name, idx) { const c = trace.steps[name]; return idx.map((i) => c[i]); }

  // ---------- panels: one per (trace, rank, device) ----------
  const PANELS = [];
  TRACES.forEach((trace, ti) => {
    const series = trace.overview.series;
    for (const [rank, device] of series) {
      const idx = [];
      trace.steps.step.forEach((_, i) => {
        if (trace.steps.rank[i] === rank && trace.steps.device[i] === device) idx.push(i);
      });
      let label = TRACES.length > 1 ? trace.overview.label : "";
      if (series.length > 1) label += (label ? " · " : "") + "rank " + rank + " dev " + device;
      // many steps (trace.step_bins): bins of consecutive steps drawn instead of every step
      const bins = trace.step_bins ? trace.step_bins.bins : null, bidx = [];
      if (bins) bins.count.forEach((_, i) => { if (bins.rank[i] === rank && bins.device[i] === device) bidx.push(i); });
      PANELS.push({ ti, rank, device, idx, bins, bidx, label: label || trace.overview.label });
    }
  });
  const AGGREGATED = TRACES.filter((t) => t.step_bins);
  if (AGGREGATED.length) {  // say what the page aggregated, above the first chart
    const note = el("div", { id: "aggregation-note", class: "note" });
    AGGREGATED.forEach((t) => note.append(el("p", { text: (TRACES.length > 1 ? t.overview.label + ": " : "") + t.step_bins.note })));
    document.getElementById("plot-time").before(note);
  }
  function binColumn(p, name) {  // a bin column of a panel; a category no step has: zeros
    const c = p.bins[name];
    return p.bidx.map((i) => (c ? c[i] : 0));
  }
  function binX(p) { return p.bidx.map((i) => (p.bins.first[i] + p.bins.last[i]) / 2); }
  function binText(p) {
    return p.bidx.map((i) => "steps " + p.bins.first[i] + "–" + p.bins.last[i] + " (" + p.bins.phase[i] + ", " + fmtInt(p.bins.count[i]) + ")");
  }
  function area(trace, panel, color) {  // a stacked area of bin means
    return Object.assign(trace, { type: "scatter", mode: "lines", stackgroup: "p" + panel,
      line: { width: 0.5, color }, fillcolor: color });
  }
  const SHOWN = PANELS.slice(0, MAX_PANELS);
  if (PANELS.length > MAX_PANELS) {
    document.getElementById("panel-note").textContent =
      "Bars show the first " + MAX_PANELS + " of " + PANELS.length +
      " devices; the duration and overlap lines show all of them.";
  }
  function xDomains(n) {
    const gap = n > 1 ? 0.03 : 0;
    return Array.from({ length: n }, (_, i) => [i / n + (i ? gap / 2 : 0), (i + 1) / n - (i < n - 1 ? gap / 2 : 0)]);
  }
  function panelAxes(layout, n) {  // side-by-side columns sharing one y axis
    xDomains(n).forEach((domain, i) => {
      layout["xaxis" + (i ? i + 1 : "")] = stepAxis({ domain, anchor: "y" });
    });
    if (n > 1) {
      layout.annotations = SHOWN.map((p, i) => ({
        text: esc(p.label), showarrow: false, xref: "x" + (i ? i + 1 : "") + " domain", x: 0.5,
        yref: "paper", y: 1.0, yanchor: "bottom", font: { size: 12 },
      }));
    }
    return layout;
  }
  function stepAxis(extra) {  // integer ticks: one per step for short traces, else automatic
    const n = Math.max(0, ...TRACES.map((t) => (t.step_bins ? t.step_bins.rows : t.steps.step.length)));
    return Object.assign({ title: { text: "step" } }, n <= 30 ? { dtick: 1 } : {}, extra || {});
  }
  function ms(values) { return values.map((v) => (v === null ? null : v / 1e6)); }
  function stacked(trace, panel, color) {  // a bar series, or a stacked area for long traces
    if (trace.x.length <= MAX_BARS) return Object.assign(trace, { type: "bar", marker: { color } });
    return Object.assign(trace, { type: "scatter", mode: "lines", stackgroup: "p" + panel,
      line: { width: 0.5, color }, fillcolor: color });
  }

  // ---------- per-step figures ----------
  function drawTime() {
    const data = [];
    SHOWN.forEach((p, i) => {
      if (p.bins) {  // means per bin
        const x = binX(p), text = binText(p), busy = binColumn(p, "mean_busy_ns");
        const compute = binColumn(p, "mean_compute_ns"), exposed = binColumn(p, "mean_exposed_comm_ns");
        const other = busy.map((b, k) => Math.max(b - compute[k] - exposed[k], 0));
        const parts = [compute, exposed, other, binColumn(p, "mean_idle_ns")];
        TIME_PARTS.forEach(([name, color], k) => data.push(area({
          name, x, y: ms(parts[k]), text, legendgroup: name, showlegend: i === 0,
          xaxis: "x" + (i ? i + 1 : ""), yaxis: "y", meta: [p.ti],
          hovertemplate: "%{text}<br>" + name + ": %{y:.3f} ms (mean)<extra>" + esc(p.label) + "</extra>",
        }, i, color)));
        return;
      }
      const t = TRACES[p.ti], idx = p.idx;
      const step = column(t, "step", idx), busy = column(t, "busy_ns", idx);
      const compute = column(t, "compute_ns", idx), exposed = column(t, "exposed_comm_ns", idx);
      const other = busy.map((b, k) => Math.max(b - compute[k] - exposed[k], 0));
      const parts = [compute, exposed, other, column(t, "idle_ns", idx)];
      TIME_PARTS.forEach(([name, color], k) => {
        data.push(stacked({
          name, x: step, y: ms(parts[k]), legendgroup: name,
          showlegend: i === 0, xaxis: "x" + (i ? i + 1 : ""), yaxis: "y", meta: [p.ti],
          hovertemplate: "step %{x}<br>" + name + ": %{y:.3f} ms<extra>" + esc(p.label) + "</extra>",
        }, i, color));
      });
    });
    const layout = panelAxes({
      barmode: "stack", height: 340, margin: { t: 40, r: 10, b: 40, l: 60 },
      yaxis: { title: { text: "ms" } }, legend: { orientation: "h", y: 1.18 },
      title: { text: "Step time: compute, exposed communication, other busy, idle", font: { size: 14 } },
    }, SHOWN.length);
    layout.margin.t = 80;
    return plot("plot-time", data, layout);
  }

  function drawCategories() {
    const data = [];
    SHOWN.forEach((p, i) => {
      if (p.bins) {  // means per bin, the median step time as the line
        const x = binX(p), text = binText(p), ax = "x" + (i ? i + 1 : "");
        for (const cat of DATA.categories) {
          const values = binColumn(p, "mean_cat_" + cat + "_ns");
          if (!values.some((v) => v > 0)) continue;
          const [color] = CLASS_STYLE[cat] || ["#999"];
          data.push(area({
            name: cat, x, y: ms(values), text, legendgroup: cat,
            showlegend: !data.some((d) => d.name === cat), xaxis: ax, yaxis: "y", meta: [p.ti],
            hovertemplate: "%{text}<br>" + cat + ": %{y:.3f} ms (mean)<extra>" + esc(p.label) + "</extra>",
          }, i, color));
        }
        data.push({
          type: "scatter", mode: "lines", name: "step duration (median)", x, y: ms(binColumn(p, "median")), text,
          line: { color: "#1d2330", width: 1.5 }, legendgroup: "dur", showlegend: i === 0, xaxis: ax, yaxis: "y",
          meta: [p.ti], hovertemplate: "%{text}: median %{y:.3f} ms<extra>" + esc(p.label) + "</extra>",
        });
        return;
      }
      const t = TRACES[p.ti], step = column(t, "step", p.idx), ax = "x" + (i ? i + 1 : "");
      for (const cat of DATA.categories) {
        const values = column(t, "cat_" + cat + "_ns", p.idx);
        if (!values.some((v) => v > 0)) continue;
        const [color] = CLASS_STYLE[cat] || ["#999"];
        data.push(stacked({
          name: cat, x: step, y: ms(values), legendgroup: cat,
          showlegend: !data.some((d) => d.name === cat), xaxis: ax, yaxis: "y", meta: [p.ti],
          hovertemplate: "step %{x}<br>" + cat + ": %{y:.3f} ms<extra>" + esc(p.label) + "</extra>",
        }, i, color));
      }
      data.push({
        type: "scatter", mode: step.length > MAX_BARS ? "lines" : "lines+markers", name: "step duration", x: step,
        y: ms(column(t, "dur", p.idx)), line: { color: "#1d2330", width: 1.5 }, marker: { size: 4 },
        legendgroup: "dur", showlegend: i === 0, xaxis: ax, yaxis: "y", meta: [p.ti],
        hovertemplate: "step %{x}: %{y:.3f} ms<extra>" + esc(p.label) + "</extra>",
      });
    });
    const layout = panelAxes({
      barmode: "stack", height: 340, margin: { t: 80, r: 10, b: 40, l: 60 },
      yaxis: { title: { text: "ms (sum over streams)" } }, legend: { orientation: "h", y: 1.18 },
      title: { text: "Kernel time by category", font: { size: 14 } },
    }, SHOWN.length);
    return plot("plot-categories", data, layout);
  }

  function drawDurations() {
    const data = [];
    PANELS.forEach((p) => {
      if (p.bins) { data.push(...binnedDurations(p)); return; }
      const t = TRACES[p.ti], step = column(t, "step", p.idx), dur = ms(column(t, "dur", p.idx));
      const out = p.idx.map((i) => t.steps.outlier[i]);
      data.push({
        type: "scatter", mode: step.length > MAX_BARS ? "lines" : "lines+markers", name: esc(p.label),
        x: step, y: dur, meta: [p.ti],
        hovertemplate: "step %{x}: %{y:.3f} ms<extra>" + esc(p.label) + "</extra>",
      });
      const ox = step.filter((_, k) => out[k]), oy = dur.filter((_, k) => out[k]);
      if (ox.length) {
        data.push({
          type: "scatter", mode: "markers", name: "outlier · " + esc(p.label), x: ox, y: oy,
          marker: { symbol: "circle-open", size: step.length > MAX_BARS ? 6 : 13, color: "#c0392b", line: { width: 2 } },
          meta: [p.ti],
          hovertemplate: "outlier: step %{x}, %{y:.3f} ms<extra>" + esc(p.label) + "</extra>",
        });
      }
    });
    return plot("plot-durations", data, {
      height: 300, margin: { t: 40, r: 10, b: 40, l: 60 }, showlegend: true,
      title: { text: "Step duration (outliers circled: outside Tukey's fences)", font: { size: 14 } },
      xaxis: stepAxis(), yaxis: { title: { text: "ms" } },
    });
  }

  function binnedDurations(p) {  // p10–p90 band, median line, the kept extreme steps as points
    const t = TRACES[p.ti], x = binX(p), text = binText(p), label = esc(p.label);
    const step = column(t, "step", p.idx), dur = ms(column(t, "dur", p.idx));
    return [
      { type: "scatter", mode: "lines", x, y: ms(binColumn(p, "p10")), line: { width: 0, color: "#4c78a8" },
        legendgroup: "band" + p.ti + p.label, showlegend: false, hoverinfo: "skip", meta: [p.ti] },
      { type: "scatter", mode: "lines", name: "p10–p90 · " + label, x, y: ms(binColumn(p, "p90")), fill: "tonexty",
        fillcolor: "rgba(76,120,168,0.25)", line: { width: 0, color: "#4c78a8" }, legendgroup: "band" + p.ti + p.label,
        text, meta: [p.ti], hovertemplate: "%{text}: p90 %{y:.3f} ms<extra>" + label + "</extra>" },
      { type: "scatter", mode: "lines", name: "median · " + label, x, y: ms(binColumn(p, "median")), text,
        line: { color: "#1d2330", width: 1.5 }, meta: [p.ti],
        hovertemplate: "%{text}: median %{y:.3f} ms<extra>" + label + "</extra>" },
      { type: "scatter", mode: "markers", name: "slowest and fastest steps · " + label, x: step, y: dur,
        marker: { size: 6, color: p.idx.map((i) => (t.steps.outlier[i] ? "#c0392b" : "#4c78a8")) }, meta: [p.ti],
        hovertemplate: "step %{x}: %{y:.3f} ms<extra>" + label + "</extra>" },
    ];
  }

  function drawCommOverlap() {
    const data = PANELS.map((p) => {
      if (p.bins) {
        return {
          type: "scatter", mode: "lines", name: esc(p.label), x: binX(p), text: binText(p), meta: [p.ti],
          y: binColumn(p, "mean_comm_overlap_ratio").map((r) => (r === null ? null : 100 * r)),
          hovertemplate: "%{text}: %{y:.1f}% of communication overlapped (mean)<extra>" + esc(p.label) + "</extra>",
        };
      }
      const t = TRACES[p.ti];
      return {
        type: "scatter", mode: p.idx.length > MAX_BARS ? "lines" : "lines+markers", name: esc(p.label),
        x: column(t, "step", p.idx),
        y: column(t, "comm_overlap_ratio", p.idx).map((r) => (r === null ? null : 100 * r)),
        customdata: column(t, "exposed_comm_ns", p.idx).map(fmtNs), meta: [p.ti],
        hovertemplate: "step %{x}: %{y:.1f}% of communication overlapped, exposed %{customdata}<extra>" +
          esc(p.label) + "</extra>",
      };
    });
    return plot("plot-comm-overlap", data, {
      height: 280, margin: { t: 40, r: 10, b: 40, l: 60 }, showlegend: true,
      title: { text: "Compute-communication overlap per step (|comm ∩ compute| / |comm|)", font: { size: 14 } },
      xaxis: stepAxis(), yaxis: { title: { text: "%" }, range: [0, 105] },
    });
  }

  function drawOverlapMatrices() {
    const box = document.getElementById("overlap-matrices"), done = [];
    TRACES.forEach((t, ti) => {
      t.overlap.forEach((m, k) => {
        const id = "overlap-" + ti + "-" + k;
        const label = (TRACES.length > 1 ? t.overview.label + " · " : "") + "rank " + m.rank + " dev " + m.device;
        const names = m.streams.map((s) => "s" + s);
        const z = m.ns.map((row) => row.map((v) => v / 1e6));
        const more = m.streams_total > m.streams.length
          ? " (busiest " + m.streams.length + " of " + m.streams_total + " streams)" : "";
        box.append(el("div", { id, class: "plot" }));
        done.push(plot(id, [{
          type: "heatmap", x: names, y: names, z, colorscale: "Blues", reversescale: true, texttemplate: "%{z:.2f}",
          hovertemplate: "%{y} × %{x}: %{z:.3f} ms<extra></extra>", colorbar: { title: { text: "ms" } },
        }], {
          height: 120 + 34 * names.length, margin: { t: 40, r: 10, b: 50, l: 60 },
          title: { text: esc(label + more), font: { size: 13 } },
          yaxis: { autorange: "reversed", type: "category" }, xaxis: { type: "category" },
        }));
      });
    });
    return done;
  }

  function plot(id, data, layout) {
    const div = document.getElementById(id);
    return Plotly.newPlot(div, data, layout, CONFIG).then(() => {
      div.on("plotly_click", (ev) => {
        const pt = ev.points && ev.points[0];
        if (pt && pt.data.meta && typeof pt.x === "number") selectStep(pt.data.meta[0], pt.x, null, true);
      });
    });
  }

  // ---------- drill-down (Gantt) ----------
  const GANTT = [];
  function stepTimes(t) {  // step -> slowest window
    const out = new Map();
    t.steps.step.forEach((s, i) => out.set(s, Math.max(out.get(s) || 0, t.steps.dur[i])));
    return out;
  }
  function buildGantts() {
    const box = document.getElementById("gantts");
    TRACES.forEach((t, ti) => {
      const card = el("div", { class: "card" });
      card.append(el("h3", { text: t.overview.label }));
      const controls = el("div", { class: "controls" });
      const times = stepTimes(t);
      const select = el("select", { id: "step-select-" + ti, "aria-label": "step" });
      for (const [s, dur] of times) {
        const tags = Object.entries(t.defaults).filter(([, v]) => v === s).map(([k]) => k);
        const missing = t.gantt[String(s)] ? "" : " · events not embedded";
        select.append(el("option", { value: String(s), text: "step " + s + " · " + fmtNs(dur) +
          (tags.length ? " · " + tags.join(", ") : "") + missing }));
      }
      const buttons = {};
      for (const [name, s] of Object.entries(t.defaults)) {
        buttons[name] = el("button", { type: "button", "data-preset": name, text: name + " (step " + s + ")" });
        buttons[name].addEventListener("click", () => selectStep(ti, s, null, false));
        controls.append(buttons[name]);
      }
      controls.append(el("span", { text: "step:" }), select);
      select.addEventListener("change", () => selectStep(ti, Number(select.value), null, false));
      const note = el("p", { class: "note" });
      const focus = el("div", { class: "finding-focus", id: "finding-focus-" + ti });
      focus.hidden = true;
      const div = el("div", { class: "plot gantt", id: "gantt-" + ti });
      card.append(controls, focus, note, div);
      box.append(card);
      GANTT[ti] = { select, buttons, note, focus, div, card };
    });
  }
  function laneLabel(g, lane, single) {
    const [rank, device, stream] = g.lanes[lane];
    const s = stream === null ? "?" : stream;
    return single ? "stream " + s : "r" + rank + " d" + device + " s" + s;
  }
  function drawGantt(ti, step, finding) {
    const t = TRACES[ti], g = t.gantt[String(step)], box = GANTT[ti];
    box.select.value = String(step);
    for (const [name, b] of Object.entries(box.buttons)) b.classList.toggle("active", t.defaults[name] === step);
    box.div.setAttribute("data-step", String(step));
    box.div.setAttribute("data-finding", finding ? String(t.findings.indexOf(finding)) : "");
    showFinding(ti, finding);
    const layout = {
      barmode: "overlay", margin: { t: 40, r: 10, b: 45, l: 110 }, showlegend: true,
      legend: { orientation: "h", y: 1.0, yanchor: "bottom" },
      xaxis: { title: { text: "µs from the step's start" }, zeroline: true },
      yaxis: { type: "category", autorange: "reversed" }, shapes: [], hoverlabel: { align: "left" },
    };
    if (!g) {
      box.note.textContent = "Raw events of step " + step + " are not embedded in this report " +
        "(it keeps a few steps to stay small); rerun tracekit report with --steps " + step + ".";
      layout.height = 200;
      layout.annotations = [{ text: "step " + step + ": events not embedded", showarrow: false,
        xref: "paper", yref: "paper", x: 0.5, y: 0.5 }];
      return Plotly.react(box.div, [], layout, CONFIG);
    }
    const single = t.overview.series.length === 1;
    const lanes = g.lanes.map((_, i) => laneLabel(g, i, single));
    Object.assign(layout.yaxis, { categoryorder: "array", categoryarray: lanes });
    const byClass = new Map();
    g.start.forEach((_, i) => {
      const c = g.cls[i];
      if (!byClass.has(c)) byClass.set(c, []);
      byClass.get(c).push(i);
    });
    const data = [];
    // categories first, then fused comm, communication (thinner, so that the communication
    // side of a fused operator shows inside it) and fallbacks on top
    const layer = (c) => ({ fallback: 102, "fused comm": 100, communication: 101 })[DATA.classes[c]] || c;
    for (const [c, idx] of [...byClass.entries()].sort((a, b) => layer(a[0]) - layer(b[0]))) {
      const name = DATA.classes[c], [color, pattern] = CLASS_STYLE[name] || ["#999", ""];
      data.push({
        type: "bar", orientation: "h", name, y: idx.map((i) => lanes[g.lane[i]]),
        width: name === "communication" ? 0.45 : 0.8,
        base: idx.map((i) => g.start[i] / 1e3), x: idx.map((i) => Math.max(g.dur[i], 1) / 1e3),
        marker: { color, line: { width: 0 }, pattern: pattern ? { shape: pattern, fgcolor: "#222", size: 6 } : undefined },
        customdata: idx.map((i) => [
          esc(t.strings[g.name[i]]), fmtNs(g.dur[i]), fmtNs(g.start[i]), lanes[g.lane[i]],
          g.args[i] === null ? "" : esc(t.strings[g.args[i]]), DATA.kinds[g.kind[i]],
        ]),
        hovertemplate: "<b>%{customdata[0]}</b><br>%{customdata[5]} · " + name +
          " · %{customdata[1]} at +%{customdata[2]}<br>%{customdata[3]}<br>%{customdata[4]}<extra></extra>",
      });
    }
    const named = new Set(finding && finding.names ? finding.names : []);
    const outlined = g.start.map((_, i) => i).filter((i) => named.has(t.strings[g.name[i]]));
    if (outlined.length) {  // the events the finding's evidence names, outlined on top
      data.push({
        type: "bar", orientation: "h", name: "finding evidence", y: outlined.map((i) => lanes[g.lane[i]]), width: 0.95,
        base: outlined.map((i) => g.start[i] / 1e3), x: outlined.map((i) => Math.max(g.dur[i], 1) / 1e3),
        marker: { color: "rgba(0, 0, 0, 0)", line: { color: "#111", width: 2 } },
        customdata: outlined.map((i) => [esc(t.strings[g.name[i]]), fmtNs(g.dur[i]), fmtNs(g.start[i])]),
        hovertemplate: "<b>%{customdata[0]}</b><br>named in the finding's evidence · %{customdata[1]} at +%{customdata[2]}<extra></extra>",
      });
    }
    for (const [rank, device, , dur] of g.windows) {
      if (single) layout.shapes.push({ type: "line", x0: dur / 1e3, x1: dur / 1e3, yref: "paper", y0: 0, y1: 1,
        line: { color: "#555", dash: "dot", width: 1 } });
      void rank; void device;
    }
    if (finding && finding.evidence && Array.isArray(finding.evidence.ranges)) {
      const w = g.windows.find((x) => x[0] === finding.rank && x[1] === finding.device) || g.windows[0];
      for (const r of finding.evidence.ranges.slice(0, 200)) {
        if (!Array.isArray(r) || r.length < 2) continue;
        layout.shapes.push({ type: "rect", x0: (r[0] - w[2]) / 1e3, x1: (r[1] - w[2]) / 1e3, yref: "paper",
          y0: 0, y1: 1, fillcolor: "rgba(255, 196, 0, 0.28)", line: { width: 0 }, layer: "below" });
      }
    }
    layout.height = Math.max(220, 90 + 28 * lanes.length);
    let text = "Step " + step + ": " + fmtInt(g.total) + " device events on " + lanes.length + " streams";
    if (g.shown < g.total) text += "; showing the " + fmtInt(g.shown) + " longest (cap " + fmtInt(t.max_events) + ")";
    if (finding) {
      text += ". Highlighted: evidence of the " + finding.rule + " finding \u201c" + finding.title + "\u201d";
      if (outlined.length) text += " (" + fmtInt(outlined.length) + " events it names outlined)";
    }
    box.note.textContent = text + ".";
    return Plotly.react(box.div, data, layout, CONFIG);
  }
  function emptyGantt(ti) {
    GANTT[ti].note.textContent = "This trace has no device work in any step.";
    return Plotly.newPlot(GANTT[ti].div, [], { height: 200, annotations: [{ text: "no device work",
      showarrow: false, xref: "paper", yref: "paper", x: 0.5, y: 0.5 }] }, CONFIG);
  }
  function selectStep(ti, step, finding, scroll) {
    const done = drawGantt(ti, step, finding);
    if (scroll) GANTT[ti].card.scrollIntoView({ behavior: "smooth", block: "start" });
    return done;
  }

  // ---------- tables ----------
  function buildOverview() {
    const labels = TRACES.map((t) => t.overview.label);
    const o = TRACES.map((t) => t.overview);
    const sev = (f) => Object.entries(f).sort((a, b) => (SEVERITY_ORDER[a[0]] ?? 9) - (SEVERITY_ORDER[b[0]] ?? 9))
      .map(([k, v]) => v + " " + k).join(", ") || "none";
    const rows = [
      ["source", (x) => x.source || "-"], ["format", (x) => x.format || "-"], ["producer", (x) => x.producer || "-"],
      ["devices", (x) => x.devices.map((d) => d.index + ": " + (d.name || "?")).join(", ") || "-"],
      ["ranks", (x) => x.ranks.join(", ")], ["events", (x) => fmtInt(x.events) + " (" + fmtInt(x.work_events) + " device work)"],
      ["span", (x) => fmtNs(x.span_ns)],
      ["workload", (x) => workloadText(x.workload)],
      ["software stack", (x) => x.stack || "-"],
      ["steps", (x) => x.steps.count + " " + x.workload.unit + (x.steps.count === 1 ? "" : "s") + " by " +
        x.steps.method + " (confidence " + x.steps.confidence + ")"],
      ...(o.some((x) => x.workload.repetitions.length) ? [["repetitions", (x) => repetitionText(x.workload)]] : []),
      ["how steps were found", (x) => x.steps.detail + (x.steps.warnings.length ? " — " + x.steps.warnings.join("; ") : "")],
      ["phases", (x) => phaseText(x)],
      ["step time median / p90 / max" , (x) => (x.step_time_phase ? x.step_time_phase + " steps: " : "") +
        [x.step_time.median, x.step_time.p90, x.step_time.max].map(fmtNs).join(" / ")],
      ["rows placed by", (x) => Object.entries(x.steps.placement).filter(([, n]) => n > 0)
        .map(([k, n]) => fmtInt(n) + " " + k.replace("_", " ")).join(", ") || "-"],
      ["all steps (sum of windows)", (x) => fmtNs(x.totals.dur)],
      ["busy", (x) => fmtNs(x.totals.busy_ns)], ["compute", (x) => fmtNs(x.totals.compute_ns)],
      ["communication", (x) => fmtNs(x.totals.comm_ns)],
      ["exposed communication", (x) => fmtNs(x.totals.exposed_comm_ns)],
      ["fused comm kernels", (x) => fmtNs(x.totals.fused_comm_ns)],
      ["fallback kernels", (x) => fmtNs(x.totals.fallback_ns)],
      ["idle", (x) => fmtNs(x.totals.idle_ns)], ["bubbles", (x) => fmtNs(x.totals.bubble_ns)],
      ["findings", (x) => sev(x.findings)],
      ["checks", (x) => x.checks],
      ["parser warnings", (x) => (x.warnings.length ? x.warnings.join("; ") : "none")],
    ];
    const t = table(["", ...labels], rows.map(([name, f]) => [name, ...o.map(f)]), ["text"]);
    t.classList.add("overview");
    const captures = o.filter((x) => x.capture_note).map((x) =>  // an incomplete capture, said first
      el("p", { class: "capture-note", text: "⚠ " + (TRACES.length > 1 ? x.label + ": " : "") + x.capture_note }));
    document.getElementById("confidence").append(...captures);
    const notes = o.filter((x) => x.low_confidence).map((x) =>
      el("p", { class: "low-confidence", text: "⚠ " + (TRACES.length > 1 ? x.label + ": " : "") + x.low_confidence }));
    document.getElementById("confidence").append(...notes);
    document.getElementById("overview-table").append(t);
    document.getElementById("subtitle").textContent = labels.join(" · ");
  }
  function workloadText(w) {  // what the trace is, what one step is, and why
    const kinds = { decode: "LLM serving, decode", serving: "LLM serving with prefill",
      runs: "runs marked by the user's ranges", training: "training", microbenchmark: "micro-benchmark",
      single: "a single pass", unknown: "unknown" };
    return (kinds[w.kind] || w.kind) + " (" + w.confidence + "); step unit: " + w.unit +
      (w.evidence.length ? " — " + w.evidence.join("; ") : "");
  }
  function repetitionText(w) {  // a micro-benchmark's kernels: count, median, spread
    return w.repetitions.map((r) => r.name + " ×" + fmtInt(r.count) + ", median " + fmtNs(r.median_ns) +
      (r.spread == null ? "" : ", spread " + Math.round(r.spread * 100) + "%")).join("; ") || "-";
  }
  function phaseText(x) {  // step time per phase: a decode median never mixes prefill steps in
    if (!x.phases.length || (x.phases.length === 1 && x.phases[0].phase === "unknown")) return "unknown";
    const parts = x.phases.map((p) => p.phase + " " + p.steps + ": median " + fmtNs(p.median_ns) +
      (p.ns_per_token === null ? "" : ", " + fmtNs(p.ns_per_token) + "/token"));
    return parts.join("; ") + (x.steps.phase_method ? " (from " + x.steps.phase_method + ")" : "");
  }
  function buildStepTable() {
    const base = ["step", "rank", "device", "phase", "tokens", "dur", "ns_per_token", "busy_ns", "compute_ns", "comm_ns", "exposed_comm_ns",
      "comm_overlap_ratio", "fused_comm_ns", "fallback_ns", "bubble_ns", "idle_ns"];
    const box = document.getElementById("steps-table");
    TRACES.forEach((t) => {
      // the roofline's columns where some step of the trace has a roofline bound
      const cols = "roofline_ns" in t.steps ? [...base, "roofline_ns", "shaped_share", "bound"] : base;
      if (TRACES.length > 1) box.append(el("h3", { text: t.overview.label }));
      const n = Math.min(t.steps.step.length, 2000);
      const rows = [];
      for (let i = 0; i < n; i++) {
        rows.push(cols.map((c) => {
          const v = t.steps[c][i];
          if (v === null || v === undefined) return "-";
          return c === "comm_overlap_ratio" || c === "shaped_share" ? fmtPct(v) : c.endsWith("_ns") || c === "dur" || c === "ns_per_token" ? fmtNs(v) : String(v);
        }).concat(t.steps.outlier[i] ? ["outlier"] : [""]));
      }
      if (t.step_bins) box.append(binTable(t.step_bins));
      box.append(table([...cols.map((c) => DATA.labels[c] || c), ""], rows));
      if (n < t.steps.step.length) box.append(el("p", { class: "note", text: "First " + n + " of " + t.steps.step.length + " rows; all are in --format json." }));
    });
  }
  function binTable(sb) {  // the bins of an aggregated trace, then its kept steps' rows
    const b = sb.bins, n = Math.min(b.count.length, 2000), rows = [];
    for (let i = 0; i < n; i++) {
      rows.push([b.first[i] + "–" + b.last[i], String(b.rank[i]), String(b.device[i]), b.phase[i], fmtInt(b.count[i]),
        fmtNs(b.median[i]), fmtNs(b.p10[i]), fmtNs(b.p90[i]), fmtNs(b.min[i]), fmtNs(b.max[i]),
        fmtNs(b.mean_busy_ns[i]), fmtNs(b.mean_compute_ns[i]), fmtNs(b.mean_exposed_comm_ns[i]), fmtNs(b.mean_idle_ns[i])]);
    }
    const part = el("div", { class: "step-bins" });
    part.append(el("p", { class: "note", text: sb.note }));
    part.append(table(["steps", "rank", "dev", "phase", "count", "median", "p10", "p90", "min", "max",
      "busy (mean)", "compute (mean)", "exposed comm (mean)", "idle (mean)"], rows));
    part.append(el("p", { class: "note", text: "The slowest, fastest and drilled-down steps, one row each:" }));
    return part;
  }
  function buildChecks() {  // failing first, one row each
    const order = { fail: 0, warn: 1, pass: 2, skip: 3 };
    const box = document.getElementById("checks-list");
    TRACES.forEach((t) => {
      if (TRACES.length > 1) box.append(el("h3", { text: t.overview.label }));
      if (!t.checks.length) { box.append(el("p", { text: "No checks." })); return; }
      const rows = [...t.checks].sort((a, b) => (order[a.status] ?? 9) - (order[b.status] ?? 9)).map((c) => [
        el("span", { class: "sev sev-" + c.status, text: c.status }), c.name, c.detail]);
      box.append(table(["status", "check", "detail"], rows, ["", "text", "detail"]));
    });
  }
  function buildFindings() {  // per trace: the top findings by impact, the rest folded
    const box = document.getElementById("findings-list");
    TRACES.forEach((t, ti) => {
      const part = el("div", { class: "trace-findings", id: "findings-" + ti });
      if (TRACES.length > 1) part.append(el("h3", { text: t.overview.label }));
      box.append(part);
      if (!t.findings.length) { part.append(el("p", { text: "No findings." })); return; }
      const shown = t.findings_shown;
      part.append(findingTable(ti, t.findings.slice(0, shown), 0));
      const rest = t.findings.slice(shown);
      if (rest.length) {
        const more = el("details", { class: "more-findings" },
          el("summary", { text: fmtInt(rest.length) + " more finding" + (rest.length === 1 ? "" : "s") }));
        more.append(findingTable(ti, rest, shown));
        part.append(more);
      }
      if (t.findings_total > t.findings.length) {
        part.append(el("p", { class: "note", text: "The page carries the top " + fmtInt(t.findings.length) +
          " of " + fmtInt(t.findings_total) + " findings; tracekit report --format json has every one." }));
      }
    });
  }
  function findingTable(ti, list, offset) {
    const t = el("table", { class: "findings" });
    const head = ["#", "impact", "share", "severity", "rule", "finding", "steps", "advice"];
    const cls = ["num", "num", "num", "", "", "", "", ""];
    t.append(el("tr", {}, ...head.map((h, i) => el("th", { class: cls[i] || "text", text: h }))));
    list.forEach((f, k) => t.append(findingRow(ti, f, offset + k + 1)));
    return t;
  }
  function findingRow(ti, f, rank) {
    const drill = f.step !== null && f.step !== undefined;
    const row = el("tr", drill ? { class: "finding-row", tabindex: "0", "data-finding": String(rank - 1),
      "data-step": String(f.step), title: "Open step " + f.step + " (the worst) in the drill-down" }
      : { class: "finding-row no-step", "data-finding": String(rank - 1) });
    const what = el("td", { class: "what" },
      el("div", { class: "title one-line", title: f.title + (f.pattern ? "\npattern: " + f.pattern : ""), text: f.title }),
      el("div", { class: "detail one-line", title: f.detail, text: f.detail }));
    const where = el("td", { class: "where" }, el("div", { text: f.steps_text }));
    if (f.worst_text) where.append(el("div", { class: "note", text: f.worst_text }));
    row.append(
      el("td", { class: "num", text: String(rank) }), el("td", { class: "num", text: fmtNs(f.impact_ns) }),
      el("td", { class: "num", text: fmtPct(f.impact_share) }),
      el("td", {}, el("span", { class: "sev sev-" + f.severity, text: f.severity })),
      el("td", { class: "rule", text: f.rule }), what, where,
      el("td", { class: "advice" }, el("div", { class: "clamp2", title: f.advice || "", text: f.advice || "-" })));
    if (drill) {
      const open = () => {
        document.querySelectorAll("#findings-" + ti + " tr.selected").forEach((r) => r.classList.remove("selected"));
        row.classList.add("selected");
        selectStep(ti, f.step, f, true);
      };
      row.addEventListener("click", open);
      row.addEventListener("keydown", (ev) => { if (ev.key === "Enter" || ev.key === " ") { ev.preventDefault(); open(); } });
    }
    return row;
  }
  function showFinding(ti, finding) {  // above the drill-down: what the chart highlights, as text
    const t = TRACES[ti], focus = GANTT[ti].focus;
    focus.replaceChildren();
    focus.hidden = !finding;
    if (!finding) return;
    const rank = t.findings.indexOf(finding) + 1;
    focus.append(el("div", { class: "title" }, el("span", { class: "sev sev-" + finding.severity, text: finding.severity }),
      el("span", { text: (rank ? "#" + rank + " " : "") + "[" + finding.rule + "] " + finding.title })));
    const share = finding.impact_share === null || finding.impact_share === undefined ? ""
      : " (" + fmtPct(finding.impact_share) + " of the step time)";
    focus.append(el("div", { class: "note", text: "impact " + fmtNs(finding.impact_ns) + share + " · steps: " +
      finding.steps_text + (finding.worst_text ? " · " + finding.worst_text : "") }));
    focus.append(el("div", { class: "detail", text: finding.detail }));
    if (finding.advice) focus.append(el("div", { class: "advice", text: "What to change: " + finding.advice }));
    if (finding.names && finding.names.length) {
      const names = el("div", { class: "names" }, el("span", { text: "Outlined in the chart (named in the evidence): " }));
      finding.names.forEach((n) => names.append(el("code", { text: n })));
      focus.append(names);
    }
    const metrics = Object.entries(finding.metrics || {}).map(([k, v]) =>
      k + " " + (typeof v !== "number" ? String(v) : k.endsWith("_ns") ? fmtNs(v) : /share|ratio/.test(k) ? fmtPct(v) : fmtInt(v)));
    if (metrics.length) focus.append(el("div", { class: "metrics", text: "worst step: " + metrics.join(" · ") }));
    if (finding.evidence && Object.keys(finding.evidence).length) {
      let text = JSON.stringify(finding.evidence, null, 1);
      if (text.length > 6000) text = text.slice(0, 6000) + "\n… (full evidence in --format json)";
      focus.append(el("details", {}, el("summary", { text: "evidence" }), el("pre", { text })));
    }
  }
  function kernelTable(rows, shareLabel) {
    return table(["kernel", "category", "count", "total", "mean", shareLabel, "steps"], rows.map((k) => {
      const name = el("span", { title: k.name || "", text: k.label || k.name || "?" });
      const category = el("span", { text: k.category || "-" });
      const flag = k.is_fallback ? "fallback" : k.is_fused_comm ? "fused comm" : k.is_comm ? "communication" : null;
      if (flag) category.append(el("span", { class: "tag", style: "background:" + CLASS_STYLE[flag][0], text: flag }));
      return [name, category, fmtInt(k.count), fmtNs(k.total_ns), fmtNs(k.mean_ns), fmtPct(k.share), fmtInt(k.steps)];
    }), ["name", "text"]);
  }
  function buildKernels() {
    const box = document.getElementById("kernel-tables");
    TRACES.forEach((t) => {
      const card = el("div", { class: "card" }, el("h3", { text: t.overview.label + ": top kernels" }));
      card.append(kernelTable(t.kernels, "share of device time"));
      card.append(el("h3", { text: "Fallback kernels" }));
      if (t.fallbacks.length) card.append(kernelTable(t.fallbacks, "share of compute"));
      else card.append(el("p", { text: "None found." }));
      box.append(card);
    });
  }

  // ---------- roofline: per trace with shapes, operators against the device's roofs ----------
  const FAMILY_COLOR = {
    gemm: "#4c78a8", grouped_gemm: "#54a24b", attention: "#72b7b2", norm: "#9d755d",
    activation: "#eeca3b", elementwise: "#ff9da6", embedding: "#b279a2", sampling: "#d67195",
    memory: "#bab0ac",
  };
  function fmtRate(v) {  // TFLOP/s or GB/s
    if (v === null || v === undefined) return "-";
    return v >= 100 ? fmtInt(Math.round(v)) : v >= 1 ? v.toFixed(1) : v <= 0 ? "0" : v.toPrecision(3);
  }
  function effText(e, exact) { return e === null || e === undefined ? "-" : (exact ? "" : "≤ ") + fmtPct(e); }
  function buildRoofline() {  // the section exists only when some trace has shapes
    if (!TRACES.some((t) => t.roofline)) return [];
    const section = el("section", { id: "roofline" }, el("h2", { text: "Roofline" }),
      el("p", { class: "help", text: "Each point is an operator with the same shapes on one device: its arithmetic " +
        "intensity (FLOPs per byte of minimum HBM traffic, from its shapes) against the TFLOP/s it achieved, sized " +
        "by its time. The lines are the device's roofs: HBM bandwidth × intensity up to the ridge point, then the " +
        "peak of each dtype its operators ran at. Efficiency = roofline bound / time; ≤ where the shapes give only " +
        "an upper bound on the work." }));
    document.getElementById("steps").after(section);
    document.querySelector('nav a[href="#steps"]').after(el("a", { href: "#roofline", text: "Roofline" }));
    const done = [];
    TRACES.forEach((t, ti) => {
      const r = t.roofline, card = el("div", { class: "card roofline", id: "roofline-card-" + ti });
      card.append(el("h3", { text: t.overview.label }));
      section.append(card);
      if (!r) { card.append(el("p", { class: "note", text: "No operator shapes in this trace: no roofline." })); return; }
      for (const w of r.warnings) card.append(el("p", { class: "roofline-warning", text: "⚠ " + w }));
      for (const part of r.parts) {
        card.append(el("p", { class: "note", text: "device" + (part.devices.length > 1 ? "s " : " ") +
          part.devices.join(", ") + ": " + part.name + " · HBM " + fmtInt(part.hbm_gbps) + " GB/s · " +
          part.roofs.map((f) => f.dtypes.join("/") + " " + f.tflops + " TFLOP/s (" + f.units.join("/") + ")").join(", ") }));
      }
      const id = "roofline-" + ti;
      card.append(el("div", { class: "plot", id }));
      const notes = [];
      if (r.not_drawn) notes.push(r.not_drawn + " operator" + (r.not_drawn === 1 ? "" : "s") +
        " without FLOPs or time (copies, fills) not drawn on the log axes");
      if (r.left_out) notes.push("the chart has the " + fmtInt(r.operators_total - r.left_out) + " operators with the most " +
        "headroom of " + fmtInt(r.operators_total) + "; --format json has every one");
      card.append(el("p", { class: "note", text: notes.join("; ") }));
      card.append(table(["op", "shapes", "launches", "time", "TFLOP/s", "GB/s", "efficiency", "headroom", "limit"],
        r.top.map((o) => [el("span", { title: o.op, text: o.op }), el("span", { title: o.shapes || "", text: o.shapes || "-" }),
          fmtInt(o.launches), fmtNs(o.time_ns), fmtRate(o.tflops), fmtRate(o.gbps), effText(o.efficiency, o.exact),
          fmtNs(o.headroom_ns), o.efficiency === null ? "-" : o.limit || "-"]), ["name", "name", "", "", "", "", "", "", "text"]));
      done.push(drawRoofline(id, r));
    });
    return done;
  }
  function drawRoofline(id, r) {
    const p = r.points, n = p.op.length, data = [];
    const tmax = Math.max(1, ...p.time_ns);
    const ridges = r.parts.flatMap((part) => part.roofs.map((f) => (f.tflops * 1e3) / part.hbm_gbps));
    const xs = [...p.intensity, ...ridges];
    const lo = xs.length ? Math.min(...xs) / 4 : 0.1, hi = xs.length ? Math.max(...xs) * 4 : 1000;
    r.parts.forEach((part, k) => {  // the roofs: bandwidth slope to the ridge, then flat
      const who = r.parts.length > 1 ? esc(part.name) + " · " : "";
      const top = Math.max(...part.roofs.map((f) => f.tflops), 0);
      const ridgeTop = top ? (top * 1e3) / part.hbm_gbps : hi;
      data.push({ type: "scatter", mode: "lines", name: who + "HBM " + fmtInt(part.hbm_gbps) + " GB/s",
        x: [lo, ridgeTop], y: [(part.hbm_gbps * lo) / 1e3, (part.hbm_gbps * ridgeTop) / 1e3],
        line: { color: "#333", width: 2, dash: k ? "dot" : "solid" }, legendgroup: "roof" + k, meta: ["roof"],
        hovertemplate: "HBM " + fmtInt(part.hbm_gbps) + " GB/s × intensity<extra></extra>" });
      part.roofs.forEach((f) => {
        const ridge = (f.tflops * 1e3) / part.hbm_gbps;
        const label = f.dtypes.join("/") + " " + f.tflops + " TFLOP/s";
        data.push({ type: "scatter", mode: "lines+markers", name: who + esc(label) + " (" + f.units.join("/") + ")",
          x: [ridge, hi], y: [f.tflops, f.tflops], marker: { size: [7, 0], color: "#555" },
          line: { color: "#555", width: 1.5, dash: f.units.includes("vector") ? "dash" : "solid" },
          legendgroup: "roof" + k, meta: ["roof"],
          hovertemplate: esc(label) + "<br>ridge point: " + ridge.toFixed(1) + " FLOP/byte<extra></extra>" });
      });
    });
    const families = r.families.length ? r.families : [];
    for (const fam of families) {
      const idx = [];
      for (let i = 0; i < n; i++) if (p.family[i] === fam) idx.push(i);
      data.push({
        type: "scatter", mode: "markers", name: esc(fam), x: idx.map((i) => p.intensity[i]), y: idx.map((i) => p.tflops[i]),
        marker: { size: idx.map((i) => 6 + 30 * Math.sqrt(p.time_ns[i] / tmax)), color: FAMILY_COLOR[fam] || "#999",
          opacity: 0.75, line: { width: 1, color: "#fff" } }, meta: ["operators"],
        customdata: idx.map((i) => [
          esc(p.op[i]), esc(p.shapes[i] || ""), p.kernels[i].map(esc).join("<br>"), fmtInt(p.launches[i]), fmtNs(p.time_ns[i]),
          effText(p.efficiency[i], p.exact[i]), fmtNs(p.headroom_ns[i]), fmtRate(p.gbps[i]),
          p.efficiency[i] === null ? "no device" : p.limit[i] || "-",
          esc(p.note[i] || ""), p.device[i],
        ]),
        hovertemplate: "<b>%{customdata[0]}</b> · device %{customdata[10]}<br>%{customdata[1]}<br>" +
          "%{customdata[3]} launches, %{customdata[4]} · %{y:.3g} TFLOP/s, %{customdata[7]} GB/s, %{x:.3g} FLOP/byte<br>" +
          "efficiency %{customdata[5]}, headroom %{customdata[6]} (%{customdata[8]}-bound) %{customdata[9]}<br>" +
          "<i>%{customdata[2]}</i><extra>" + esc(fam) + "</extra>",
      });
    }
    const div = document.getElementById(id);
    return Plotly.newPlot(div, data, {
      height: 460, margin: { t: 40, r: 10, b: 50, l: 70 }, hoverlabel: { align: "left" },
      title: { text: "Achieved TFLOP/s against arithmetic intensity (log-log)", font: { size: 14 } },
      xaxis: { type: "log", title: { text: "arithmetic intensity (FLOP/byte)" } },
      yaxis: { type: "log", title: { text: "TFLOP/s" } }, legend: { orientation: "v" },
    }, CONFIG);
  }

  // ---------- start ----------
  buildOverview();
  buildChecks();
  buildStepTable();
  buildGantts();
  buildFindings();
  buildKernels();
  const drawn = [drawTime(), drawCategories(), drawDurations(), drawCommOverlap(), ...drawOverlapMatrices(),
    ...buildRoofline()];
  TRACES.forEach((t, ti) => {
    const first = t.defaults.first;
    drawn.push(first === undefined ? emptyGantt(ti) : drawGantt(ti, first, null));
  });
  Promise.all(drawn).then(() => document.body.setAttribute("data-ready", "1"));
})();
