// ajet view: routing, the runs page (uPlot curves) and the episode table. episode.js draws one
// episode, its tokens and the comparison. Plain JS, no build step; every text goes in via
// textContent (run folders hold model output, never trusted as HTML).
"use strict";

const AJ = (window.AJ = {});

AJ.h = function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") el.className = v;
    else if (k === "text") el.textContent = v;
    else if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "dataset") Object.assign(el.dataset, v);
    else el.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
};
const h = AJ.h;

AJ.fmt = function fmt(v, digits = 3) {
  if (v === null || v === undefined) return "–";
  if (typeof v === "number") return Number.isInteger(v) ? String(v) : v.toFixed(digits);
  if (typeof v === "boolean") return v ? "yes" : "no";
  return String(v);
};

AJ.showError = function showError(message) {
  const box = document.getElementById("error");
  box.hidden = !message;
  box.textContent = message || "";
};

// `ajet view --api-key KEY` prints /?key=KEY: keep the key for this tab, take it out of the address bar,
// and send it with every API call.
(function takeKey() {
  const search = new URLSearchParams(location.search);
  if (search.has("key")) {
    sessionStorage.setItem("ajet-view-key", search.get("key"));
    search.delete("key");
    history.replaceState(null, "", location.pathname + (String(search) ? "?" + search : "") + location.hash);
  }
})();

AJ.api = async function api(path, params) {
  const query = params ? "?" + new URLSearchParams(Object.entries(params).filter(([, v]) => v !== "" && v !== null && v !== undefined)) : "";
  const key = sessionStorage.getItem("ajet-view-key");
  const response = await fetch("api/" + path + query, key ? { headers: { Authorization: "Bearer " + key } } : {});
  let body;
  try { body = await response.json(); } catch (e) { body = { error: { message: `HTTP ${response.status}: not JSON` } }; }
  if (!response.ok) {
    const err = body && body.error ? body.error : { message: `HTTP ${response.status}` };
    throw new Error(err.message + (err.param ? ` (parameter: ${err.param})` : ""));
  }
  return body;
};

// ---------------------------------------------------------------- routing: #/view?key=value
AJ.route = function route() {
  const hash = location.hash.replace(/^#\/?/, "") || "runs";
  const [name, query] = hash.split("?");
  return { name, params: Object.fromEntries(new URLSearchParams(query || "")) };
};
AJ.go = function go(name, params) {
  const query = new URLSearchParams(Object.entries(params || {}).filter(([, v]) => v !== "" && v !== null && v !== undefined));
  location.hash = `#/${name}` + (String(query) ? "?" + query : "");
};
AJ.views = {};
AJ.runs = [];

async function render() {
  const { name, params } = AJ.route();
  for (const section of document.querySelectorAll("main > section")) section.hidden = section.id !== "view-" + name;
  for (const link of document.querySelectorAll("nav a")) link.classList.toggle("active", link.id === "nav-" + name);
  AJ.showError("");
  try {
    if (!AJ.runs.length) AJ.runs = await AJ.api("runs");
    await (AJ.views[name] || AJ.views.runs)(params, false);
  } catch (e) {
    AJ.showError(e.message);
  }
}
window.addEventListener("hashchange", render);

// ---------------------------------------------------------------- runs and curves
const PREFERRED = ["reward_mean", "success_rate", "loss", "kl", "grad_norm", "train_tokens_per_s",
  "rollout_tokens_per_s", "val_success_rate", "val_reward_mean", "clip_fraction", "samples_per_episode", "lr"];
const COLORS = ["#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2", "#ca8a04", "#db2777"];
const charts = { metrics: [], chosen: null, signature: "", plots: [] };

AJ.views.runs = async function runsView(params, refresh) {
  AJ.runs = await AJ.api("runs");
  const metrics = await Promise.all(AJ.runs.map((run) => AJ.api(`runs/${run.id}/metrics`)));
  drawRunsTable(metrics);
  const signature = JSON.stringify(metrics.map((m) => [m.rows.length, m.corrupt.length]));
  if (refresh && signature === charts.signature) return;
  charts.signature = signature;
  charts.metrics = metrics;
  const keys = new Set();
  for (const m of metrics) for (const row of m.rows) for (const [k, v] of Object.entries(row)) {
    if (typeof v === "number" && !["step", "time"].includes(k)) keys.add(k);
  }
  const all = [...keys].sort();
  if (!charts.chosen) charts.chosen = new Set(PREFERRED.filter((k) => keys.has(k)));
  drawMetricPicker(all);
  drawCharts();
};

function drawRunsTable(metrics) {
  const table = document.getElementById("runs-table");
  table.replaceChildren(h("tr", {}, ["run", "model", "stages", "steps", "episodes", "last reward", "last loss", "bad lines"].map((t) => h("th", { text: t }))));
  AJ.runs.forEach((run, i) => {
    const rows = metrics[i].rows;
    const last = (key) => { for (let j = rows.length - 1; j >= 0; j--) if (typeof rows[j][key] === "number") return rows[j][key]; return null; };
    const files = Object.entries(run.episode_files).map(([name, n]) =>
      h("a", { href: `#/episodes?run=${run.id}&file=${name}`, text: `${name} ${n}` }));
    table.append(h("tr", { "data-run": run.id },
      h("td", { title: run.path }, h("span", { class: "swatch", style: `background:${COLORS[i % COLORS.length]}` }), run.name),
      h("td", { text: run.model || "–" }), h("td", { text: run.stages.join(", ") || run.kind }),
      h("td", { text: run.steps }), h("td", {}, files.flatMap((a) => [a, " "])),
      h("td", { text: AJ.fmt(last("reward_mean")) }), h("td", { text: AJ.fmt(last("loss"), 4) }),
      h("td", { class: metrics[i].corrupt.length ? "bad" : "", text: metrics[i].corrupt.length })));
    if (run.eval) {
      const e = run.eval;
      const text = e.corrupt ? "eval.json cannot be read" : `eval.json: ${AJ.fmt(e.episodes)} episodes · reward ${AJ.fmt(e.reward_mean)} · ` +
        `success ${AJ.fmt(e.success_rate)} · failed ${AJ.fmt(e.failed)}`;
      table.append(h("tr", {}, h("td", { colspan: 8, class: "muted", text })));
    }
    for (const problem of run.problems || [])  // a file the viewer refused: a FIFO, a link out of the folder, ...
      table.append(h("tr", { class: "corrupt" }, h("td", { colspan: 8, text: "not read: " + problem })));
    if (run.behind_bytes)
      table.append(h("tr", {}, h("td", { colspan: 8, class: "muted", text: `still indexing: ${AJ.fmt(run.behind_bytes)} bytes to go` })));
  });
}

function drawMetricPicker(all) {
  const box = document.getElementById("metric-keys");
  box.replaceChildren(...all.map((key) => h("label", {},
    h("input", { type: "checkbox", checked: charts.chosen.has(key), onchange: (e) => {
      e.target.checked ? charts.chosen.add(key) : charts.chosen.delete(key);
      drawCharts();
    } }), key)));
}

function tick(v) {  // small values (a loss of 1e-5) must not all read "0"
  if (v === 0 || v === null) return v === 0 ? "0" : "";
  const a = Math.abs(v);
  return a >= 1e4 || a < 1e-3 ? v.toExponential(1) : String(Number(v.toPrecision(4)));
}

function drawCharts() {
  for (const plot of charts.plots) plot.destroy();
  charts.plots = [];
  const box = document.getElementById("charts");
  box.replaceChildren();
  const keys = [...charts.chosen].sort((a, b) => (PREFERRED.indexOf(a) + 1 || 99) - (PREFERRED.indexOf(b) + 1 || 99));
  for (const key of keys) {
    const tables = [], series = [{ label: "step" }];
    charts.metrics.forEach((m, runIndex) => {
      const stages = [...new Set(m.rows.map((r) => r.stage))];
      stages.forEach((stage, stageIndex) => {
        const rows = m.rows.filter((r) => r.stage === stage && typeof r[key] === "number" && typeof r.step === "number");
        if (!rows.length) return;
        tables.push([rows.map((r) => r.step), rows.map((r) => r[key])]);
        const color = COLORS[runIndex % COLORS.length];
        series.push({ label: `${AJ.runs[runIndex].name} ${stage}`, stroke: color, width: 2,
          dash: stageIndex ? [6, 4] : undefined, points: { show: true, size: 5 }, spanGaps: true });
      });
    });
    if (!tables.length) continue;
    const holder = h("div", { class: "chart", "data-metric": key }, h("h3", { text: key }));
    box.append(holder);
    const data = uPlot.join(tables);
    const width = Math.max(300, Math.min(600, Math.floor((box.clientWidth - 16) / 2) - 20));  // two per row
    const yRange = (u, min, max) => {  // a flat series (one step, or an all-zero reward) still gets an axis
      const pad = Math.abs(min) * 0.1 || 1;
      return min === max ? [min - pad, max + pad] : uPlot.rangeNum(min, max, 0.1, true);
    };
    charts.plots.push(new uPlot({ width, height: 220, series, scales: { x: { time: false }, y: { range: yRange } },
      axes: [{ label: "step" }, { size: 64, values: (u, ticks) => ticks.map(tick) }], legend: { live: true } }, data, holder));
  }
  if (!box.children.length) box.append(h("p", { class: "muted", text: "no metrics yet (an eval folder has none; a live run writes one line per step)" }));
}

// ---------------------------------------------------------------- the episode table
const form = () => document.getElementById("filters");
let lastTotal = null;

function fillSelect(select, values, keep, first) {
  const current = keep ?? select.value;
  select.replaceChildren(...first.map(([v, t]) => h("option", { value: v, text: t })),
    ...values.map((v) => h("option", { value: String(v), text: String(v) })));
  select.value = [...select.options].some((o) => o.value === current) ? current : "";
}

AJ.views.episodes = async function episodesView(params, refresh) {
  const run = AJ.runs[Number(params.run || 0)] || AJ.runs[0];
  const f = form();
  fillSelect(f.run, [], String(run.id), AJ.runs.map((r) => [String(r.id), r.name]));
  const files = Object.keys(run.episode_files);
  fillSelect(f.file, [], params.file || files[0] || "episodes", (files.length ? files : ["episodes"]).map((n) => [n, n + ".jsonl"]));
  for (const el of f.elements) if (el.name && !["run", "file"].includes(el.name) && !refresh) el.value = params[el.name] ?? "";
  const query = Object.fromEntries(new FormData(f));
  query.limit = 50;
  const body = await AJ.api(`runs/${run.id}/episodes`, query);
  if (refresh && body.total === lastTotal) return;
  lastTotal = body.total;
  fillSelect(f.step, body.facets.steps, params.step, [["", "all"]]);
  fillSelect(document.getElementById("f-failure"), body.facets.failures, params.failure, [["", "any"], ["none", "none"], ["any", "some"]]);
  fillSelect(document.getElementById("f-stop"), body.facets.stops, params.stop, [["", "any"]]);
  drawEpisodes(run, body, query);
};

const COLUMNS = [["line", "#"], ["step", "step"], ["task_id", "task"], ["reward", "reward"], ["success", "success"],
  ["failure", "failure"], ["stop", "stop"], ["turns", "turns"], ["tool_calls", "tool calls"], ["tokens", "tokens"],
  ["seconds", "s"]];

function drawEpisodes(run, body, query) {
  const facets = body.facets;
  document.getElementById("episodes-count").textContent =
    `${body.matched} of ${body.total} lines shown · ${facets.tasks} tasks` + (facets.corrupt ? ` · ${facets.corrupt} corrupt line(s)` : "");
  const table = document.getElementById("episodes-table");
  const header = h("tr", {}, COLUMNS.map(([key, label]) => h("th", { class: "sortable", "data-sort": key,
    text: label + (query.sort === key ? (query.order === "desc" ? " ▼" : " ▲") : ""),
    onclick: () => {
      const order = query.sort === key && query.order !== "desc" ? "desc" : "asc";
      AJ.go("episodes", { ...query, limit: undefined, sort: key, order, offset: 0 });
    } })), h("th", { text: "query / answer" }));
  table.replaceChildren(header);
  for (const row of body.rows) {
    const open = () => AJ.go("episode", { run: run.id, file: body.file, line: row.line });
    if (row.corrupt) {
      table.append(h("tr", { class: "corrupt", "data-line": row.line, onclick: open },
        h("td", { text: row.line }), h("td", { colspan: COLUMNS.length, text: `corrupt line: ${row.reason || ""} · ${row.text}` })));
      continue;
    }
    table.append(h("tr", { class: row.success ? "ok" : row.failure ? "failed" : "", "data-line": row.line, onclick: open },
      COLUMNS.map(([key]) => h("td", { text: AJ.fmt(row[key]) })),
      h("td", { class: "snippet", text: `${row.query} → ${row.answer || row.error}` })));
  }
  const offset = Number(query.offset || 0);
  document.getElementById("page").textContent = body.matched ? `${offset + 1}–${Math.min(offset + body.limit, body.matched)}` : "none";
  document.getElementById("prev").disabled = offset <= 0;
  document.getElementById("next").disabled = offset + body.limit >= body.matched;
  document.getElementById("prev").onclick = () => AJ.go("episodes", { ...query, limit: undefined, offset: Math.max(0, offset - body.limit) });
  document.getElementById("next").onclick = () => AJ.go("episodes", { ...query, limit: undefined, offset: offset + body.limit });
}

document.addEventListener("DOMContentLoaded", () => {
  const f = form();
  let typing;
  const apply = () => AJ.go("episodes", { ...Object.fromEntries(new FormData(f)), offset: 0 });
  f.addEventListener("change", (e) => { if (e.target.name === "run") { f.file.value = ""; } apply(); });
  f.addEventListener("input", (e) => { if (e.target.tagName === "INPUT") { clearTimeout(typing); typing = setTimeout(apply, 350); } });
  f.addEventListener("submit", (e) => { e.preventDefault(); apply(); });
  render();
  // a live run: the runs page and the table follow the files as they grow
  setInterval(async () => {
    if (!document.getElementById("live").checked || document.hidden) return;
    const { name, params } = AJ.route();
    if (name !== "runs" && name !== "episodes") return;
    try {
      await AJ.views[name](params, true);
      document.getElementById("status").textContent = "updated " + new Date().toLocaleTimeString();
    } catch (e) { AJ.showError(e.message); }
  }, 4000);
});
