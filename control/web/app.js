// fano control panel: reads the REST API, listens to /api/events and
// refreshes what an event touches. Every value from the server goes into
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
      history.replaceState(null, "", location.pathname + location.search);
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
    showTokenState();
  });
  showTokenState();

  // ---- HTTP
  async function api(method, path, body) {
    const opts = { method: method, headers: { "Accept": "application/json" } };
    if (method !== "GET") {
      opts.headers["Authorization"] = "Bearer " + token();
      if (body !== undefined) {
        opts.headers["Content-Type"] = "application/json";
        opts.body = JSON.stringify(body);
      }
    }
    const resp = await fetch(path, opts);
    let data = null;
    try { data = await resp.json(); } catch (_) { /* not JSON */ }
    if (!resp.ok) {
      const msg = (data && data.error) || (resp.status + " " + resp.statusText);
      const err = new Error(msg);
      err.status = resp.status;
      throw err;
    }
    return data;
  }

  function el(tag, attrs, ...children) {
    const n = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === "class") n.className = v;
      else if (k.startsWith("data-")) n.setAttribute(k, v);
      else if (k === "text") n.textContent = v;
      else n[k] = v;
    }
    for (const c of children) if (c != null) n.append(c);
    return n;
  }

  function fmtTime(s) {
    if (!s) return "";
    const d = new Date(s);
    return d.toLocaleTimeString();
  }

  function setResult(id, ok, msg) {
    const r = $(id);
    r.textContent = msg;
    r.className = "result " + (ok ? "ok" : "err");
  }

  // ---- status
  let lastStatus = null;
  async function refreshStatus() {
    const st = await api("GET", "/api/orchestrator/status");
    lastStatus = st;
    $("orch-state").textContent = st.state;
    $("uptime").textContent = "up " + st.uptime;
    renderTotals(st);
    renderQueue(st);
    renderBackends(st);
    renderRunning(st);
    renderHealth(st);
    renderPipelines(st);
    const sel = $("filter-module");
    const have = new Set([...sel.options].map((o) => o.value));
    for (const m of st.modules) if (!have.has(m.name)) sel.append(el("option", { value: m.name, text: m.name }));
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
        (s.waiting ? " — waiting for the daily budget until " + s.waiting_until + " (" + s.waiting + ")" : "")));
      const t = el("table", { class: "pipeline-steps" },
        el("thead", {}, el("tr", {}, ...["step", "model", "ok", "failed", "pending", "invalid", "cost"].map((h) => el("th", { text: h })))));
      const body = el("tbody");
      for (const step of Object.keys(s.steps).sort()) {
        for (const model of Object.keys(s.steps[step]).sort()) {
          const c = s.steps[step][model];
          body.append(el("tr", { "data-step": step, "data-model": model },
            el("td", { text: step }), el("td", { text: model }), el("td", { text: String(c.ok) }),
            el("td", { text: String(c.failed) }), el("td", { text: String(c.pending) }),
            el("td", { text: String(c.invalid || 0) }), el("td", { text: "$" + (c.cost_usd || 0).toFixed(4) })));
        }
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
    for (const [k, v] of [["pending", t.pending + t.ready], ["running", t.running], ["paused", t.paused],
      ["completed (24 h)", t.completed_24h], ["failed", t.failed], ["cancelled", t.cancelled]]) {
      box.append(el("span", { "data-total": k }, el("b", { text: String(v) }), " " + k));
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
      const row = el("tr", { "data-module": name }, el("td", { text: name }));
      for (const s of ["PENDING", "READY", "RUNNING", "PAUSED", "COMPLETED", "FAILED", "CANCELLED"]) {
        row.append(el("td", { "data-state": s, text: String(c[s] || 0) }));
      }
      row.append(el("td", { class: "muted", text: (caps[name] || []).join(", ") }));
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
    b.append(el("em", { text: limit > 0 ? used + " / " + limit : (used + " (none allowed)") }));
    return b;
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
        c.card = el("div", { class: "backend", "data-backend": b.name }, c.info, c.btn);
        const cc = c;
        c.btn.addEventListener("click", () => togglePause(cc.b, cc.btn));
        backendCards.set(b.name, c);
        box.append(c.card);
      }
      c.b = b;
      c.card.setAttribute("data-state", b.state);
      c.btn.textContent = b.paused ? "Resume" : "Pause";
      c.btn.setAttribute("data-action", b.paused ? "resume" : "pause");
      c.info.replaceChildren(...[
        el("header", null,
          el("span", { class: "name", text: b.name }),
          el("span", { class: "badge bstate-" + b.state, text: b.state.replace("_", " ") }),
          b.circuit ? el("span", { class: "badge", title: "circuit breaker", text: "circuit " + b.circuit }) : null,
          el("span", { class: "muted", text: b.kind })),
        el("div", { class: "muted", text: "hourly (limit estimate " + b.limit_estimate + ", usable " + b.usable + ")" }),
        bar(b.hourly_used, b.hourly_limit, b.usable),
        el("div", { class: "muted", text: "deep mode today" }),
        bar(b.deep_mode_used, b.deep_mode_limit),
        el("div", { class: "muted", text: "in flight " + b.in_use + " / " + b.max_concurrency +
          (b.running_tasks.length ? " — " + b.running_tasks.join(", ") : "") }),
        b.paused ? el("div", { class: "muted", text: "paused: " + (b.pause_reason || "") }) : null,
        b.rate_limited_until ? el("div", { class: "muted", text: "rate limited until " + fmtTime(b.rate_limited_until) }) : null,
      ].filter(Boolean));
    }
  }

  async function togglePause(b, btn) {
    btn.disabled = true;
    try {
      await api("POST", "/api/backends/" + encodeURIComponent(b.name) + "/" + (b.paused ? "resume" : "pause"), {});
      await refreshStatus();
    } catch (e) {
      alertFeed("pause " + b.name + ": " + e.message);
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
        el("code", { text: r.id }), " on ", el("b", { text: r.llm }),
        el("span", { class: "muted", text: " — request " + r.request_count + "/" + r.max_requests + (r.deep_mode ? " (deep)" : "") })));
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
      line.append(el("span", { class: "badge " + (v.healthy ? "conn-on" : "conn-off"), "data-healthy": String(v.healthy), text: v.healthy ? "healthy" : "unhealthy" }));
    }
    if (v.checks === 0) line.append(el("span", { class: "muted", text: " first check pending" }));
    else if (v.llms_total != null) line.append(el("span", { text: " LLMs available " + v.llms_available + "/" + v.llms_total }));
    if (v.disk_free_bytes != null) line.append(el("span", { text: " · disk free " + (v.disk_free_bytes / 1e9).toFixed(1) + " GB" }));
    if (v.intake_stopped) line.append(el("span", { class: "result err", text: " · new work stopped (low disk)" }));
    for (const issue of v.issues || []) line.append(el("div", { class: "result err", text: issue }));
    const more = el("details", null, el("summary", { text: "health report" }), el("pre", { text: JSON.stringify(v, null, 2) }));
    h.append(el("h2", { text: "Health" }), line, more);
  }

  // ---- tasks
  const taskRows = new Map(); // task id -> { row, figures, action, cancel }
  async function refreshTasks() {
    const q = new URLSearchParams();
    if ($("filter-module").value) q.set("module", $("filter-module").value);
    if ($("filter-state").value) q.set("state", $("filter-state").value);
    q.set("limit", $("filter-limit").value);
    const tasks = await api("GET", "/api/orchestrator/tasks?" + q.toString());
    const body = $("tasks-body");
    // As with the backend cards: a task's row, link and cancel button stay
    // in the page while it is listed; only its figures are replaced, and a
    // row moves only when the order changes.
    const shown = new Set(tasks.map((t) => t.id));
    for (const [id, r] of taskRows) {
      if (!shown.has(id)) { r.row.remove(); taskRows.delete(id); }
    }
    let next = body.firstChild;
    for (const t of tasks) {
      let r = taskRows.get(t.id);
      if (!r) {
        const idLink = el("a", { text: t.id, href: "#", title: "show the conversation" });
        idLink.addEventListener("click", (e) => { e.preventDefault(); showTask(t.id); });
        const cancel = el("button", { class: "danger cancel-btn", text: "Cancel", title: "cancel this task" });
        cancel.addEventListener("click", () => cancelTask(t.id, cancel));
        r = { cancel, figures: [], action: el("td") };
        for (let i = 0; i < 7; i++) r.figures.push(el("td"));
        r.row = el("tr", { "data-task-id": t.id }, el("td", { class: "id" }, idLink), ...r.figures, r.action);
        taskRows.set(t.id, r);
      }
      for (const [k, v] of [["data-state", t.state], ["data-task-type", t.task_type], ["data-module", t.module]]) r.row.setAttribute(k, v);
      const f = r.figures;
      f[0].textContent = t.module;
      f[1].textContent = t.task_type;
      f[2].replaceChildren(el("span", { class: "badge state-" + t.state, text: t.state }));
      f[3].textContent = t.llm_assigned || "";
      f[4].textContent = t.request_count + "/" + t.max_requests;
      f[5].textContent = t.overdue ? t.priority + " (overdue)" : String(t.priority);
      f[6].className = "muted";
      f[6].textContent = fmtTime(t.created_at);
      if (FINISHED.has(t.state)) r.action.replaceChildren();
      else if (r.cancel.parentNode !== r.action) r.action.append(r.cancel);
      if (r.row === next) next = next.nextSibling;
      else body.insertBefore(r.row, next);
    }
    while (next) { const n = next.nextSibling; next.remove(); next = n; }
  }

  async function cancelTask(id, btn) {
    btn.disabled = true;
    try {
      const r = await api("POST", "/api/orchestrator/task/" + encodeURIComponent(id) + "/cancel", {});
      setResult("tasks-result", true, id + ": " + r.status);
      scheduleRefresh();
    } catch (e) {
      setResult("tasks-result", false, "cancel " + id + ": " + e.message);
      btn.disabled = false;
    }
  }

  async function showTask(id) {
    const box = $("task-detail");
    try {
      const t = await api("GET", "/api/orchestrator/task/" + encodeURIComponent(id));
      const conv = el("div", { class: "conversation" });
      for (const m of (t.conversation && t.conversation.messages) || []) {
        conv.append(el("div", { class: "msg " + m.role }, el("b", { text: m.role + (m.llm ? " (" + m.llm + ")" : "") + ": " }), m.content));
      }
      box.className = "";
      box.replaceChildren(...[
        el("div", null, el("code", { text: t.id }), " ", el("span", { class: "badge state-" + t.state, text: t.state })),
        t.error ? el("div", { class: "result err", text: t.error }) : null,
        conv].filter((n) => n != null));
    } catch (e) {
      box.textContent = e.message;
    }
  }

  // ---- forms
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
      setResult("seed-result", false, err.message);
    }
  });

  $("comment-form").addEventListener("submit", async (e) => {
    e.preventDefault();
    try {
      const r = await api("POST", "/api/comments", { section_id: $("comment-section").value.trim(), text: $("comment-text").value });
      setResult("comment-result", true, "Comment added to " + r.module + ": it will be addressed first.");
      $("comment-text").value = "";
      scheduleRefresh();
    } catch (err) {
      setResult("comment-result", false, err.message);
    }
  });

  // ---- document
  async function refreshDocument() {
    const box = $("document");
    try {
      const d = await api("GET", "/api/document?format=json");
      box.className = "document";
      box.innerHTML = window.fanoMarkdown.render(d.markdown || "*The document is empty so far.*");
      const list = $("section-ids");
      list.replaceChildren(...d.sections.map((s) => el("option", { value: s })));
    } catch (e) {
      box.className = "document muted";
      box.textContent = e.message;
    }
  }

  // ---- live events
  function feedLine(text, cls) {
    const li = el("li", { class: cls || "" }, el("span", { class: "t", text: new Date().toLocaleTimeString() }), text);
    const feed = $("feed");
    feed.prepend(li);
    while (feed.children.length > FEED_MAX) feed.lastChild.remove();
  }
  function alertFeed(msg) { feedLine(msg, "result err"); }

  function describe(ev) {
    switch (ev.type) {
      case "task":
        return ev.kind.replace("task_", "") + " " + ev.task_id + (ev.llm ? " on " + ev.llm : "") +
          (ev.reason ? " (" + ev.reason + ")" : "") + (ev.error ? " — " + ev.error : "");
      case "llm":
        if (ev.kind === "llm_request_started")
          return "→ " + ev.llm + " " + ev.task_id + " turn " + ev.turn + ", " + ev.prompt_bytes + " B" + (ev.deep_mode ? " (deep)" : "") + (ev.resend ? " (resend)" : "");
        if (ev.kind === "llm_request_finished")
          return "← " + ev.llm + " " + ev.task_id + ", " + ev.response_bytes + " B in " + Math.round(ev.duration_ms) + " ms";
        return "✗ " + ev.llm + " " + ev.task_id + ": " + ev.reason + (ev.error ? " — " + ev.error : "");
      case "quota":
        return ev.kind.replace(/_/g, " ") + (ev.backend ? " " + ev.backend : "") + (ev.deep_mode ? " (deep)" : "") +
          (ev.until ? " until " + fmtTime(ev.until) : "") + (ev.reason ? " (" + ev.reason + ")" : "");
      case "module":
        return ev.module + ": " + ev.kind + (ev.task_id ? " (" + ev.task_id + ")" : "");
      case "health":
        return "health " + (ev.component || "") + ": " + ev.kind + " " + JSON.stringify(ev.data || {});
    }
    return ev.kind;
  }

  let refreshTimer = null;
  let docTimer = null;
  function scheduleRefresh() {
    if (refreshTimer) return;
    refreshTimer = setTimeout(async () => {
      refreshTimer = null;
      try { await Promise.all([refreshStatus(), refreshTasks()]); } catch (e) { /* shown on the next try */ }
    }, 250);
  }
  function scheduleDocument() {
    if (docTimer) return;
    docTimer = setTimeout(() => { docTimer = null; refreshDocument(); }, 1000);
  }

  let backoff = 500;
  let lastSeq = 0;
  function connect() {
    const proto = location.protocol === "https:" ? "wss://" : "ws://";
    const ws = new WebSocket(proto + location.host + "/api/events");
    const conn = $("conn-state");
    ws.onopen = () => {
      backoff = 500;
      conn.textContent = "live";
      conn.className = "badge conn-on";
      conn.dataset.state = "live";
      scheduleRefresh();
      scheduleDocument();
    };
    ws.onmessage = (m) => {
      let ev;
      try { ev = JSON.parse(m.data); } catch (_) { return; }
      if (lastSeq && ev.seq > lastSeq + 1) feedLine("(" + (ev.seq - lastSeq - 1) + " events missed)", "muted");
      lastSeq = ev.seq;
      feedLine(describe(ev), "ev-" + ev.type);
      if (ev.type === "task" || ev.type === "quota" || ev.type === "health" || ev.kind === "llm_request_started") scheduleRefresh();
      if (ev.type === "module") { scheduleRefresh(); scheduleDocument(); }
    };
    ws.onclose = (e) => {
      conn.textContent = "reconnecting";
      conn.className = "badge conn-off";
      conn.dataset.state = "reconnecting";
      if (e.reason) feedLine("event stream closed: " + e.reason, "muted");
      setTimeout(connect, backoff);
      backoff = Math.min(backoff * 2, 5000);
    };
  }

  for (const id of ["filter-module", "filter-state", "filter-limit"]) $(id).addEventListener("change", () => refreshTasks().catch(() => {}));
  refreshStatus().catch((e) => alertFeed("status: " + e.message));
  refreshTasks().catch((e) => alertFeed("tasks: " + e.message));
  refreshDocument();
  connect();
})();
