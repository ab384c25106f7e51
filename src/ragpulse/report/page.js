"use strict";
// The ragpulse report page. Everything it shows comes from the JSON embedded above:
// list columns per run in #rp-data, the detail of each run in #rp-detail-N, parsed
// the first time a request of that run is opened.
const DATA = JSON.parse(document.getElementById("rp-data").textContent);
const RUNS = DATA.runs;
const PAGE_SIZE = 100;
const VERDICT_LABELS = {
  SUPPORTED: "✓ supported", INFERRED: "≈ inferred", NOT_FOUND: "? not found", CONTRADICTED: "✗ contradicted",
};
const VERDICT_HELP = {
  SUPPORTED: "a passage states it (evidence highlighted)",
  INFERRED: "follows from the passages, none states it",
  NOT_FOUND: "the passages are silent",
  CONTRADICTED: "a passage states otherwise (conflicting passage highlighted)",
};
const BINS = 10;
const SOURCES = { eval: "ragpulse eval output", traces: "OTLP traces", evaluations: "evaluations recorded live", empty: "nothing yet" };
const ABSTENTIONS = ["", "abstained, though answerable", "abstained, rightly", "abstained"];
const DIAGNOSIS_HELP = {
  ok: "nothing to fault in the claims: they are in the passages (relevancy and completeness are scored on their own)",
  retrieval_miss: "retrieval: the passages lacked what the answer needed",
  generation_drift: "generation: the passages held it, the answer left them",
  unanswerable_ok: "the answer rightly abstained: the passages could not answer",
  tool_failure: "a tool failed before the answer was given",
  unvouched_history: "claims rest only on history tool results no tool span vouches for",
};
const FAILING = ["CONTRADICTED", "NOT_FOUND"];
const details = [];
const state = { tab: RUNS.length > 1 ? "compare" : "run0", cut: "", runs: RUNS.map(initialRunState) };

function initialRunState(run) {
  // The list opens worst first by each request's worst metric (the one furthest below its
  // threshold), so a failing relevancy is not hidden among passing groundedness scores.
  const metric = run.metrics.includes("groundedness") ? "groundedness" : run.metrics[0];
  return { status: "", verdict: "", metric: metric || "", label: "", search: "", sort: run.metrics.length ? "worst" : "index", dir: 1, page: 0, selected: -1, claim: -1 };
}

function detailOf(r) {
  if (!details[r]) {
    const detail = JSON.parse(document.getElementById("rp-detail-" + r).textContent);
    // Claim texts and evidence that are stretches of the answer or passage were left out.
    for (const request of detail.requests) {
      const [, , answer, contexts, claims] = request;
      for (const c of claims) {
        if (c[0] === null) c[0] = answer.slice(c[2], c[3]);
        const passage = contexts && contexts[c[4]] ? detail.texts[contexts[c[4]][0]] : null;
        if (c[7] === null && c[5] !== null && c[6] !== null && passage !== null) c[7] = passage.slice(c[5], c[6]);
      }
    }
    details[r] = detail;
  }
  return details[r];
}

function esc(text) {
  return String(text).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
}

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "html") node.innerHTML = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? "" : value);
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function verdictBadge(verdict) {
  return el("span", { class: "vlabel v-" + verdict }, VERDICT_LABELS[verdict] || verdict.toLowerCase());
}

function fmtScore(value) { return value < 0 ? "–" : (value / 1000).toFixed(2); }
function pct(part, whole) { return whole ? Math.round((100 * part) / whole) + "%" : "n/a"; }
function plural(count, noun) { return count + " " + noun + (count === 1 ? "" : "s"); }

// --- statistics --------------------------------------------------------------------------

function metricStats(run, metric, indexes) {
  const bins = new Array(BINS).fill(0);
  // A metric the run never scored (the other run of a comparison did) has no scores at all.
  if (!run.sc[metric]) return { n: indexes.length, defined: 0, passed: 0, bins, mean: null };
  const scores = run.sc[metric], labels = run.lab[metric];
  let defined = 0, passed = 0, total = 0;
  for (const i of indexes) {
    const s = scores[i];
    if (s < 0) continue;
    defined += 1;
    total += s;
    passed += labels[i] === 1 ? 1 : 0;
    bins[Math.min(BINS - 1, Math.floor((s / 1000) * BINS))] += 1;
  }
  return { n: indexes.length, defined, passed, bins, mean: defined ? total / defined / 1000 : null };
}

function histogram(stats, threshold, width, height, before) {
  const ns = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("class", "hist");
  svg.setAttribute("width", width);
  svg.setAttribute("height", height);
  svg.setAttribute("role", "img");
  const top = Math.max(1, ...stats.bins, ...(before ? before.bins : []));
  const axis = height > 40 ? 12 : 0;
  const pad = axis ? 10 : 0; // room for the counts above the bars
  const plot = height - axis;
  const bw = width / BINS;
  const share = (count, total) => (total ? count / total : 0);
  const scale = before ? Math.max(1e-9, ...stats.bins.map((c) => share(c, stats.defined)), ...before.bins.map((c) => share(c, before.defined))) : top;
  svg.setAttribute("aria-label", "score distribution: " + stats.bins.join(", "));
  stats.bins.forEach((count, b) => {
    const value = before ? share(count, stats.defined) : count;
    const h = (value / scale) * (plot - pad - 2);
    const rect = document.createElementNS(ns, "rect");
    rect.setAttribute("x", b * bw + 1);
    rect.setAttribute("y", plot - h);
    rect.setAttribute("width", bw - 2);
    rect.setAttribute("height", h);
    // A metric without a threshold (a share to read) has no failing side.
    rect.setAttribute("fill", threshold === null ? "#0969da" : (b + 1) / BINS <= threshold + 1e-9 ? "#cf222e" : "#1a7f37");
    rect.setAttribute("opacity", "0.8");
    const title = document.createElementNS(ns, "title");
    title.textContent = `${(b / BINS).toFixed(1)}–${((b + 1) / BINS).toFixed(1)}: ${count}`;
    rect.append(title);
    svg.append(rect);
    if (axis && count && !before) {
      const label = document.createElementNS(ns, "text");
      label.setAttribute("x", b * bw + bw / 2);
      label.setAttribute("y", Math.max(8, plot - h - 2));
      label.setAttribute("text-anchor", "middle");
      label.textContent = count;
      svg.append(label);
    }
    if (before) {
      const hb = (share(before.bins[b], before.defined) / scale) * (plot - pad - 2);
      const line = document.createElementNS(ns, "rect");
      line.setAttribute("x", b * bw + 1);
      line.setAttribute("y", plot - hb);
      line.setAttribute("width", bw - 2);
      line.setAttribute("height", hb);
      line.setAttribute("fill", "none");
      line.setAttribute("stroke", "#1f2328");
      line.setAttribute("stroke-dasharray", "3 2");
      svg.append(line);
    }
  });
  if (threshold !== null) {
    const t = document.createElementNS(ns, "line");
    const tx = threshold * width;
    t.setAttribute("x1", tx); t.setAttribute("x2", tx); t.setAttribute("y1", 0); t.setAttribute("y2", plot);
    t.setAttribute("stroke", "#1f2328"); t.setAttribute("stroke-width", "1");
    svg.append(t);
  }
  if (axis) {
    for (const v of [0, 0.5, 1]) {
      const label = document.createElementNS(ns, "text");
      label.setAttribute("x", v * width);
      label.setAttribute("text-anchor", v === 0 ? "start" : v === 1 ? "end" : "middle");
      label.setAttribute("y", height - 1);
      label.textContent = v.toFixed(1);
      svg.append(label);
    }
  }
  return svg;
}

// --- one run -------------------------------------------------------------------------------

function statusChips(run) {
  const counts = run.statuses.map(() => 0);
  for (const s of run.st) counts[s] += 1;
  const abstained = run.ab.filter((a) => a > 0).length;
  return el("div", { class: "chips", id: "status-counts" },
    el("span", { class: "chip" }, "requests", el("b", {}, run.n)),
    run.statuses.map((name, k) => el("span", { class: "chip st-" + name, "data-status": name }, name, el("b", {}, counts[k]))),
    abstained ? el("span", { class: "chip", "data-status": "abstained" }, "abstained", el("b", {}, abstained)) : null);
}

function metricCards(run, r) {
  const all = [...Array(run.n).keys()];
  const cut = state.cut && run.slices[state.cut] ? state.cut : "";
  const cutSelect = el("select", { id: "cut", onchange: (e) => { state.cut = e.target.value; render(); } },
    el("option", { value: "" }, "all requests"),
    Object.keys(run.slices).map((name) => el("option", { value: name, selected: name === cut }, "slice: " + name)));
  const cards = run.metrics.map((metric) => {
    const threshold = run.thresholds[metric];
    const stats = metricStats(run, metric, all);
    const rate = threshold === null
      // No threshold: a share to read, not to pass (docs/metrics.md), so no pass rate.
      ? el("div", { class: "rate", "data-threshold": "" }, "mean ", el("b", {}, stats.mean === null ? "–" : stats.mean.toFixed(2)),
        ` (${stats.defined} scored; no pass/fail label; ${stats.n - stats.defined} undefined)`)
      : el("div", { class: "rate", "data-threshold": threshold }, "pass rate ", el("b", {}, pct(stats.passed, stats.defined)),
        ` (${stats.passed} of ${stats.defined} scored; threshold ${threshold}; ${stats.n - stats.defined} undefined)`);
    const card = el("div", { class: "card", "data-metric": metric }, el("h3", {}, metric), rate, histogram(stats, threshold, 400, 90));
    if (cut) {
      const values = run.slices[cut];
      const codes = run.sl[cut];
      const groups = values.map(() => []);
      const missing = [];
      codes.forEach((c, i) => (c < 0 ? missing : groups[c]).push(i));
      const rows = values.map((v, k) => [v, groups[k]]);
      if (missing.length) rows.push(["(none)", missing]);
      for (const [value, indexes] of rows) {
        const s = metricStats(run, metric, indexes);
        card.append(el("div", { class: "slice-row", "data-slice": value },
          el("span", {}, value), histogram(s, threshold, 110, 24),
          el("span", {}, threshold === null ? `mean ${s.mean === null ? "–" : s.mean.toFixed(2)} (n=${s.defined})` : `${pct(s.passed, s.defined)} pass (n=${s.defined})`)));
      }
    }
    return card;
  });
  return [el("div", { class: "controls" }, el("label", { for: "cut" }, "Cut by"), cutSelect,
    el("span", { class: "muted" }, "Each metric stands on its own: no score is averaged across metrics.")),
    el("div", { class: "cards", id: "metric-cards" }, cards)];
}

function matches(run, rs, i) {
  if (rs.status !== "" && run.statuses[run.st[i]] !== rs.status) return false;
  if (rs.verdict !== "") {
    const k = run.verdicts.indexOf(rs.verdict);
    if (k < 0 || run.vc[i * run.verdicts.length + k] === 0) return false;
  }
  if (rs.label !== "" && rs.metric) {
    const label = run.lab[rs.metric][i];
    if (rs.label === "any-fail") { if (!run.metrics.some((m) => run.lab[m][i] === 0)) return false; }
    else if (String(label) !== rs.label) return false;
  }
  if (rs.search) {
    const needle = rs.search.toLowerCase();
    if (!run.q[i].toLowerCase().includes(needle) && !run.id[i].toLowerCase().includes(needle)) return false;
  }
  return true;
}

function sortKey(run, rs) {
  const width = run.verdicts.length;
  if (rs.sort.startsWith("m:")) {
    const scores = run.sc[rs.sort.slice(2)];
    // Undefined scores go last whichever the direction.
    return (i) => (scores[i] < 0 ? Infinity * rs.dir : scores[i]);
  }
  if (rs.sort.startsWith("v:")) {
    const k = run.verdicts.indexOf(rs.sort.slice(2));
    return (i) => run.vc[i * width + k];
  }
  if (rs.sort === "worst") {
    // A failing metric ranks below every passing one, then by its margin to the threshold.
    return (i) => (run.wm[i] < 0 ? Infinity * rs.dir : run.lab[run.metrics[run.wm[i]]][i] * 1e6 + run.wv[i]);
  }
  if (rs.sort === "feedback") {
    // Requests where people disagree with the judge first, then those with most feedback.
    return (i) => (run.fbc ? -(run.fbc[i][2] * 1e6 + run.fbc[i][0] + run.fbc[i][1]) : 0);
  }
  if (rs.sort === "claims") {
    // Most failing claims first when descending; then most claims.
    const bad = FAILING.map((v) => run.verdicts.indexOf(v)).filter((k) => k >= 0);
    return (i) => bad.reduce((n, k) => n + run.vc[i * width + k], 0) * 1e6 + run.verdicts.reduce((n, _, k) => n + run.vc[i * width + k], 0);
  }
  if (rs.sort === "diagnosis") return (i) => (run.dg[i] < 0 ? "~" : run.diagnoses[run.dg[i]]);
  if (rs.sort === "conversation") {
    // A conversation's turns together, in their order; requests of none after them.
    return (i) => (run.cv[i] < 0 ? Infinity * rs.dir : run.cv[i] * 1e7 + i);
  }
  if (rs.sort === "status") return (i) => run.statuses[run.st[i]];
  if (rs.sort === "question") return (i) => run.q[i].toLowerCase();
  return (i) => i;
}

function visibleRows(run, rs) {
  const rows = [];
  for (let i = 0; i < run.n; i++) if (matches(run, rs, i)) rows.push(i);
  const key = sortKey(run, rs);
  const keys = new Map(rows.map((i) => [i, key(i)]));
  rows.sort((a, b) => {
    const x = keys.get(a), y = keys.get(b);
    if (x < y) return -rs.dir;
    if (x > y) return rs.dir;
    return a - b;
  });
  return rows;
}

function requestList(run, r) {
  const rs = state.runs[r];
  const rerender = (changes) => { Object.assign(rs, changes, { page: changes.page ?? 0 }); render(); };
  const metricOptions = run.metrics.map((m) => el("option", { value: m, selected: m === rs.metric }, m));
  const controls = el("div", { class: "controls" },
    el("label", { for: "filter-status" }, "Status"),
    el("select", { id: "filter-status", onchange: (e) => rerender({ status: e.target.value }) },
      el("option", { value: "" }, "any"),
      run.statuses.map((s) => el("option", { value: s, selected: s === rs.status }, s))),
    el("label", { for: "filter-verdict" }, "A claim is"),
    el("select", { id: "filter-verdict", onchange: (e) => rerender({ verdict: e.target.value }) },
      el("option", { value: "" }, "any verdict"),
      run.verdicts.map((v) => el("option", { value: v, selected: v === rs.verdict }, v))),
    el("label", { for: "filter-metric" }, "Metric"),
    el("select", { id: "filter-metric", onchange: (e) => rerender({ metric: e.target.value }) }, metricOptions),
    el("select", { id: "filter-label", "aria-label": "metric result", onchange: (e) => rerender({ label: e.target.value }) },
      [["", "any result"], ["0", "fails"], ["1", "passes"], ["-1", "is undefined"], ["any-fail", "(any metric fails)"]]
        .map(([v, t]) => el("option", { value: v, selected: v === rs.label }, t))),
    el("input", { type: "search", id: "search", placeholder: "search question or id", value: rs.search,
      onchange: (e) => rerender({ search: e.target.value }) }));
  const rows = visibleRows(run, rs);
  const pages = Math.max(1, Math.ceil(rows.length / PAGE_SIZE));
  const page = Math.min(rs.page, pages - 1);
  const shown = rows.slice(page * PAGE_SIZE, (page + 1) * PAGE_SIZE);
  const header = (key, text, cls, title) => el("th", {
    "data-sort": key, class: cls || null, title: title || null,
    "aria-sort": rs.sort === key ? (rs.dir > 0 ? "ascending" : "descending") : null,
    onclick: () => rerender({ sort: key, dir: rs.sort === key ? -rs.dir : 1 }),
  }, text);
  const width = run.verdicts.length;
  // The list fits the window (fixed layout, no sideways scroll): one column holds the question
  // and, under it, the first failing claim, two lines each, and takes all the narrow columns
  // leave, so both stay readable at 1,280 px whatever the number of metrics; the full text is
  // on hover and in the request's detail. A row is named by its record's id.
  const head = el("tr", {}, header("index", "id", "c-index", "the record's id (its line number when it has none)"),
    header("question", "question · first failing claim", "c-question", "the question, and under it the answer's first contradicted or unsupported claim"),
    header("status", "status", "c-status"),
    run.cv ? header("conversation", "conversation", "c-conversation", "the conversation this turn belongs to") : null,
    header("diagnosis", "diagnosis", "c-diagnosis", "whose fault the unsupported claims are: retrieval, generation or a failed tool; read from the claims only, so an answer true to its passages is ok here even when it misses the question (relevancy) or part of it (completeness), which are scored on their own"),
    run.metrics.length ? header("worst", "worst metric", "c-worst", "the metric furthest below its threshold") : null,
    run.fbc ? header("feedback", "people", "c-people") : null,
    run.metrics.map((m) => header("m:" + m, el("span", {}, m), "num c-metric", m)),
    header("claims", "claims", "num c-claims", "claims by verdict; sorted by failing claims"));
  const body = shown.map((i) => {
    const status = run.statuses[run.st[i]] + (run.ab[i] ? " · abstained" : "");
    const question = run.q[i] || run.id[i];
    const first = run.fc[i];
    const claim = first ? `<div class="first-claim" data-verdict="${esc(run.verdicts[first[0]])}"><div class="clamp" title="${esc(first[1])}">${verdictBadge(run.verdicts[first[0]]).outerHTML}${esc(first[1])}</div></div>` : "";
    const id = run.id[i] || String(i + 1);
    const cells = [`<td class="rid" title="${esc(id)}">${esc(id)}</td><td class="q"><div class="clamp" title="${esc(question)}">${esc(question)}</div>${claim}</td><td>${esc(status)}</td>`];
    if (run.cv) {
      const c = run.cv[i];
      cells.push(c < 0 ? `<td class="undef" data-conversation="">–</td>`
        : `<td data-conversation="${esc(run.convs[c])}"><div class="clamp" title="${esc(run.convs[c])}">${esc(run.convs[c])} · turn ${turnsOf(run, c).indexOf(i) + 1}</div></td>`);
    }
    const d = run.dg[i] < 0 ? "" : run.diagnoses[run.dg[i]];
    cells.push(d ? `<td class="diagnosis dg-${esc(d)}" data-diagnosis="${esc(d)}" title="${esc(DIAGNOSIS_HELP[d] || d)}">${esc(d.replace(/_/g, " "))}</td>`
      : `<td class="undef" data-diagnosis="">–</td>`);
    if (run.metrics.length) {
      const w = run.wm[i], m = run.metrics[w];
      const label = w < 0 ? -1 : run.lab[m][i];
      const cls = label === 0 ? "fail" : label === 1 ? "pass" : "undef";
      cells.push(w < 0 ? `<td class="undef" data-worst="">–</td>` : `<td class="${cls}" data-worst="${esc(m)}">${esc(m)} ${fmtScore(run.sc[m][i])}</td>`);
    }
    if (run.fbc) cells.push(feedbackCell(run.fbc[i]));
    for (const m of run.metrics) {
      const label = run.lab[m][i];
      const cls = label === 0 ? "fail" : label === 1 ? "pass" : "undef";
      cells.push(`<td class="num ${cls}" data-metric="${esc(m)}">${fmtScore(run.sc[m][i])}</td>`);
    }
    const counts = [];
    for (let k = 0; k < width; k++) {
      const n = run.vc[i * width + k];
      if (!n) continue;
      const bad = FAILING.includes(run.verdicts[k]);
      const mark = (VERDICT_LABELS[run.verdicts[k]] || run.verdicts[k]).split(" ")[0];
      counts.push(`<span class="${bad ? "fail" : ""}" data-verdict="${esc(run.verdicts[k])}" title="${esc(run.verdicts[k].toLowerCase())}">${n}${esc(mark)}</span>`);
    }
    cells.push(`<td class="num claims">${counts.join(" ") || "–"}</td>`);
    const tr = el("tr", { "data-index": i, tabindex: 0, class: i === rs.selected ? "selected" : null, html: cells.join("") });
    const open = () => { rs.selected = i; rs.claim = -1; render(); document.getElementById("detail")?.scrollIntoView({ block: "start" }); };
    tr.addEventListener("click", open);
    tr.addEventListener("keydown", (e) => { if (e.key === "Enter") open(); });
    return tr;
  });
  const pager = el("div", { class: "pager" },
    el("span", { id: "row-count" }, `${rows.length} of ${plural(run.n, "request")}`),
    el("button", { disabled: page === 0, onclick: () => rerender({ page: page - 1 }) }, "‹ previous"),
    el("span", {}, `page ${page + 1} of ${pages}`),
    el("button", { disabled: page >= pages - 1, onclick: () => rerender({ page: page + 1 }) }, "next ›"));
  return [controls, pager, el("table", { id: "requests" }, el("thead", {}, head), el("tbody", {}, body))];
}

// --- one request ---------------------------------------------------------------------------

function fold(text) { return text.toLowerCase().replace(/\s+/g, " ").trim(); }

function evidenceRange(text, claim) {
  const [, , , , , start, end, evidence] = claim;
  if (text === null) return null;
  if (start !== null && end !== null && start < end && end <= text.length) {
    if (!evidence || fold(text.slice(start, end)) === fold(evidence)) return [start, end];
  }
  if (evidence) {
    const at = text.toLowerCase().indexOf(evidence.toLowerCase());
    if (at >= 0) return [at, at + evidence.length];
  }
  return null;
}

function answerView(answer, claims, active, select) {
  const node = el("div", { class: "answer", id: "answer" });
  if (answer === null) { node.append(el("span", { class: "muted" }, "(the answer was not recorded)")); return node; }
  const placed = claims.map((c, k) => [c[2], c[3], k]).filter(([s, e]) => s !== null && e !== null && s < e && e <= answer.length)
    .sort((a, b) => a[0] - b[0]);
  let cursor = 0;
  for (const [start, end, k] of placed) {
    if (start < cursor) continue;
    node.append(answer.slice(cursor, start));
    const verdict = claims[k][1];
    node.append(el("span", {
      class: "claim v-" + verdict + (k === active ? " active" : ""), "data-claim": k, "data-verdict": verdict, tabindex: 0,
      role: "button", title: verdict, onclick: () => select(k), onkeydown: (e) => { if (e.key === "Enter") select(k); },
    }, verdictBadge(verdict), answer.slice(start, end)));
    cursor = end;
  }
  node.append(answer.slice(cursor));
  return node;
}

const SENTENCE_END = /[.!?。！？](?=\s|$)|\n/g;
const QUOTE_REACH = 400;

// [before, span, after]: the sentences of ``text`` that [start, end) touches, at most
// QUOTE_REACH characters each side of the span (an ellipsis where that cuts).
function sentenceAround(text, [start, end]) {
  if (text === null || text === undefined) return null;
  const reach = Math.max(0, start - QUOTE_REACH);
  let from = reach;
  let found = reach === 0;
  for (const m of text.slice(reach, start).matchAll(SENTENCE_END)) {
    from = reach + m.index + m[0].length;
    found = true;
  }
  const rest = text.slice(end, end + QUOTE_REACH);
  const stop = rest.search(/[.!?。！？](?=\s|$)|\n/);
  const to = stop >= 0 ? end + stop + 1 : Math.min(text.length, end + QUOTE_REACH);
  const before = (found ? "" : "…") + text.slice(from, start).trimStart();
  const after = text.slice(end, to).trimEnd() + (stop < 0 && to < text.length ? "…" : "");
  return [before, text.slice(start, end), after];
}

function claimPanel(claim, contexts, texts, explanations) {
  const [text, verdict, , , ci, , , evidence, cited, holds, reason] = claim;
  const panel = el("div", { class: "panel", id: "claim-panel", "data-verdict": verdict },
    el("div", {}, verdictBadge(verdict), el("b", {}, text)),
    el("div", { class: "muted" }, VERDICT_HELP[verdict] || ""));
  if (ci !== null) {
    const ctx = contexts && contexts[ci];
    const where = (ctx && ctx[2] ? `result [${ci + 1}] of tool ${ctx[2]}` : `passage [${ci + 1}]`) + (ctx && ctx[1] ? ` (${ctx[1]})` : "");
    const found = ctx ? evidenceRange(texts[ctx[0]], claim) : null;
    const what = verdict === "CONTRADICTED" ? "Conflicting passage" : "Evidence";
    panel.append(el("div", {}, `${what}: ${where}` + (found ? ", highlighted below." : ", not inside the embedded passage (redacted, capped or not recorded).")));
    const quote = found ? sentenceAround(texts[ctx[0]], found) : null;
    if (quote) {
      // The judge's span can start or stop inside a sentence: the quote is the whole of the
      // sentences it touches, the span itself marked, so no fact is cut in half.
      panel.append(el("div", { class: "quote" }, "“", quote[0], el("mark", { class: "evidence v-" + verdict }, quote[1]), quote[2], "”"));
    } else if (evidence) panel.append(el("div", { class: "quote" }, "“", el("i", {}, evidence), "”"));
  } else {
    panel.append(el("div", { class: "muted" }, "The judge recorded no passage for this claim."));
  }
  if (cited && cited.length) {
    const state = holds === null ? "not checked" : holds ? "holds: the cited passage supports the claim" : "does not hold: the cited passage does not support the claim";
    panel.append(el("div", { id: "citation" }, `Cites ${cited.map((c) => "[" + (c + 1) + "]").join(" ")}; the citation ${state}.`));
  }
  if (reason) panel.append(el("div", { class: "expl" }, "Judge: " + reason));
  const shown = Object.entries(explanations || {});
  if (shown.length) {
    panel.append(el("div", { class: "muted" }, "Judge's explanation:"),
      el("ul", {}, shown.map(([m, t]) => el("li", { class: "expl" }, el("b", {}, m + ": "), t))));
  }
  return panel;
}

function contextView(contexts, texts, claim) {
  const node = el("div", { id: "contexts" });
  if (contexts === null) {
    node.append(el("p", { class: "muted" }, "The passages were not recorded in this run (for `ragpulse eval` output, pass the evaluated file as --input)."));
    return node;
  }
  if (!contexts.length) node.append(el("p", { class: "muted" }, "No passages were retrieved."));
  contexts.forEach(([ref, id, tool], index) => {
    const text = texts[ref];
    const pre = el("pre", { class: "ctx-text" });
    let evidence = false;
    if (text === null) pre.append(el("span", { class: "muted" }, "(content not exported)"));
    else if (claim && claim[4] === index && evidenceRange(text, claim)) {
      const [start, end] = evidenceRange(text, claim);
      pre.append(text.slice(0, start), el("mark", { class: "evidence v-" + claim[1], "data-verdict": claim[1] }, text.slice(start, end)), text.slice(end));
      evidence = true;
    } else pre.append(text);
    const cited = claim && claim[8] && claim[8].includes(index);
    const box = el("div", { class: "ctx" + (evidence ? " has-evidence" : "") + (cited ? " cited" : ""), "data-index": index },
      el("div", { class: "ctx-head" }, `[${index + 1}]`, tool ? el("span", { class: "tool", "data-tool": tool }, "tool " + tool) : null, id ? " " + id : "", cited ? " · cited" : "", evidence ? " · " + (claim[1] === "CONTRADICTED" ? "conflicting passage" : "evidence") : ""), pre);
    node.append(box);
  });
  return node;
}

function legend() {
  return el("div", { class: "legend", id: "legend" }, Object.keys(VERDICT_LABELS).map((v) =>
    el("span", { title: VERDICT_HELP[v] }, verdictBadge(v), VERDICT_HELP[v])));
}

function turnsOf(run, c) {
  if (!run.turns) {
    run.turns = run.convs.map(() => []);
    run.cv.forEach((k, i) => { if (k >= 0) run.turns[k].push(i); });
  }
  return run.turns[c];
}

function conversationView(r, i) {
  // The turns of this request's conversation, in order, each one click away.
  const run = RUNS[r], rs = state.runs[r];
  if (!run.cv || run.cv[i] < 0) return null;
  const turns = turnsOf(run, run.cv[i]);
  const items = turns.map((j, k) => {
    const w = run.wm[j], m = run.metrics[w];
    const label = w < 0 ? -1 : run.lab[m][j];
    return el("li", { "data-index": j, class: j === i ? "current" : null },
      el("button", { class: "turn", disabled: j === i, onclick: () => { rs.selected = j; rs.claim = -1; render(); document.getElementById("detail")?.scrollIntoView({ block: "start" }); } },
        `turn ${k + 1}: `, run.q[j] || run.id[j]),
      el("span", { class: "muted" }, ` · ${run.statuses[run.st[j]]}`),
      w < 0 ? null : el("span", { class: label === 0 ? "fail" : label === 1 ? "pass" : "undef" }, ` · ${m} ${fmtScore(run.sc[m][j])}`));
  });
  return el("section", { id: "conversation", "data-conversation": run.convs[run.cv[i]] },
    el("h3", {}, `Conversation ${run.convs[run.cv[i]]} (${plural(turns.length, "turn")})`),
    el("ol", { class: "turns" }, items));
}

function requestDetail(r, i, title) {
  const run = RUNS[r], rs = state.runs[r];
  const { texts, requests } = detailOf(r);
  const [id, question, answer, contexts, claims, judge, errorType, explanations, omitted, abstention, feedback, failedTools] = requests[i];
  const tools = contexts && contexts.some((c) => c[2]);
  const active = rs.selected === i ? rs.claim : -1;
  const select = (k) => { rs.selected = i; rs.claim = k; render(); document.querySelector(`#claim-panel`)?.scrollIntoView({ block: "nearest" }); };
  const claim = active >= 0 ? claims[active] : null;
  const scores = run.metrics.map((m) => {
    const label = run.lab[m][i];
    return el("span", { class: "chip" }, m, el("b", { class: label === 0 ? "fail" : label === 1 ? "pass" : "undef" }, fmtScore(run.sc[m][i])));
  });
  const claimItems = claims.map((c, k) => el("li", {}, el("button", {
    class: "claim-button" + (k === active ? " active" : ""), "data-claim": k, "data-verdict": c[1], onclick: () => select(k),
  }, verdictBadge(c[1]), c[0], c[2] === null ? el("span", { class: "muted" }, " (not located in the answer)") : null)));
  return el("section", { class: "detail", id: title ? null : "detail", "data-run": r, "data-index": i },
    el("h2", {}, title || `Request ${i + 1}`),
    el("div", { class: "meta" }, `id ${id} · status ${run.statuses[run.st[i]]}` + (judge ? ` · judge ${judge}` : "") + (errorType ? ` · error ${errorType}` : "")),
    el("div", { class: "chips" }, scores),
    failedTools && failedTools.length ? el("p", { class: "notes failed-tools", id: "failed-tools" }, el("b", {}, "Tool failure"),
      `: ${failedTools.join(", ")} failed or returned nothing before this answer.`) : null,
    title ? null : conversationView(r, i),
    abstention ? el("p", { class: "notes abstention", id: "abstention" }, el("b", {}, ABSTENTIONS[run.ab[i]] || "abstained"), ": " + abstention + ".") : null,
    feedback && feedback.length ? feedbackView(feedback) : null,
    el("h3", {}, "Question"), el("div", { class: "question", id: "question" }, question ?? "(not recorded)"),
    el("div", { class: "cols" },
      el("div", {},
        el("h3", {}, "Answer (select a claim)"), legend(), answerView(answer, claims, active, select),
        el("h3", {}, `Claims (${claims.length})`),
        claims.length ? el("ol", { class: "claims-list", id: "claims" }, claimItems) : el("p", { class: "muted" }, abstention ? "No claims: the answer abstains." : "No claims."),
        omitted ? el("p", { class: "muted" }, `${plural(omitted, "more claim")} ${omitted === 1 ? "is" : "are"} not embedded in this page.`) : null,
        claim ? claimPanel(claim, contexts, texts, explanations)
          : el("div", { class: "panel", id: "explanations" }, el("div", { class: "muted" }, "Judge's explanation:"),
            el("ul", {}, Object.entries(explanations || {}).map(([m, t]) => el("li", { class: "expl" }, el("b", {}, m + ": "), t))))),
      el("div", {}, el("h3", {}, tools ? "Evidence: retrieved passages and tool results" : "Retrieved passages"), contextView(contexts, texts, claim))));
}

// --- human feedback ------------------------------------------------------------------------

const VERDICT_WORDS = { 1: "pass", 0: "fail", "-1": "–" };

function feedbackCell([pass, fail, disagree]) {
  const text = (pass ? `${pass} pass` : "") + (pass && fail ? " · " : "") + (fail ? `${fail} fail` : "") || "–";
  return `<td class="${disagree ? "fail" : ""}" data-feedback="${pass},${fail},${disagree}">${esc(text)}${disagree ? " · " + esc(plural(disagree, "disagreement")) : ""}</td>`;
}

function feedbackSummary(run) {
  const [noVerdict, unscored] = run.fbx;
  const num = (v) => (v === null ? "–" : v.toFixed(2));
  const rows = run.fb.map(([metric, n, agree, kappa, judgePass, humanPass]) => el("tr", { "data-metric": metric },
    el("td", {}, metric), el("td", { class: "num" }, n), el("td", { class: "num" }, num(agree)), el("td", { class: "num" }, num(kappa)),
    el("td", { class: "num" }, `${judgePass} of ${n}`), el("td", { class: "num" }, `${humanPass} of ${n}`)));
  return el("section", { id: "judge-and-people" }, el("h2", {}, "Judge and people"),
    el("p", { class: "muted" }, "Each person's verdict (a score of 0.5 or more, or the label pass, is a pass) against the judge's pass/fail on the same request and metric; "
      + "“overall” is feedback on the answer as a whole, against every metric passing. Cohen's kappa: 1 is full agreement, 0 is what chance gives"
      + " (ragpulse calibrate adds its interval)."),
    el("table", { id: "agreement" }, el("thead", {}, el("tr", {}, ["metric", "pairs", "agreement", "kappa", "judge pass", "people pass"].map((t, k) => el("th", { class: k ? "num" : null }, t)))),
      el("tbody", {}, rows)),
    noVerdict || unscored ? el("p", { class: "muted" }, `Not compared: ${plural(noVerdict, "event")} with a label that is no verdict, ${plural(unscored, "event")} on a metric the judge did not score.`) : null);
}

function feedbackView(feedback) {
  const rows = feedback.map(([metric, score, label, comment, person, judge]) => el("tr", {
    class: person >= 0 && judge >= 0 && person !== judge ? "disagree" : null, "data-person": person, "data-judge": judge,
  },
  el("td", {}, metric || "the answer (overall)"),
  el("td", { class: person === 0 ? "fail" : person === 1 ? "pass" : "undef" }, [score === null ? null : score.toFixed(2), label].filter((x) => x !== null).join(" · ")),
  el("td", { class: judge === 0 ? "fail" : judge === 1 ? "pass" : "undef" }, VERDICT_WORDS[judge]),
  el("td", {}, person >= 0 && judge >= 0 ? (person === judge ? "agree" : "disagree") : "–"),
  el("td", { class: "expl" }, comment ?? "")));
  return el("section", { id: "human-feedback" }, el("h3", {}, "Human feedback"),
    el("table", { id: "feedback" }, el("thead", {}, el("tr", {}, ["about", "person", "judge", "they", "comment"].map((t) => el("th", {}, t)))),
      el("tbody", {}, rows)));
}

function runView(r) {
  const run = RUNS[r], rs = state.runs[r];
  const heading = el("h2", {}, `${run.name} (${SOURCES[run.source] || run.source})`);
  const notes = run.notes.map((n) => el("p", { class: "notes" }, n));
  if (!run.n) {
    return [heading, notes, el("p", { class: "empty", id: "nothing-yet" },
      "Nothing evaluated yet: this run holds no evaluated request. Evaluated requests appear here once " +
      "the application has sent traffic and its spans are written (or once `ragpulse eval` has written results).")];
  }
  const parts = [
    heading, notes,
    statusChips(run),
    el("h2", {}, "Metrics"), metricCards(run, r),
    ...(run.fb ? [feedbackSummary(run)] : []),
    el("h2", {}, "Requests, worst first"),
    el("p", { class: "muted" }, "Ordered by each request's worst metric: the one furthest below its threshold."),
    requestList(run, r),
  ];
  if (rs.selected >= 0) parts.push(requestDetail(r, rs.selected));
  return parts;
}

// --- two runs ------------------------------------------------------------------------------

function compareView() {
  const [a, b] = RUNS, cmp = DATA.compare;
  // Every metric either run scored: one the other run lacks reads "not scored in" that run.
  const metrics = [...a.metrics, ...b.metrics.filter((m) => !a.metrics.includes(m))];
  const threshold = (m) => (m in a.thresholds ? a.thresholds[m] : b.thresholds[m]);
  const score = (run, m, i) => (run.sc[m] ? run.sc[m][i] : -1);
  const idxA = [...Array(a.n).keys()], idxB = [...Array(b.n).keys()];
  const cards = metrics.map((m) => {
    const sa = metricStats(a, m, idxA), sb = metricStats(b, m, idxB);
    let rate;
    if (threshold(m) === null) {
      const mean = (st) => (st.mean === null ? "–" : st.mean.toFixed(2));
      rate = el("div", { class: "rate", "data-delta": "" }, "mean ", el("b", {}, mean(sa)), " → ", el("b", {}, mean(sb)),
        el("span", { class: "muted" }, " (no pass/fail label)"));
    } else if (sa.defined && sb.defined) {
      const delta = Math.round((sb.passed / sb.defined - sa.passed / sa.defined) * 100);
      rate = el("div", { class: "rate" }, "pass rate ", el("b", {}, pct(sa.passed, sa.defined)), " → ", el("b", {}, pct(sb.passed, sb.defined)),
        el("span", { class: delta < 0 ? "delta-down" : delta > 0 ? "delta-up" : "muted", "data-delta": delta }, ` (${delta > 0 ? "+" : ""}${plural(delta, "point")})`));
    } else {
      // Without scores on both sides there is no change to state: say which side has none.
      const side = (run, s) => (s.defined ? `${pct(s.passed, s.defined)} in ${run.name}` : `not scored in ${run.name}`);
      rate = el("div", { class: "rate", "data-delta": "" }, "pass rate ", el("b", {}, side(a, sa)), " → ", el("b", {}, side(b, sb)),
        el("span", { class: "muted" }, " (no change to compare)"));
    }
    return el("div", { class: "card", "data-metric": m },
      el("h3", {}, m),
      rate,
      el("div", { class: "muted" }, `scored ${sa.defined} → ${sb.defined}; bars: ${b.name}, dashed: ${a.name} (share of scored requests)`),
      histogram(sb, threshold(m), 400, 90, sa));
  });
  const st = state.compare || (state.compare = { selected: -1 });
  const rows = cmp.changed.map((c, k) => {
    const [i, j, before, after, transitions] = c;
    return el("tr", { "data-change": k, class: k === st.selected ? "selected" : null, onclick: () => { st.selected = k; render(); document.getElementById("compare-detail")?.scrollIntoView(); } },
      el("td", { class: "q" }, a.q[i] || a.id[i]),
      el("td", {}, before === after ? before : `${before} → ${after}`),
      metrics.map((m) => {
        const x = score(a, m, i), y = score(b, m, j);
        const cls = x >= 0 && y >= 0 ? (y < x ? "delta-down" : y > x ? "delta-up" : "") : "";
        return el("td", { class: "num " + cls }, `${fmtScore(x)} → ${fmtScore(y)}`);
      }),
      el("td", {}, transitions.map(([text, v1, v2]) => el("div", { class: "transition" },
        v1 ? verdictBadge(v1) : el("span", { class: "muted" }, "(absent) "), "→ ", v2 ? verdictBadge(v2) : el("span", { class: "muted" }, "(absent) "), text))));
  });
  const parts = [
    el("h2", {}, `Comparing ${a.name} → ${b.name}`),
    el("p", { class: "notes" }, `${plural(cmp.matched, "request")} in both runs; ${cmp.only_before} only in ${a.name}, ${cmp.only_after} only in ${b.name}.`),
    el("h2", {}, "Distribution shift per metric"),
    el("div", { class: "cards", id: "shift-cards" }, cards),
    el("h2", {}, `Requests whose verdicts changed (${cmp.changed.length})`),
    el("table", { id: "changed" }, el("thead", {}, el("tr", {}, el("th", {}, "question"), el("th", {}, "status"), metrics.map((m) => el("th", { class: "num" }, m)), el("th", {}, "claims whose verdict changed"))),
      el("tbody", {}, rows)),
  ];
  if (st.selected >= 0) {
    const [i, j] = cmp.changed[st.selected];
    parts.push(el("div", { class: "cols", id: "compare-detail" }, requestDetail(0, i, `${a.name}: request ${i + 1}`), requestDetail(1, j, `${b.name}: request ${j + 1}`)));
  }
  return parts;
}

// --- page ----------------------------------------------------------------------------------

function tabs() {
  const nav = document.getElementById("tabs");
  nav.replaceChildren();
  if (RUNS.length < 2) return;
  const items = [["compare", "Comparison"], ...RUNS.map((run, r) => ["run" + r, (r ? "After: " : "Before: ") + run.name])];
  for (const [key, text] of items) {
    nav.append(el("button", { id: "tab-" + key, role: "tab", "aria-selected": String(state.tab === key), onclick: () => { state.tab = key; render(); } }, text));
  }
}

function render() {
  tabs();
  const view = document.getElementById("view");
  const parts = state.tab === "compare" ? compareView() : runView(Number(state.tab.slice(3)));
  view.replaceChildren(...parts.flat(2));
  if (!document.body.dataset.ready) document.body.dataset.readyMs = String(Math.round(performance.now()));
  document.body.dataset.ready = "1";
}

render();
