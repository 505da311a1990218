// The labelling page. Every piece of study text (query, document, names) reaches the DOM as a text node
// (textContent / createTextNode): documents are untrusted, and nothing here parses them as HTML.
"use strict";

const NAME_KEY = "retbench.labeller";
const RETRY_MS = 700;
const state = { labeller: null, scale: [0, 1, 2, 3], pair: null, busy: false, study: null, agreement: false };

const $ = (id) => document.getElementById(id);

function el(tag, text, cls) {
  const node = document.createElement(tag);
  if (text !== undefined && text !== null) node.textContent = String(text);
  if (cls) node.className = cls;
  return node;
}

function say(text, kind) {
  const box = $("status");
  box.textContent = text || "";
  box.className = kind || "";
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// One request; a refused connection (the server is down or restarting) is retried until it answers, so a
// grade typed while the server is away is stored once it is back (the server stores a repeat only once).
async function call(method, path, body) {
  const options = { method, headers: {}, cache: "no-store" };
  if (body !== undefined) {
    options.headers["Content-Type"] = "application/json";
    options.body = JSON.stringify(body);
  }
  for (;;) {
    let response;
    try {
      response = await fetch(path, options);
    } catch (err) {
      say("The server is not answering: retrying (your last answer is kept until it is stored)...", "offline");
      await sleep(RETRY_MS);
      continue;
    }
    const data = await response.json().catch(() => ({ error: `HTTP ${response.status}` }));
    if (document.getElementById("status").className === "offline") say("");
    return { ok: response.ok, status: response.status, data };
  }
}

function fmt(x) {
  return typeof x === "number" ? x.toFixed(3) : "-";
}

function renderPair(pair) {
  state.pair = pair;
  $("pair").hidden = !pair;
  $("empty").hidden = !!pair;
  if (!pair) {
    $("empty").textContent = state.agreement
      ? "No pair graded by someone else is waiting for your second opinion."
      : "Nothing left in your queue. Ask for more with `retbench label next STUDY --budget N`, then reload.";
    return;
  }
  $("qid").textContent = pair.qid;
  $("doc-id").textContent = pair.doc_id;
  $("query").textContent = pair.query;
  const doc = $("doc");
  doc.replaceChildren();
  for (const seg of pair.segments) {
    doc.appendChild(seg.mark ? el("mark", seg.text) : document.createTextNode(seg.text));
  }
  doc.scrollTop = 0;
}

function renderProgress(p) {
  if (!p) return;
  const bar = $("progress");
  bar.max = Math.max(p.queued, 1);
  bar.value = p.done;
  $("progress-text").textContent =
    `${p.done} of ${p.queued} queued pairs done (you: ${p.graded_by_you} graded, ${p.skipped_by_you} skipped; ` +
    `${p.pairs_graded} of ${p.pairs} pairs have a human grade)`;
  if (p.note) say(p.note, "note");
}

function renderReveal(reveal) {
  const box = $("reveal");
  box.replaceChildren();
  if (!reveal) return;
  const llm = reveal.llm;
  const said = !llm ? "no LLM grade for this pair" :
    llm.grade === null || llm.grade === undefined ? `the LLM gave no grade (${llm.status})` : `LLM: ${llm.grade}`;
  box.appendChild(el("span", `Stored pair #${reveal.pair_id}: you ${reveal.grade}`, "you"));
  box.appendChild(el("span", said, "llm"));
}

function systemsOf(est) {
  if (est.systems && typeof est.systems === "object" && !Array.isArray(est.systems)) return est.systems;
  const out = {};
  for (const [name, row] of Object.entries(est)) {
    if (name !== "difference" && row && typeof row === "object" && "mean" in row) out[name] = row;
  }
  return out;
}

function intervalBar(row, lo, hi) {
  const track = el("div", null, "track");
  const span = el("div", null, "span");
  const dot = el("div", null, "dot");
  const at = (x) => `${(100 * (x - lo)) / (hi - lo || 1)}%`;
  if (typeof row.low === "number" && typeof row.high === "number") {
    span.style.left = at(row.low);
    span.style.width = `${(100 * (row.high - row.low)) / (hi - lo || 1)}%`;
    track.appendChild(span);
  }
  if (typeof row.mean === "number") {
    dot.style.left = at(row.mean);
    track.appendChild(dot);
  }
  return track;
}

function renderEstimate(data) {
  const body = $("estimate").tBodies[0];
  body.replaceChildren();
  $("estimate-note").textContent = data.error || "";
  const est = data.estimate;
  if (est) {
    const rows = Object.entries(systemsOf(est));
    if (est.difference) {
      const d = est.difference;
      rows.push([`difference ${d.a} - ${d.b}`, d]);
    }
    const nums = rows.flatMap(([, r]) => [r.low, r.high, r.mean]).filter((x) => typeof x === "number");
    const lo = Math.min(0, ...nums);
    const hi = Math.max(1, ...nums);
    for (const [name, row] of rows) {
      const tr = document.createElement("tr");
      tr.dataset.system = name;
      tr.appendChild(el("td", name));
      tr.appendChild(el("td", row.estimate ?? ""));
      tr.appendChild(el("td", fmt(row.mean), "num"));
      tr.appendChild(el("td", `[${fmt(row.low)}, ${fmt(row.high)}]`, "num"));
      const cell = el("td");
      cell.appendChild(intervalBar(row, lo, hi));
      tr.appendChild(cell);
      tr.appendChild(el("td", row.n_human ?? "", "num n-human"));
      tr.appendChild(el("td", row.n_llm ?? "", "num"));
      body.appendChild(tr);
    }
  }
  const agree = data.agreement;
  const parts = Object.entries(agree.labellers).map(([who, n]) => `${who}: ${n} graded`);
  for (const p of agree.pairs) {
    const k = p.kappa === null ? "undefined" : p.kappa.toFixed(2);
    parts.push(`${p.a} vs ${p.b}: Cohen's kappa ${k} on ${p.n} pairs both graded (relevant = grade >= ${p.relevant_from}), ` +
      `same grade on ${(100 * p.exact).toFixed(0)}%`);
  }
  $("agreement").textContent = parts.length ? parts.join("; ") : "No human grades yet.";
}

// the table is marked "loading" while an estimate is on its way (several may overlap)
let estimating = 0;

async function refreshEstimate() {
  estimating += 1;
  $("estimate").classList.add("loading");
  try {
    const r = await call("GET", "/api/estimate");
    if (r.ok) renderEstimate(r.data);
  } finally {
    estimating -= 1;
    if (!estimating) $("estimate").classList.remove("loading");
  }
}

async function loadNext() {
  const mode = state.agreement ? "&mode=agreement" : "";
  const r = await call("GET", `/api/next?labeller=${encodeURIComponent(state.labeller)}${mode}`);
  if (!r.ok) return say(r.data.error, "error");
  renderPair(r.data.pair);
  renderProgress(r.data.progress);
}

async function act(path, extra) {
  if (state.busy || !state.pair) return;
  state.busy = true;
  document.body.classList.add("busy");
  try {
    const pair = state.pair;
    const r = await call("POST", path, { labeller: state.labeller, pair_id: pair.pair_id, doc_sha256: pair.doc_sha256, ...extra });
    if (!r.ok) {
      say(r.data.error, "error");
    } else {
      say(r.data.duplicate ? "Already stored (kept once)." : "");
      renderReveal(r.data.reveal);
      renderProgress(r.data.progress);
    }
    await loadNext();
    refreshEstimate();
  } finally {
    state.busy = false;
    document.body.classList.remove("busy");
  }
}

async function undo() {
  if (state.busy) return;
  state.busy = true;
  document.body.classList.add("busy");
  try {
    const r = await call("POST", "/api/undo", { labeller: state.labeller });
    if (!r.ok) return say(r.data.error, "error");
    const old = r.data.undone;
    say(`Undone: your ${old.event === "grade" ? `grade ${old.grade}` : "skip"} of pair #${old.pair_id}.`);
    renderReveal(null);
    renderPair(r.data.pair);
    renderProgress(r.data.progress);
    refreshEstimate();
  } finally {
    state.busy = false;
    document.body.classList.remove("busy");
  }
}

function toggleHelp(show) {
  const help = $("help");
  help.hidden = show === undefined ? !help.hidden : !show;
}

function onKey(event) {
  if (event.ctrlKey || event.metaKey || event.altKey) return;
  if (event.target === $("name-input") || !$("name-form").hidden) return;
  const key = event.key;
  if (key === "a" || key === "A") return setAgreement(!state.agreement);
  if (key === "?") return toggleHelp();
  if (key === "Escape") return toggleHelp(false);
  if (key === "s" || key === "S") return act("/api/skip", {});
  if (key === "u" || key === "U" || key === "Backspace") {
    event.preventDefault();
    return undo();
  }
  if (/^[0-9]$/.test(key) && state.scale.includes(Number(key))) return act("/api/label", { grade: Number(key) });
}

function setAgreement(on) {
  state.agreement = on;
  $("agreement-mode").checked = on;
  if (!state.busy) loadNext();
}

function renderGrades() {
  const box = $("grades");
  box.replaceChildren();
  for (const g of state.scale) {
    const b = el("button", String(g), "grade");
    b.type = "button";
    b.title = `grade ${g} (key ${g})`;
    b.addEventListener("click", () => act("/api/label", { grade: g }));
    box.appendChild(b);
  }
  const skip = el("button", "skip (s)");
  skip.type = "button";
  skip.addEventListener("click", () => act("/api/skip", {}));
  const back = el("button", "undo (u)");
  back.type = "button";
  back.addEventListener("click", undo);
  box.append(skip, back);
  $("help-keys").querySelector("dt").textContent = `${state.scale[0]} … ${state.scale[state.scale.length - 1]}`;
}

function askName() {
  $("name-form").hidden = false;
  $("pair").hidden = true;
  const input = $("name-input");
  input.value = state.labeller || "";
  input.focus();
}

async function start(name) {
  state.labeller = name;
  $("labeller-name").textContent = name;
  $("name-form").hidden = true;
  await loadNext();
  await refreshEstimate();
}

async function init() {
  const r = await call("GET", "/api/study");
  if (!r.ok) return say(r.data.error, "error");
  state.study = r.data;
  state.scale = r.data.scale;
  $("study-name").textContent = r.data.name || "Labelling";
  $("metric").textContent = r.data.metric ? `metric: ${r.data.metric}` : "";
  renderGrades();
  document.addEventListener("keydown", onKey);
  $("help-button").addEventListener("click", () => toggleHelp());
  $("change-name").addEventListener("click", askName);
  $("agreement-mode").addEventListener("change", (event) => {
    event.target.blur();
    setAgreement(event.target.checked);
  });
  $("name-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const name = $("name-input").value.trim();
    if (!name) return;
    localStorage.setItem(NAME_KEY, name);
    start(name);
  });
  const name = r.data.labeller || localStorage.getItem(NAME_KEY);
  if (name) start(name);
  else askName();
}

init();
