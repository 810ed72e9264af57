// The lobby: live, waiting and finished games, tournaments and the leaderboard,
// refreshed every few seconds from the public API.

import { ago, api, apiOrNull, ApiError, botLink, conditionsText, countdown, el, fill } from "./api.js";
import { addGame, currentToken, forget, keepToken, markFresh, myGames, remembered } from "./player.js";

const $ = (id) => document.getElementById(id);
const REFRESH_MS = 3000;

// A team's bots, each name a link to its bot page ("open seat" while nobody sits there).
function teamNames(g, t) {
  const seen = new Set();
  const out = [];
  for (const s of g.seats.filter((x) => x.seat % 2 === t)) {
    const key = s.bot_id || `open:${s.seat}`;
    if (seen.has(s.bot_id || key)) continue;
    seen.add(key);
    if (out.length) out.push(" & ");
    out.push(s.bot_id ? el("a", { class: "bot-link", href: `/bots/${s.bot_id}`, text: s.bot_name || s.bot_id }) : "open seat");
  }
  return out;
}

function gameItem(g) {
  const who = el("span", { class: "who" },
    el("span", { class: "team-0-text" }, teamNames(g, 0)),
    el("span", { class: "vs", text: " vs " }),
    el("span", { class: "team-1-text" }, teamNames(g, 1)));
  const li = el("li", { dataset: { gameId: g.id, status: g.status } });
  const finished = g.status === "finished";
  const link = el("a", { href: `/games/${g.id}`, "aria-label": `${finished ? "Result of" : "Watch"} game ${g.id}`, text: finished ? "result" : "watch" });
  const links = el("span", { class: "links" }, link);
  if (finished) links.append(el("a", { href: `/games/${g.id}/replay`, "aria-label": `Replay game ${g.id}`, text: "replay" }));
  if (g.status === "waiting") links.append(el("a", { href: `/games/${g.id}/play`, "aria-label": `Play a seat in game ${g.id}`, text: "play a seat" }));
  // scores are null while a tournament's duplicate deal is still played at another table
  li.append(who, el("span", { class: "score", text: g.scores ? `${g.scores[0]}–${g.scores[1]}` : "–" }),
    el("span", { class: "muted small when", text: `${g.players}p · ${ago(g.created)}` }), links);
  return li;
}

function tournamentItem(t) {
  const p = t.progress || {};
  return el("li", { dataset: { tournamentId: t.id } },
    el("a", { class: "who", href: `/tournaments/${t.id}`, text: t.name || t.id }),
    el("span", { class: `badge status-${{ running: "active", paused: "waiting", registering: "waiting", cancelled: "error" }[t.status] || "finished"}`, text: t.status }),
    el("span", { class: "muted small", text: `${t.settings ? t.settings.format.replace("_", " ") : ""} · ${(t.entrants || []).length} bots · ${p.games_done ?? "?"}/${p.games_planned ?? "?"} games` }));
}

// A tournament taking entries: when it starts (a countdown, ticking), what it asks, who
// has entered (each linked to its bot page).
function registeringItem(t) {
  const reg = t.registration || {};
  const s = t.settings || {};
  const when = reg.starts_at
    ? el("span", { class: "badge status-waiting countdown", dataset: { at: String(reg.starts_at) }, text: `starts ${countdown(reg.starts_at)}` })
    : el("span", { class: "badge status-waiting", text: "starts when its organizer says" });
  const entrants = (t.entrants || []).slice(0, 12);
  return el("li", { dataset: { tournamentId: t.id, status: "registering" } },
    el("a", { class: "who", href: `/tournaments/${t.id}`, text: t.name || t.id }), when,
    el("span", { class: "muted small", text: `${s.format ? s.format.replace("_", " ") : ""}${s.format === "arena" ? ` ${Math.round((s.duration || 0) / 60)} min` : ""} · ${s.players}p${s.move_limit ? ` · ${s.move_limit} s a move` : ""} · ${t.entrant_count} entered · ${conditionsText(reg)}` }),
    entrants.length ? el("span", { class: "small entrants" }, "Entrants: ", ...entrants.flatMap((e, i) => [i ? ", " : "", botLink(e.bot_id, e.bot_name)]), t.entrants.length > entrants.length ? " …" : "") : null);
}

function tickCountdowns() {
  for (const node of document.querySelectorAll(".countdown")) node.textContent = `starts ${countdown(Number(node.dataset.at))}`;
}
setInterval(() => { if (!document.hidden) tickCountdowns(); }, 1000);

function leaderboard(rows) {
  if (!rows || !rows.length) return el("p", { class: "muted", text: "No rated games yet." });
  const head = el("tr", {}, ...["#", "Bot", "Rating", "±", "Games", "Wins"].map((h, i) =>
    el("th", { scope: "col", class: i >= 2 ? "num" : "", text: h })));
  const body = rows.map((r) => el("tr", { dataset: { botId: r.bot_id } },
    // a provisional bot (too few rated games or owners met: docs/ratings.md) is not ranked
    el("td", r.rank == null ? { text: "–", title: "provisional" } : { text: String(r.rank) }),
    el("td", {}, el("a", { href: `/bots/${r.bot_id}`, text: r.bot_name })),
    el("td", { class: "num", text: r.mu.toFixed(1), title: `ordinal ${r.ordinal.toFixed(1)}` }),
    el("td", { class: "num pm", text: r.sigma.toFixed(1) }),
    el("td", { class: "num", text: String(r.games) }), el("td", { class: "num", text: String(r.wins) })));
  return el("table", {}, el("thead", {}, head), el("tbody", {}, body));
}

async function refresh() {
  try {
    const [live, waiting, done, tours, board, registering] = await Promise.all([
      api("/games?status=active&limit=20"),
      api("/games?status=waiting&limit=10"),
      api("/games?status=finished&limit=10"),
      apiOrNull("/tournaments?limit=10"),
      apiOrNull("/leaderboard"),
      apiOrNull("/tournaments?status=registering&limit=10"),
    ]);
    $("registering-panel").hidden = registering === null;
    if (registering) fill($("registering"), registering.items.map(registeringItem));
    // A game nobody has moved in for a long time (abandoned, with no move limit) is not "live".
    const idleAfter = Number($("live-games").dataset.idleAfter) || 600;
    const now = Date.now() / 1000;
    const moving = live.items.filter((g) => !g.updated_at || now - g.updated_at <= idleAfter);
    const idle = live.items.length - moving.length;
    fill($("live-games"), moving.map(gameItem));
    $("live-count").textContent = moving.length ? `(${moving.length}${live.next_cursor ? "+" : ""})` : "";
    $("live-idle").hidden = !idle;
    $("live-idle").textContent = idle ? `${idle} idle ${idle === 1 ? "game" : "games"} not shown (no move for ${Math.round(idleAfter / 60) || 1} min)` : "";
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

// --- play against a bot ------------------------------------------------------------------

const form = $("house-form");
const playersValue = () => Number(form.querySelector("input[name=players]:checked").value);
function syncPartner() { $("hf-partner-field").hidden = playersValue() !== 4; }
form.addEventListener("change", syncPartner);
syncPartner();
const kept = remembered();
if (kept) {
  $("hf-keep").checked = true;
  $("hf-name").value = kept.name;
}

function formError(msg) {
  const box = $("hf-error");
  box.hidden = !msg;
  box.textContent = msg || "";
}

async function createHouseGame(token) {
  const body = {
    players: playersValue(),
    opponent: $("hf-opponent").value,
    variants: { target: Number($("hf-target").value), under_trumping: $("hf-under").checked },
    name: $("hf-name").value.trim() || "guest",
  };
  if (body.players === 4) body.partner = $("hf-partner").value;
  return api("/house/games", { method: "POST", body, token });
}

form.addEventListener("submit", async (e) => {
  e.preventDefault();
  formError(null);
  const button = $("hf-play");
  button.disabled = true;
  try {
    let token = currentToken();
    let made;
    try {
      made = await createHouseGame(token);
    } catch (err) {
      if (!(token && err instanceof ApiError && err.status === 401)) throw err;
      forget();  // a token this service no longer knows: start afresh
      token = null;
      made = await createHouseGame(null);
    }
    if (made.player) {
      keepToken(made.player.token, { id: made.player.id, name: made.player.name }, $("hf-keep").checked);
      markFresh(made.player);
    } else if (token) {
      const me = remembered();
      keepToken(token, me, $("hf-keep").checked && !!me);
    }
    addGame(made.game.id, made.seat);
    location.assign(`/games/${made.game.id}/play`);
  } catch (err) {
    const p = err instanceof ApiError ? err.problem : {};
    formError(`Could not start the game: ${(p && p.detail) || err.message}`);
    button.disabled = false;
  }
});

$("forget-me").addEventListener("click", () => { forget(); $("hf-keep").checked = false; showMyGames(); });

async function showMyGames() {
  const mine = myGames();
  $("my-games").hidden = !mine.length;
  if (!mine.length) return;
  const rows = await Promise.all(mine.slice(0, 5).map((g) => apiOrNull(`/games/${g.id}`).catch(() => null)));
  fill($("my-games-list"), rows.filter(Boolean).map((v) => {
    const live = v.status !== "finished";
    return el("li", { dataset: { gameId: v.id } },
      el("span", { class: "who", text: `${v.players}p · ${v.seats.filter((s) => s.seat % 2 === 1).map((s) => s.bot_name)[0] || "?"}` }),
      el("span", { class: "score", text: `${v.scores[0]}–${v.scores[1]}` }),
      el("span", { class: "links" }, el("a", {
        href: `/games/${v.id}/play`, class: "resume",
        text: live ? "resume" : "result",
        "aria-label": `${live ? "Resume" : "Result of"} your game ${v.id}`,
      }), live ? null : el("a", {
        href: `/games/${v.id}/replay`, class: "replay",
        text: "replay and review", "aria-label": `Replay and review your game ${v.id}`,
      })));
  }));
}
showMyGames();
