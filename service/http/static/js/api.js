// The public JSON API and its event stream, as any bot sees them.

export class ApiError extends Error {
  constructor(status, problem) {
    super((problem && (problem.detail || problem.title)) || `HTTP ${status}`);
    this.status = status;
    this.problem = problem || {};
  }
}

export async function api(path, { token = null, method = "GET", body = undefined, headers = {} } = {}) {
  const h = { Accept: "application/json", ...headers };
  if (token) h.Authorization = `Bearer ${token}`;
  if (body !== undefined) h["Content-Type"] = "application/json";
  const resp = await fetch(path, {
    method, headers: h, cache: "no-store",
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await resp.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch { data = null; }
  if (!resp.ok) throw new ApiError(resp.status, data);
  return data;
}

// GET that answers null on 404 (an endpoint or object that does not exist yet).
export async function apiOrNull(path, opts) {
  try {
    return await api(path, opts);
  } catch (e) {
    if (e instanceof ApiError && (e.status === 404 || e.status === 405)) return null;
    throw e;
  }
}

// Server-sent events. Without a token: the browser's EventSource (it reconnects with
// Last-Event-ID by itself; after a non-200 answer, a new one with backoff). With one: fetch with an Authorization header (EventSource
// cannot send headers), parsing the stream and resuming with Last-Event-ID likewise.
// onEvents gets arrays of {id, type, data}; the stream stops after game_over.
export function openEvents(path, { token = null, onEvents, onState = () => {} }) {
  let closed = false;
  let lastId = null;
  const close = () => { closed = true; };

  if (!token) {
    // The browser's EventSource retries a cut by itself, but gives up for good after a
    // non-200 answer (a 503 from a worker at its connection cap, a restart): then a new
    // one is opened here after a backoff with jitter, resuming after the last event seen
    // (?last_event_id=; the browser's own Last-Event-ID header wins when it sends one).
    let es = null;
    let delay = 500;
    let batch = [];
    let scheduled = false;
    const flush = (final = false) => {
      scheduled = false;
      const out = batch;
      batch = [];
      if (out.length && (!closed || final)) onEvents(out);
    };
    const onMessage = (ev) => {
      if (closed) return;
      const data = JSON.parse(ev.data);
      if (ev.lastEventId) lastId = ev.lastEventId;
      batch.push({ id: ev.lastEventId, type: ev.type, data });
      if (ev.type === "game_over") { es.close(); closed = true; flush(true); onState("ended"); return; }
      if (!scheduled) { scheduled = true; setTimeout(flush, 0); }
    };
    const connect = () => {
      if (closed) return;
      const url = lastId
        ? `${path}${path.includes("?") ? "&" : "?"}last_event_id=${encodeURIComponent(lastId)}`
        : path;
      const source = es = new EventSource(url);
      for (const t of EVENT_TYPES) source.addEventListener(t, onMessage);
      source.onopen = () => { delay = 500; onState("open"); };
      source.onerror = () => {
        if (closed || source !== es) return;
        onState("reconnecting");
        if (source.readyState !== 2) return; // the browser retries this one itself
        source.close();
        setTimeout(connect, delay * (0.5 + Math.random() / 2));
        delay = Math.min(delay * 2, 10000);
      };
    };
    connect();
    return { close: () => { close(); if (es) es.close(); } };
  }

  const ctrl = new AbortController();
  (async () => {
    let delay = 500;
    while (!closed) {
      try {
        const headers = { Accept: "text/event-stream", Authorization: `Bearer ${token}` };
        if (lastId) headers["Last-Event-ID"] = lastId;
        const resp = await fetch(path, { headers, signal: ctrl.signal, cache: "no-store" });
        if (!resp.ok) {
          let problem = null;
          try { problem = await resp.json(); } catch { /* not JSON */ }
          onState("error", new ApiError(resp.status, problem));
          if (resp.status < 500 && resp.status !== 429) return;
        } else {
          onState("open");
          delay = 500;
          const reader = resp.body.pipeThrough(new TextDecoderStream()).getReader();
          let buf = "";
          for (;;) {
            const { value, done } = await reader.read();
            if (done) break;
            buf += value.replace(/\r\n?/g, "\n");
            let cut;
            const out = [];
            while ((cut = buf.indexOf("\n\n")) >= 0) {
              const ev = parseBlock(buf.slice(0, cut));
              buf = buf.slice(cut + 2);
              if (ev) { lastId = ev.id || lastId; out.push(ev); }
            }
            if (out.length) onEvents(out);
            if (out.some((e) => e.type === "game_over")) { closed = true; onState("ended"); ctrl.abort(); return; }
          }
        }
      } catch (e) {
        if (closed) return;
      }
      if (closed) return;
      onState("reconnecting");
      await new Promise((r) => setTimeout(r, delay));
      delay = Math.min(delay * 2, 5000);
    }
  })();
  return { close: () => { close(); ctrl.abort(); } };
}

function parseBlock(block) {
  let id = null, type = "message";
  const data = [];
  for (const line of block.split("\n")) {
    if (!line || line.startsWith(":")) continue;
    const i = line.indexOf(":");
    const field = i < 0 ? line : line.slice(0, i);
    let value = i < 0 ? "" : line.slice(i + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "id") id = value;
    else if (field === "event") type = value;
    else if (field === "data") data.push(value);
  }
  if (!data.length) return null;
  return { id, type, data: JSON.parse(data.join("\n")) };
}

export const EVENT_TYPES = [
  "game_started", "deal", "run_deal", "kick", "stand", "beg", "give_one", "run_pack",
  "redeal", "trump", "card_played", "trick_won", "score", "hand_over", "game_over",
];

export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") node.className = v;
    else if (k === "text") node.textContent = v;
    else if (k === "dataset") Object.assign(node.dataset, v);
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}

export function fill(list, items) {
  list.replaceChildren(...items);
  if (!items.length && list.dataset.empty) {
    list.append(el("li", { class: "empty muted", text: list.dataset.empty }));
  }
}

export function ago(seconds) {
  const s = Math.max(0, Math.round(Date.now() / 1000 - seconds));
  if (s < 60) return `${s}s ago`;
  if (s < 3600) return `${Math.floor(s / 60)} min ago`;
  if (s < 86400) return `${Math.floor(s / 3600)} h ago`;
  return new Date(seconds * 1000).toLocaleDateString();
}

// A bot's name as a link to its page (/bots/{id}): every page that names a bot uses it.
export function botLink(id, name) {
  return id ? el("a", { href: `/bots/${id}`, class: "bot-link", text: name || id }) : el("span", { text: name || "open seat" });
}

// "in 4:05" / "in 1 h 12 min" until a unix time; "now" once it has come.
export function countdown(at) {
  const left = Math.round(at - Date.now() / 1000);
  if (left <= 0) return "now";
  if (left >= 3600) return `in ${Math.floor(left / 3600)} h ${Math.floor((left % 3600) / 60)} min`;
  return `in ${Math.floor(left / 60)}:${String(left % 60).padStart(2, "0")}`;
}

// What a tournament asks of its entrants, in words (its `registration.conditions`).
export function conditionsText(reg) {
  if (!reg) return "entrants named by the organizer";
  const c = reg.conditions || {};
  const parts = [reg.mode === "private" ? "private (join code)" : "open"];
  if (c.validated) parts.push("validated bots");
  if (c.min_rated_games) parts.push(`${c.min_rated_games}+ rated games`);
  if (c.rating_min != null || c.rating_max != null) parts.push(`rating ${c.rating_min ?? "…"} to ${c.rating_max ?? "…"}`);
  if (c.one_per_owner) parts.push("one bot per owner");
  parts.push(`${reg.min_entrants}–${reg.max_entrants} entrants`);
  if (reg.house_fill) parts.push("house bots fill up");
  return parts.join(" · ");
}
