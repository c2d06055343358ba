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
        el("td", { class: e.parent ? "nested" : "" }, e.parent ? `${e.parent} › ${e.id}` : e.id),
        el("td", {}, e.name),
        el("td", {}, el("span", { class: `badge status-${e.status}` }, e.status)),
        el("td", {}, e.load_ms === null ? "" : `${e.load_ms} ms`),
        el("td", {}, `${c.file}:${e.line}`),
        el("td", {}, e.error || (e.waiting_for.length ? `waits for ${e.waiting_for.join(", ")}` : "")),
      ),
    ),
  );
  renderGraph(c.entries);
  renderMcp(c);
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

// The MCP servers: each `mcp` entry's state (connected = active, pending with why, failed
// with the error) and what its server offers.
function renderMcp(c) {
  const section = document.getElementById("mcp");
  section.hidden = c.mcp.length === 0;
  const byId = new Map(c.entries.map((e) => [e.id, e]));
  document.querySelector("#mcp-servers tbody").replaceChildren(
    ...c.mcp.map((m) => {
      const e = byId.get(m.entry) || {};
      const state = e.status === "active" ? "connected" : e.status;
      const count = (n) => (n === null || n === undefined ? "–" : String(n));
      return el(
        "tr",
        { "data-mcp": m.server, "data-mcp-state": state },
        el("td", {}, m.server),
        el("td", {}, m.entry),
        el("td", {}, m.transport),
        el("td", {}, el("span", { class: `badge status-${e.status}` }, state)),
        el("td", { class: "tools" }, String(m.tools)),
        el("td", {}, count(m.prompts)),
        el("td", {}, count(m.resources)),
        el("td", { class: "note" }, e.error || (e.waiting_for && e.waiting_for.length ? `waits for ${e.waiting_for.join(", ")}` : "")),
      );
    }),
  );
}

// The dependency graph as layers: an entry sits one column right of the deepest entry it
// injects a service from; arrows go from provider to injector.
function renderGraph(entries) {
  const svgNs = "http://www.w3.org/2000/svg";
  const byId = new Map(entries.map((e) => [e.id, e]));
  const depth = new Map();
  const depthOf = (id, seen = new Set()) => {
    if (depth.has(id)) return depth.get(id);
    if (seen.has(id)) return 0; // a cycle (the runtime would leave such entries pending)
    seen.add(id);
    const e = byId.get(id);
    let d = 0;
    for (const n of (e && e.needs) || []) for (const from of n.from) if (byId.has(from)) d = Math.max(d, depthOf(from, seen) + 1);
    depth.set(id, d);
    return d;
  };
  entries.forEach((e) => depthOf(e.id));
  const columns = [];
  for (const e of entries) (columns[depth.get(e.id)] ||= []).push(e);
  const w = 170, h = 34, gapX = 60, gapY = 12;
  const pos = new Map();
  columns.forEach((col, x) => col.forEach((e, y) => pos.set(e.id, { x: x * (w + gapX) + 4, y: y * (h + gapY) + 4 })));
  const width = columns.length * (w + gapX);
  const height = Math.max(...columns.map((c) => c.length)) * (h + gapY) + 8;
  const svg = document.createElementNS(svgNs, "svg");
  svg.setAttribute("width", String(width));
  svg.setAttribute("height", String(height));
  svg.setAttribute("id", "graph-svg");
  const node = (tag, attrs, text) => {
    const n = document.createElementNS(svgNs, tag);
    for (const [k, v] of Object.entries(attrs)) n.setAttribute(k, String(v));
    if (text !== undefined) n.textContent = text;
    svg.append(n);
    return n;
  };
  let edges = 0;
  for (const e of entries) {
    for (const n of e.needs || []) {
      for (const from of n.from) {
        const a = pos.get(from), b = pos.get(e.id);
        if (!a || !b) continue;
        edges += 1;
        const line = node("line", { x1: a.x + w, y1: a.y + h / 2, x2: b.x, y2: b.y + h / 2, class: n.required ? "edge" : "edge optional", "data-edge": `${from} to ${e.id}` });
        node("title", {}, n.service);
        line.append(svg.lastChild);
      }
    }
  }
  for (const e of entries) {
    const p = pos.get(e.id);
    node("rect", { x: p.x, y: p.y, width: w, height: h, rx: 5, class: `node status-${e.status}`, "data-node": e.id });
    node("text", { x: p.x + 8, y: p.y + 14 }, e.id);
    node("text", { x: p.x + 8, y: p.y + 28, class: "plugin" }, e.name);
  }
  const view = document.getElementById("graph-view");
  view.setAttribute("data-edges", String(edges));
  view.replaceChildren(svg);
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

// The page's agent plane (GET /api/agents): live sessions, presets, waiting approvals and forms.
let agents = { available: false, live: [], presets: [], approvals: [] };

async function refreshAgents() {
  agents = await api("/api/agents");
  const bar = document.getElementById("agent-bar");
  bar.hidden = !agents.available;
  const choice = document.getElementById("preset-choice");
  choice.hidden = agents.presets.length === 0;
  if (choice.options.length !== agents.presets.length) {
    choice.replaceChildren(...agents.presets.map((p) => el("option", { value: p.id }, p.name || p.id)));
  }
  const models = document.getElementById("model-choice");
  models.hidden = agents.models.length < 2;
  if (models.options.length !== agents.models.length) {
    models.replaceChildren(...agents.models.map((m) => el("option", { value: m }, m)));
  }
  renderApprovals();
}

function post(path, body) {
  return api(path, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
}

// A tool's card as the terminal shows it: the title, a diff as lines, a command's output.
function cardOf(view) {
  const parts = [el("div", { class: "title" }, view.title)];
  const card = view.card || { type: "generic" };
  if (card.type === "diff") {
    const lines = el("pre", { class: "diff", "data-card": "diff" });
    parts.push(el("div", { class: "path" }, card.path), lines);
    post("/api/diff", { a: card.oldText || "", b: card.newText || "" })
      .then((d) =>
        lines.replaceChildren(
          ...d.lines.map((l) => el("span", { class: l.op === "-" ? "diff-del" : l.op === "+" ? "diff-add" : "" }, `${l.op} ${l.text}\n`)),
        ),
      )
      .catch(showError);
  } else if (card.type === "terminal") {
    const code = card.exitCode === null || card.exitCode === undefined ? "" : `\n[exit code ${card.exitCode}]`;
    // A command not run yet (a question, a call running) has no output box.
    if (card.output || code) parts.push(el("pre", { "data-card": "terminal" }, (card.output || "") + code));
  }
  if (view.text) parts.push(el("pre", {}, view.text));
  return parts;
}

// The waiting questions: approvals and MCP servers' forms. A card still waiting is kept as it
// is (what was typed into it stays); answered ones go.
function renderApprovals() {
  const box = document.getElementById("approvals");
  const waiting = new Set(agents.approvals.map((q) => String(q.id)));
  // Cards are removed and added, never moved: a moved input loses its focus and caret.
  for (const card of [...box.children]) {
    if (!waiting.has(card.dataset.approval)) card.remove();
  }
  const shown = new Set([...box.children].map((c) => c.dataset.approval));
  for (const q of agents.approvals) {
    if (shown.has(String(q.id))) continue;
    box.append(q.kind === "form" ? formCard(q) : q.kind === "page" ? pageCard(q) : approvalCard(q));
  }
}

// A page an MCP server asks the user to open (URL mode): the whole URL, a link that opens
// only on the person's click, and the answer.
function pageCard(q) {
  const send = (action) =>
    post(`/api/forms/${q.id}`, { action })
      .then(refreshAgents)
      .catch(showError);
  return el(
    "div",
    { class: "approval page", "data-approval": String(q.id), "data-page": q.server },
    el("div", {}, `MCP server ${q.server} asks you to open a page:`),
    el("pre", {}, q.message),
    el("pre", { class: "url" }, q.url),
    el("a", { href: q.url, target: "_blank", rel: "noopener noreferrer" }, "Open the page"),
    " ",
    el("button", { type: "button", class: "accept", onclick: () => send("accept") }, "I will open it"),
    el("button", { type: "button", class: "decline", onclick: () => send("decline") }, "Decline"),
    el("button", { type: "button", class: "cancel", onclick: () => send("cancel") }, "Cancel"),
  );
}

function approvalCard(q) {
  const reason = el("input", { type: "text", placeholder: "why not (told to the model)", class: "reason" });
  const decide = (answer) =>
    post(`/api/approvals/${q.id}`, { answer, reason: reason.value })
      .then(refreshAgents)
      .catch(showError);
  const always = q.always || null;
  return el(
    "div",
    { class: "approval", "data-approval": String(q.id), "data-tool": q.tool },
    el("div", {}, `Session ${q.session || "?"} wants to run ${q.tool}:`),
    ...(q.view ? cardOf(q.view) : [el("pre", {}, q.tool)]),
    el("button", { type: "button", class: "allow", onclick: () => decide("allow") }, "Allow once"),
    always ? el("button", { type: "button", class: "always", onclick: () => decide("always") }, always) : null,
    el("button", { type: "button", class: "deny", onclick: () => decide("deny") }, "Deny"),
    reason,
  );
}

// One input for a form's field: a list for choices (several for a multi-select) and yes/no,
// a number box, or a text box; `read()` gives the value to send (undefined: left out, so the
// form's default applies). The choices are the server's, read by `cordis_mcp` (`f.choices`).
function fieldInput(f) {
  const p = f.property;
  const name = `field-${f.name}`;
  const leaveOut = (has) => (f.required && has ? [] : [el("option", { value: "" }, "—")]);
  if (f.multi) {
    const chosen = Array.isArray(p.default) ? p.default : [];
    const select = el(
      "select",
      { name, "data-field": f.name, multiple: true, size: Math.min(f.choices.length, 6) },
      ...f.choices.map((c, i) => el("option", { value: String(i), selected: chosen.includes(c.value) }, c.label)),
    );
    const read = () => {
      const picked = [...select.selectedOptions].map((o) => f.choices[Number(o.value)].value);
      return picked.length ? picked : undefined;
    };
    return { node: select, read };
  }
  if (f.choices || p.type === "boolean") {
    const options = f.choices || [
      { value: true, label: "yes" },
      { value: false, label: "no" },
    ];
    const select = el(
      "select",
      { name, "data-field": f.name },
      ...leaveOut(p.default !== undefined),
      ...options.map((o, i) => el("option", { value: String(i), selected: p.default === o.value }, o.label)),
    );
    return { node: select, read: () => (select.value === "" ? undefined : options[Number(select.value)].value) };
  }
  const number = p.type === "integer" || p.type === "number";
  const input = el("input", {
    name,
    "data-field": f.name,
    type: number ? "number" : "text",
    value: p.default === undefined ? "" : String(p.default),
  });
  if (number) {
    input.step = p.type === "integer" ? "1" : "any";
    if (p.minimum !== undefined) input.min = String(p.minimum);
    if (p.maximum !== undefined) input.max = String(p.maximum);
  } else {
    if (p.minLength !== undefined) input.minLength = p.minLength;
    if (p.maxLength !== undefined) input.maxLength = p.maxLength;
  }
  const read = () => {
    if (input.value === "") return undefined;
    return number ? Number(input.value) : input.value;
  };
  return { node: input, read };
}

function formCard(q) {
  const inputs = q.fields.map((f) => ({ f, ...fieldInput(f) }));
  const problem = el("div", { class: "error", "data-form-error": "" });
  const send = (action) => {
    const content = {};
    if (action === "accept") {
      for (const { f, read } of inputs) {
        const v = read();
        if (v !== undefined) content[f.name] = v;
      }
    }
    post(`/api/forms/${q.id}`, action === "accept" ? { action, content } : { action })
      .then(refreshAgents)
      .catch((e) => {
        // A value the form does not take: said here, the form stays to be fixed.
        const text = String(e.message || e);
        const json = text.indexOf("{");
        let why = text;
        try {
          why = JSON.parse(text.slice(json)).error || text;
        } catch (_) {}
        problem.textContent = why;
      });
  };
  return el(
    "div",
    { class: "approval form", "data-approval": String(q.id), "data-form": q.server },
    el("div", {}, `MCP server ${q.server} asks:`),
    el("pre", {}, q.message),
    ...inputs.map(({ f, node }) => {
      const p = f.property;
      const about = [p.title, p.description].filter((t) => typeof t === "string" && t.trim()).join(": ");
      return el(
        "label",
        { class: "field" },
        el("span", { class: "name" }, f.name + (f.required ? " *" : "")),
        node,
        about ? el("span", { class: "hint" }, about) : null,
      );
    }),
    problem,
    el("button", { type: "button", class: "accept", onclick: () => send("accept") }, "Send"),
    el("button", { type: "button", class: "decline", onclick: () => send("decline") }, "Decline"),
    el("button", { type: "button", class: "cancel", onclick: () => send("cancel") }, "Cancel"),
  );
}

// The shown session's transcript: its items by seq and type (the newest page, fetched again on each
// change, and the older pages the reader asked for), so a live redraw keeps what was paged in.
// While it runs: the answer streaming (`stream`: [seq, text] deltas, sent as `delta` events),
// the running commands' output by call id (`outputs`: their last lines, sent as `output`
// events) and when each running call was first seen (`started`), and the newest page's last
// seq (`lastSeq`: deltas after it are not in the fetched transcript yet).
function freshShown(id) {
  return { id, items: new Map(), oldest: null, hasMore: false, answer: null, stream: null, partial: false, outputs: new Map(), started: new Map(), lastSeq: -1 };
}
let shown = freshShown(null);

// A result under its call: the card of the result's view, or its text (cut: the log has it all).
function resultOf(result) {
  const view = result.view || { title: "", card: { type: "generic" } };
  const card = view.card || { type: "generic" };
  const parts = [];
  const cut = (text) => (text.length > 4000 ? `${text.slice(0, 4000)}… (${text.length - 4000} more characters)` : text);
  // An MCP tool's result ({content: [blocks], structuredContent?}) as its blocks, as the
  // terminal draws them (src/acp/mcp_content.rs): a link as its URI and name, an image or audio
  // clip as its type and size (its base64 never shown), an embedded resource as its URI and
  // text. Null for anything else.
  const mcpLines = (r) => {
    if (!r || typeof r !== "object" || Array.isArray(r) || !Array.isArray(r.content)) return null;
    if (!Object.keys(r).every((k) => ["content", "structuredContent", "isError", "_meta"].includes(k))) return null;
    const bytes = (data) => Math.max(0, Math.floor(data.length / 4) * 3 - Math.min(2, (data.match(/=+$/) || [""])[0].length));
    const str = (v) => typeof v === "string";
    const lines = [];
    for (const b of r.content) {
      if (!b || typeof b !== "object") return null;
      if (b.type === "text" && str(b.text)) lines.push(...cut(b.text).split("\n"));
      else if ((b.type === "image" || b.type === "audio") && str(b.mimeType) && str(b.data)) lines.push(`[${b.type} ${b.mimeType}, ${bytes(b.data)} bytes]`);
      else if (b.type === "resource_link" && str(b.uri) && str(b.name)) lines.push(`[link] ${b.uri} (${b.name})`);
      else if (b.type === "resource" && b.resource && str(b.resource.uri) && (str(b.resource.text) || str(b.resource.blob))) {
        const mime = str(b.resource.mimeType) ? ` ${b.resource.mimeType}` : "";
        if (str(b.resource.text)) lines.push(`[resource ${b.resource.uri}${mime}]`, ...cut(b.resource.text).split("\n"));
        else lines.push(`[resource ${b.resource.uri}${mime}, ${bytes(b.resource.blob)} bytes]`);
      } else return null;
    }
    if (r.content.length === 0 && r.structuredContent !== undefined) lines.push(cut(JSON.stringify(r.structuredContent)));
    return lines;
  };
  const raw = typeof result.content === "string" ? result.content : JSON.stringify(result.content);
  const mcp = !result.isError && card.type === "generic" && (view.text === undefined || view.text === null || view.text === raw) ? mcpLines(result.content) : null;
  if (card.type === "diff" || card.type === "terminal") {
    parts.push(...cardOf(view).slice(1));
  } else if (mcp) {
    parts.push(el("pre", { class: "mcp-content" }, mcp.join("\n")));
  } else {
    let text = view.text;
    if (text === undefined || text === null) text = raw;
    parts.push(el("pre", {}, cut(text)));
  }
  return el(
    "div",
    { class: result.isError ? "result failed" : "result", "data-seq": String(result.seq) },
    el("span", { class: "lead" }, result.isError ? `⎿ error${result.code ? ` ${result.code}` : ""}` : "⎿"),
    ...parts,
  );
}

function callOf(call) {
  return el(
    "div",
    { class: "card tool", "data-kind": "call", "data-seq": String(call.seq), "data-tool": call.name, "data-call": call.callId },
    ...cardOf(call.view),
    ...(call.subCalls || []).map((sub) => el("div", { class: "sub-call" }, callOf(sub))),
    call.result ? resultOf(call.result) : runningOf(call.callId),
  );
}

// A call still running: "⎿ running… 3 s", with the last lines of its command's output and an
// MCP tool's latest progress ("2 of 5: indexing", with a bar when the total is known) as they
// come (the server's `output` events, bounded there).
function secondsSince(since) {
  return `${Math.max(0, Math.floor((Date.now() - since) / 1000))} s`;
}

function runningOf(callId) {
  const live = shown.outputs.get(callId);
  if (!shown.started.has(callId)) shown.started.set(callId, Date.now());
  let since = shown.started.get(callId);
  if (live) since = Math.min(since, live.at - live.elapsedMs);
  shown.started.set(callId, since);
  return el(
    "div",
    { class: "result pending", "data-live": callId },
    el("span", { class: "lead" }, "⎿ running… "),
    el("span", { class: "elapsed", "data-since": String(since) }, secondsSince(since)),
    live && live.progress ? progressOf(live.progress) : null,
    live && (live.tail || !live.progress) ? el("pre", { class: "live-tail", "data-card": "live", "data-bytes": String(live.bytes) }, live.tail) : null,
  );
}

function progressOf(p) {
  const total = typeof p.total === "number" ? ` of ${p.total}` : "";
  const message = p.message ? `: ${p.message}` : "";
  const bar = typeof p.total === "number" && p.total > 0
    ? el("progress", { max: String(p.total), value: String(Math.min(p.progress, p.total)) })
    : null;
  return el("div", { class: "live-progress", "data-card": "progress" }, bar, el("span", { "data-progress": "text" }, `${p.progress}${total}${message}`));
}

// A piece of a running command's output for the shown session: its call's card shows the new
// tail at once (no transcript fetch).
function onOutput(message) {
  const o = JSON.parse(message.data);
  if (o.session !== shown.id) return;
  shown.outputs.set(o.call, { tail: o.tail, bytes: o.bytes, elapsedMs: o.elapsedMs, progress: o.progress || null, at: Date.now() });
  const pending = [...document.querySelectorAll("#transcript [data-live]")].find((p) => p.dataset.live === o.call);
  if (pending) pending.replaceWith(runningOf(o.call));
}

// The answer streaming: the fetched transcript's unfinished answer (its last item) and the
// deltas that came after that fetch, in one growing card until the message is logged.
function streamingCard(partial) {
  const after = shown.stream.deltas.filter(([seq]) => seq > shown.lastSeq).map(([, text]) => text);
  const text = (partial ? partial.text : "") + after.join("");
  return el("div", { class: "card assistant streaming", "data-kind": "assistant", "data-streaming": "true" }, el("pre", {}, text));
}

function onDelta(message) {
  const d = JSON.parse(message.data);
  if (d.session !== shown.id) return;
  // A thought shows whole when its message comes (the fetched transcript has it meanwhile).
  if (d.thought) return redrawSoon();
  if (!shown.stream) shown.stream = { deltas: [] };
  shown.stream.deltas.push([d.seq, d.text]);
  const transcript = document.getElementById("transcript");
  if (!transcript) return;
  const card = transcript.querySelector("[data-streaming]");
  if (card) card.firstChild.textContent += d.seq > shown.lastSeq ? d.text : "";
  else transcript.append(streamingCard(null));
}

// A logged event of a page session: the answer's message (or the step's or turn's end) ends
// its stream; the transcript is fetched again.
function onAgent(message) {
  const e = JSON.parse(message.data);
  if (e.session === shown.id && ["assistant/message", "step/start", "step/end", "turn/end"].includes(e.type)) shown.stream = null;
  redrawSoon();
}

// One item of the transcript model (src/session/transcript.rs) as a card.
function itemOf(item) {
  const seq = String(item.seq);
  switch (item.type) {
    case "user":
      return el("div", { class: "card user", "data-kind": "user", "data-seq": seq }, el("pre", {}, item.text));
    case "assistant":
      return el("div", { class: "card assistant", "data-kind": "assistant", "data-seq": seq }, el("pre", {}, item.text));
    case "thought":
      return el("details", { class: "card thought", "data-kind": "thought", "data-seq": seq }, el("summary", {}, "thinking"), el("pre", {}, item.text));
    case "call":
      return callOf(item);
    case "plan":
      return el(
        "div",
        { class: "card plan", "data-kind": "plan", "data-seq": seq },
        el("ul", {}, ...item.todos.map((t) => el("li", { "data-status": t.status }, `${t.status === "completed" ? "[x]" : t.status === "in_progress" ? "[~]" : "[ ]"} ${t.content}`))),
      );
    case "compaction": {
      const how = item.trigger === "manual" ? "/compact" : "automatically, near the context window";
      return el(
        "details",
        { class: "card notice compaction", "data-kind": "compaction", "data-seq": seq },
        el("summary", {}, `(conversation compacted (${how}): ${item.messages} messages replaced by a summary)`),
        el("pre", {}, item.summary),
      );
    }
    default:
      return el("div", { class: item.failure ? "card notice failed" : "card notice", "data-kind": "notice", "data-seq": seq }, el("pre", {}, `(${item.text})`));
  }
}

async function fetchTranscript(id, before) {
  const q = before === undefined ? "" : `?before=${before}`;
  try {
    return await api(`/api/sessions/${encodeURIComponent(id)}${q}`);
  } catch (e) {
    // A session opened in the page has no log until its first event.
    return { items: [], hasMore: false, firstSeq: null, live: false };
  }
}

// Merges a page into the shown items: what the page covers (its first seq on) is replaced.
// Items are keyed by seq and type: one answer is a thought, a message and its usage.
function merge(page, newest) {
  if (newest && page.firstSeq !== null && page.firstSeq !== undefined) {
    for (const [key, item] of [...shown.items]) if (item.seq >= page.firstSeq) shown.items.delete(key);
  }
  for (const item of page.items) shown.items.set(`${item.seq}:${item.type}`, item);
  if (!newest || shown.oldest === null) {
    shown.oldest = page.firstSeq;
    shown.hasMore = page.hasMore;
  }
}

// "Fork from here" on user message `i` of `items`: a new session holding the conversation
// through that message's turn (POST /api/sessions/{id}/fork with the seq just before the next
// user message, or none for the last: a fork never starts mid-turn), opened in the page.
function forkButton(id, items, i) {
  const next = items.slice(i + 1).find((x) => x.type === "user");
  const seq = next ? next.seq - 1 : null;
  const fork = () =>
    post(`/api/sessions/${encodeURIComponent(id)}/fork`, { seq })
      .then(async (forked) => {
        await refreshAgents();
        location.hash = `#sessions/${encodeURIComponent(forked.id)}`;
      })
      .catch(showError);
  return el("button", { type: "button", class: "fork", title: "A new session with the conversation through this turn", onclick: fork }, "Fork from here");
}

// The session's usage (GET /api/sessions/{id}'s `usage`, the whole log): input tokens with the
// share the provider's prompt cache served, output, the latest request against the context
// window, and the cost when the llm entry prices the model.
function percentOf(part, whole) {
  return `${((part * 100) / whole).toFixed(1)}%`;
}

function usagePanel(u) {
  if (!u || !u.answers) return null;
  const parts = [el("span", { "data-usage": "input" }, `${u.inputTokens} tokens in`)];
  if (u.cacheReported && u.inputTokens > 0) {
    parts.push(el("span", { "data-usage": "cached" }, `${u.cachedInputTokens} cached (${percentOf(u.cachedInputTokens, u.inputTokens)})`));
  }
  parts.push(el("span", { "data-usage": "output" }, `${u.outputTokens} out`));
  if (u.contextTokens !== null && u.contextTokens !== undefined && u.contextWindow) {
    parts.push(el("span", { "data-usage": "context" }, `context ${u.contextTokens} of ${u.contextWindow} (${percentOf(u.contextTokens, u.contextWindow)})`));
  }
  if (u.costUsd !== null && u.costUsd !== undefined) {
    const digits = u.costUsd !== 0 && Math.abs(u.costUsd) < 0.01 ? 6 : 4;
    parts.push(el("span", { "data-usage": "cost" }, `$${u.costUsd.toFixed(digits)}`));
  }
  return el("div", { id: "usage", class: "usage-panel", title: `${u.answers} model answers reported usage` }, ...parts);
}

async function renderSession(id, older = false) {
  const view = document.getElementById("session-view");
  if (shown.id !== id) shown = freshShown(id);
  const page = older ? await fetchTranscript(id, shown.oldest) : await fetchTranscript(id);
  merge(page, !older);
  if (!older) {
    shown.lastSeq = page.lastSeq === null || page.lastSeq === undefined ? -1 : page.lastSeq;
    // The log ends mid-answer (the page opened while it streams, or a redraw in between).
    if (page.streaming && !shown.stream) shown.stream = { deltas: [] };
    // Every delta is in the log and the log no longer ends mid-answer: the stream is over
    // (its end was missed, say while the event stream reconnected).
    if (!page.streaming && shown.stream && shown.stream.deltas.every(([seq]) => seq <= shown.lastSeq)) shown.stream = null;
    shown.partial = page.streaming;
  }
  if (page.usage) shown.usage = page.usage;
  // Usage is bookkeeping here (the agent bar's turn state says enough); a plan is shown by its
  // todo_write call's checklist.
  const items = [...shown.items.values()].filter((i) => i.type !== "usage" && i.type !== "plan").sort((a, b) => a.seq - b.seq);
  // While the answer streams, the fetched transcript's last item is what of it was logged then.
  const streaming = shown.stream !== null;
  const partial = streaming && shown.partial && items.length && items[items.length - 1].type === "assistant" ? items.pop() : null;
  const head = [el("h3", {}, `Session ${id}`)];
  const usage = usagePanel(shown.usage);
  if (usage) head.push(usage);
  if (shown.hasMore) {
    head.push(el("button", { type: "button", id: "older", onclick: () => renderSession(id, true).catch(showError) }, "Show older turns"));
  }
  if (items.length > 20) {
    head.push(el("a", { href: "#", id: "to-latest", onclick: (e) => { e.preventDefault(); view.lastElementChild.scrollIntoView(); } }, "Jump to the latest"));
  }
  let controls = null;
  const live = agents.live.find((x) => x.id === id);
  if (live) {
    const commands = (agents.commands || []).map((c) => `${c.usage}: ${c.what}`);
    const text = el("textarea", { id: "prompt", placeholder: "Message the agent (/help lists the commands)", title: commands.join("\n") });
    // Kept across redraws (a command that logs, like a mode set, redraws the session).
    const answer = el("pre", { id: "command-answer", hidden: !shown.answer }, shown.answer || "");
    const send = () =>
      post(`/api/agents/sessions/${encodeURIComponent(id)}/prompt`, { text: text.value })
        .then((r) => {
          text.value = "";
          // A slash command is answered at once (the session core's answer); no turn runs.
          shown.answer = r.answer || null;
          answer.hidden = !r.answer;
          answer.textContent = r.answer || "";
        })
        .catch(showError);
    controls = el(
      "div",
      { class: "prompt-bar" },
      text,
      el("button", { type: "button", id: "send", onclick: send }, "Send"),
      el("button", { type: "button", id: "cancel", onclick: () => post(`/api/agents/sessions/${encodeURIComponent(id)}/cancel`, {}).catch(showError) }, "Cancel"),
      el("span", { id: "turn-state", class: live.busy ? "busy" : "", "data-busy": String(live.busy) }, live.busy ? "answering…" : "idle"),
      answer,
      el("ul", { id: "commands", class: "hint" }, ...(agents.commands || []).map((c) => el("li", { "data-command": c.name }, el("code", {}, c.usage), ` ${c.what}`))),
    );
  } else if (page.heldBy) {
    // Another process runs it: the page follows its log; its questions are answered there.
    controls = el("p", { id: "held-by", class: "hint" }, `Running in process ${page.heldBy} (a terminal or an editor): this view follows it live; its questions are answered there.`);
  } else if (agents.available) {
    controls = el(
      "button",
      { type: "button", id: "open-here", onclick: () => post("/api/agents/sessions", { resume: id }).then(refreshAgents).then(() => renderSession(id)).catch(showError) },
      "Continue this session here",
    );
  }
  const kept = document.getElementById("prompt");
  const draft = kept ? kept.value : "";
  const cards = items.map((item, i) => {
    const card = itemOf(item);
    if (item.type === "user" && agents.available) card.append(forkButton(id, items, i));
    return card;
  });
  if (streaming) cards.push(streamingCard(partial));
  view.replaceChildren(...head, el("div", { id: "transcript" }, ...cards), controls);
  const fresh = document.getElementById("prompt");
  if (fresh && draft) fresh.value = draft;
}

function shownSession() {
  const m = location.hash.match(/^#sessions\/(.+)$/);
  return m ? decodeURIComponent(m[1]) : null;
}

// Many events arrive at once while a turn runs: redraw once per burst.
let redraw = null;
function redrawSoon() {
  if (redraw) return;
  redraw = setTimeout(async () => {
    redraw = null;
    await refreshAgents().catch(showError);
    const id = shownSession();
    if (id) await renderSession(id).catch(showError);
    await renderSessions().catch(showError);
  }, 100);
}

// What a report says, for `cordis stress --report` / `--json`, `stress merge` and `permute
// --json`: the verdict first, the replay commands under it, the whole report one click away.
function verdictOf(report) {
  if (report.failure) {
    const f = report.failure;
    const where = f.entries && f.entries.length ? ` in ${f.entries.join(", ")}` : "";
    const seeds = f.seeds && f.seeds.length ? ` (seeds ${f.seeds.join(" and ")})` : "";
    const kind = f.kind === "divergence" ? "Divergence found" : `Failure: ${f.kind}`;
    return { ok: false, text: `${kind}${where}${seeds} under schedule ${report.schedule}.` };
  }
  if (report.distinct_outcomes !== undefined) {
    if (report.distinct_outcomes > 1) return { ok: false, text: `Order dependence: ${report.distinct_outcomes} outcomes over ${report.orders} orders.` };
    if (report.unhealthy) return { ok: false, text: `One outcome, but not every entry is active: ${report.unhealthy.why} (order ${report.unhealthy.order.join(", ")}).` };
    return { ok: true, text: `One outcome over ${report.orders} order(s) of ${report.all_orders}.` };
  }
  const divergent = report.divergences || report.divergent || [];
  if (report.ok === false || divergent.length) return { ok: false, text: "Divergence found." };
  if (report.runs !== undefined) return { ok: true, text: `All ${report.runs} run(s) agree: digest ${report.digest}.` };
  return { ok: true, text: "No failure in this report." };
}

function renderReport(report) {
  const view = document.getElementById("report-view");
  const rows = [];
  const verdict = verdictOf(report);
  rows.push(el("p", { id: "report-verdict", class: verdict.ok ? "applied" : "rejected", "data-ok": String(verdict.ok) }, verdict.text));
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
  const id = shownSession();
  listen();
  if (id) await renderSession(id).catch(showError);
}

// The server's events (`live=0` in the URL gives a still page: a stream left open would keep a
// headless browser waiting for the page to settle). The stream names the session shown, so
// its answer's text and its commands' output come to this page only while it shows it.
let events = null;
let listening = undefined;
function listen() {
  if (new URLSearchParams(location.search).get("live") === "0") return;
  const id = shownSession();
  if (events && listening === id) return;
  if (events) events.close();
  listening = id;
  const only = id === null ? "" : `&session=${encodeURIComponent(id)}`;
  events = new EventSource(`/api/events?token=${encodeURIComponent(token)}${only}`);
  // Each reload as it happens (with `--watch`).
  events.addEventListener("reload", () => renderComposition().catch(showError));
  events.addEventListener("agent", onAgent);
  events.addEventListener("delta", onDelta);
  events.addEventListener("output", onOutput);
  // `session`: a log any process wrote (a terminal run, an editor, this page).
  for (const kind of ["state", "approval", "form", "answered", "session"]) {
    events.addEventListener(kind, redrawSoon);
  }
}

async function main() {
  document.getElementById("report-file").addEventListener("change", async (e) => {
    const file = e.target.files[0];
    if (file) renderReport(JSON.parse(await file.text()));
  });
  document.getElementById("diff-run").addEventListener("click", () => compare().catch(showError));
  window.addEventListener("hashchange", route);
  document.getElementById("new-session").addEventListener("click", async () => {
    const choice = document.getElementById("preset-choice");
    const body = choice.hidden ? {} : { preset: choice.value };
    const models = document.getElementById("model-choice");
    if (!models.hidden) body.model = models.value;
    try {
      const opened = await post("/api/agents/sessions", body);
      await refreshAgents();
      location.hash = `#sessions/${encodeURIComponent(opened.id)}`;
    } catch (e) {
      showError(e);
    }
  });
  await renderComposition();
  await refreshAgents();
  await renderSessions();
  await route();
  if (new URLSearchParams(location.search).get("live") !== "0") {
    // The running calls' clocks.
    setInterval(() => {
      for (const span of document.querySelectorAll("[data-since]")) span.textContent = secondsSince(Number(span.dataset.since));
    }, 1000);
  }
  document.body.setAttribute("data-ready", "true");
  // From navigation to a page with every part filled (what the benchmark reads).
  document.body.setAttribute("data-ready-ms", String(Math.round(performance.now())));
}

main().catch(showError);
