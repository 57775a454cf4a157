// fano control panel: one page with a view per address (#/tasks?state=…,
// #/task/<id>, …), reading the REST API and listening to /api/events to
// refresh what an event touches. Every value from the server goes into
// the page through textContent (or the escaping Markdown renderer).
"use strict";

(function () {
  const $ = (id) => document.getElementById(id);
  const FINISHED = new Set(["COMPLETED", "FAILED", "CANCELLED"]);
  const FEED_MAX = 200;

  // ---- token: from #token=… once (the fragment never reaches the server),
  // then localStorage.
  const TOKEN_KEY = "fano.panel.token";
  (function takeTokenFromHash() {
    const m = location.hash.match(/(?:^#|&)token=([^&]+)/);
    if (m) {
      localStorage.setItem(TOKEN_KEY, decodeURIComponent(m[1]));
      history.replaceState(null, "", location.pathname + location.search + "#/");
    }
  })();
  function token() { return localStorage.getItem(TOKEN_KEY) || ""; }
  function showTokenState() {
    $("token-state").textContent = token() ? "token set" : "no token: changes will be refused";
  }
  $("token-form").addEventListener("submit", (e) => {
    e.preventDefault();
    const v = $("token-input").value.trim();
    if (v) localStorage.setItem(TOKEN_KEY, v); else localStorage.removeItem(TOKEN_KEY);
    $("token-input").value = "";
    $("token-box").open = false;
    showTokenState();
    // Messages that asked for the token are out of date now.
    for (const r of document.querySelectorAll(".result.needs-token")) { r.textContent = ""; r.className = "result"; }
    if ($("notice").dataset.needsToken) hideNotice();
  });
  showTokenState();

  // ---- HTTP
  class APIError extends Error {}
  async function api(method, path, body) {
    const opts = { method: method, headers: { "Accept": "application/json" } };
    if (method !== "GET") {
      opts.headers["Authorization"] = "Bearer " + token();
      if (body !== undefined) {
        opts.headers["Content-Type"] = "application/json";
        opts.body = JSON.stringify(body);
      }
    }
    let resp;
    try {
      resp = await fetch(path, opts);
    } catch (_) {
      const err = new APIError("fano did not answer: it may be stopped or unreachable.");
      err.status = 0;
      throw err;
    }
    let data = null;
    try { data = await resp.json(); } catch (_) { /* not JSON */ }
    if (!resp.ok) {
      const err = new APIError(sentence(resp.status, data && data.error, resp.statusText));
      err.status = resp.status;
      throw err;
    }
    return data;
  }

  // sentence turns an API error into something a person reads.
  function sentence(status, msg, statusText) {
    if (status === 401) return "This change needs the panel token: open “Token” at the top and paste it (it is in the file panel.token in the data directory).";
    let s = (msg || (status + " " + statusText)).trim();
    s = s.charAt(0).toUpperCase() + s.slice(1);
    return /[.!?]$/.test(s) ? s : s + ".";
  }

  function el(tag, attrs, ...children) {
    const n = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v == null) continue;
      if (k === "class") n.className = v;
      else if (k.startsWith("data-") || k.startsWith("aria-")) n.setAttribute(k, v);
      else if (k === "text") n.textContent = v;
      else n[k] = v;
    }
    for (const c of children) if (c != null && c !== false) n.append(c);
    return n;
  }
  // put replaces a node's children, leaving out the nulls of optional parts.
  function put(node, ...children) { node.replaceChildren(...children.filter((c) => c != null && c !== false)); }

  // ---- dates: ISO 8601 in the person's zone, UTC on hover (the CLI's
  // convention, in the browser's zone).
  const pad = (n, w) => String(n).padStart(w || 2, "0");
  function isoLocal(d, withSeconds) {
    const off = -d.getTimezoneOffset();
    const zone = off === 0 ? "Z" : (off > 0 ? "+" : "−") + pad(Math.floor(Math.abs(off) / 60)) + ":" + pad(Math.abs(off) % 60);
    return d.getFullYear() + "-" + pad(d.getMonth() + 1) + "-" + pad(d.getDate()) + " " + pad(d.getHours()) + ":" + pad(d.getMinutes()) +
      (withSeconds === false ? "" : ":" + pad(d.getSeconds())) + zone;
  }
  function isoUTC(d) { return d.toISOString().replace(/\.\d{3}Z$/, "Z"); }
  function fmtTime(s) { return s ? isoLocal(new Date(s)) : ""; }
  function timeEl(s) {
    if (!s) return el("span", { class: "muted", text: "—" });
    const d = new Date(s);
    return el("time", { dateTime: isoUTC(d), title: isoUTC(d) + " (UTC)", text: isoLocal(d) });
  }
  function fmtDuration(ms) {
    if (ms == null) return "";
    if (ms < 1000) return Math.round(ms) + " ms";
    const s = ms / 1000;
    if (s < 60) return s.toFixed(1) + " s";
    const m = Math.floor(s / 60);
    if (m < 60) return m + " min " + Math.round(s % 60) + " s";
    return Math.floor(m / 60) + " h " + (m % 60) + " min";
  }

  function setResult(id, ok, msg, err) {
    const r = $(id);
    r.textContent = msg;
    r.className = "result " + (ok ? "ok" : "err") + (err && err.status === 401 ? " needs-token" : "");
  }
  function showNotice(msg, err) {
    $("notice-text").textContent = msg;
    $("notice").hidden = false;
    $("notice").className = "notice " + (err ? "err" : "ok");
    if (err && err.status === 401) $("notice").dataset.needsToken = "1"; else delete $("notice").dataset.needsToken;
  }
  function hideNotice() { $("notice").hidden = true; delete $("notice").dataset.needsToken; }
  $("notice-close").addEventListener("click", hideNotice);

  // ---- routing: #/view/arg?query
  const VIEWS = ["overview", "tasks", "task", "backends", "alerts", "document", "history"];
  function parseRoute() {
    const h = location.hash.replace(/^#\/?/, "");
    const [path, query] = h.split("?");
    const parts = path.split("/");
    let view = parts[0] || "overview";
    let arg = parts.slice(1).join("/");
    if (!VIEWS.includes(view)) view = "overview";
    return { view: view, arg: decodeURIComponent(arg || ""), q: new URLSearchParams(query || "") };
  }
  // A view's refresh can be overtaken by a newer one: a filter changed,
  // or another task opened, while the last answer was still on its way.
  // Answers may arrive in any order, so only the newest refresh of a view
  // draws; an older one's answer is dropped. While any refresh of a view
  // is in flight its section is aria-busy.
  const refreshes = {}; // view -> { started, open }
  function startRefresh(view) {
    const r = refreshes[view] || (refreshes[view] = { started: 0, open: 0 });
    const n = ++r.started;
    r.open++;
    const section = $("view-" + view);
    if (section) section.setAttribute("aria-busy", "true");
    let ended = false;
    return {
      newest: () => n === r.started,
      end: () => {
        if (ended) return;
        ended = true;
        if (--r.open === 0 && section) section.setAttribute("aria-busy", "false");
      },
    };
  }

  // newestAnswer gets path for view's refresh; null when a newer refresh
  // of the view started meanwhile (its answer is the one to draw).
  async function newestAnswer(view, path) {
    const turn = startRefresh(view);
    try {
      const v = await api("GET", path);
      return turn.newest() ? v : null;
    } finally {
      turn.end();
    }
  }

  function go(hash) { if (location.hash !== hash) location.hash = hash; else route(); }
  function taskHref(id) { return "#/task/" + encodeURIComponent(id); }

  let current = parseRoute();
  function route() {
    const was = current.view;
    current = parseRoute();
    if (was !== current.view) for (const r of document.querySelectorAll("#tasks-result, #seed-result, #comment-result")) { r.textContent = ""; r.className = "result"; }
    for (const v of VIEWS) $("view-" + v).hidden = v !== current.view;
    for (const a of document.querySelectorAll("#nav a[data-nav]")) {
      const on = a.dataset.nav === current.view || (current.view === "task" && a.dataset.nav === "tasks");
      if (on) a.setAttribute("aria-current", "page"); else a.removeAttribute("aria-current");
    }
    document.title = "fano — " + (current.view === "task" ? current.arg : current.view);
    refreshView();
  }
  window.addEventListener("hashchange", route);

  function refreshView() {
    const v = current.view;
    const p = [refreshStatus()];
    if (v === "tasks") p.push(refreshTasks());
    if (v === "task") p.push(refreshTask());
    p.push(refreshAlerts()); // the count in the navigation, on every view
    if (v === "document") p.push(refreshDocument());
    if (v === "history") p.push(refreshHistory());
    return Promise.all(p.map((x) => x.catch(() => {})));
  }

  // ---- status
  let lastStatus = null;
  async function refreshStatus() {
    const st = await newestAnswer("status", "/api/orchestrator/status");
    if (!st) return;
    lastStatus = st;
    $("orch-state").textContent = st.state === "running" ? "running" : st.state.replace(/_/g, " ");
    $("orch-state").dataset.state = st.state;
    $("uptime").textContent = "up " + st.uptime + " · since " + fmtTime(st.started_at);
    renderTotals(st);
    renderQueue(st);
    renderHosts(st);
    renderBackends(st);
    renderBackendSummary(st);
    renderRunning(st);
    renderHealth(st);
    renderPipelines(st);
    const sel = $("filter-module");
    const have = new Set([...sel.options].map((o) => o.value));
    for (const m of st.modules) if (!have.has(m.name)) sel.append(el("option", { value: m.name, text: m.name }));
    $("retry-failed").hidden = !(st.tasks.failed > 0);
  }

  // A pipeline module's report: items, cost, counts per step and model,
  // and its first failures with the stage that failed.
  function renderPipelines(st) {
    const box = $("pipelines");
    box.replaceChildren();
    const reports = st.modules.filter((m) => m.report && m.report.kind === "pipeline");
    $("pipelines-section").hidden = reports.length === 0;
    for (const m of reports) {
      const r = m.report, s = r.summary;
      box.append(el("p", { "data-pipeline": s.pipeline },
        el("b", { text: s.pipeline }),
        " " + (s.items_done + s.items_failed) + " / " + s.items + " items (" + s.items_failed + " failed), " +
        s.requests + " requests, $" + s.cost_usd.toFixed(4) + (s.max_cost_usd ? " of $" + s.max_cost_usd.toFixed(2) : "") +
        (s.stopped ? " — stopped: " + s.stopped : "") +
        (s.waiting ? " — waiting for the daily budget until " + fmtTime(s.waiting_until) + " (" + s.waiting + ")" : "")));
      const t = el("table", { class: "pipeline-steps" },
        el("thead", {}, el("tr", {}, ...["step", "model", "ok", "failed", "pending", "invalid", "cost", "per s", "time left"].map((h) => el("th", { text: h })))));
      const body = el("tbody");
      // Steps in pipeline order, each with its rate and time left (the
      // report's steps); an older fano's report has only the summary.
      const rows = (r.steps && r.steps.length) ? r.steps :
        Object.keys(s.steps).sort().flatMap((step) => Object.keys(s.steps[step]).sort().map((model) => ({ step, model, eta_s: -1 })));
      for (const p of rows) {
        const c = (s.steps[p.step] || {})[p.model] || {};
        const rate = p.rate_per_s > 0 ? (p.rate_per_s >= 10 ? p.rate_per_s.toFixed(0) : p.rate_per_s.toFixed(2)) : "—";
        const left = p.eta_s === 0 ? "done" : p.eta_s > 0 ? fmtDuration(p.eta_s * 1000) : "—";
        body.append(el("tr", { "data-step": p.step, "data-model": p.model },
          el("td", { text: p.step }), el("td", { text: p.model }), el("td", { text: String(c.ok || 0) }),
          el("td", { text: String(c.failed || 0) }), el("td", { text: String(c.pending || 0) }),
          el("td", { text: String(c.invalid || 0) }), el("td", { text: "$" + (c.cost_usd || 0).toFixed(4) }),
          el("td", { class: "rate", text: rate }), el("td", { class: "eta", text: left })));
      }
      t.append(body);
      box.append(t);
      if (r.failures_total > 0) {
        const ul = el("ul", { class: "plain pipeline-failures" });
        for (const f of r.failures) {
          ul.append(el("li", { title: f.raw || "" },
            el("code", { text: f.key + " · " + f.step + " · " + f.model }), " " + f.stage + ": " + f.error));
        }
        box.append(el("p", { class: "muted", text: r.failures_total + " failed (first " + r.failures.length + " below; all in output/failures.jsonl)" }), ul);
      }
    }
  }

  function renderTotals(st) {
    const t = st.tasks;
    const box = $("totals");
    box.replaceChildren();
    for (const [k, v, href] of [["pending", t.pending + t.ready, "#/tasks?state=PENDING"], ["running", t.running, "#/tasks?state=RUNNING"],
      ["paused", t.paused, "#/tasks?state=PAUSED"], ["completed (24 h)", t.completed_24h, "#/tasks?state=COMPLETED"],
      ["failed", t.failed, "#/tasks?state=FAILED"], ["cancelled", t.cancelled, "#/tasks?state=CANCELLED"]]) {
      box.append(el("a", { href: href, class: "total" + (k === "failed" && v > 0 ? " bad" : ""), "data-total": k }, el("b", { text: String(v) }), " " + k));
    }
  }

  function renderQueue(st) {
    const body = $("queue-body");
    body.replaceChildren();
    const names = new Set(st.modules.map((m) => m.name));
    for (const m of Object.keys(st.tasks.by_module)) names.add(m);
    const caps = Object.fromEntries(st.modules.map((m) => [m.name, m.capabilities]));
    for (const name of [...names].sort()) {
      const c = st.tasks.by_module[name] || {};
      const row = el("tr", { "data-module": name }, el("td", null, el("a", { href: "#/tasks?module=" + encodeURIComponent(name), text: name })));
      for (const s of ["PENDING", "READY", "RUNNING", "PAUSED", "COMPLETED", "FAILED", "CANCELLED"]) {
        row.append(el("td", { "data-state": s }, c[s] ? el("a", { href: "#/tasks?module=" + encodeURIComponent(name) + "&state=" + s, text: String(c[s]) }) : "0"));
      }
      row.append(el("td", { class: "muted col-opt", text: (caps[name] || []).join(", ") }));
      body.append(row);
    }
  }

  function bar(used, limit, mark) {
    const pct = limit > 0 ? Math.min(100, (100 * used) / limit) : (used > 0 ? 100 : 0);
    const b = el("div", { class: "bar" + (pct >= 100 ? " full" : pct >= 80 ? " high" : "") });
    const fill = el("span");
    fill.style.width = pct + "%";
    b.append(fill);
    if (mark != null && limit > 0 && mark < limit) {
      const m = el("i", { class: "buffer", title: "usable (the rest is the safety buffer)" });
      m.style.left = (100 * mark) / limit + "%";
      b.append(m);
    }
    return el("div", { class: "bar-row" }, b, el("span", { class: "bar-figure", text: limit > 0 ? used + " / " + limit : (used + " (none allowed)") }));
  }

  // Each backend's card and its pause button stay in the page across
  // re-renders (events re-render several times a second); only the
  // figures inside are replaced. A button taken out of the page between
  // mousedown and mouseup loses the click.
  const backendCards = new Map(); // backend name -> { card, info, btn, b }
  function renderBackends(st) {
    const box = $("backends");
    const names = st.backends.map((b) => b.name);
    for (const [name, c] of backendCards) {
      if (!names.includes(name)) { c.card.remove(); backendCards.delete(name); }
    }
    for (const b of st.backends) {
      let c = backendCards.get(b.name);
      if (!c) {
        c = { info: el("div"), btn: el("button", { class: "secondary" }) };
        c.card = el("div", { class: "backend card", "data-backend": b.name }, c.info, c.btn);
        const cc = c;
        c.btn.addEventListener("click", () => togglePause(cc.b, cc.btn));
        backendCards.set(b.name, c);
        box.append(c.card);
      }
      c.b = b;
      c.card.setAttribute("data-state", b.state);
      c.btn.textContent = b.paused ? "Resume" : "Pause";
      c.btn.setAttribute("data-action", b.paused ? "resume" : "pause");
      put(c.info, ...[
        el("div", { class: "backend-head" },
          el("span", { class: "name", text: b.name }),
          el("span", { class: "badge bstate-" + b.state, text: b.state.replace(/_/g, " ") }),
          b.circuit ? el("span", { class: "badge", title: "circuit breaker", text: "circuit " + b.circuit }) : null,
          el("span", { class: "kind", text: b.kind })),
        b.host ? el("div", { class: "on-host" }, "on gateway host ", el("b", { text: b.host }),
          hostState[b.host] && hostState[b.host] !== "connected" ? el("span", { class: "muted", text: " (" + hostState[b.host].replace(/_/g, " ") + ")" }) : null) : null,
        b.reason ? el("div", { class: "reason", text: b.reason + (b.until ? " (until " + fmtTime(b.until) + ")" : "") }) : null,
        el("div", { class: "muted", text: "requests this hour (limit estimate " + b.limit_estimate + ", usable " + b.usable + ")" }),
        bar(b.hourly_used, b.hourly_limit, b.usable),
        el("div", { class: "muted", text: "deep mode today" }),
        bar(b.deep_mode_used, b.deep_mode_limit),
        el("div", { class: "muted", text: "in flight " + b.in_use + " / " + b.max_concurrency }),
        b.running_tasks.length ? el("div", { class: "running-on" }, ...b.running_tasks.map((id) => el("a", { href: taskHref(id), text: id }))) : null,
        b.paused ? el("div", { class: "muted", text: "paused: " + (b.pause_reason || "") }) : null,
        b.rate_limited_until ? el("div", { class: "muted" }, "rate limited until ", timeEl(b.rate_limited_until)) : null,
      ]);
    }
  }

  // The gateway hosts on other machines: where each is, which fano, its
  // backends, when it was last heard and how long a ping took, and the
  // state of its link since when (why, on hover and below the state).
  const hostState = {}; // host name -> state, for the backend cards
  function renderHosts(st) {
    const hosts = st.hosts || [];
    $("hosts-section").hidden = hosts.length === 0;
    for (const k of Object.keys(hostState)) delete hostState[k];
    put($("hosts-body"), ...hosts.map((h) => {
      hostState[h.name] = h.state;
      return el("tr", { "data-host": h.name, "data-state": h.state },
        el("td", null, el("b", { text: h.name })),
        el("td", null,
          el("span", { class: "badge hstate-" + h.state, title: h.reason || "", text: h.state.replace(/_/g, " ") }),
          h.since ? el("span", { class: "muted" }, " since ", timeEl(h.since)) : null,
          h.reason ? el("div", { class: "muted host-reason", text: h.reason }) : null),
        el("td", { class: "col-opt" }, h.address ? el("code", { text: h.address }) : el("span", { class: "muted", text: "—" })),
        el("td", { class: "col-opt2", text: h.version || "—" }),
        el("td", { text: h.backends.join(", ") || "—" }),
        el("td", { class: "col-phone" }, timeEl(h.last_heard)),
        el("td", { class: "col-opt", text: h.last_heard ? fmtRTT(h.rtt_ms) : "—" }));
    }));
  }
  function fmtRTT(ms) { return ms < 10 ? ms.toFixed(1) + " ms" : fmtDuration(ms); }

  function renderBackendSummary(st) {
    const ul = $("backend-summary");
    ul.replaceChildren(...st.backends.map((b) => el("li", { "data-backend-summary": b.name },
      el("a", { href: "#/backends", text: b.name }), " ",
      el("span", { class: "badge bstate-" + b.state, text: b.state.replace(/_/g, " ") }),
      el("span", { class: "muted", text: " " + b.hourly_used + "/" + b.hourly_limit + " this hour" }))));
    if (!st.backends.length) ul.append(el("li", { class: "muted", text: "no backends" }));
  }

  async function togglePause(b, btn) {
    btn.disabled = true;
    try {
      await api("POST", "/api/backends/" + encodeURIComponent(b.name) + "/" + (b.paused ? "resume" : "pause"), {});
      await refreshStatus();
      showNotice(b.name + (b.paused ? " resumed." : " paused: it takes no new requests."));
    } catch (e) {
      showNotice((b.paused ? "Could not resume " : "Could not pause ") + b.name + ". " + e.message, e);
    } finally {
      btn.disabled = false;
    }
  }

  function renderRunning(st) {
    const ul = $("running");
    ul.replaceChildren();
    if (!st.running.length) { ul.append(el("li", { class: "muted", text: "nothing running" })); return; }
    for (const r of st.running) {
      ul.append(el("li", { "data-task-id": r.id },
        el("a", { href: taskHref(r.id), class: "mono", text: r.id }), " on ", el("b", { text: r.llm }),
        el("span", { class: "muted", text: " — request " + r.request_count + "/" + r.max_requests + (r.deep_mode ? " (deep)" : "") + ", since " }),
        timeEl(r.started_at)));
    }
  }

  // renderHealth shows the health monitor's headline figures, with the
  // whole report folded away beneath them.
  function renderHealth(st) {
    const h = $("health");
    h.replaceChildren();
    const v = st.health;
    if (v == null) return;
    const line = el("div", { class: "health-line" });
    if (typeof v.healthy === "boolean") {
      line.append(el("span", { class: "badge " + (v.healthy ? "good" : "bad"), "data-healthy": String(v.healthy), text: v.healthy ? "healthy" : "unhealthy" }));
    }
    if (v.checks === 0) line.append(el("span", { class: "muted", text: " first check pending" }));
    else if (v.llms_total != null) line.append(el("span", { text: " LLMs available " + v.llms_available + "/" + v.llms_total }));
    if (v.disk_free_bytes != null) line.append(el("span", { text: " · disk free " + (v.disk_free_bytes / 1e9).toFixed(1) + " GB" }));
    if (v.intake_stopped) line.append(el("span", { class: "result err", text: " · new work stopped (low disk)" }));
    for (const issue of v.issues || []) line.append(el("div", { class: "result err", text: issue }));
    const more = el("details", null, el("summary", { text: "health report" }), el("pre", { text: JSON.stringify(v, null, 2) }));
    h.append(line, more);
  }

  // ---- tasks
  function tasksQuery() {
    const q = current.q;
    return { module: q.get("module") || "", state: (q.get("state") || "").toUpperCase(), q: q.get("q") || "",
      limit: parseInt(q.get("limit") || "50", 10) || 50, page: Math.max(1, parseInt(q.get("page") || "1", 10) || 1) };
  }
  function tasksHash(p) {
    const q = new URLSearchParams();
    if (p.module) q.set("module", p.module);
    if (p.state) q.set("state", p.state);
    if (p.q) q.set("q", p.q);
    if (p.limit !== 50) q.set("limit", String(p.limit));
    if (p.page > 1) q.set("page", String(p.page));
    const s = q.toString();
    return "#/tasks" + (s ? "?" + s : "");
  }
  function filtersChanged() {
    go(tasksHash({ module: $("filter-module").value, state: $("filter-state").value, q: $("filter-q").value.trim(),
      limit: parseInt($("filter-limit").value, 10), page: 1 }));
  }
  for (const id of ["filter-module", "filter-state", "filter-limit"]) $(id).addEventListener("change", filtersChanged);
  $("filter-q").addEventListener("change", filtersChanged);
  $("task-filters").addEventListener("submit", (e) => { e.preventDefault(); filtersChanged(); });

  const taskRows = new Map(); // task id -> { row, cells, action, cancel, retry }
  async function refreshTasks() {
    const p = tasksQuery();
    $("filter-module").value = p.module;
    $("filter-state").value = p.state;
    if (document.activeElement !== $("filter-q")) $("filter-q").value = p.q;
    $("filter-limit").value = String(p.limit);
    const q = new URLSearchParams();
    if (p.module) q.set("module", p.module);
    if (p.state) q.set("state", p.state);
    if (p.q) q.set("q", p.q);
    q.set("limit", String(p.limit));
    q.set("offset", String((p.page - 1) * p.limit));
    const page = await newestAnswer("tasks", "/api/tasks?" + q.toString());
    if (page) drawTasks(p, page);
  }
  function drawTasks(p, page) {
    const tasks = page.tasks;
    const first = page.total ? page.offset + 1 : 0;
    $("tasks-count").textContent = page.total + (page.total === 1 ? " task" : " tasks") + (p.state || p.module || p.q ? (page.total === 1 ? " matches" : " match") : " in memory");
    $("tasks-count").dataset.total = String(page.total);
    $("page-info").textContent = page.total ? first + "–" + (page.offset + tasks.length) + " of " + page.total : "";
    if (!page.total) $("tasks-count").textContent = p.state || p.module || p.q ? "No task matches these filters." : "No tasks in memory.";
    const prev = $("page-prev"), next = $("page-next");
    prev.hidden = p.page <= 1;
    prev.href = tasksHash(Object.assign({}, p, { page: p.page - 1 }));
    next.hidden = page.offset + tasks.length >= page.total;
    next.href = tasksHash(Object.assign({}, p, { page: p.page + 1 }));
    const body = $("tasks-body");
    // As with the backend cards: a task's row, link and buttons stay in
    // the page while it is listed; only its figures are replaced, and a
    // row moves only when the order changes.
    const shown = new Set(tasks.map((t) => t.id));
    for (const [id, r] of taskRows) {
      if (!shown.has(id)) { r.row.remove(); taskRows.delete(id); }
    }
    let nextRow = body.firstChild;
    for (const t of tasks) {
      let r = taskRows.get(t.id);
      if (!r) {
        const cancel = el("button", { class: "danger cancel-btn", text: "Cancel…", title: "cancel this task" });
        cancel.addEventListener("click", () => cancelTask(t.id, cancel, "tasks-result"));
        const retry = el("button", { class: "secondary retry-btn", text: "Retry", title: "put this failed task back in the queue" });
        retry.addEventListener("click", () => retryTask(t.id, retry, "tasks-result"));
        r = { cancel, retry, cells: [], action: el("td", { class: "actions" }) };
        r.idCell = el("td", { class: "id" }, el("a", { href: taskHref(t.id), text: t.id, title: "open this task" }));
        r.err = el("div", { class: "task-error" });
        r.idCell.append(r.err);
        for (let i = 0; i < 8; i++) r.cells.push(el("td"));
        for (const i of [0, 1, 3]) r.cells[i].className = "col-opt";
        for (const i of [4, 5, 6]) r.cells[i].className = "col-opt2";
        r.cells[7].className = "col-phone";
        r.row = el("tr", { "data-task-id": t.id }, r.idCell, ...r.cells, r.action);
        taskRows.set(t.id, r);
      }
      for (const [k, v] of [["data-state", t.state], ["data-task-type", t.task_type], ["data-module", t.module]]) r.row.setAttribute(k, v);
      const c = r.cells;
      c[0].textContent = t.module;
      c[1].textContent = t.task_type;
      c[2].replaceChildren(el("span", { class: "badge state-" + t.state, text: t.state.toLowerCase() }));
      c[3].textContent = t.llm_assigned || "";
      c[4].textContent = t.request_count + "/" + t.max_requests;
      c[5].textContent = String(t.attempts || 0);
      c[6].textContent = t.overdue ? t.priority + " (overdue)" : String(t.priority);
      c[7].replaceChildren(timeEl(t.created_at));
      r.err.textContent = t.state === "FAILED" && t.error ? t.error : "";
      const want = t.state === "FAILED" ? r.retry : FINISHED.has(t.state) ? null : r.cancel;
      if (!want) r.action.replaceChildren();
      else if (want.parentNode !== r.action) r.action.replaceChildren(want);
      if (r.row === nextRow) nextRow = nextRow.nextSibling;
      else body.insertBefore(r.row, nextRow);
    }
    while (nextRow) { const n = nextRow.nextSibling; nextRow.remove(); nextRow = n; }
  }

  // confirm asks in a dialog; resolves with the reason, or null if the
  // person went back.
  function confirmDialog(title, text, withReason, yes) {
    return new Promise((resolve) => {
      const d = $("confirm");
      $("confirm-title").textContent = title;
      $("confirm-text").textContent = text;
      $("confirm-reason").value = "";
      $("confirm-reason").hidden = !withReason;
      $("confirm-reason-label").hidden = !withReason;
      $("confirm-yes").textContent = yes;
      d.returnValue = "";
      d.addEventListener("close", () => resolve(d.returnValue === "ok" ? $("confirm-reason").value.trim() : null), { once: true });
      d.showModal();
      (withReason ? $("confirm-reason") : $("confirm-yes")).focus();
    });
  }

  async function cancelTask(id, btn, resultId) {
    const reason = await confirmDialog("Cancel " + id + "?", "The task stops (a running one at its next step) and will not run again. Give a reason for the record.", true, "Cancel the task");
    if (reason == null) return;
    btn.disabled = true;
    try {
      const r = await api("POST", "/api/orchestrator/task/" + encodeURIComponent(id) + "/cancel", reason ? { reason: reason } : {});
      setResult(resultId, true, id + ": " + r.status);
      scheduleRefresh();
    } catch (e) {
      setResult(resultId, false, "Could not cancel " + id + ". " + e.message, e);
    } finally {
      btn.disabled = false;
    }
  }

  async function retryTask(id, btn, resultId) {
    btn.disabled = true;
    try {
      const r = await api("POST", "/api/orchestrator/retry", { ids: [id] });
      setResult(resultId, true, r.requeued.length ? id + ": back in the queue" : id + ": nothing to retry");
      scheduleRefresh();
    } catch (e) {
      setResult(resultId, false, "Could not retry " + id + ". " + e.message, e);
    } finally {
      btn.disabled = false;
    }
  }

  $("retry-failed").addEventListener("click", async () => {
    const p = tasksQuery();
    const n = lastStatus ? lastStatus.tasks.failed : 0;
    const ok = await confirmDialog("Retry every failed task" + (p.module ? " of " + p.module : "") + "?",
      n + " failed task(s) go back in the queue with their attempts reset.", false, "Retry them");
    if (ok == null) return;
    try {
      const body = { failed: true };
      if (p.module) body.module = p.module;
      const r = await api("POST", "/api/orchestrator/retry", body);
      setResult("tasks-result", true, r.requeued.length + " task(s) back in the queue");
      scheduleRefresh();
    } catch (e) {
      setResult("tasks-result", false, "Could not retry. " + e.message, e);
    }
  });

  // ---- one task
  const STEP_TEXT = { started: "run started", request: "request sent", answer: "answer received", request_failed: "request failed",
    retry_scheduled: "retry scheduled", paused: "paused", requeued: "back in the queue", resumed: "resumed",
    completed: "completed", failed: "failed", cancelled: "cancelled" };
  let taskShown = null; // id of the task on screen
  async function refreshTask() {
    const id = current.arg;
    const box = $("task-detail");
    const turn = startRefresh("task");
    try {
      let t;
      try {
        t = await api("GET", "/api/orchestrator/task/" + encodeURIComponent(id));
      } catch (e) {
        if (turn.newest()) box.replaceChildren(el("p", { class: "result err", text: e.message }));
        return;
      }
      if (turn.newest()) drawTask(id, box, t);
    } finally {
      turn.end();
    }
  }
  function drawTask(id, box, t) {
    const keepScroll = taskShown === id ? box.querySelector(".conversation") : null;
    taskShown = id;
    const facts = el("dl", { class: "facts" });
    const fact = (k, v) => { if (v != null && v !== "") facts.append(el("dt", { text: k }), el("dd", null, v)); };
    fact("module", t.module);
    fact("type", t.task_type);
    fact("subject", t.subject);
    fact("priority", t.overdue ? t.priority + " (overdue)" : String(t.priority));
    fact("attempts", String(t.attempts || 0));
    fact("requests", t.request_count + " of at most " + t.max_requests);
    fact("LLM", t.llm_assigned || t.llm_preference || "");
    fact("created", timeEl(t.created_at));
    if (t.started_at) fact("started", timeEl(t.started_at));
    if (t.completed_at) fact("finished", timeEl(t.completed_at));
    if (t.started_at && t.completed_at) fact("took", fmtDuration(new Date(t.completed_at) - new Date(t.started_at)));
    if (t.not_before) fact("not before", timeEl(t.not_before));
    if (t.pause_reason) fact("paused because", t.pause_reason);

    const actions = el("div", { class: "task-actions" });
    if (t.state === "FAILED") {
      const b = el("button", { class: "retry-btn", text: "Retry" });
      b.addEventListener("click", () => retryTask(t.id, b, "task-result"));
      actions.append(b);
    } else if (!FINISHED.has(t.state)) {
      const b = el("button", { class: "danger cancel-btn", text: "Cancel…" });
      b.addEventListener("click", () => cancelTask(t.id, b, "task-result"));
      actions.append(b);
    }

    const timeline = el("table", { class: "timeline" },
      el("thead", null, el("tr", null, ...[["time"], ["step"], ["backend", "col-phone"], ["turn", "col-phone"], ["took"], ["detail"]].map(([h, c]) => el("th", { class: c, text: h })))));
    const tb = el("tbody");
    let prevAttempt = 0;
    for (const s of t.timeline) {
      if (s.attempt && s.attempt !== prevAttempt) {
        prevAttempt = s.attempt;
        tb.append(el("tr", { class: "attempt-row" }, el("td", { colSpan: 6, text: "attempt " + s.attempt })));
      }
      tb.append(el("tr", { class: "step-" + s.kind, "data-step": s.kind },
        el("td", null, timeEl(s.at)),
        el("td", { text: STEP_TEXT[s.kind] || s.kind }),
        el("td", { class: "col-phone", text: s.llm || "" }),
        el("td", { class: "col-phone", text: s.turn ? String(s.turn) : "" }),
        el("td", { text: s.duration_ms ? fmtDuration(s.duration_ms) : "" }),
        el("td", { class: s.error ? "err-text" : "", text: [s.reason, s.error].filter(Boolean).join(": ") + (s.bytes ? (s.error || s.reason ? " · " : "") + s.bytes + " bytes" : "") })));
    }
    timeline.append(tb);
    const tlBox = t.timeline.length ? el("div", { class: "scroll" }, timeline,
      t.timeline_dropped ? el("p", { class: "muted", text: t.timeline_dropped + " steps in the middle are not shown." }) : null)
      : el("p", { class: "muted", text: "No timeline: this task ran before the panel's history reaches back (the conversation below has its turns)." });

    const conv = el("div", { class: "conversation" });
    const msgs = (t.conversation && t.conversation.messages) || [];
    let prevAt = null;
    msgs.forEach((m, i) => {
      const took = m.role === "assistant" && prevAt && m.at ? " · " + fmtDuration(new Date(m.at) - new Date(prevAt)) : "";
      const body = el("div", { class: "msg-body document" });
      body.innerHTML = window.fanoMarkdown.render(m.content);
      conv.append(el("div", { class: "msg " + m.role },
        el("div", { class: "msg-head" }, el("b", { text: (m.role === "user" ? "prompt" : "answer") + " " + (Math.floor(i / 2) + 1) }),
          m.llm ? el("span", { class: "muted", text: " from " + m.llm }) : null, " ", m.at ? timeEl(m.at) : null,
          el("span", { class: "muted", text: took })),
        body));
      prevAt = m.at;
    });
    if (!msgs.length) conv.append(el("p", { class: "muted", text: "No conversation yet." }));
    const scrollTop = keepScroll ? keepScroll.scrollTop : 0;
    put(box,
      el("h1", { class: "view-title task-title" }, el("span", { class: "mono", text: t.id }), " ",
        el("span", { class: "badge state-" + t.state, id: "task-state", "data-state": t.state, text: t.state.toLowerCase() })),
      t.error ? el("div", { class: "error-box", id: "task-error" }, el("b", { text: t.state === "FAILED" ? "Last error: " : "Error: " }), t.error) : null,
      actions,
      el("p", { id: "task-result", class: "result", role: "status" }),
      el("section", { class: "card" }, facts),
      el("section", { class: "card" }, el("h2", { text: "Timeline" }), tlBox),
      el("section", { class: "card" }, el("h2", { text: "Conversation" }), conv));
    conv.scrollTop = scrollTop;
  }

  // ---- alerts
  let alertsSeen = null; // ids already known (null: first load, nothing notified)
  async function refreshAlerts() {
    const a = await newestAnswer("alerts", "/api/alerts");
    if (!a) return;
    const count = $("alert-count");
    count.textContent = String(a.open);
    count.hidden = a.open === 0;
    renderOpenAlerts(a);
    notifyNew(a);
    if (current.view !== "alerts") return;
    const openOnly = current.q.get("open") === "1";
    $("alerts-open-only").checked = openOnly;
    const list = a.alerts.filter((x) => !openOnly || !x.resolved_at);
    $("alerts-empty").hidden = list.length > 0;
    $("alerts-body").replaceChildren(...list.map((x) => el("tr", { "data-alert": x.kind, "data-open": String(!x.resolved_at), class: x.resolved_at ? "resolved" : "open" },
      el("td", null, timeEl(x.raised_at)),
      el("td", null, el("b", { text: x.kind.replace(/_/g, " ") }), el("div", { text: x.message })),
      el("td", { class: "col-opt" }, x.backend ? el("a", { href: "#/backends", text: x.backend }) : null,
        x.task_id ? el("a", { href: taskHref(x.task_id), class: "mono", text: x.task_id }) : null),
      el("td", null, x.needs_person ? el("span", { class: "badge bad", text: "needs you" }) : null, " " + (x.action || "")),
      el("td", null, x.resolved_at ? el("span", null, el("span", { class: "badge good", text: "resolved" }), " ", timeEl(x.resolved_at),
        x.resolution ? el("div", { class: "muted", text: x.resolution }) : null) : el("span", { class: "badge bad", text: "open" })))));
  }
  $("alerts-open-only").addEventListener("change", () => go("#/alerts" + ($("alerts-open-only").checked ? "?open=1" : "")));

  function renderOpenAlerts(a) {
    const box = $("open-alerts");
    const open = a.alerts.filter((x) => !x.resolved_at);
    box.replaceChildren();
    if (!open.length) return;
    box.append(el("a", { href: "#/alerts?open=1", class: "alert-line" },
      el("b", { text: open.length + (open.length === 1 ? " open alert" : " open alerts") + ": " }),
      open.slice(0, 3).map((x) => x.message).join(" · ")));
  }

  function notifyNew(a) {
    const first = alertsSeen == null;
    if (first) alertsSeen = new Set();
    for (const x of a.alerts) {
      const key = x.id + (x.resolved_at ? "/r" : "");
      if (alertsSeen.has(key)) continue;
      alertsSeen.add(key);
      if (first || localStorage.getItem("fano.panel.notify") !== "on" || !("Notification" in window) || Notification.permission !== "granted") continue;
      try {
        new Notification(x.resolved_at ? "fano: resolved" : "fano: " + x.kind.replace(/_/g, " "), { body: x.message + (x.action && !x.resolved_at ? "\nTo do: " + x.action : ""), tag: x.id });
      } catch (_) { /* notifications refused by the browser */ }
    }
  }
  function showNotifyState() {
    const on = localStorage.getItem("fano.panel.notify") === "on";
    const perm = "Notification" in window ? Notification.permission : "unsupported";
    $("notify-btn").textContent = on ? "Stop browser notifications" : "Notify me in this browser";
    $("notify-state").textContent = perm === "unsupported" ? "this browser has no notifications" :
      on && perm === "granted" ? "notifications on while this page is open" : perm === "denied" ? "notifications are blocked for this site in the browser" : "";
  }
  $("notify-btn").addEventListener("click", async () => {
    if (localStorage.getItem("fano.panel.notify") === "on") { localStorage.removeItem("fano.panel.notify"); showNotifyState(); return; }
    if (!("Notification" in window)) { showNotifyState(); return; }
    const perm = await Notification.requestPermission();
    if (perm === "granted") localStorage.setItem("fano.panel.notify", "on");
    showNotifyState();
  });
  showNotifyState();

  // ---- document: rendered, with a comment form under each section
  let docSections = [];
  async function refreshDocument() {
    const box = $("document");
    if (box.querySelector(".inline-comment textarea:focus")) return; // do not redraw under a person typing
    try {
      const d = await api("GET", "/api/document?format=json");
      box.className = "document";
      box.innerHTML = window.fanoMarkdown.render(d.markdown || "*The document is empty so far.*");
      docSections = d.sections;
      $("section-ids").replaceChildren(...d.sections.map((s) => el("option", { value: s })));
      addSectionButtons(box, new Set(d.sections));
    } catch (e) {
      box.className = "document muted";
      box.textContent = e.status === 404 ? "No document: " + e.message.replace(/^No document: /i, "") : e.message;
    }
  }

  // addSectionButtons puts "Comment on this section" under the heading
  // that follows each section's anchor.
  function addSectionButtons(box, known) {
    for (const a of box.querySelectorAll("a[id]")) {
      if (!known.has(a.id)) continue;
      let h = a.nextElementSibling;
      while (h && !/^H[1-6]$/.test(h.tagName)) h = h.nextElementSibling;
      if (!h) continue;
      const id = a.id;
      const btn = el("button", { type: "button", class: "link comment-here", "data-section": id, text: "Comment on this section" });
      btn.addEventListener("click", () => openInlineComment(h, id, btn));
      h.after(btn);
    }
  }
  function openInlineComment(h, id, btn) {
    if (btn.nextElementSibling && btn.nextElementSibling.classList.contains("inline-comment")) return;
    const text = el("textarea", { rows: 3, required: true, "aria-label": "comment on section " + id });
    const result = el("p", { class: "result", role: "status" });
    const form = el("form", { class: "inline-comment", "data-section": id }, text,
      el("div", { class: "dialog-buttons" }, el("button", { type: "button", class: "secondary", text: "Close" }), el("button", { type: "submit", text: "Add comment" })), result);
    form.querySelector("button.secondary").addEventListener("click", () => form.remove());
    form.addEventListener("submit", async (e) => {
      e.preventDefault();
      try {
        const r = await api("POST", "/api/comments", { section_id: id, text: text.value });
        result.textContent = r.status === "duplicate" ? "This comment was already taken." : "Comment added: " + r.module + " addresses it first.";
        result.className = "result ok";
        text.value = "";
      } catch (err) {
        result.textContent = err.message;
        result.className = "result err" + (err.status === 401 ? " needs-token" : "");
      }
    });
    btn.after(form);
    text.focus();
  }

  $("comment-form").addEventListener("submit", async (e) => {
    e.preventDefault();
    try {
      const r = await api("POST", "/api/comments", { section_id: $("comment-section").value.trim(), text: $("comment-text").value });
      setResult("comment-result", true, "Comment added to " + r.module + ": it will be addressed first.");
      $("comment-text").value = "";
      scheduleRefresh();
    } catch (err) {
      setResult("comment-result", false, err.message, err);
    }
  });

  $("seed-form").addEventListener("submit", async (e) => {
    e.preventDefault();
    const body = { text: $("seed-text").value };
    const p = $("seed-priority").value.trim();
    if (p !== "") body.priority = parseInt(p, 10);
    try {
      const r = await api("POST", "/api/seeds", body);
      setResult("seed-result", true, "Seed added to " + r.module + ".");
      $("seed-text").value = "";
      scheduleRefresh();
    } catch (err) {
      setResult("seed-result", false, err.message, err);
    }
  });

  // ---- history: uPlot charts
  const charts = {};
  function cssVar(name) { return getComputedStyle(document.documentElement).getPropertyValue(name).trim(); }
  const PALETTE = ["--c1", "--c2", "--c3", "--c4", "--c5", "--c6"];
  function chart(id, x, series, opts) {
    const box = $(id);
    if (charts[id]) { charts[id].destroy(); delete charts[id]; }
    box.replaceChildren();
    const width = Math.max(280, box.clientWidth || box.parentElement.clientWidth - 32);
    const axis = { stroke: cssVar("--fg"), grid: { stroke: cssVar("--line") }, ticks: { stroke: cssVar("--line") } };
    const o = {
      width: width, height: opts.height || 220,
      scales: { x: opts.bars ? { time: true, range: (u, min, max) => [min - 43200, max + 43200] } : { time: true }, y: { range: (u, min, max) => [0, Math.max(1, max)] } },
      axes: [Object.assign({}, axis, opts.dayAxis ? { splits: () => x } : {}, { values: opts.dayAxis ? (u, ticks) => ticks.map((t) => isoLocal(new Date(t * 1000)).slice(0, 10)) :
        (u, ticks) => ticks.map((t) => { const s = isoLocal(new Date(t * 1000), false); return s.slice(5, 16); }) }),
        Object.assign({}, axis, { size: 48 })],
      series: [{ label: "time", value: (u, v) => v == null ? "" : (opts.dayAxis ? isoLocal(new Date(v * 1000)).slice(0, 10) : isoLocal(new Date(v * 1000), false)) }]
        .concat(series.map((s, i) => ({
          label: s.label, stroke: cssVar(PALETTE[i % PALETTE.length]), width: 2,
          points: opts.bars ? { show: true, size: 7, fill: cssVar(PALETTE[i % PALETTE.length]) } : { show: false },
        }))),
      legend: { live: true },
    };
    const data = [x].concat(series.map((s) => s.values));
    charts[id] = new window.uPlot(o, data, box);
  }

  let historyAt = 0; // when the charts were last drawn: events redraw them at most once a minute
  async function refreshHistory() {
    historyAt = Date.now();
    const hours = parseInt(current.q.get("hours") || "336", 10);
    $("history-hours").value = String(hours);
    const h = await newestAnswer("history", "/api/history?hours=" + hours);
    if (h) drawHistory(h);
  }
  function drawHistory(h) {
    $("history-note").textContent = (h.complete ? "" : h.reading ? "Still reading fano's log for the earlier hours… " :
      "fano's log could not be read to its end: the hours before the panel started may be short. ") +
      "From " + fmtTime(h.from) + " to " + fmtTime(h.to) + ". Hours are UTC hours.";
    const x = h.hours.map((f) => Date.parse(f.start) / 1000);
    chart("chart-requests", x, h.backends.map((b) => ({ label: b, values: h.hours.map((f) => f.requests[b] || 0) })), {});
    chart("chart-quota", x, h.backends.map((b) => ({ label: b, values: h.hours.map((f) => f.quota_used[b] || 0) })), {});
    chart("chart-tasks", x, [{ label: "completed", values: h.hours.map((f) => f.tasks_completed) },
      { label: "failed", values: h.hours.map((f) => f.tasks_failed) }], {});
    const dx = h.days.map((d) => Date.parse(d.date + "T00:00:00Z") / 1000);
    chart("chart-days", dx, [{ label: "insights blessed", values: h.days.map((d) => d.insights_blessed) },
      { label: "sections written", values: h.days.map((d) => d.sections_written) },
      { label: "sections revised", values: h.days.map((d) => d.sections_revised) }], { bars: true, dayAxis: true });
  }
  $("history-hours").addEventListener("change", () => go("#/history?hours=" + $("history-hours").value));
  let resizeTimer = null;
  window.addEventListener("resize", () => {
    clearTimeout(resizeTimer);
    resizeTimer = setTimeout(() => { if (current.view === "history") refreshHistory().catch(() => {}); }, 200);
  });

  // ---- live events
  function feedLine(text, cls, at) {
    const d = at ? new Date(at) : new Date();
    const li = el("li", { class: cls || "" }, el("span", { class: "t", title: isoUTC(d) + " (UTC)", text: isoLocal(d).slice(11, 19) }), text);
    const feed = $("feed");
    feed.prepend(li);
    while (feed.children.length > FEED_MAX) feed.lastChild.remove();
  }

  function describe(ev) {
    const turn = " turn " + ((ev.turn || 0) + 1);
    switch (ev.type) {
      case "task":
        return ev.kind.replace("task_", "").replace(/_/g, " ") + " " + ev.task_id + (ev.llm ? " on " + ev.llm : "") +
          (ev.reason ? " (" + ev.reason + ")" : "") + (ev.error ? " — " + ev.error : "");
      case "llm":
        if (ev.kind === "llm_request_started")
          return "→ " + ev.llm + " " + ev.task_id + turn + ", " + ev.prompt_bytes + " B" + (ev.deep_mode ? " (deep)" : "") + (ev.resend ? " (resend)" : "");
        if (ev.kind === "llm_request_finished")
          return "← " + ev.llm + " " + ev.task_id + turn + ", " + (ev.response_bytes || 0) + " B in " + fmtDuration(ev.duration_ms || 0);
        return "✗ " + ev.llm + " " + ev.task_id + turn + ": " + (ev.reason || "failed") + (ev.error ? " — " + ev.error : "");
      case "quota":
        return ev.kind.replace(/_/g, " ") + (ev.backend ? " " + ev.backend : "") + (ev.deep_mode ? " (deep)" : "") +
          (ev.until ? " until " + fmtTime(ev.until) : "") + (ev.reason ? " (" + ev.reason + ")" : "");
      case "module":
        return ev.module + ": " + ev.kind.replace(/_/g, " ") + (ev.task_id ? " (" + ev.task_id + ")" : "");
      case "health": {
        const d = ev.data || {};
        if (d.message) return (d.resolved === "true" ? "resolved: " : "alert: ") + d.message;
        return "health " + (ev.component || "") + ": " + ev.kind.replace(/_/g, " ");
      }
    }
    return ev.kind;
  }

  let refreshTimer = null;
  let docTimer = null;
  let taskTimer = null;
  function scheduleRefresh() {
    if (refreshTimer) return;
    refreshTimer = setTimeout(async () => {
      refreshTimer = null;
      const p = [refreshStatus(), refreshAlerts()];
      if (current.view === "tasks") p.push(refreshTasks());
      if (current.view === "history" && Date.now() - historyAt > 60000) p.push(refreshHistory());
      await Promise.all(p.map((x) => x.catch(() => {})));
    }, 250);
  }
  function scheduleDocument() {
    if (docTimer || current.view !== "document") return;
    docTimer = setTimeout(() => { docTimer = null; refreshDocument(); }, 1000);
  }
  function scheduleTask() {
    if (taskTimer) return;
    taskTimer = setTimeout(() => { taskTimer = null; if (current.view === "task") refreshTask(); }, 300);
  }

  // ---- connection: a stopped or unreachable fano greys the page and says
  // since when; the page reconnects by itself. The last moment fano
  // answered is kept, so a page loaded while fano is down (from the
  // service worker's copy) still says since when.
  const LIVE_KEY = "fano.panel.lastLive";
  let offlineSince = null;
  setInterval(() => { if (!offlineSince && ws && ws.readyState === WebSocket.OPEN) localStorage.setItem(LIVE_KEY, new Date().toISOString()); }, 5000);
  function setOffline(why) {
    const conn = $("conn-state");
    conn.textContent = "unreachable";
    conn.className = "badge bad";
    conn.dataset.state = "offline";
    if (offlineSince == null) {
      const last = localStorage.getItem(LIVE_KEY);
      offlineSince = last && !everLive ? new Date(last) : new Date();
    }
    document.body.classList.add("offline");
    const b = $("conn-banner");
    b.hidden = false;
    b.replaceChildren(el("b", { text: "fano is not reachable since " }), el("time", { dateTime: isoUTC(offlineSince), title: isoUTC(offlineSince) + " (UTC)", text: isoLocal(offlineSince) }),
      el("span", { text: " (" + (why || "no answer") + "). What the page shows is as it was then; it reconnects by itself." }));
    $("orch-state").textContent = "unknown";
    $("orch-state").dataset.state = "unknown";
    $("uptime").textContent = ""; // a frozen uptime would pass for a running fano
  }
  let everLive = false; // this page has seen fano answer
  function setOnline() {
    everLive = true;
    localStorage.setItem(LIVE_KEY, new Date().toISOString());
    const conn = $("conn-state");
    conn.textContent = "live";
    conn.className = "badge good";
    conn.dataset.state = "live";
    offlineSince = null;
    document.body.classList.remove("offline");
    $("conn-banner").hidden = true;
  }

  let backoff = 500;
  let lastSeq = 0;
  let ws = null;
  function connect() {
    const proto = location.protocol === "https:" ? "wss://" : "ws://";
    ws = new WebSocket(proto + location.host + "/api/events");
    ws.onopen = () => {
      backoff = 500;
      lastSeq = 0;
      setOnline();
      refreshView();
    };
    ws.onmessage = (m) => {
      let ev;
      try { ev = JSON.parse(m.data); } catch (_) { return; }
      if (lastSeq && ev.seq > lastSeq + 1) feedLine("(" + (ev.seq - lastSeq - 1) + " events missed)", "muted");
      lastSeq = ev.seq;
      feedLine(describe(ev), "ev-" + ev.type, ev.at);
      if (ev.type === "task" || ev.type === "quota" || ev.type === "health" || ev.kind === "llm_request_started") scheduleRefresh();
      if (ev.type === "module") { scheduleRefresh(); scheduleDocument(); }
      if (current.view === "task" && ev.task_id === current.arg) scheduleTask();
    };
    ws.onclose = (e) => {
      ws = null;
      setOffline(e.reason === "fano is stopping" ? "fano stopped" : everLive ? "the connection closed" : "it does not answer");
      setTimeout(connect, backoff);
      backoff = Math.min(backoff * 2, 5000);
    };
  }

  // The gateway hosts' last heard and round trip change with every ping,
  // without an event: the backends view reads them again every 5 s.
  setInterval(() => {
    if (current.view === "backends" && !offlineSince && ws && ws.readyState === WebSocket.OPEN && lastStatus && lastStatus.hosts && lastStatus.hosts.length) scheduleRefresh();
  }, 5000);

  // A watchdog: a fano that hangs, or a network that drops without
  // closing the socket, shows too.
  setInterval(async () => {
    if (!ws || ws.readyState !== WebSocket.OPEN) return;
    const ctl = new AbortController();
    const t = setTimeout(() => ctl.abort(), 8000);
    try {
      const r = await fetch("/healthz", { signal: ctl.signal });
      if (!r.ok && r.status !== 503) throw new Error(String(r.status));
      if (offlineSince) { setOnline(); refreshView(); }
    } catch (_) {
      setOffline("no answer within 8 s");
    } finally {
      clearTimeout(t);
    }
  }, 15000);

  if ("serviceWorker" in navigator) navigator.serviceWorker.register("/sw.js").catch(() => { /* no copy for reloads: not fatal */ });
  route();
  connect();
})();
