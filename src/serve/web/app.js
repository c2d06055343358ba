// The page of `cordis serve`: plain DOM, no framework, nothing from the network but its own
// server. The token comes from the URL `cordis serve` printed and goes with every API call.
const token = new URLSearchParams(location.search).get("token") || "";

async function api(path, options = {}) {
  const headers = Object.assign({ "x-cordis-token": token }, options.headers || {});
  const response = await fetch(path, Object.assign({}, options, { headers }));
  if (!response.ok) {
    throw new Error(`${path}: ${response.status} ${await response.text()}`);
  }
  return response.json();
}

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") node.className = v;
    else if (k.startsWith("data-")) node.setAttribute(k, v);
    else node[k] = v;
  }
  for (const c of children) {
    if (c !== null && c !== undefined) node.append(c);
  }
  return node;
}

function showError(e) {
  const p = document.getElementById("error");
  p.hidden = false;
  p.textContent = String(e);
}

async function sha256Hex(text) {
  const bytes = new TextEncoder().encode(text);
  const digest = await crypto.subtle.digest("SHA-256", bytes);
  return [...new Uint8Array(digest)].map((b) => b.toString(16).padStart(2, "0")).join("");
}

async function renderComposition() {
  const c = await api("/api/composition");
  document.getElementById("file").textContent = c.file;
  const healthy = c.entries.every((e) => e.status === "active" || e.status === "disabled") && !c.assembly_error;
  const health = document.getElementById("health");
  health.textContent = healthy ? "every entry as configured" : "not all entries are active";
  health.className = "badge " + (healthy ? "healthy" : "unhealthy");
  const body = document.querySelector("#entries tbody");
  body.replaceChildren(
    ...c.entries.map((e) =>
      el(
        "tr",
        { "data-entry": e.id, "data-entry-status": e.status },
        el("td", {}, e.id),
        el("td", {}, e.name),
        el("td", {}, el("span", { class: `badge status-${e.status}` }, e.status)),
        el("td", {}, e.load_ms === null ? "" : `${e.load_ms} ms`),
        el("td", {}, `${c.file}:${e.line}`),
        el("td", {}, e.error || (e.waiting_for.length ? `waits for ${e.waiting_for.join(", ")}` : "")),
      ),
    ),
  );
  document.getElementById("digest").textContent = c.digest;
  const assembly = document.getElementById("assembly");
  const parts = [];
  if (c.assembly_error) parts.push(el("p", { class: "error" }, c.assembly_error));
  if (c.request !== null) {
    const verified = (await sha256Hex(c.request)) === c.digest;
    parts.push(
      el(
        "p",
        { id: "digest-check", "data-verified": String(verified) },
        verified ? "The digest is the SHA-256 of exactly the bytes below (checked in this page)." : "The digest does not match the bytes below.",
      ),
    );
    const header = JSON.parse(c.request);
    if (header.system !== undefined) {
      parts.push(el("h3", {}, "System prompt"), el("pre", { id: "system" }, header.system));
    }
    const tools = header.tools || [];
    parts.push(el("h3", {}, `Tools, in canonical order (${tools.length})`));
    for (const t of tools) {
      parts.push(
        el(
          "details",
          { class: "tool", "data-tool": t.name },
          el("summary", {}, el("code", {}, t.name), " — ", t.description || ""),
          el("pre", {}, JSON.stringify(t.parameters, null, 2)),
        ),
      );
    }
    parts.push(el("h3", {}, "The request header, as hashed"), el("pre", { id: "header-bytes" }, c.request));
  }
  assembly.replaceChildren(...parts);
  renderReloads(c.reloads);
}

function renderReloads(reloads) {
  const list = document.getElementById("reload-list");
  list.replaceChildren(
    ...reloads.map((r) => {
      if (r.outcome === "applied") {
        return el(
          "li",
          { class: "applied", "data-reload": "applied" },
          `${r.summary} — digest ${r.digest}`,
        );
      }
      return el(
        "li",
        { class: "rejected", "data-reload": "rejected" },
        "Rejected (the last good composition keeps running): ",
        el("pre", {}, r.errors.join("\n")),
      );
    }),
  );
}

async function renderSessions() {
  const s = await api("/api/sessions");
  const list = document.getElementById("session-list");
  if (s.sessions.length === 0) {
    list.replaceChildren(el("li", { class: "hint" }, s.note || "No sessions yet."));
    return;
  }
  list.replaceChildren(
    ...s.sessions.map((x) =>
      el(
        "li",
        { "data-session": x.id },
        el("a", { href: `#sessions/${encodeURIComponent(x.id)}` }, x.id),
        ` — ${x.title || "(no message)"} — ${x.turns} turn(s), ${x.modified}`,
        x.model ? ` — ${x.model}` : "",
      ),
    ),
  );
}

async function renderSession(id) {
  const view = document.getElementById("session-view");
  const page = await api(`/api/sessions/${encodeURIComponent(id)}`);
  // One card per event: what a person reads first (the message, the tool's card), the event
  // as logged one click away.
  const cards = page.events.map((entry) => {
    const e = entry.event;
    let kind = "";
    let shown = null;
    if (e.type === "user/message") {
      kind = "user";
      shown = el("pre", {}, e.data.content);
    } else if (e.type === "assistant/message") {
      kind = "assistant";
      shown = el("pre", {}, e.data.content || "(tool calls only)");
    } else if (entry.view) {
      kind = "tool";
      const v = entry.view.view || entry.view;
      shown = el("pre", {}, [v.title, v.text].filter(Boolean).join("\n") || JSON.stringify(v));
    }
    return el(
      "div",
      { class: kind ? `card ${kind}` : "card", "data-kind": e.type },
      el("div", { class: "kind" }, `#${e.seq} ${e.type}`),
      shown,
      el("details", {}, el("summary", {}, "as logged"), el("pre", {}, JSON.stringify(e.data, null, 2))),
    );
  });
  view.replaceChildren(el("h3", {}, `Session ${id}`), ...cards);
}

function renderReport(report) {
  const view = document.getElementById("report-view");
  const rows = [];
  const divergent = report.divergences || report.divergent || [];
  rows.push(el("p", { id: "report-verdict" }, report.ok === false || divergent.length ? "Divergence found." : "All runs agree."));
  const replays = new Set();
  const walk = (v) => {
    if (Array.isArray(v)) v.forEach(walk);
    else if (v && typeof v === "object") {
      for (const [k, x] of Object.entries(v)) {
        if (k === "replay") (Array.isArray(x) ? x : [x]).forEach((r) => replays.add(String(r)));
        else walk(x);
      }
    }
  };
  walk(report);
  if (replays.size) {
    rows.push(el("h3", {}, "Replay"));
    for (const r of replays) rows.push(el("pre", { class: "replay" }, r));
  }
  rows.push(el("details", {}, el("summary", {}, "The whole report"), el("pre", {}, JSON.stringify(report, null, 2))));
  view.replaceChildren(...rows);
}

async function compare() {
  const a = document.getElementById("diff-a").value;
  const b = document.getElementById("diff-b").value;
  const d = await api("/api/diff", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ a, b }) });
  const out = document.getElementById("diff-view");
  out.replaceChildren(
    ...d.lines.map((l) => el("span", { class: l.op === "-" ? "diff-del" : l.op === "+" ? "diff-add" : "" }, `${l.op} ${l.text}\n`)),
  );
}

async function route() {
  const m = location.hash.match(/^#sessions\/(.+)$/);
  if (m) await renderSession(decodeURIComponent(m[1])).catch(showError);
}

async function main() {
  document.getElementById("report-file").addEventListener("change", async (e) => {
    const file = e.target.files[0];
    if (file) renderReport(JSON.parse(await file.text()));
  });
  document.getElementById("diff-run").addEventListener("click", () => compare().catch(showError));
  window.addEventListener("hashchange", route);
  await renderComposition();
  await renderSessions();
  await route();
  // Each reload as it happens (with `--watch`); `live=0` in the URL gives a still page (a
  // stream left open would keep a headless browser waiting for the page to settle).
  if (new URLSearchParams(location.search).get("live") !== "0") {
    const events = new EventSource(`/api/events?token=${encodeURIComponent(token)}`);
    events.addEventListener("reload", () => renderComposition().catch(showError));
  }
  document.body.setAttribute("data-ready", "true");
  // From navigation to a page with every part filled (what the benchmark reads).
  document.body.setAttribute("data-ready-ms", String(Math.round(performance.now())));
}

main().catch(showError);
