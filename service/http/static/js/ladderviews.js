// A ladder's queue and standings as the lobby's panel and the ladder pages show them, and
// what their columns mean. Public API only.

import { ago, el } from "./api.js";

const STATE_BADGE = { waiting: "waiting", matched: "waiting", playing: "active", paused: "finished" };

export function botLink(id, name) {
  return el("a", { class: "bot-link", href: `/bots/${id}`, text: name || id });
}

export function queueList(lad) {
  if (!lad.queue.length) return el("p", { class: "muted small", text: "Nobody is queued." });
  return el("ul", { class: "game-list" }, lad.queue.map((q) => el("li", { dataset: { botId: q.bot_id, state: q.state } },
    el("span", { class: "who" }, botLink(q.bot_id, q.bot_name)),
    el("span", { class: `badge status-${STATE_BADGE[q.state] || "waiting"}`, text: q.state }),
    el("span", { class: "muted small when", text: q.waiting_since ? `since ${ago(q.waiting_since)}` : "" }),
    el("span", { class: "links" }, q.game_id ? el("a", { href: `/games/${q.game_id}`, "aria-label": `Watch ${q.bot_name}'s ladder game`, text: "watch" }) : null))));
}

export function standingsTable(name, st, { caption = null } = {}) {
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
  return el("div", { class: "table-wrap", tabindex: "0", role: "region", "aria-label": `Ladder ${name} standings` },
    el("table", { class: "standings" }, caption ? el("caption", { class: "sr-only", text: caption }) : null,
      el("thead", {}, head), el("tbody", {}, rows)));
}

// The columns in words, shown under the standings (a <details>: one tap, then read).
export function columnsExplained() {
  const row = (term, text) => [el("dt", { text: term }), el("dd", { text })];
  return el("details", { class: "explain" }, el("summary", { text: "What the columns mean" }),
    el("dl", {},
      row("#", "the rank; – for a provisional bot (fewer than 10 rated games, or games against fewer than 3 owners), shown but not ranked"),
      row("Rating (μ ± σ)", "OpenSkill: μ is the estimate of the bot's strength (a new bot starts at 25), σ how uncertain it still is"),
      row("Ordinal", "μ − 3σ, what the ranking orders by: a bot climbs by winning, and as its σ shrinks"),
      row("Games, Wins", "rated ladder games played and won"),
      row("Form", "the last results, oldest first: W a win, L a loss")));
}
