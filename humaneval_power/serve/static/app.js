// hepower planner: the page's logic. Plain JavaScript, no external resources.
// Each change of the inputs becomes up to three API calls (jobs): the design's power, a power curve,
// and the cheapest design (or smallest size) reaching the target power; the numbers shown are the
// records the API returns, the same as `hepower ... --json` prints.
"use strict";

const $ = (sel) => document.querySelector(sel);
const state = { paramsDoc: null, paramsName: null, presets: {}, last: null, generation: 0, running: new Set(),
  pilot: null, h2hDoc: null, h2hName: null, forms: {}, uploads: {} };

// ---------- inputs <-> state <-> URL ----------

function scenario() { return $("#scenario").value; }
function panel(name) { return document.querySelector(`[data-scenario="${name || scenario()}"]`); }

function values() {
  const out = {};
  for (const el of panel().querySelectorAll("[name]")) out[el.name] = el.value;
  return out;
}

function encodeState() {
  const q = new URLSearchParams({ scenario: scenario(), ...values() });
  if (scenario() === "likert" && values().source === "file" && state.paramsDoc) {
    q.set("params_doc", JSON.stringify(state.paramsDoc));
    q.set("params_name", state.paramsName || "params.json");
  }
  return q.toString();
}

function restoreState(hash) {
  const q = new URLSearchParams(hash.replace(/^#/, ""));
  if (q.has("scenario")) $("#scenario").value = q.get("scenario");
  for (const el of panel().querySelectorAll("[name]")) if (q.has(el.name)) el.value = q.get(el.name);
  if (q.has("params_doc")) {
    try { state.paramsDoc = JSON.parse(q.get("params_doc")); state.paramsName = q.get("params_name"); }
    catch (e) { showError("the link's parameter file is not valid JSON"); }
  }
}

function showPanels() {
  for (const p of document.querySelectorAll("[data-scenario]")) p.hidden = p.dataset.scenario !== scenario();
  const source = panel("likert").querySelector("[name=source]").value;
  for (const el of document.querySelectorAll("[data-source]")) el.hidden = el.dataset.source !== source;
  $("#params-name").textContent = state.paramsDoc ? `loaded: ${state.paramsName} (${state.paramsDoc.name || "fitted"})`
                                                  : "no file loaded";
  const h2hSource = panel("h2h_glmm").querySelector("[name=source]").value;
  for (const el of document.querySelectorAll("[data-h2h-source]")) el.hidden = el.dataset.h2hSource !== h2hSource;
  $("#h2h-params-name").textContent = state.h2hDoc ? `loaded: ${state.h2hName}` : "no file loaded";
  $("#pilot-name").textContent = state.pilot ? `pilot: ${state.pilot.name} (its own layout, scaled to the items)`
    : "no pilot: the crowd design above";
  $("#frontier-figure").hidden = $("#dl-params").hidden = scenario() !== "likert";
  $("#dl-design").textContent = scenario() === "likert" ? "Download design JSON" : "Download request JSON";
}

// ---------- requests ----------

const num = (v) => (v === "" || v === undefined || v === null ? null : Number(v));
const list = (text) => text.split(/[\s,;]+/).filter((s) => s !== "").map(Number);
const compact = (o) => Object.fromEntries(Object.entries(o).filter(([, v]) => v !== null && v !== undefined && v !== ""));

function around(n, max) {  // a size grid for the power curve: n/4 ... 4n
  const out = [0.25, 0.5, 1, 2, 4].map((f) => Math.max(2, Math.round(n * f))).filter((v) => v <= max);
  return [...new Set(out)].sort((a, b) => a - b);
}

class InputProblem extends Error {}

function likertParams(v) {
  if (v.source === "preset") return v.preset;
  if (v.source === "file") {
    if (!state.paramsDoc) throw new InputProblem("load a parameter file (from `hepower fit -o FILE`) or choose a preset");
    return state.paramsDoc;
  }
  return compact({ intercept: num(v.intercept), sd_worker_intercept: num(v.sd_worker_intercept),
    sd_worker_slope: num(v.sd_worker_slope), sd_item_intercept: num(v.sd_item_intercept),
    sd_item_slope: num(v.sd_item_slope), sd_residual: num(v.sd_residual) });
}

function likertCosts(v) {
  const c = compact({ per_rating: num(v.per_rating), per_hit: num(v.per_hit), fee: num(v.fee), per_worker: num(v.per_worker) });
  for (const k of Object.keys(c)) if (c[k] === 0) delete c[k];
  return Object.keys(c).length ? c : null;
}

const words = (text) => text.split(/[\s,;]+/).filter((s) => s !== "");
function pilotWhere(text) {  // "COL=VALUE ..." -> {COL: VALUE}
  const out = {};
  for (const w of words(text || "")) {
    const at = w.indexOf("=");
    if (at < 1) throw new InputProblem(`keep rows takes COL=VALUE, got ${JSON.stringify(w)}`);
    out[w.slice(0, at)] = w.slice(at + 1);
  }
  return Object.keys(out).length ? out : null;
}

// a pilot's layout (an uploaded file, --design-from): its own workers, k, h, systems and presentation
function likertPilotPlan(v) {
  const params = likertParams(v);
  const analysis = { method: v.method, test: v.test, alpha: num(v.alpha), n_sims: num(v.n_sims), seed: num(v.seed) };
  const pilot = { where: pilotWhere(v.pilot_where), pilot_systems: words(v.pilot_systems || "").length
    ? words(v.pilot_systems) : null };
  const items = num(v.items);
  const power = (itemsList) => compact({ params, items: itemsList, effect: [num(v.effect)], ...pilot, ...analysis });
  return { main: ["likert_power", power([items])], curve: ["likert_power", power(around(items, 20000)), "items"],
    cheapest: ["likert_sample_size", compact({ params, effect: num(v.effect), target_power: num(v.target_power),
      vary: "items", ...pilot, ...analysis })] };
}

// scenario -> the three calls: [function, keyword arguments] (+ the curve's x axis)
const PLANS = {
  likert(v) {
    if (state.pilot) return likertPilotPlan(v);
    const params = likertParams(v), costs = likertCosts(v);
    const design = { systems: num(v.systems), assignment: v.assignment || null, presentation: v.presentation };
    const analysis = { method: v.method, test: v.test, alpha: num(v.alpha), n_sims: num(v.n_sims), seed: num(v.seed) };
    const k = num(v.ratings_per_item), h = num(v.items_per_hit), items = num(v.items), workers = num(v.workers);
    const power = (itemsList) => compact({ params, workers: [workers], items: itemsList, effect: [num(v.effect)],
      ratings_per_item: k === null ? null : [k], items_per_hit: [h], ...design, costs, ...analysis });
    const cheapest = costs
      ? ["likert_budget", compact({ params, effect: num(v.effect), items: list(v.search_items),
          workers: list(v.search_workers), ratings_per_item: list(v.search_k), items_per_hit: [h], costs,
          target_power: num(v.target_power), ...design, ...analysis })]
      : ["likert_sample_size", compact({ params, effect: num(v.effect), target_power: num(v.target_power), workers,
          vary: "items", ratings_per_item: k, items_per_hit: h, ...design, ...analysis })];
    return { main: ["likert_power", power([items])], curve: ["likert_power", power(around(items, 20000)), "items"], cheapest };
  },
  h2h(v) {
    const common = { ties: v.ties, alpha: num(v.alpha) };
    const power = (n) => compact({ n, p_win: [num(v.p_win)], p_tie: [num(v.p_tie)], ...common, method: v.method,
      n_sims: num(v.n_sims), seed: num(v.seed) });
    return { main: ["h2h_power", power([num(v.n)])], curve: ["h2h_power", power(around(num(v.n), 20000)), "n"],
      cheapest: ["h2h_sample_size", compact({ p_win: num(v.p_win), p_tie: num(v.p_tie),
        target_power: num(v.target_power), ...common })] };
  },
  h2h_glmm(v) {  // the GLMM head-to-head planner: repeated judgments of workers on items
    let params;
    if (v.source === "file") {
      if (!state.h2hDoc) throw new InputProblem("load a head-to-head parameter file (from `hepower fit --family binomial -o FILE`) or type the SDs");
      params = state.h2hDoc;
    } else {
      params = compact({ sd_worker: num(v.sd_worker), sd_item: num(v.sd_item), p_tie: num(v.p_tie), ties: v.ties });
    }
    const p = num(v.p_win);
    if (!(p > 0 && p < 1)) throw new InputProblem(`P(B preferred | decisive) must be in (0, 1), got ${v.p_win}`);
    const logOdds = Math.log(p / (1 - p)), k = num(v.per_item), items = num(v.items), workers = num(v.workers);
    const common = { params, test: v.test, method: v.method, alpha: num(v.alpha), n_sims: num(v.n_sims), seed: num(v.seed) };
    const power = (itemsList) => compact({ workers: [workers], items: itemsList, log_odds: [logOdds],
      per_item: k === null ? null : [k], ...common });
    return { main: ["h2h_mixed_power", power([items])], curve: ["h2h_mixed_power", power(around(items, 20000)), "items"],
      cheapest: ["h2h_mixed_sample_size", compact({ log_odds: logOdds, workers, per_item: k,
        target_power: num(v.target_power), ...common })] };
  },
  accuracy(v) {
    const power = (n) => compact({ n, delta: [num(v.delta)], agreement: [num(v.agreement)], method: v.method,
      alpha: num(v.alpha), n_sims: num(v.n_sims), seed: num(v.seed) });
    return { main: ["mcnemar_power", power([num(v.n)])], curve: ["mcnemar_power", power(around(num(v.n), 20000)), "n"],
      cheapest: ["mcnemar_sample_size", compact({ delta: num(v.delta), agreement: num(v.agreement),
        target_power: num(v.target_power), method: v.method === "simulate" ? "exact" : v.method, alpha: num(v.alpha) })] };
  },
  bleu(v) {
    const common = { method: v.method, permutations: num(v.permutations), alpha: num(v.alpha), n_sims: num(v.n_sims),
      seed: num(v.seed) };
    const power = (n) => compact({ n, delta: [num(v.delta)], p0: [num(v.p0)], b0: [num(v.b0)], ...common });
    return { main: ["bleu_power", power([num(v.n)])], curve: ["bleu_power", power(around(num(v.n), 20000)), "n"],
      cheapest: ["bleu_sample_size", compact({ delta: num(v.delta), p0: num(v.p0), b0: num(v.b0),
        target_power: num(v.target_power), ...common })] };
  },
};

// ---------- jobs ----------

class ApiError extends Error {
  constructor(message, status) { super(message); this.status = status; }
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function api(method, url, body) {
  const init = { method, headers: {} };
  if (body !== undefined) { init.headers["Content-Type"] = "application/json"; init.body = JSON.stringify(body); }
  const r = await fetch(url, init);
  const doc = await r.json().catch(() => ({ detail: `HTTP ${r.status}` }));
  if (!r.ok) throw new ApiError(doc.detail || `HTTP ${r.status}`, r.status);
  return doc;
}

// Run one call as a job: poll its progress, return its outcome (null when superseded or cancelled).
async function submit(fn, body) {  // a job; with a pilot, the Likert planners' upload (--design-from)
  if (state.pilot) await state.described;
  if (!(state.pilot && scenario() === "likert" && state.uploads[fn] === "design_from")) {
    return api("POST", `/api/jobs/${fn}`, body);
  }
  return upload(fn, state.pilot, body);
}

async function upload(fn, file, body) {  // POST /api/upload/<fn>: the file(s) and the other arguments
  const form = new FormData();  // ``file``: its one file, or [argument, file] pairs (several file arguments)
  if (Array.isArray(file)) for (const [name, f] of file) form.append(name, f);
  else form.append("file", file);
  form.append("arguments", JSON.stringify(body));
  const r = await fetch(`/api/upload/${fn}`, { method: "POST", body: form });
  const doc = await r.json().catch(() => ({ detail: `HTTP ${r.status}` }));
  if (!r.ok) throw new ApiError(doc.detail || `HTTP ${r.status}`, r.status);
  return doc;
}

// Start a job, waiting while the server is busy (HTTP 429: the slots of superseded inputs free up) and
// ``current()`` (the request is still wanted).
async function started(start, current) {
  for (let wait = 100; ; wait = Math.min(2 * wait, 1000)) {
    try { return await start(); } catch (e) {
      if (!(e instanceof ApiError && e.status === 429) || !current()) throw e;
      await sleep(wait);
    }
  }
}

async function runJob(what, fn, body, generation) {
  let job = await started(() => submit(fn, body), () => generation === state.generation);
  if (generation !== state.generation) { api("DELETE", `/api/jobs/${job.id}`).catch(() => {}); return null; }
  state.running.add(job.id);
  const t0 = performance.now();
  try {
    while (job.state === "running") {
      if (generation !== state.generation) { await api("DELETE", `/api/jobs/${job.id}`).catch(() => {}); return null; }
      if (performance.now() - t0 > 300) showProgress(what, job);
      job = await api("GET", `/api/jobs/${job.id}?wait=0.25`);  // answered as soon as the job ends
    }
  } finally {
    state.running.delete(job.id);
    $("#progress").hidden = true;
  }
  if (job.state === "cancelled") return null;
  if (job.state !== "done") throw new ApiError(job.detail);
  return job;
}

function showProgress(what, job) {
  $("#progress").hidden = false;
  const bar = $("#progress-bar");
  if (job.total) { bar.max = job.total; bar.value = job.done; } else { bar.removeAttribute("value"); }
  const unit = job.unit;  // what the command's progress counts (its description's): studies, designs, trials
  $("#progress-label").textContent = `${what}: ${job.total ? `${job.done.toLocaleString()} / ${job.total.toLocaleString()} ${unit}` : "working"}`
    + ` (${job.seconds.toFixed(1)} s)`;
}

async function cancelAll() {
  state.generation += 1;
  await Promise.all([...state.running].map((id) => api("DELETE", `/api/jobs/${id}`).catch(() => {})));
  $("#progress").hidden = true;
  delete document.body.dataset.busy;
  showError("cancelled; change an input to compute again");
}

// ---------- the update cycle ----------

let timer = null;
function schedule() {
  showPanels();
  history.replaceState(null, "", "#" + encodeState());
  clearTimeout(timer);
  timer = setTimeout(update, 200);
}

async function update() {
  const generation = ++state.generation;
  for (const id of state.running) api("DELETE", `/api/jobs/${id}`).catch(() => {});  // superseded: free their slots
  let plan;
  try { plan = PLANS[scenario()](values()); } catch (e) { showError(e.message); return; }
  state.last = plan;
  document.body.dataset.busy = "1";
  try {
    const main = await runJob("power", ...plan.main, generation);
    if (!main) return;
    clearError();
    showMain(main);
    const curve = await runJob("power curve", plan.curve[0], plan.curve[1], generation);
    if (!curve) return;
    drawCurve(curve.records, plan.curve[2], main.records[0]);
    const cheapest = await runJob("search", ...plan.cheapest, generation);
    if (!cheapest) return;
    showCheapest(cheapest);
  } catch (e) {
    if (generation === state.generation) { showError(e.message); clearResults(); }
  } finally {
    if (generation === state.generation) delete document.body.dataset.busy;
  }
}

// ---------- display ----------

const fmt = (v, digits = 3) => (v === null || v === undefined ? "–" : Number(v).toFixed(digits));
const sig = (v) => (v === null || v === undefined ? "–" : Number(v).toPrecision(3));

function showError(message) { $("#error").textContent = message; $("#error").hidden = false; }
function clearError() { $("#error").hidden = true; $("#error").textContent = ""; }

function clearResults() {
  for (const id of ["#power", "#type-s", "#type-m", "#cost"]) { $(id).textContent = "–"; $(id).dataset.value = ""; }
  $("#power-ci").textContent = ""; $("#cheapest").textContent = "";
  for (const c of ["#curve", "#frontier"]) $(c).getContext("2d").clearRect(0, 0, $(c).width, $(c).height);
}

function setValue(id, value, text) { $(id).dataset.value = value === null || value === undefined ? "" : JSON.stringify(value); $(id).textContent = text; }

function showMain(job) {
  const r = job.records[0];
  state.mainJob = job;
  setValue("#power", r.power, fmt(r.power));
  $("#power-ci").textContent = r.n_sims ? `[${fmt(r.ci_low)}, ${fmt(r.ci_high)}]` : "(exact)";
  setValue("#type-s", r.type_s, sig(r.type_s));
  setValue("#type-m", r.type_m, sig(r.type_m));
  setValue("#cost", r.cost ?? null, r.cost === undefined || r.cost === null ? "–" : Number(r.cost).toLocaleString());
  $("#command").textContent = job.command;
  $("#python").textContent = job.python;
  const file = scenario() === "likert" && values().source === "file";
  $("#command-note").innerHTML = "The same numbers from the command line (add <code>--json</code> for every digit)"
    + (file ? "; save the parameter file as <code>params.json</code> first (Download params JSON):" : ":");
  $("#cheapest").textContent = "searching …";
  delete $("#cheapest").dataset.value;
  $("#frontier").getContext("2d").clearRect(0, 0, $("#frontier").width, $("#frontier").height);
}

function showCheapest(job) {
  const r = job.records[0], v = values(), target = num(v.target_power);
  const el = $("#cheapest");
  el.dataset.value = JSON.stringify(r.value);
  if (!r.attainable) { el.textContent = `Target power ${target} not reached: ${r.reason}`; }
  else if (job.function === "likert_budget") {
    el.textContent = `Cheapest design reaching ${target * 100}% power: ${r.items} items, ${r.workers} workers, `
      + `${r.ratings_per_item} ratings per item, cost ${Number(r.value).toLocaleString()} `
      + `(power ${fmt(r.power)} [${fmt(r.ci_low)}, ${fmt(r.ci_high)}], Type-M ${sig(r.type_m)})`;
  } else {
    const what = { items: "items", n: "n" }[r.solve_for] || r.solve_for;
    el.textContent = `Smallest ${what} reaching ${target * 100}% power: ${r.value}`
      + (r.power !== undefined ? ` (power there ${fmt(r.power)})` : "")
      + (scenario() === "likert" ? " — give costs to search the cheapest crowd design" : "");
  }
  if (job.designs) drawFrontier(job.designs, target, r);
}

// ---------- charts (canvas) ----------

function axes(ctx, box, xs, xlabel, ylabel, log) {
  const [x0, x1] = [Math.min(...xs), Math.max(...xs)];
  const tx = log ? (x) => Math.log(x) : (x) => x;
  const span = tx(x1) - tx(x0) || 1;
  const X = (x) => box.l + (tx(x) - tx(x0)) / span * (box.r - box.l);
  const Y = (y) => box.b - y * (box.b - box.t);
  ctx.strokeStyle = "#9aa3b2"; ctx.fillStyle = "#3b4252"; ctx.lineWidth = 1; ctx.font = "11px sans-serif";
  ctx.beginPath(); ctx.moveTo(box.l, box.t); ctx.lineTo(box.l, box.b); ctx.lineTo(box.r, box.b); ctx.stroke();
  for (const y of [0, 0.2, 0.4, 0.6, 0.8, 1]) {
    ctx.fillText(y.toFixed(1), box.l - 24, Y(y) + 4);
    ctx.strokeStyle = "#eceff4"; ctx.beginPath(); ctx.moveTo(box.l + 1, Y(y)); ctx.lineTo(box.r, Y(y)); ctx.stroke();
  }
  const step = Math.ceil(xs.length / 7);  // at most 7 labels
  xs.filter((x, i) => i % step === 0 || i === xs.length - 1)
    .forEach((x) => { ctx.textAlign = "center"; ctx.fillText(Number(x).toLocaleString(), X(x), box.b + 14); });
  ctx.textAlign = "left";
  ctx.fillText(xlabel, (box.l + box.r) / 2 - 20, box.b + 30);
  ctx.save(); ctx.translate(12, (box.t + box.b) / 2 + 16); ctx.rotate(-Math.PI / 2); ctx.fillText(ylabel, 0, 0); ctx.restore();
  return { X, Y };
}

function targetLine(ctx, box, Y, target) {
  if (!(target > 0 && target < 1)) return;
  ctx.strokeStyle = "#c0392b"; ctx.setLineDash([4, 3]);
  ctx.beginPath(); ctx.moveTo(box.l, Y(target)); ctx.lineTo(box.r, Y(target)); ctx.stroke(); ctx.setLineDash([]);
}

function drawCurve(records, xkey, current) {
  const c = $("#curve"), ctx = c.getContext("2d");
  ctx.clearRect(0, 0, c.width, c.height);
  const box = { l: 40, r: c.width - 24, t: 10, b: c.height - 40 };
  const pts = records.map((r) => ({ x: r[xkey], y: r.power, lo: r.ci_low, hi: r.ci_high })).sort((a, b) => a.x - b.x);
  const { X, Y } = axes(ctx, box, pts.map((p) => p.x), xkey, "power", true);
  targetLine(ctx, box, Y, num(values().target_power));
  ctx.fillStyle = "rgba(52, 101, 164, .15)"; ctx.beginPath();
  pts.forEach((p, i) => (i ? ctx.lineTo(X(p.x), Y(p.hi)) : ctx.moveTo(X(p.x), Y(p.hi))));
  [...pts].reverse().forEach((p) => ctx.lineTo(X(p.x), Y(p.lo))); ctx.fill();
  ctx.strokeStyle = "#3465a4"; ctx.lineWidth = 2; ctx.beginPath();
  pts.forEach((p, i) => (i ? ctx.lineTo(X(p.x), Y(p.y)) : ctx.moveTo(X(p.x), Y(p.y)))); ctx.stroke();
  for (const p of pts) {
    ctx.fillStyle = p.x === current[xkey] ? "#c0392b" : "#3465a4";
    ctx.beginPath(); ctx.arc(X(p.x), Y(p.y), p.x === current[xkey] ? 5 : 3, 0, 2 * Math.PI); ctx.fill();
  }
  $("#curve-caption").textContent = `Power against ${xkey} (band: 95% interval; red: this design; dashed: target)`;
  c.dataset.points = JSON.stringify(pts);
}

function drawFrontier(designs, target, answer) {
  const c = $("#frontier"), ctx = c.getContext("2d");
  ctx.clearRect(0, 0, c.width, c.height);
  const box = { l: 40, r: c.width - 24, t: 10, b: c.height - 40 };
  const costs = [...new Set(designs.map((d) => d.cost))].sort((a, b) => a - b);
  const { X, Y } = axes(ctx, box, costs.length > 1 ? costs : [costs[0], costs[0] * 1.01], "cost", "power", false);
  targetLine(ctx, box, Y, target);
  for (const d of designs) {
    const reach = d.power >= target;
    ctx.strokeStyle = "#4d8a3a"; ctx.beginPath(); ctx.moveTo(X(d.cost), Y(d.ci_low)); ctx.lineTo(X(d.cost), Y(d.ci_high)); ctx.stroke();
    ctx.fillStyle = reach ? "#4d8a3a" : "#fff"; ctx.beginPath(); ctx.arc(X(d.cost), Y(d.power), 4, 0, 2 * Math.PI); ctx.fill(); ctx.stroke();
  }
  if (answer && answer.attainable) {
    ctx.strokeStyle = "#c0392b"; ctx.lineWidth = 2; ctx.beginPath(); ctx.arc(X(answer.value), Y(answer.power), 7, 0, 2 * Math.PI); ctx.stroke(); ctx.lineWidth = 1;
  }
  c.dataset.points = JSON.stringify(designs.map((d) => ({ cost: d.cost, power: d.power })));
}

// ---------- share, downloads, command ----------

function download(name, doc) {
  const url = URL.createObjectURL(new Blob([JSON.stringify(doc, null, 1) + "\n"], { type: "application/json" }));
  const a = Object.assign(document.createElement("a"), { href: url, download: name });
  document.body.appendChild(a); a.click(); a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 1000);
}

function designDoc() {  // a `--design FILE` for the Likert commands, else the request
  const v = values();
  if (scenario() !== "likert") return state.last ? state.last.main[1] : {};
  return compact({ items: num(v.items), workers: num(v.workers), ratings_per_item: num(v.ratings_per_item),
    items_per_hit: num(v.items_per_hit), systems: num(v.systems), assignment: v.assignment || null,
    presentation: v.presentation });
}

function paramsDoc() {
  const v = values();
  if (v.source === "file") return state.paramsDoc;
  if (v.source === "preset") return state.presets[v.preset];
  const p = likertParams(v);
  return { schema: "humaneval-power/likert-params", version: 1, family: "gaussian",
    effect_coding: "mean-difference (x = -0.5 for system A, +0.5 for system B)", name: "typed", intercept: p.intercept ?? 0.5,
    sd_worker_intercept: p.sd_worker_intercept, sd_worker_slope: p.sd_worker_slope, sd_item_intercept: p.sd_item_intercept,
    sd_item_slope: p.sd_item_slope, sd_residual: p.sd_residual, correlations: null, scale: null, effect: null, provenance: {} };
}

async function uploadParams(file) {
  const form = new FormData();
  form.append("file", file);
  try {
    const r = await fetch("/api/params", { method: "POST", body: form });
    const doc = await r.json();
    if (!r.ok) throw new ApiError(doc.detail);
    state.paramsDoc = doc.params; state.paramsName = doc.filename;
    clearError(); schedule();
  } catch (e) { state.paramsDoc = null; showPanels(); showError(e.message); }
}

// ---------- the analysis of a completed study (POST /api/upload/analyze) ----------

//: the backends of each family of ratings (hepower analyze --backend), the first the family's default
const ANALYSIS_BACKENDS = {
  gaussian: [["lme4", "lme4 (R)"], ["statsmodels", "statsmodels (no R)"]],
  ordinal: [["clmm", "clmm (R ordinal::clmm)"], ["laplace", "laplace (no R, the same likelihood)"]],
};

function analysisBackends() {
  $("#analysis-backend").replaceChildren(
    ...ANALYSIS_BACKENDS[$("#analysis-family").value].map(([value, text]) => new Option(text, value)));
}

async function analyseStudy() {
  const file = $("#ratings-file").files[0];
  const error = $("#analysis-error");
  error.hidden = true;
  if (!file) { error.textContent = "choose a ratings file first"; error.hidden = false; return; }
  $("#analysis-status").textContent = "analysing ...";
  try {
    let job = await started(() => upload("analyze", file,
      { contrasts: $("#analysis-contrasts").value, backend: $("#analysis-backend").value,
        ...($("#analysis-family").value === "gaussian" ? {} : { family: $("#analysis-family").value }) }),
      () => true);
    while (job.state === "running") {
      $("#analysis-status").textContent = `analysing: ${job.label || "working"} (${job.seconds.toFixed(1)} s)`;
      await sleep(100);
      job = await api("GET", `/api/jobs/${job.id}`);
    }
    if (job.state !== "done") throw new ApiError(job.detail);
    $("#analysis-status").textContent = `analysed ${file.name}: ${job.records.length} contrasts`;
    $("#analysis-command").textContent = job.command; $("#analysis-command").hidden = false;
    const report = $("#analysis-report");
    report.dataset.records = JSON.stringify(job.records);
    report.srcdoc = job.report; report.hidden = false;
  } catch (e) {
    $("#analysis-status").textContent = "";
    error.textContent = e.message; error.hidden = false;
  }
}

// ---------- every other command: a form generated from the description (GET /api "forms") ----------

function buildForm() {
  const fn = $("#other-function").value, form = $("#other-form");
  form.innerHTML = "";
  for (const a of state.forms[fn] || []) {
    if (["params", "costs", "pair"].includes(a.type)) continue;  // the planners above build these
    const label = document.createElement("label");
    label.title = a.help || "";
    label.append(`${a.name}${a.required ? " *" : ""} `);
    let input;
    if (a.type === "file") {  // a table (.csv, ...) or text files, one segment per line (any name)
      input = Object.assign(document.createElement("input"), { type: "file", multiple: !!a.several });
      if (a.accept) input.accept = a.accept.join(",");
    } else if (a.choices && !a.several) {
      input = document.createElement("select");
      input.append(new Option(a.default === null || a.default === undefined ? "(default)" : `(default: ${a.default})`, ""));
      for (const c of a.choices) input.append(new Option(c, c));
    } else if (a.type === "switch") {
      input = Object.assign(document.createElement("input"), { type: "checkbox" });
    } else {
      input = Object.assign(document.createElement("input"), { type: "text",
        placeholder: a.type === "where" ? "COL=VALUE ..." : a.default ?? "" });
    }
    input.dataset.arg = a.name;
    label.append(input);
    form.append(label);
  }
}

function otherArguments(fn) {  // the form's values as the function's JSON keyword arguments
  const body = {}, files = [];
  for (const input of $("#other-form").querySelectorAll("[data-arg]")) {
    const a = state.forms[fn].find((x) => x.name === input.dataset.arg);
    if (a.type === "file") { for (const f of input.files) files.push([a.name, f]); continue; }
    if (a.type === "switch") { if (input.checked) body[a.name] = true; continue; }
    if (input.value.trim() === "") continue;
    const numeric = a.type === "number" || a.type === "integer";
    const value = (w) => (numeric && w !== "" && !isNaN(Number(w)) ? Number(w) : w);
    if (a.type === "where") body[a.name] = pilotWhere(input.value);
    else body[a.name] = a.several ? words(input.value).map(value) : value(input.value.trim());
  }
  return { body, files };
}

function recordsTable(records) {
  const table = document.createElement("table");
  const columns = [...new Set(records.flatMap((r) => Object.keys(r)))];
  const head = table.createTHead().insertRow();
  for (const c of columns) head.append(Object.assign(document.createElement("th"), { textContent: c }));
  const body = table.createTBody();
  for (const r of records) {
    const row = body.insertRow();
    for (const c of columns) {
      const v = r[c];
      row.insertCell().textContent = typeof v === "number" && !Number.isInteger(v) ? sig(v) : v === null || v === undefined ? "" : String(v);
    }
  }
  return table;
}

async function runOther() {
  const fn = $("#other-function").value, error = $("#other-error");
  error.hidden = true;
  $("#other-records").innerHTML = ""; $("#other-summary").hidden = $("#other-command").hidden = true;
  $("#other-params").hidden = true;
  $("#other-status").textContent = "running ...";
  try {
    const { body, files } = otherArguments(fn);
    const needed = state.uploads[fn] ? state.forms[fn].filter((a) => a.type === "file" && a.required) : [];
    const missing = needed.find((a) => !files.some(([name]) => name === a.name));
    if (missing) throw new InputProblem(`choose the file (${missing.name}) first`);
    let job = await started(() => (files.length ? upload(fn, files, body) : api("POST", `/api/jobs/${fn}`, body)),
      () => true);
    while (job.state === "running") {
      $("#other-status").textContent = `running: ${job.label || (job.total ? `${job.done} / ${job.total}` : "working")} (${job.seconds.toFixed(1)} s)`;
      await sleep(100);
      job = await api("GET", `/api/jobs/${job.id}`);
    }
    if (job.state !== "done") throw new ApiError(job.detail);
    $("#other-status").textContent = `${fn}: ${job.records.length} record${job.records.length === 1 ? "" : "s"}`;
    $("#other-command").textContent = job.command; $("#other-command").hidden = false;
    if (job.summary) { $("#other-summary").textContent = job.summary; $("#other-summary").hidden = false; }
    if (job.params_file) {  // a fitted pilot: the parameter file as `hepower fit -o` writes it
      const link = $("#other-params");
      if (link.href) URL.revokeObjectURL(link.href);
      link.href = URL.createObjectURL(new Blob([job.params_file], { type: "application/json" }));
      link.hidden = false;
    }
    const records = $("#other-records");
    records.dataset.records = JSON.stringify(job.records);
    records.append(recordsTable(job.records));
  } catch (e) {
    $("#other-status").textContent = "";
    error.textContent = e.message; error.hidden = false;
  }
}

async function loadForms() {
  const doc = await api("GET", "/api");
  state.forms = doc.forms; state.uploads = doc.uploads;
  const select = $("#other-function");
  for (const fn of Object.keys(doc.forms)) select.append(new Option(fn, fn));
  select.value = "agreement" in doc.forms ? "agreement" : Object.keys(doc.forms)[0];
  buildForm();
}

function readJson(file) {  // a head-to-head parameter file, sent as the request's params (checked by the server)
  return file.text().then((text) => {
    try { return JSON.parse(text); } catch (e) { throw new InputProblem(`${file.name} is not JSON (${e.message})`); }
  });
}

function init() {
  restoreState(location.hash);
  showPanels();
  $("#inputs").addEventListener("input", schedule);
  const files = ["params-file", "pilot-file", "h2h-params-file"];
  $("#inputs").addEventListener("change", (e) => { if (!files.includes(e.target.id)) schedule(); });
  $("#params-file").addEventListener("change", (e) => { if (e.target.files[0]) uploadParams(e.target.files[0]); });
  $("#cancel").addEventListener("click", cancelAll);
  $("#analysis-run").addEventListener("click", analyseStudy);
  $("#analysis-family").addEventListener("change", analysisBackends);
  $("#pilot-file").addEventListener("change", (e) => { state.pilot = e.target.files[0] || null; schedule(); });
  $("#pilot-clear").addEventListener("click", () => { state.pilot = null; $("#pilot-file").value = ""; schedule(); });
  $("#h2h-params-file").addEventListener("change", async (e) => {
    const file = e.target.files[0];
    if (!file) return;
    try { state.h2hDoc = await readJson(file); state.h2hName = file.name; clearError(); schedule(); }
    catch (err) { state.h2hDoc = null; showPanels(); showError(err.message); }
  });
  $("#other-function").addEventListener("change", buildForm);
  $("#other-run").addEventListener("click", runOther);
  state.described = loadForms().catch((e) => { $("#other-error").textContent = e.message; $("#other-error").hidden = false; });
  window.addEventListener("hashchange", () => { restoreState(location.hash); showPanels(); update(); });  // a link pasted
  $("#share").addEventListener("click", async () => {
    const url = location.href.split("#")[0] + "#" + encodeState();
    $("#share-url").value = url; $("#share-url").hidden = false; $("#share-url").select();
    try { await navigator.clipboard.writeText(url); } catch (e) { /* the field shows it */ }
  });
  $("#dl-design").addEventListener("click", () => download(scenario() === "likert" ? "design.json" : "request.json", designDoc()));
  $("#dl-params").addEventListener("click", () => {
    if (scenario() !== "likert") { showError("parameter files belong to the Likert planner"); return; }
    try { download("params.json", paramsDoc()); } catch (e) { showError(e.message); }
  });
  $("#dl-request").addEventListener("click", () => {
    if (state.last) download("request.json", { function: state.last.main[0], arguments: state.last.main[1] });
  });
  $("#show-command").addEventListener("click", () => { $("#command-box").hidden = !$("#command-box").hidden; });
  api("GET", "/api/presets").then((p) => { state.presets = p; }).catch(() => {});
  update();
}

init();
