// The lobby: live, waiting and finished games, tournaments and the leaderboard,
// refreshed every few seconds from the public API.

import { ago, api, apiOrNull, el, fill } from "./api.js";

const $ = (id) => document.getElementById(id);
const REFRESH_MS = 3000;

function teamNames(g, t) {
  const names = g.seats.filter((s) => s.seat % 2 === t).map((s) => s.bot_name || "open seat");
  return [...new Set(names)].join(" & ");
}

function gameItem(g) {
  const who = el("span", { class: "who" },
    el("span", { class: "team-0-text", text: teamNames(g, 0) }),
    el("span", { class: "vs", text: " vs " }),
    el("span", { class: "team-1-text", text: teamNames(g, 1) }));
  const li = el("li", { dataset: { gameId: g.id, status: g.status } });
  const link = el("a", { href: `/games/${g.id}`, "aria-label": `Watch game ${g.id}`, text: g.status === "finished" ? "result" : "watch" });
  const links = el("span", { class: "links" }, link);
  if (g.status === "finished") links.append(el("a", { href: `/games/${g.id}/replay`, text: "replay" }));
  if (g.status === "waiting") links.append(el("a", { href: `/games/${g.id}/play`, text: "play a seat" }));
  // scores are null while a tournament's duplicate deal is still played at another table
  li.append(who, el("span", { class: "score", text: g.scores ? `${g.scores[0]}–${g.scores[1]}` : "–" }),
    el("span", { class: "muted small when", text: `${g.players}p · ${ago(g.created)}` }), links);
  return li;
}

function tournamentItem(t) {
  const p = t.progress || {};
  return el("li", { dataset: { tournamentId: t.id } },
    el("a", { class: "who", href: `/tournaments/${t.id}`, text: t.name || t.id }),
    el("span", { class: `badge status-${t.status === "running" ? "active" : "finished"}`, text: t.status }),
    el("span", { class: "muted small", text: `${t.settings ? t.settings.format.replace("_", " ") : ""} · ${(t.entrants || []).length} bots · ${p.games_done ?? "?"}/${p.games_planned ?? "?"} games` }));
}

function leaderboard(rows) {
  if (!rows || !rows.length) return el("p", { class: "muted", text: "No rated games yet." });
  const head = el("tr", {}, ...["#", "Bot", "Rating", "±", "Games", "Wins"].map((h, i) =>
    el("th", { scope: "col", class: i >= 2 ? "num" : "", text: h })));
  const body = rows.map((r) => el("tr", { dataset: { botId: r.bot_id } },
    el("td", { text: String(r.rank) }), el("td", { text: r.bot_name }),
    el("td", { class: "num", text: r.mu.toFixed(1), title: `ordinal ${r.ordinal.toFixed(1)}` }),
    el("td", { class: "num pm", text: r.sigma.toFixed(1) }),
    el("td", { class: "num", text: String(r.games) }), el("td", { class: "num", text: String(r.wins) })));
  return el("table", {}, el("thead", {}, head), el("tbody", {}, body));
}

async function refresh() {
  try {
    const [live, waiting, done, tours, board] = await Promise.all([
      api("/games?status=active&limit=20"),
      api("/games?status=waiting&limit=10"),
      api("/games?status=finished&limit=10"),
      apiOrNull("/tournaments?limit=10"),
      apiOrNull("/leaderboard"),
    ]);
    fill($("live-games"), live.items.map(gameItem));
    $("live-count").textContent = live.items.length ? `(${live.items.length}${live.next_cursor ? "+" : ""})` : "";
    fill($("waiting-games"), waiting.items.map(gameItem));
    fill($("finished-games"), done.items.map(gameItem));
    $("tournaments-panel").hidden = tours === null;
    if (tours) fill($("tournaments"), tours.items.map(tournamentItem));
    $("leaderboard-panel").hidden = board === null;
    if (board) $("leaderboard").replaceChildren(leaderboard(board.items));
    $("updated").textContent = `Updated ${new Date().toLocaleTimeString()}`;
    document.body.dataset.loaded = "true";
  } catch (e) {
    $("updated").textContent = `Could not refresh: ${e.message}`;
  }
}

refresh();
setInterval(() => { if (!document.hidden) refresh(); }, REFRESH_MS);
document.addEventListener("visibilitychange", () => { if (!document.hidden) refresh(); });
