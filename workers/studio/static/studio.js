// apportion policy studio: the page. Every number shown comes from the server, which
// runs the launch_select engine; this file only edits the stack and draws answers.
"use strict";

(function () {
  const $ = (id) => document.getElementById(id);
  const MODULE_DEFAULTS = {
    equal: {},
    least_used: {},
    weights: {},
    failure_penalty: { percent: 5, window_hours: 6 },
    priority: { mode: "strict", strength: 0.5 },
    cost: { mode: "strict", amount: 0.5 },
    expression: { expression: "1", name: "" },
  };
  const SHOWN_ACCOUNTS = 40; // weight sliders and trace rows shown at once (filter for more)

  const S = {
    token: sessionStorage.getItem("apportion-studio-token") || "",
    pool: "default",
    deployable: null, // the server's summary of the picked job
    cards: [], // [{on: bool, m: {module, ...params}}]
    sentCards: [], // card index of each module in the last evaluated policy
    inflight: false,
    pending: false,
    inputAt: null, // performance.now() of the newest change not yet drawn
    charts: [],
    last: null, // the last evaluation
    loaded: "[]", // the policy (as sent) the editor last loaded or saved: unsaved if it differs
    drafts: {}, // pool -> the cards it was left with, unsaved
  };

  // Timing hooks for tests and the curious: the latency from a change (input event) to
  // the redrawn pies, per change, and the server's own share of it.
  const timing = { renders: 0, last: null, history: [] };
  window.studio = { timing, state: S };

  // ---- server ------------------------------------------------------------------------

  async function api(path, body, opts) {
    const headers = {};
    if (S.token) headers.Authorization = "Bearer " + S.token;
    const init = { method: body === undefined ? "GET" : "POST", headers };
    if (body !== undefined) {
      headers["X-Apportion-Studio"] = "1";
      headers["Content-Type"] = "application/json";
      init.body = typeof body === "string" ? body : JSON.stringify(body);
    }
    const response = await fetch(path + (opts && opts.query ? opts.query : ""), init);
    let data = null;
    try { data = await response.json(); } catch (e) { data = null; }
    if (response.status === 401) $("token-box").hidden = false;
    if (!response.ok) {
      const error = (data && data.error) || { code: String(response.status), message: response.statusText, details: [] };
      throw Object.assign(new Error(error.message), { info: error, data });
    }
    return data;
  }

  function showError(err) {
    const box = $("errors");
    if (!err) { box.hidden = true; box.textContent = ""; markBad(null); return; }
    const info = err.info || { message: String(err), details: [] };
    const lines = [info.message];
    for (const d of info.details || []) {
      if (d.path && d.path !== "$" && !info.message.includes(d.message)) lines.push(d.path + ": " + d.message);
    }
    box.textContent = lines.join("\n");
    box.hidden = false;
    markBad(info.details || []);
  }

  function markBad(details) {
    document.querySelectorAll(".module.bad").forEach((el) => el.classList.remove("bad"));
    if (!details) return;
    for (const d of details) {
      const m = /^policy\[(\d+)\]/.exec(d.path || "");
      if (!m) continue;
      const card = S.sentCards[Number(m[1])];
      const el = document.querySelector(`.module[data-index="${card}"]`);
      if (el) el.classList.add("bad");
    }
  }

  function status(text) { $("status").textContent = text; }

  // ---- the stack ---------------------------------------------------------------------

  function policy() {
    S.sentCards = [];
    const out = [];
    S.cards.forEach((card, i) => {
      if (!card.on) return;
      const m = {};
      for (const [k, v] of Object.entries(card.m)) {
        if (v === null || v === undefined || v === "") continue;
        if (k === "weights" && Object.keys(v).length === 0) continue;
        m[k] = v;
      }
      S.sentCards.push(i);
      out.push(m);
    });
    return out;
  }

  function setStack(modules) {
    S.cards = (modules || []).map((m) => ({ on: true, m: JSON.parse(JSON.stringify(m)) }));
    renderStack();
  }

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === "class") node.className = v;
      else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
      else if (k in node && typeof v !== "string") node[k] = v;
      else node.setAttribute(k, v);
    }
    for (const child of children) {
      if (child !== null && child !== undefined) node.append(child);
    }
    return node;
  }

  function slider(label, value, min, max, step, onInput, id) {
    max = Math.max(max, value); // a saved value beyond the usual range stays reachable
    const out = el("output", {}, fmt(value));
    const input = el("input", { type: "range", min: String(min), max: String(max), step: String(step) });
    input.value = String(value);
    if (id) input.id = id;
    input.addEventListener("input", () => {
      out.textContent = fmt(Number(input.value));
      onInput(Number(input.value));
    });
    return el("label", { class: "param" }, el("span", {}, label), input, out);
  }

  function fmt(x) { return Number.isInteger(x) ? String(x) : x.toFixed(2).replace(/0$/, ""); }

  function select(label, value, options, onChange) {
    const s = el("select", {});
    for (const o of options) s.append(el("option", { value: o }, o));
    s.value = value;
    s.addEventListener("change", () => onChange(s.value));
    return el("label", { class: "param" }, el("span", {}, label), s);
  }

  function number(label, value, onChange, attrs) {
    const input = el("input", Object.assign({ type: "number", size: "6" }, attrs || {}));
    input.value = value === null || value === undefined ? "" : String(value);
    input.addEventListener("input", () => onChange(input.value === "" ? null : Number(input.value)));
    return el("label", { class: "param" }, el("span", {}, label), input);
  }

  function params(card, i) {
    const m = card.m;
    const set = (key) => (value) => { m[key] = value; changed(); };
    const box = el("div", { class: "params" });
    switch (m.module) {
      case "equal":
      case "least_used": {
        const now = m.weighted === true ? "yes" : m.weighted === false ? "no" : "auto";
        box.append(select("account weight", now, ["auto", "yes", "no"], (v) => {
          m.weighted = v === "auto" ? null : v === "yes";
          changed();
        }));
        break;
      }
      case "weights":
        box.append(weightSliders(m, i));
        break;
      case "failure_penalty":
        box.append(
          slider("percent", m.percent ?? 5, 0, 100, 1, set("percent"), `fp-percent-${i}`),
          slider("window (h)", m.window_hours ?? 6, 1, 168, 1, set("window_hours")),
          number("hard limit", m.hard_limit ?? null, set("hard_limit"), { min: "1", placeholder: "none" }),
        );
        break;
      case "priority":
      case "cost": {
        const key = m.module === "priority" ? "strength" : "amount";
        box.append(
          select("mode", m.mode || "strict", ["strict", "probabilistic"], (v) => { m.mode = v; renderStack(); changed(); }),
        );
        if ((m.mode || "strict") === "probabilistic") {
          box.append(slider(key, m[key] ?? 0.5, 0, 5, 0.05, set(key)));
        }
        break;
      }
      case "expression": {
        const area = el("textarea", { rows: "3", spellcheck: "false", maxlength: String(S.maxExpression || 4096) });
        area.value = m.expression || "";
        let timer = null;
        area.addEventListener("input", () => {
          clearTimeout(timer);
          timer = setTimeout(() => { m.expression = area.value; changed(); }, 400);
        });
        const name = el("input", { placeholder: "name (optional)", size: "16", maxlength: "128" });
        name.value = m.name || "";
        name.addEventListener("change", () => { m.name = name.value || null; changed(); });
        box.append(area, el("label", { class: "param" }, el("span", {}, "name"), name));
        break;
      }
      default:
        box.append(el("div", { class: "muted" }, JSON.stringify(m)));
    }
    return box;
  }

  function weightSliders(m, i) {
    const wrap = el("div", {});
    const accounts = S.deployable ? S.deployable.accounts : [];
    const own = S.deployable ? S.deployable.account_settings : {};
    const top = Math.max(10, ...Object.values(own).map((a) => 2 * a.weight));
    const filter = el("input", { placeholder: `filter ${plural(accounts.length, "account", "accounts")}`, size: "18" });
    const list = el("div", { class: "weights" });
    const reset = el("button", { type: "button", onclick: () => { m.weights = null; renderStack(); changed(); } }, "use accounts' weights");
    function draw() {
      list.replaceChildren();
      const needle = filter.value.trim().toLowerCase();
      const shown = accounts.filter((a) => !needle || a.toLowerCase().includes(needle));
      for (const a of shown.slice(0, SHOWN_ACCOUNTS)) {
        const base = m.weights && a in m.weights ? m.weights[a] : (own[a] ? own[a].weight : 1);
        const row = slider(a, base, 0, top, 0.1, (v) => {
          m.weights = Object.assign({}, m.weights || {}, { [a]: v });
          changed();
        });
        row.querySelector("input").dataset.account = a;
        list.append(row);
      }
      if (shown.length > SHOWN_ACCOUNTS) list.append(el("div", { class: "muted" }, `${shown.length - SHOWN_ACCOUNTS} more: filter to find them`));
    }
    filter.addEventListener("input", draw);
    draw();
    wrap.append(el("div", { class: "row" }, filter, reset), list);
    return wrap;
  }

  function renderStack() {
    const list = $("modules");
    list.replaceChildren();
    S.cards.forEach((card, i) => {
      const toggle = el("input", { type: "checkbox", title: "switch this module on or off" });
      toggle.checked = card.on;
      toggle.dataset.role = "toggle";
      toggle.addEventListener("change", () => { card.on = toggle.checked; item.classList.toggle("off", !card.on); changed(); });
      const move = (delta) => () => {
        const j = i + delta;
        if (j < 0 || j >= S.cards.length) return;
        [S.cards[i], S.cards[j]] = [S.cards[j], S.cards[i]];
        renderStack();
        changed();
      };
      const item = el(
        "li",
        { class: "module" + (card.on ? "" : " off") },
        el("div", { class: "head" },
          toggle,
          el("span", { class: "name" }, card.m.module + (card.m.name ? ` (${card.m.name})` : "")),
          el("button", { type: "button", title: "move up", onclick: move(-1) }, "↑"),
          el("button", { type: "button", title: "move down", onclick: move(1) }, "↓"),
          el("button", { type: "button", title: "remove", onclick: () => { S.cards.splice(i, 1); renderStack(); changed(); } }, "✕"),
        ),
        params(card, i),
      );
      item.dataset.index = String(i);
      item.dataset.module = card.m.module;
      list.append(item);
    });
  }

  // ---- evaluation --------------------------------------------------------------------

  // A change is sent at once; changes made while a request is out are sent together as
  // soon as it returns, so a dragged slider never queues a backlog of stale requests.
  function changed() {
    showDirty();
    S.inputAt = performance.now();
    if (!S.deployable) return;
    if (S.inflight) { S.pending = true; return; }
    evaluate();
  }

  async function evaluate() {
    S.inflight = true;
    S.pending = false;
    const inputAt = S.inputAt;
    const sent = performance.now();
    try {
      const result = await api("/api/evaluate", { deployable: S.deployable.id, policy: policy() });
      const answered = performance.now();
      S.last = result;
      showError(null);
      draw(result);
      const drawn = performance.now();
      if (inputAt !== null) {
        timing.last = Object.assign(
          { total_ms: drawn - inputAt, server_ms: answered - sent, draw_ms: drawn - answered }, S.drawParts);
        timing.history.push(timing.last);
        if (timing.history.length > 200) timing.history.shift();
        status(`evaluated in ${Math.round(drawn - inputAt)} ms`);
      }
    } catch (err) {
      showError(err);
      if (inputAt !== null) timing.last = { total_ms: performance.now() - inputAt, error: true };
    } finally {
      timing.renders += 1;
      S.inflight = false;
      document.dispatchEvent(new CustomEvent("studio:rendered"));
      if (S.pending) evaluate();
    }
  }

  const colours = new Map();
  function colour(name) {
    let c = colours.get(name);
    if (c === undefined) {
      let h = 2166136261;
      for (let i = 0; i < name.length; i++) { h ^= name.charCodeAt(i); h = Math.imul(h, 16777619); }
      c = `hsl(${(h >>> 0) % 360}, ${55 + ((h >>> 9) % 30)}%, ${45 + ((h >>> 17) % 20)}%)`;
      colours.set(name, c);
    }
    return c;
  }

  const same = (a, b) => a.length === b.length && a.every((x, i) => x === b[i]);
  // Renormalising a group whose members did not change can move its shares in the last
  // bits only; such a pie is not redrawn.
  const close = (a, b) => a.length === b.length && a.every((x, i) => Math.abs(x - b[i]) <= 1e-12);

  const pct = (p) => (100 * p).toFixed(p > 0 && p < 0.001 ? 3 : 1) + "%";

  function draw(result) {
    const t0 = performance.now();
    drawPies(result.groups);
    const t1 = performance.now();
    const chosen = result.chosen_account ? ` · the job's seed picks ${result.chosen_account}` : "";
    $("summary").textContent = `${S.deployable.label}: ${plural(S.deployable.candidates, "candidate", "candidates")}, ${plural(S.deployable.accounts.length, "account", "accounts")}, ${plural(result.groups.length, "priority group", "priority groups")}${chosen}`;
    const none = $("no-chance");
    none.replaceChildren();
    for (const n of result.no_chance.slice(0, SHOWN_ACCOUNTS)) none.append(el("li", {}, el("b", {}, n.account), " — " + n.why));
    const hidden = result.no_chance.length - SHOWN_ACCOUNTS;
    if (hidden > 0) none.append(el("li", { class: "muted" }, `${hidden} more (${result.no_chance.length} in all)`));
    if (!result.no_chance.length) none.append(el("li", { class: "muted" }, "every account keeps a chance"));
    const t2 = performance.now();
    drawTrace();
    S.drawParts = { pies_ms: t1 - t0, lists_ms: t2 - t1, trace_ms: performance.now() - t2 };
  }

  // Slice borders only where slices are few enough to tell apart (they cost ~10 ms a
  // redraw at hundreds of slices); set on every new set of accounts, not only the first.
  const border = (names) => (names.length > 50 || names.length === 1 ? 0 : 1);
  const plural = (n, one, many) => `${n} ${n === 1 ? one : many}`;

  function drawPies(groups) {
    const box = $("pies");
    while (S.charts.length > groups.length) { S.charts.pop().destroy(); box.lastChild.remove(); }
    groups.forEach((group, g) => {
      const names = Object.keys(group.probabilities);
      const values = names.map((a) => group.probabilities[a]);
      const title = `Priority group ${g}` + (g === 0 ? " (the dice rolls here)" : " (spillover)");
      let chart = S.charts[g];
      if (!chart) {
        const canvas = el("canvas", { width: "260", height: "260" });
        canvas.dataset.group = String(g);
        const table = el("table", { class: "top" });
        box.append(el("div", { class: "pie" }, el("h3", {}, title), canvas, table));
        chart = new Chart(canvas, {
          type: "pie",
          data: { labels: names, datasets: [{ data: values, backgroundColor: names.map(colour), borderWidth: border(names) }] },
          options: {
            animation: false,
            responsive: false,
            plugins: {
              legend: { display: false },
              tooltip: { callbacks: { label: (c) => `${c.label}: ${pct(c.raw)}` } },
            },
          },
        });
        S.charts[g] = chart;
      } else if (same(chart.data.labels, names) && close(chart.data.datasets[0].data, values)) {
        return; // this group did not change: most changes move one group's pie only
      } else {
        if (!same(chart.data.labels, names)) {
          chart.data.labels = names;
          chart.data.datasets[0].backgroundColor = names.map(colour);
          chart.data.datasets[0].borderWidth = border(names);
        }
        chart.data.datasets[0].data = values;
        chart.update("none");
        box.children[g].querySelector("h3").textContent = title;
      }
      const table = box.children[g].querySelector("table");
      const top = names.map((a, k) => [a, values[k]]).sort((x, y) => y[1] - x[1]);
      const rows = top.slice(0, 12).map(([a, p]) => el("tr", {},
        el("td", {}, el("span", { class: "swatch" }, "■ "), a), el("td", { class: p > 0 ? "" : "zero" }, pct(p))));
      rows.forEach((r, k) => { r.firstChild.firstChild.style.color = colour(top[k][0]); });
      if (top.length > 12) rows.push(el("tr", {}, el("td", { class: "muted" }, `${top.length - 12} more`), el("td", {}, "")));
      table.replaceChildren(...rows);
    });
  }

  function drawTrace() {
    const result = S.last;
    const box = $("trace");
    if (!result) { box.replaceChildren(); return; }
    const steps = result.trace;
    const final = steps[steps.length - 1];
    const needle = $("trace-filter").value.trim().toLowerCase();
    let accounts = S.deployable.accounts.filter((a) => !needle || a.toLowerCase().includes(needle));
    accounts.sort((a, b) => (final.probabilities[b] ?? -1) - (final.probabilities[a] ?? -1));
    const more = accounts.length - SHOWN_ACCOUNTS;
    accounts = accounts.slice(0, SHOWN_ACCOUNTS);
    const groupOf = steps.map((s) => {
      const map = {};
      (s.groups || []).forEach((members, g) => { for (const a in members) map[a] = g; });
      return map;
    });
    const head = el("tr", {}, el("th", {}, "account"), ...steps.map((s, k) => el("th", { title: s.note || "" }, `${k}. ${s.module}`)));
    const rows = accounts.map((a) => el("tr", {}, el("td", {}, a), ...steps.map((s, k) => {
      const p = s.probabilities[a];
      if (p === undefined) return el("td", { class: "muted" }, "—");
      return el("td", { class: p > 0 ? "" : "zero" }, `${pct(p)} g${groupOf[k][a]}`);
    })));
    const notes = el("tr", {}, el("td", { class: "muted" }, "note"), ...steps.map((s) => el("td", { class: "muted" }, s.note || "")));
    const table = el("table", { id: "trace-table" }, el("thead", {}, head), el("tbody", {}, ...rows, notes));
    box.replaceChildren(table);
    if (more > 0) box.append(el("div", { class: "muted" }, `${more} more accounts: filter to find them`));
  }

  // ---- the rest ----------------------------------------------------------------------

  // ---- unsaved edits ---------------------------------------------------------------

  const snapshot = () => JSON.stringify(S.cards);
  function dirty() { return snapshot() !== S.loaded; }

  function markLoaded() { S.loaded = snapshot(); showDirty(); }

  function showDirty() {
    const d = S.cards.length > 0 && dirty();
    $("unsaved").hidden = !d;
    $("discard").hidden = !d;
  }

  // Leaving a pool keeps its unsaved stack, to be found again when it is picked again.
  function keepDraft() {
    if (dirty()) S.drafts[S.pool] = { cards: JSON.parse(snapshot()), loaded: S.loaded };
    else delete S.drafts[S.pool];
  }

  async function switchPool(pool) {
    if (pool === S.pool) return;
    keepDraft();
    S.pool = pool;
    if (![...$("pool").options].some((o) => o.value === pool)) $("pool").append(el("option", { value: pool }, pool));
    $("pool").value = pool;
    await loadPolicy();
    changed();
  }

  // ---- the rest ----------------------------------------------------------------------

  async function loadPolicy() {
    const answer = await api("/api/policy", undefined, { query: "?pool=" + encodeURIComponent(S.pool) });
    const current = answer.current;
    S.current = current;
    $("policy-source").textContent = !current
      ? "(no policy anywhere yet)"
      : current.version === 0
        ? "the worker's config/default_policy.yaml (no version saved yet)"
        : `${current.pool === S.pool ? "" : "inherited from "}${current.pool} v${current.version}`;
    setStack(current ? current.policy : [{ module: "equal" }]);
    markLoaded();
    const draft = S.drafts[S.pool];
    if (draft) {
      delete S.drafts[S.pool];
      S.cards = draft.cards;
      renderStack();
      showDirty();
    }
    $("compare").hidden = true;
    const history = $("history");
    history.replaceChildren();
    for (const v of answer.history) {
      const when = v.saved_at ? new Date(v.saved_at * 1000).toISOString().replace("T", " ").slice(0, 19) : "";
      const isCurrent = current && current.pool === S.pool && current.version === v.version;
      const text = el("span", { class: "version", title: "load this version into the editor" },
        `v${v.version} ${when} ${v.author}: ${v.comment || ""}`);
      text.addEventListener("click", () => loadVersion(v.version));
      const li = el("li", { value: String(v.version) }, text);
      if (isCurrent) li.append(el("span", { class: "muted" }, " (current)"));
      else {
        li.append(
          el("button", { type: "button", class: "compare", title: `what changes from v${v.version} to the current version`, onclick: () => compare(v.version) }, "compare with current"),
          el("button", { type: "button", class: "revert", title: `save v${v.version}'s policy again as the newest version`, onclick: () => revert(v.version) }, "revert"),
        );
      }
      history.append(li);
    }
    if (!answer.history.length) history.append(el("li", { class: "muted" }, "no version saved for this pool"));
  }

  async function fetchVersion(version) {
    const query = "?pool=" + encodeURIComponent(S.pool) + "&version=" + version;
    return api("/api/policy/version", undefined, { query });
  }

  async function loadVersion(version) {
    if (dirty() && !window.confirm(`Your unsaved changes to pool ${S.pool} will be replaced by version ${version}. Load it?`)) return;
    try {
      const v = await fetchVersion(version);
      setStack(v.policy);
      markLoaded();
      status(`version ${version} loaded into the editor`);
      changed();
    } catch (err) { showError(err); }
  }

  async function compare(version) {
    try {
      const query = "?pool=" + encodeURIComponent(S.pool) + "&version=" + version;
      const answer = await api("/api/policy/diff", undefined, { query });
      const box = $("compare");
      box.replaceChildren(
        el("div", { class: "row" }, el("b", {}, `v${answer.version} → current v${answer.current}`),
          el("button", { type: "button", onclick: () => { box.hidden = true; } }, "close")),
        el("pre", { id: "compare-diff" }, answer.diff || "(the same policy)"));
      box.hidden = false;
    } catch (err) { showError(err); }
  }

  async function revert(version) {
    if (!$("author").value.trim()) {
      showError({ info: { message: "type your name in author first: a revert is saved as a new version", details: [] } });
      $("author").focus();
      return;
    }
    try {
      const v = await fetchVersion(version);
      await save(false, { policy: v.policy, comment: $("comment").value || `revert to v${version}` });
    } catch (err) { showError(err); }
  }

  async function loadState(keep) {
    const state = await api("/api/state");
    S.maxExpression = state.max_expression_length;
    $("launches").max = String(state.max_launches);
    const pools = $("pool");
    pools.replaceChildren(...state.pools.map((p) => el("option", { value: p }, p)));
    if (!state.pools.includes(S.pool)) pools.append(el("option", { value: S.pool }, S.pool));
    pools.value = S.pool;
    const deps = $("deployable");
    const picked = keep || deps.value;
    deps.replaceChildren(el("option", { value: "" }, "— pick a launch_select job —"),
      ...state.deployables.concat(state.loaded).map((d) => el("option", { value: d.id }, d.label)));
    deps.value = picked || "";
    return state;
  }

  async function pick(id) {
    if (!id) return;
    status("computing candidates…");
    try {
      S.deployable = await api("/api/deployables/select", { id });
      afterPick();
    } catch (err) { showError(err); status(""); }
  }

  async function afterPick() {
    const d = S.deployable;
    status(plural(d.candidates, "candidate", "candidates") + (d.pool ? ` · the job names pool ${d.pool}` : ""));
    $("use-job-policy").disabled = !d.policy;
    $("use-job-policy").title = d.policy
      ? "replace the stack with the policy the job carries inline"
      : "this job carries no policy of its own";
    // The job's own pool is the one whose policy it gets: edit that one.
    const pool = d.pool || S.defaultPool || "default";
    if (pool !== S.pool) {
      try { await switchPool(pool); } catch (err) { showError(err); }
    }
    renderStack(); // weight sliders list the job's accounts
    changed();
  }

  async function upload(file) {
    if (!file) return;
    status("checking the job…");
    try {
      const text = await file.text();
      S.deployable = await api("/api/deployables/upload", text, { query: "?name=" + encodeURIComponent(file.name) });
      await loadState(S.deployable.id);
      showError(null);
      afterPick();
    } catch (err) { showError(err); status("upload rejected"); }
  }

  async function simulate() {
    if (!S.deployable) return;
    try {
      const answer = await api("/api/simulate", {
        deployable: S.deployable.id, policy: policy(),
        launches: Number($("launches").value), seed: Number($("seed").value),
      });
      const rows = Object.keys(answer.expected)
        .sort((a, b) => answer.expected[b] - answer.expected[a]).slice(0, SHOWN_ACCOUNTS)
        .map((a) => el("tr", {}, el("td", {}, a), el("td", {}, String(answer.counts[a])),
          el("td", {}, pct(answer.counts[a] / answer.launches)), el("td", {}, pct(answer.expected[a]))));
      $("simulation").replaceChildren(el("table", { id: "simulation-table" },
        el("thead", {}, el("tr", {}, el("th", {}, "account (group 0)"), el("th", {}, "launches"), el("th", {}, "share"), el("th", {}, "expected"))),
        el("tbody", {}, ...rows)));
      showError(null);
    } catch (err) { showError(err); }
  }

  // The dry run's report (workers/policies/dryrun.py): each deployable tried, ok or
  // rejected with the engine's reason.
  function showDryRun(report, refusedWith) {
    const box = $("dry-run");
    const items = report.deployables.map((t) => el("li", { class: t.outcome },
      el("b", {}, t.outcome), " " + t.label + (t.reason ? ` — ${t.reason}` : "")));
    box.replaceChildren(el("div", { id: "dry-run-summary" }, report.summary), el("ul", {}, ...items));
    if (refusedWith) {
      box.append(el("button", { type: "button", id: "save-anyway", class: "danger", onclick: () => save(true, refusedWith) },
        `Save anyway: it rejects all ${plural(report.rejected, "deployable", "deployables")} it was tried on`));
    }
    box.hidden = false;
  }

  async function save(force, what) {
    const box = $("save-status");
    const sent = what || { policy: policy(), comment: $("comment").value };
    box.textContent = "trying it on the pool's recent jobs…";
    try {
      const answer = await api("/api/save", {
        pool: S.pool, policy: sent.policy, author: $("author").value, comment: sent.comment, force: !!force,
      });
      box.textContent = `saved ${answer.saved.pool} version ${answer.saved.version}`;
      showDryRun(answer.dry_run, null);
      showError(null);
      // Who and why belong to this version, not the next.
      $("author").value = "";
      $("comment").value = "";
      delete S.drafts[S.pool];
      await loadState();
      await loadPolicy();
      changed();
    } catch (err) {
      box.textContent = "not saved";
      if (err.data && err.data.dry_run) showDryRun(err.data.dry_run, sent);
      showError(err);
    }
  }

  function start() {
    const fromHash = /(?:^|[#&])token=([^&]+)/.exec(location.hash);
    if (fromHash) {
      S.token = decodeURIComponent(fromHash[1]);
      sessionStorage.setItem("apportion-studio-token", S.token);
      history.replaceState(null, "", location.pathname + location.search);
    }
    $("token-ok").addEventListener("click", () => {
      S.token = $("token").value;
      sessionStorage.setItem("apportion-studio-token", S.token);
      $("token-box").hidden = true;
      boot();
    });
    $("pool").addEventListener("change", () => switchPool($("pool").value).catch(showError));
    $("add-pool").addEventListener("click", async () => {
      const name = $("new-pool").value.trim();
      if (!name) return;
      $("new-pool").value = "";
      await switchPool(name).catch(showError);
    });
    $("discard").addEventListener("click", async () => {
      if (!window.confirm(`Drop your unsaved changes to pool ${S.pool}?`)) return;
      delete S.drafts[S.pool];
      await loadPolicy();
      changed();
    });
    $("deployable").addEventListener("change", () => pick($("deployable").value));
    $("upload").addEventListener("change", (e) => upload(e.target.files[0]));
    $("add-module").addEventListener("click", () => {
      const kind = $("add-kind").value;
      S.cards.push({ on: true, m: Object.assign({ module: kind }, JSON.parse(JSON.stringify(MODULE_DEFAULTS[kind]))) });
      renderStack();
      changed();
    });
    $("use-job-policy").addEventListener("click", () => {
      const d = S.deployable;
      if (!d || !d.policy) { status("this job carries no policy of its own"); return; }
      setStack(d.policy);
      $("policy-source").textContent = `${d.label}'s own policy (not saved)`;
      status(`the job's own policy: ${plural(d.policy.length, "module", "modules")}`);
      changed();
    });
    $("trace-filter").addEventListener("input", drawTrace);
    $("simulate").addEventListener("click", simulate);
    $("save").addEventListener("click", () => save(false));
    boot();
  }

  async function boot() {
    try {
      const state = await loadState();
      S.defaultPool = state.default_pool;
      await loadPolicy();
      showError(null); // a 401's message, once the right token is in
      const params = new URLSearchParams(location.search);
      const wanted = params.get("deployable");
      if (wanted) { $("deployable").value = wanted; await pick(wanted); }
      document.body.dataset.ready = "1";
    } catch (err) { showError(err); }
  }

  document.addEventListener("DOMContentLoaded", start);
})();
