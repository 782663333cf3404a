/* tracekit cluster report: draws every figure from the embedded JSON payload (see
 * tracekit/reports/cluster_payload.py). Trace text (sources, group and kernel names) is
 * inserted only as DOM text (textContent, append(string)) or, for plotly labels, with <, >
 * and & written as entities (plotly renders a subset of HTML). */
(function () {
  "use strict";
  const DATA = JSON.parse(document.getElementById("tracekit-data").textContent);
  const CONFIG = { displaylogo: false, responsive: true };
  const H = DATA.header, S = DATA.series, STEPS = DATA.steps, M = DATA.metrics;
  const NS = S.label.length;
  const MAX_OPEN_INPUTS = 8;  // more inputs than this: their table is folded
  const STATUS_ORDER = { fail: 0, warn: 1, pass: 2, skip: 3 };
  const CLASSES = [["communication", "#e45756"], ["compute", "#4c78a8"], ["other", "#bab0ac"]];
  const GROUP_COLOURS = ["#4c78a8", "#f58518", "#54a24b", "#e45756", "#72b7b2", "#eeca3b",
    "#b279a2", "#ff9da6", "#9d755d", "#79706e"];
  const STEP_AT = new Map(STEPS.map((s, i) => [s, i]));
  const DRILL = new Map(DATA.drill.steps.map((d) => [d.series + ":" + d.step, d]));
  const LATE = DATA.late;
  const STILL = window.matchMedia && window.matchMedia("(prefers-reduced-motion: reduce)").matches;

  // ---------- helpers ----------
  function plural(n, word) { return fmtInt(n) + " " + word + (n === 1 ? "" : "s"); }
  function fmtBytes(b) {
    if (b === null || b === undefined) return "-";
    const units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let v = b, u = 0;
    while (Math.abs(v) >= 1024 && u < units.length - 1) { v /= 1024; u++; }
    return (u ? v.toFixed(1) : String(Math.round(v))) + " " + units[u];
  }
  function fmtNum(v, digits) { return v === null || v === undefined ? "-" : Number(v).toFixed(digits); }
  function table(head, rows, classes) {
    const t = el("table", {});
    t.append(el("tr", {}, ...head.map((h, i) => el("th", { class: (classes || [])[i] || "", text: h }))));
    for (const row of rows) t.append(tableRow(row, classes));
    return t;
  }
  function tableRow(row, classes) {
    return el("tr", {}, ...row.map((cell, i) => {
      const td = el("td", { class: (classes || [])[i] || "" });
      if (cell instanceof Node) td.append(cell); else td.textContent = cell;
      return td;
    }));
  }
  function pickable(tr, title, open) {  // a table row that opens something on click / Enter
    tr.classList.add("pick");
    tr.setAttribute("tabindex", "0");
    tr.setAttribute("title", title);
    tr.addEventListener("click", open);
    tr.addEventListener("keydown", (ev) => { if (ev.key === "Enter" || ev.key === " ") { ev.preventDefault(); open(); } });
    return tr;
  }
  function seriesOf(rank, device) {
    for (let i = 0; i < NS; i++) if (S.rank[i] === rank && (device === null || device === undefined || S.device[i] === device)) return i;
    return -1;
  }
  function rankAxis(extra) {  // rows of the rank × step figures: rank labels, first rank on top
    const every = Math.max(1, Math.ceil(NS / 40));
    const vals = S.si.filter((i) => i % every === 0);
    return Object.assign({ tickvals: vals, ticktext: vals.map((i) => esc(S.label[i])), range: [NS - 0.5, -0.5],
      automargin: true, zeroline: false }, extra || {});
  }
  function stepAxis() { return Object.assign({ title: { text: "step" } }, STEPS.length <= 30 ? { dtick: 1 } : {}); }
  function plot(id, data, layout) { return Plotly.newPlot(document.getElementById(id), data, layout, CONFIG); }
  function empty(id, text) {
    return plot(id, [], { height: 160, xaxis: { visible: false }, yaxis: { visible: false },
      annotations: [{ text: esc(text), showarrow: false, xref: "paper", yref: "paper", x: 0.5, y: 0.5 }] });
  }

  // ---------- header, checks ----------
  function buildHeader() {
    const of = H.world_size && H.world_size > H.ranks ? " of " + fmtInt(H.world_size) : "";
    const inputs = H.parts.length;
    document.getElementById("subtitle").textContent = plural(H.ranks, "rank") + of + " · " +
      plural(H.steps, "step") + " · " + (H.format || "?") + " · " + plural(inputs, "input");
    const alerts = document.getElementById("alerts");
    for (const c of DATA.checks.filter((x) => x.status !== "pass" && x.status !== "skip")) {
      alerts.append(el("div", { class: "alert " + c.status },
        el("span", { class: "sev sev-" + c.status, text: c.status }), el("b", { text: c.name + ": " }),
        el("span", { text: c.detail })));
    }
    for (const p of H.parts.filter((x) => x.low_confidence)) {
      alerts.append(el("div", { class: "alert", text: "⚠ " + p.source + ": " + p.low_confidence }));
    }
    const rows = [
      ["ranks", fmtInt(H.ranks) + " (" + (H.rank_list || "-") + ")"],
      ["world size", H.world_size ? fmtInt(H.world_size) : "not recorded"],
      ["format", H.format || "-"], ["producer", H.producer || "-"], ["steps", fmtInt(H.steps)],
      ["collective launches", fmtInt(H.launches) + " (" + fmtInt(H.matched) + " matched across ranks)"],
    ];
    const box = document.getElementById("overview-table");
    const summary = table(["", ""], rows, ["text", "text"]);
    summary.classList.add("overview");
    summary.deleteRow(0);
    box.append(summary);
    const sources = table(["input", "ranks", "events", "format", "steps"], H.parts.map((p) =>
      [p.source, p.ranks || "-", fmtInt(p.events), p.format || "-", p.steps || "-"]), ["source", "text", "", "text", "text"]);
    if (H.parts.length <= MAX_OPEN_INPUTS) box.append(sources);
    else box.append(el("details", { id: "inputs" }, el("summary", { text: plural(H.parts.length, "input") }), sources));
    const checks = [...DATA.checks].sort((a, b) => (STATUS_ORDER[a.status] ?? 9) - (STATUS_ORDER[b.status] ?? 9));
    const list = document.getElementById("checks-list");
    if (!checks.length) list.append(el("p", { text: "No checks (a single rank)." }));
    else list.append(table(["status", "check", "detail"], checks.map((c) =>
      [el("span", { class: "sev sev-" + c.status, text: c.status }), c.name, c.detail]), ["", "text", "text"]));
  }

  // ---------- stragglers ----------
  function buildStragglers() {
    const box = document.getElementById("straggler-list");
    const found = DATA.findings.stragglers;
    if (!found.length) {
      const text = !H.matched ? "Not measured: no collective was matched across ranks (see the checks at the top)."
        : "None: no rank made the others wait.";
      box.append(el("p", { text }));
    } else {
      const t = el("table", { class: "findings" });
      t.append(el("tr", {}, ...["#", "impact", "share", "finding", "cause", "steps"].map((h) => el("th", { text: h }))));
      found.forEach((f, k) => {
        const m = f.metrics || {};
        const what = el("td", {}, el("div", { class: "title", text: f.title }), el("div", { class: "detail", text: f.detail }));
        const cause = [m.cause ? m.cause.replace(/_/g, " ") + (m.cause_ns ? " (+" + fmtNs(m.cause_ns) + ")" : "") : "",
          m.persistent ? "persistent" : ""].filter((x) => x).join(" · ") || "-";
        const tr = el("tr", { "data-finding": String(k) }, el("td", { class: "num", text: String(k + 1) }),
          el("td", { class: "num", text: fmtNs(f.impact_ns) }), el("td", { class: "num", text: fmtPct(f.impact_share) }),
          what, el("td", { text: cause }),
          el("td", {}, el("div", { text: f.steps_text }), f.worst_text ? el("div", { class: "note", text: f.worst_text }) : null));
        const si = seriesOf(f.rank, f.device);
        if (si >= 0) pickable(tr, "Open rank " + f.rank + ", step " + f.step, () => selectRank(si, f.step, true));
        t.append(tr);
      });
      box.append(t);
    }
    const others = DATA.findings.others;
    if (others.length) {
      const more = el("details", {}, el("summary", { text: fmtInt(DATA.findings.others_total) +
        " findings of the per-rank rules (top " + others.length + " by impact)" }));
      more.append(table(["impact", "share", "severity", "rule", "finding", "steps"], others.map((f) => [
        fmtNs(f.impact_ns), fmtPct(f.impact_share), el("span", { class: "sev sev-" + f.severity, text: f.severity }),
        f.rule, f.title, f.steps_text]), ["", "", "", "text", "text", "text"]));
      document.getElementById("other-findings").append(more);
    }
  }

  // ---------- rank × step figures ----------
  function drawHeat(id, column, title, colorscale, fromZero, note) {
    if (!NS || !STEPS.length) return empty(id, "no steps");
    const z = M[column].map((row) => row.map((v) => (v === null ? null : v / 1e6)));
    const top = Math.max(0, ...z.map((row) => Math.max(0, ...row.filter((v) => v !== null))));
    const range = fromZero ? { zmin: 0, zmax: top > 0 ? top : 1 } : {};
    const text = S.label.map((label) => STEPS.map(() => esc(label)));
    const data = [{ type: "heatmap", x: STEPS, y: S.si, z, text, colorscale, reversescale: true, xgap: STEPS.length <= 60 ? 1 : 0,
      ygap: NS <= 60 ? 1 : 0, colorbar: { title: { text: "ms" } }, ...range,
      hovertemplate: "%{text} · step %{x}<br>" + esc(title) + ": %{z:.3f} ms<extra></extra>" }];
    const layout = { height: Math.min(900, Math.max(240, 120 + 18 * NS)), margin: { t: 36, r: 10, b: 46, l: 90 },
      title: { text: esc(title) + " (ms)" + (note ? " · " + esc(note) : ""), font: { size: 14 } }, xaxis: stepAxis(), yaxis: rankAxis() };
    return plot(id, data, layout).then((gd) => { clickToSelect(gd); return gd; });
  }
  function clickToSelect(gd) {
    gd.on("plotly_click", (ev) => {
      const p = ev.points && ev.points[0];
      if (p) selectRank(Math.round(p.y), p.x, true);
    });
  }
  function longestPerStep() {
    return STEPS.map((_, j) => {
      let best = -1;
      for (let i = 0; i < NS; i++) {
        const v = M.dur[i][j];
        if (v !== null && (best < 0 || v > M.dur[best][j])) best = i;
      }
      return best;
    });
  }
  function drawLate() {
    if (!NS || !STEPS.length) return empty("plot-late", "no steps");
    const longest = longestPerStep();
    const shown = STEPS.map((_, j) => j).filter((j) => longest[j] >= 0);
    const maxWait = Math.max(1, ...LATE.wait_ns);
    const data = [{
      type: "scatter", mode: "markers", name: "longest step window", x: shown.map((j) => STEPS[j]),
      y: shown.map((j) => longest[j]), marker: { symbol: "x-thin-open", size: 9, color: "#4c78a8" },
      customdata: shown.map((j) => [esc(S.label[longest[j]]), fmtNs(M.dur[longest[j]][j])]),
      hovertemplate: "step %{x}: %{customdata[0]} had the longest step, %{customdata[1]}<extra></extra>",
    }, {
      type: "scatter", mode: "markers", name: "last at collectives (straggler)", x: LATE.step,
      y: LATE.si, marker: { color: "#e45756", size: LATE.wait_ns.map((w) => 7 + 14 * Math.sqrt(w / maxWait)) },
      customdata: LATE.step.map((_, k) => [esc(LATE.si[k] === null ? "rank " + LATE.rank[k] : S.label[LATE.si[k]]),
        fmtNs(LATE.wait_ns[k]), fmtInt(LATE.waiters[k])]),
      hovertemplate: "step %{x}: %{customdata[0]} arrived last;<br>%{customdata[2]} launches waited %{customdata[1]} on it<extra></extra>",
    }];
    const layout = { height: Math.min(520, Math.max(220, 110 + 10 * NS)), margin: { t: 30, r: 10, b: 46, l: 90 },
      legend: { orientation: "h", y: 1.12 }, xaxis: stepAxis(), yaxis: rankAxis() };
    return plot("plot-late", data, layout).then((gd) => { clickToSelect(gd); return gd; });
  }
  function buildLateTable() {
    const box = document.getElementById("late-table");
    if (!LATE.step.length) { box.append(el("p", { text: "No step had waits at matched collectives." })); return; }
    const t = table(["step", "late rank", "device", "wait caused", "launches waiting", "instances"], [], ["", "text"]);
    LATE.step.forEach((step, k) => {
      const tr = tableRow([String(step), "rank " + LATE.rank[k], LATE.device[k] === null ? "-" : String(LATE.device[k]),
        fmtNs(LATE.wait_ns[k]), fmtInt(LATE.waiters[k]), fmtInt(LATE.instances[k])], ["", "text"]);
      if (LATE.si[k] !== null) pickable(tr, "Open rank " + LATE.rank[k] + ", step " + step, () => selectRank(LATE.si[k], step, true));
      t.append(tr);
    });
    box.append(t);
  }

  // ---------- collectives ----------
  function buildGroups() {
    const box = document.getElementById("group-table");
    if (!DATA.groups.length) { box.append(el("p", { text: "No communication launches." })); return; }
    box.append(table(["group", "kind", "launches", "instances", "ranks", "matched", "median skew", "summed wait",
      "median bytes", "bus bandwidth (GB/s)"], DATA.groups.map((g) => [g.group, g.kind || "-", fmtInt(g.launches),
      fmtInt(g.instances), fmtInt(g.ranks), fmtInt(g.matched) + " of " + fmtInt(g.launches), fmtNs(g.skew_ns),
      g.matched ? fmtNs(g.wait_ns) : "-", fmtBytes(g.bytes), fmtNum(g.busbw_gbps, 1)]), ["group", "text"]));
    if (DATA.groups_total > DATA.groups.length) {
      box.append(el("p", { class: "note", text: "The " + DATA.groups.length + " groups with the most waiting of " + fmtInt(DATA.groups_total) + "." }));
    }
  }
  function drawSkew() {
    const inst = DATA.instances, r = inst.rows;
    const n = r.instance ? r.instance.length : 0;
    if (!n) return empty("plot-skew", "no collective instances");
    const byGroup = new Map();
    for (let i = 0; i < n; i++) {
      const g = r.group[i] < GROUP_COLOURS.length ? r.group[i] : -1;
      if (!byGroup.has(g)) byGroup.set(g, []);
      byGroup.get(g).push(i);
    }
    const data = [...byGroup.entries()].sort((a, b) => (a[0] < 0) - (b[0] < 0) || a[0] - b[0]).map(([g, idx]) => ({
      type: "scatter", mode: "markers", name: g < 0 ? "other groups" : esc(inst.groups[g]),
      x: idx.map((i) => (r.t[i] === null ? null : r.t[i] / 1e6)), y: idx.map((i) => (r.skew_ns[i] === null ? null : r.skew_ns[i] / 1e6)),
      marker: { color: g < 0 ? "#999" : GROUP_COLOURS[g], size: 7, symbol: idx.map((i) => (r.matched[i] ? "circle" : "circle-open")) },
      customdata: idx.map((i) => [esc(inst.groups[r.group[i]]), esc(r.instance[i]), r.step[i] === null ? "-" : r.step[i],
        r.last_rank[i], r.ranks[i], r.matched[i] ? "matched" : "not matched (waits not counted)", fmtNs(r.wait_ns[i])]),
      hovertemplate: "%{customdata[0]} #%{customdata[1]} · step %{customdata[2]}<br>skew %{y:.3f} ms, last: rank %{customdata[3]} of %{customdata[4]}" +
        "<br>%{customdata[5]} · waits %{customdata[6]}<extra></extra>",
    }));
    document.getElementById("skew-note").textContent = "Arrival skew of each collective instance (last minus first rank's arrival, after clock alignment) over time" +
      (inst.total > n ? "; the " + fmtInt(n) + " largest of " + fmtInt(inst.total) + " instances" : "") + ". Open circles: not matched across ranks.";
    return plot("plot-skew", data, { height: 360, margin: { t: 30, r: 10, b: 46, l: 60 }, legend: { orientation: "h", y: 1.15 },
      xaxis: { title: { text: "ms from the start" } }, yaxis: { title: { text: "skew (ms)" }, rangemode: "tozero" } });
  }
  function buildInstances() {
    const r = DATA.instances.rows, box = document.getElementById("instance-table");
    const n = Math.min(DATA.top_instances, r.instance ? r.instance.length : 0);
    if (!n) { box.append(el("p", { text: "None." })); return; }
    const t = table(["group", "instance", "step", "skew", "last rank", "ranks", "matched", "waits caused"], [], ["group", "text"]);
    for (let i = 0; i < n; i++) {
      const tr = tableRow([DATA.instances.groups[r.group[i]], r.instance[i], r.step[i] === null ? "-" : String(r.step[i]),
        fmtNs(r.skew_ns[i]), "rank " + r.last_rank[i], fmtInt(r.ranks[i]), r.matched[i] ? "yes" : "no", fmtNs(r.wait_ns[i])], ["group", "text"]);
      const si = seriesOf(r.last_rank[i], null);
      if (si >= 0 && r.step[i] !== null) pickable(tr, "Open rank " + r.last_rank[i] + ", step " + r.step[i], () => selectRank(si, r.step[i], true));
      t.append(tr);
    }
    box.append(t);
  }

  // ---------- per rank ----------
  function buildRanks() {
    const box = document.getElementById("rank-table");
    if (!DATA.ranks.length) { box.append(el("p", { text: "No step metrics." })); return; }
    const t = table(["rank", "device", "steps", "median step", "p90 step", "median sync wait", "wait share", "late in", "clock offset"], []);
    for (const r of DATA.ranks) {
      const tr = tableRow([String(r.rank), r.device === null ? "-" : String(r.device), fmtInt(r.steps), fmtNs(r.median_ns),
        fmtNs(r.p90_ns), fmtNs(r.wait_ns), fmtPct(r.wait_share), plural(r.late, "step"),
        r.offset_ns ? fmtInt(r.offset_ns) + " ns" : "0"]);
      tr.setAttribute("data-series", String(r.si));
      if (r.si !== null) pickable(tr, "Open rank " + r.rank, () => selectRank(r.si, null, true));
      t.append(tr);
    }
    box.append(t);
  }
  function drilled(si) {  // steps of a series with embedded device rows, slowest first
    return DATA.drill.steps.filter((d) => d.series === si).map((d) => d.step)
      .sort((a, b) => (dur(si, b) ?? -1) - (dur(si, a) ?? -1));
  }
  function dur(si, step) { const j = STEP_AT.get(step); return j === undefined ? null : M.dur[si][j]; }
  function selectRank(si, step, scroll) {
    const box = document.getElementById("rank-detail");
    const steps = drilled(si);
    if (step === null || step === undefined) step = steps.length ? steps[0] : STEPS.find((s) => dur(si, s) !== null);
    box.hidden = false;
    document.getElementById("rank-title").textContent = S.label[si] + (step === undefined ? "" : " · step " + step);
    document.querySelectorAll("#rank-table tr.selected").forEach((r) => r.classList.remove("selected"));
    const row = document.querySelector("#rank-table tr[data-series='" + si + "']");
    if (row) row.classList.add("selected");
    const buttons = document.getElementById("drill-steps");
    buttons.replaceChildren(el("span", { text: steps.length ? "Steps with device events:" : "No device events embedded for this rank" + budgetNote() + "." }));
    for (const s of steps) {
      const b = el("button", { type: "button", "data-step": String(s), text: "step " + s + " (" + fmtNs(dur(si, s)) + ")" });
      if (s === step) b.classList.add("active");
      b.addEventListener("click", () => selectRank(si, s, false));
      buttons.append(b);
    }
    buildRankSteps(si, step);
    if (scroll) box.scrollIntoView({ behavior: STILL ? "auto" : "smooth", block: "start" });
    return drawGantt(si, step);
  }
  function buildRankSteps(si, current) {
    const late = new Map();
    LATE.step.forEach((s, k) => { if (LATE.si[k] === si) late.set(s, LATE.wait_ns[k]); });
    const cols = ["start", "dur", "sync_wait_ns", "compute_ns", "comm_ns", "exposed_comm_ns", "bubble_ns", "idle_ns"];
    const t = table(["step", "phase", ...cols.map((c) => (c === "start" ? "start (from origin)" : DATA.labels[c] || c)),
      "late: wait caused", "device events"], [], ["", "text"]);
    STEPS.forEach((step, j) => {
      if (M.dur[si][j] === null) return;
      const d = DRILL.get(si + ":" + step);
      const phase = DATA.phase[si][j];
      const tr = tableRow([String(step), phase === null ? "-" : DATA.phases[phase], ...cols.map((c) => fmtNs(M[c][si][j])),
        late.has(step) ? fmtNs(late.get(step)) : "", d ? fmtInt(d.shown) + " of " + fmtInt(d.total) : ""], ["", "text"]);
      tr.setAttribute("data-step", String(step));
      if (step === current) tr.classList.add("selected");
      if (d) pickable(tr, "Show step " + step + "'s device events", () => selectRank(si, step, false));
      t.append(tr);
    });
    document.getElementById("rank-steps").replaceChildren(t);
  }
  function budgetNote() {  // when the page could not carry every drilled step
    const d = DATA.drill;
    return d.keys > d.steps.length ? " (the page carries " + fmtInt(d.steps.length) + " of " + fmtInt(d.keys) +
      " drilled rank-steps, each rank's slowest first)" : "";
  }
  function classOf(d, i) { return d.comm[i] ? 0 : DATA.drill.kinds[d.kind[i]] === "kernel" ? 1 : 2; }
  function drawGantt(si, step) {
    const div = document.getElementById("plot-gantt"), box = document.getElementById("rank-detail");
    const note = document.getElementById("gantt-note"), d = DRILL.get(si + ":" + step);
    box.dataset.series = String(si);
    box.dataset.step = String(step);
    if (!d) {
      const others = drilled(si);
      note.textContent = "No device events embedded for step " + step + " of " + S.label[si] +
        (others.length ? "; the page carries steps " + others.join(", ") + " of this rank (its slowest and median)." : budgetNote() + ".");
      Plotly.purge(div);
      box.dataset.drawn = "0";
      return Promise.resolve(null);
    }
    const lanes = [...new Set(d.stream)].sort((a, b) => (a ?? -1) - (b ?? -1)).map((s) => "stream " + (s ?? "?"));
    const lane = (i) => "stream " + (d.stream[i] ?? "?");
    const data = CLASSES.map(([name, color], k) => {
      const idx = d.start.map((_, i) => i).filter((i) => classOf(d, i) === k);
      return { type: "bar", orientation: "h", name, y: idx.map(lane), base: idx.map((i) => d.start[i] / 1e3),
        x: idx.map((i) => Math.max(d.dur[i], 1) / 1e3), width: 0.8, marker: { color },
        customdata: idx.map((i) => [esc(DATA.drill.names[d.name[i]]), fmtNs(d.dur[i]), fmtNs(d.start[i]), lane(i),
          esc(DATA.drill.kinds[d.kind[i]])]),
        hovertemplate: "<b>%{customdata[0]}</b><br>%{customdata[4]} · " + name +
          " · %{customdata[1]} at +%{customdata[2]}<br>%{customdata[3]}<extra></extra>" };
    }).filter((t) => t.y.length);
    const shapes = [];
    const w = dur(si, step);
    if (w !== null) shapes.push({ type: "line", x0: w / 1e3, x1: w / 1e3, yref: "paper", y0: 0, y1: 1, line: { color: "#555", dash: "dot", width: 1 } });
    const layout = { barmode: "overlay", height: Math.max(220, 100 + 28 * lanes.length), margin: { t: 30, r: 10, b: 46, l: 90 },
      legend: { orientation: "h", y: 1.12 }, shapes, xaxis: { title: { text: "µs from the start of the step's window" } },
      yaxis: { type: "category", categoryorder: "array", categoryarray: lanes, autorange: "reversed" } };
    let text = S.label[si] + ", step " + step + ": " + fmtInt(d.total) + " device events on " + lanes.length + " stream" + (lanes.length === 1 ? "" : "s");
    if (d.shown < d.total) text += "; showing the " + fmtInt(d.shown) + " longest";
    note.textContent = text + ". The dotted line is the end of the step window.";
    return Plotly.react(div, data, layout, CONFIG).then((gd) => { box.dataset.drawn = "1"; return gd; });
  }

  // ---------- start ----------
  buildHeader();
  buildStragglers();
  buildLateTable();
  buildGroups();
  buildInstances();
  buildRanks();
  const drawn = [
    drawHeat("plot-heat-dur", "dur", "step time", "Blues"),
    drawHeat("plot-heat-wait", "sync_wait_ns", "sync wait", "YlOrRd", true,
      H.launches && !H.matched ? "not measured: no collective was matched across ranks" : ""),
    drawLate(), drawSkew(),
  ];
  Promise.all(drawn).then(() => document.body.setAttribute("data-ready", "1"));
})();
