// The lobby's ladder panel: every ladder with who is queued (waiting, playing, paused)
// and its top standings, refreshed every few seconds from the public API. A module of its
// own, loaded beside lobby.js, so the lobby's script is unchanged.

import { ago, apiOrNull, el } from "./api.js";

const $ = (id) => document.getElementById(id);
const REFRESH_MS = 3000;
const STATE_BADGE = { waiting: "waiting", matched: "waiting", playing: "active", paused: "finished" };

function botLink(id, name) {
  return el("a", { href: `/bots/${id}`, text: name || id });
}

function queueList(lad) {
  if (!lad.queue.length) return el("p", { class: "muted small", text: "Nobody is queued." });
  return el("ul", { class: "game-list" }, lad.queue.map((q) => el("li", { dataset: { botId: q.bot_id, state: q.state } },
    el("span", { class: "who" }, botLink(q.bot_id, q.bot_name)),
    el("span", { class: `badge status-${STATE_BADGE[q.state] || "waiting"}`, text: q.state }),
    el("span", { class: "muted small when", text: q.waiting_since ? `since ${ago(q.waiting_since)}` : "" }),
    el("span", { class: "links" }, q.game_id ? el("a", { href: `/games/${q.game_id}`, "aria-label": `Watch ${q.bot_name}'s ladder game`, text: "watch" }) : null))));
}

function standingsTable(name, st) {
  if (!st || !st.items.length) return el("p", { class: "muted small", text: "No rated games yet." });
  const head = el("tr", {}, ["#", "Bot", "Rating (μ ± σ)", "Ordinal", "Games", "Wins", "Form"].map((h, i) =>
    el("th", { scope: "col", class: `${i >= 2 && i <= 5 ? "num" : ""}${i === 2 ? " nocaps" : ""}`, text: h })));
  const rows = st.items.map((r) => el("tr", { dataset: { botId: r.bot_id, rank: r.rank == null ? "" : String(r.rank), provisional: String(Boolean(r.provisional)) } },
    el("td", r.rank == null ? { text: "–", title: "provisional" } : { text: String(r.rank) }),
    el("td", { class: "bot" }, botLink(r.bot_id, r.bot_name)),
    el("td", { class: "num", dataset: { col: "rating" } }, `${r.mu.toFixed(2)} `, el("span", { class: "pm", text: `± ${r.sigma.toFixed(2)}` })),
    el("td", { class: "num", dataset: { col: "ordinal" }, text: r.ordinal.toFixed(2) }),
    el("td", { class: "num", dataset: { col: "games" }, text: String(r.games) }),
    el("td", { class: "num", dataset: { col: "wins" }, text: String(r.wins) }),
    el("td", { class: "form", dataset: { col: "form" }, text: r.form || "–", title: "last results, oldest first: W won, L lost" })));
  return el("div", { class: "table-wrap", tabindex: "0", "aria-label": `Ladder ${name} standings` },
    el("table", { class: "standings" }, el("thead", {}, head), el("tbody", {}, rows)));
}

async function refresh() {
  const box = $("ladders");
  if (!box) return;
  const all = await apiOrNull("/ladders").catch(() => null);
  $("ladders-panel").hidden = all === null;
  if (!all) return;
  // a ladder nobody has used is listed on one line; the others in full
  const used = all.items.filter((l) => l.waiting || l.playing || l.rated);
  const idle = all.items.filter((l) => !used.includes(l));
  const parts = await Promise.all(used.map(async (l) => {
    const [lad, st] = await Promise.all([apiOrNull(`/ladders/${l.name}`), apiOrNull(`/ladders/${l.name}/standings?limit=10`)]);
    return el("section", { class: "ladder", dataset: { ladder: l.name } },
      el("h3", { text: `${l.name} · ${l.players} players · to ${l.variants.target} · ${l.move_limit} s a move` }),
      el("p", { class: "muted small", text: `${l.waiting} waiting · ${l.playing} playing · ${l.games} games rated` }),
      lad ? queueList(lad) : null, standingsTable(l.name, st));
  }));
  const quiet = idle.length ? el("p", { class: "muted small", text: `Open, nobody yet: ${idle.map((l) => `${l.name} (${l.players} players)`).join(", ")}. Join with allfours bot --ladder NAME.` }) : null;
  box.replaceChildren(...parts, quiet || "");
  box.dataset.loaded = "true";
}

refresh();
setInterval(() => { if (!document.hidden) refresh(); }, REFRESH_MS);
