// A tournament: before its start its registration (countdown, conditions, entrants); then
// for a knockout its bracket, standings with ratings (and their uncertainty), a chart of
// ratings over rounds, and every round's games. Refreshed while it runs. Every bot name
// links to its bot page.

import { api, ApiError, botLink, conditionsText, countdown, el } from "./api.js";

const $ = (id) => document.getElementById(id);
const ID = document.body.dataset.tournamentId;
// Bot colours: none is a team's colour (blue, orange), so a chart never reads as teams.
const COLORS = ["#1b7a34", "#8e3bb5", "#0f8a8a", "#c2185b", "#6b6b00", "#795548", "#5a5a5a",
  "#00695c", "#5e35b1", "#222222", "#9e9d24", "#ad1457"];
const SVG = "http://www.w3.org/2000/svg";

function svg(tag, attrs = {}, text = null) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
  if (text !== null) node.textContent = text;
  return node;
}

// How an entrant left the tournament (issue 16): it forfeits its live and unplayed games.
const LEFT = { withdrawn: "withdrawn", no_show: "no-show", disqualified: "disqualified", excluded: "excluded" };
// Badge colour per tournament status: paused waits, cancelled reads as an error.
const STATUS_BADGE = { registering: "waiting", running: "active", paused: "waiting", finished: "finished", cancelled: "error" };

// Every bot name is a link to its page (named from the tournament's names when the row
// does not say it).
function nameLink(id, names, name = null) {
  return id ? botLink(id, name || names[id] || id) : null;
}

function botCell(r, names) {
  const left = LEFT[r.status];
  return el("td", { class: "bot", dataset: { entrant: r.status || "in" } },
    nameLink(r.bot_id, names, r.bot_name),
    left ? [" ", el("span", { class: "badge status-error small", title: "left the tournament: forfeits its live and unplayed games", text: left })] : null,
    r.forfeits ? el("span", { class: "small muted", dataset: { col: "forfeits" }, text: ` · ${r.forfeits} forfeit${r.forfeits === 1 ? "" : "s"}` }) : null);
}

function standingsTable(st, names) {
  // a knockout ranks by the round reached: its place comes first
  const knockout = st.items.some((r) => r.place !== undefined);
  const cols = ["#", "Bot", "Score", "Matchpoints", "Played", "Won", "Lost", "Hands won", "Points ±", "Timeouts", "Rating (μ ± σ)", "Ordinal"];
  const optional = new Set([3, 5, 6, 7, 8, 9]); // hidden on phones (won, lost: in the score)
  const head = el("tr", {}, knockout ? el("th", { scope: "col", text: "Place" }) : null,
    cols.map((c, i) => el("th", { scope: "col", class: `${i >= 2 ? "num" : ""}${optional.has(i) || (knockout && i === 0) ? " opt" : ""}${i === 10 ? " nocaps" : ""}`, text: c })));
  const rows = st.items.map((r) => el("tr", { dataset: { botId: r.bot_id, rank: String(r.rank) } },
    knockout ? el("td", { dataset: { col: "place" }, text: r.place || "still in" }) : null,
    el("td", { class: knockout ? "opt" : null, text: String(r.rank) }), // on a phone the place says it
    botCell(r, names),
    el("td", { class: "num", dataset: { col: "score" }, text: String(r.score) }),
    // duplicate deals compared across tables, out of the most possible
    el("td", { class: "num opt", dataset: { col: "matchpoints" },
      text: r.comparisons ? `${r.matchpoints}/${r.comparisons}` : "–" }),
    el("td", { class: "num", dataset: { col: "played" }, text: String(r.played) }),
    el("td", { class: "num opt", dataset: { col: "won" }, text: String(r.won) }),
    el("td", { class: "num opt", dataset: { col: "lost" }, text: String(r.lost) }),
    el("td", { class: "num opt", dataset: { col: "hands_won" }, text: String(r.hands_won) }),
    el("td", { class: "num opt", text: `${r.points_for}–${r.points_against}` }),
    el("td", { class: "num opt", dataset: { col: "timeouts" }, text: String(r.timeouts) }),
    el("td", { class: "num", dataset: { col: "rating" } },
      `${r.rating.mu.toFixed(2)} `, el("span", { class: "pm", text: `± ${r.rating.sigma.toFixed(2)}` })),
    el("td", { class: "num", dataset: { col: "ordinal" }, text: r.rating.ordinal.toFixed(2) })));
  return el("div", {}, el("table", { class: "standings" }, el("thead", {}, head), el("tbody", {}, rows)),
    columnsExplained(knockout));
}

// What the standings' columns mean, one tap away (docs/tournaments.md, "Ranking").
function columnsExplained(knockout) {
  const row = (term, text) => [el("dt", { text: term }), el("dd", { text })];
  return el("details", { class: "explain" }, el("summary", { text: "What the columns mean" }),
    el("dl", {},
      knockout ? row("Place", "the round reached: 1 the champion, 2 the runner-up, then the losers of each earlier round (3-4, 5-8…)") : null,
      row("#", "the order of the standings: score, then matchpoints, games won, point difference, ordinal"),
      row("Score", knockout ? "matches won (a bye counts as one)" : "match score: for each pairing and round, 1 for winning more of its games (then more points in them), ½ each if still level, 1 for a bye"),
      row("Matchpoints", "duplicate deals compared across tables: for each shared deal, 1 for every other entrant that held the same cards and did worse with them, ½ for one that did as well; shown out of the most possible"),
      row("Played, Won, Lost", "games"),
      row("Hands won", "hands in which the entrant's team scored more points"),
      row("Points ±", "game points scored and conceded"),
      row("Timeouts", "moves the clock made for the entrant when its time ran out"),
      row("Rating (μ ± σ)", "OpenSkill over the tournament's games: μ the estimate of strength (a new bot starts at 25), σ its uncertainty"),
      row("Ordinal", "μ − 3σ: a cautious rating, the last tiebreak")));
}

// Lines of mu per bot over rounds, with a band of ± sigma.
function chart(st, names) {
  const hist = st.history || [];
  if (!hist.length) return el("p", { class: "muted", text: "No round finished yet." });
  const bots = st.items.map((r) => r.bot_id);
  const W = Math.round(Math.max(320, Math.min(720, $("chart").clientWidth || 720)));
  const H = W < 500 ? 240 : 300, L = 44, R = 24, T = 12, B = 30;
  let lo = Infinity, hi = -Infinity;
  for (const h of hist) for (const p of h.ratings) { lo = Math.min(lo, p.mu - p.sigma); hi = Math.max(hi, p.mu + p.sigma); }
  if (hi - lo < 1) { hi += 0.5; lo -= 0.5; }
  const rounds = hist.map((h) => h.round);
  const r0 = Math.min(...rounds), r1 = Math.max(...rounds);
  const x = (r) => L + 16 + (r1 === r0 ? (W - L - R - 32) / 2 : ((r - r0) / (r1 - r0)) * (W - L - R - 32));
  const y = (v) => T + (1 - (v - lo) / (hi - lo)) * (H - T - B);
  const root = svg("svg", { viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": "Ratings over rounds" });
  root.append(svg("title", {}, "Ratings (mu, with bars of plus or minus sigma) after each round"));
  const ticks = 5;
  for (let i = 0; i <= ticks; i++) {
    const v = lo + ((hi - lo) * i) / ticks;
    root.append(svg("line", { x1: L, x2: W - R, y1: y(v), y2: y(v), stroke: "#eee8dc" }));
    root.append(svg("text", { x: L - 6, y: y(v) + 4, "text-anchor": "end" }, v.toFixed(1)));
  }
  for (const r of rounds) root.append(svg("text", { x: x(r), y: H - 10, "text-anchor": "middle" }, `R${r}`));
  root.append(svg("line", { class: "axis", x1: L, x2: L, y1: T, y2: H - B }));
  bots.forEach((b, i) => {
    const pts = hist.map((h) => [h.round, h.ratings.find((p) => p.bot_id === b)]).filter(([, p]) => p);
    if (!pts.length) return;
    const color = COLORS[i % COLORS.length];
    // Error bars (± sigma), nudged sideways so that bots do not hide each other's.
    const dx = (i - (bots.length - 1) / 2) * Math.min(6, 40 / bots.length);
    for (const [r, p] of pts) {
      root.append(svg("line", { x1: x(r) + dx, x2: x(r) + dx, y1: y(p.mu - p.sigma), y2: y(p.mu + p.sigma), stroke: color, "stroke-opacity": 0.35, "stroke-width": 3, "stroke-linecap": "round" }));
    }
    root.append(svg("polyline", { points: pts.map(([r, p]) => `${x(r) + dx},${y(p.mu)}`).join(" "), fill: "none", stroke: color, "stroke-width": 2.5 }));
    for (const [r, p] of pts) {
      const dot = svg("circle", { cx: x(r) + dx, cy: y(p.mu), r: 4, fill: color });
      dot.append(svg("title", {}, `${names[b] || b}, round ${r}: ${p.mu.toFixed(2)} ± ${p.sigma.toFixed(2)}`));
      root.append(dot);
    }
  });
  const legend = el("div", { class: "legend" }, bots.map((b, i) => {
    const sw = el("span", { class: "sw" });
    sw.style.background = COLORS[i % COLORS.length];
    return el("span", {}, sw, names[b] || b);
  }));
  return el("div", {}, root, legend);
}

// A knockout's bracket: a column per round, each match with its two lines (seed, bot,
// games won), who goes through and why, and links to its games. Winners are marked in
// words as well as in bold, so nothing rests on colour alone.
function bracketView(b, names) {
  const who = (id) => (id ? names[id] || id : null);
  const WHY = { games: "more games won", points: "more points", seed: "the higher seed, level after the tiebreak games", bye: "a bye" };
  return el("div", { class: "bracket" }, b.rounds.map((r) => el("section", { class: "bracket-round", dataset: { round: String(r.round) }, "aria-labelledby": `br-${r.round}` },
    el("h3", { id: `br-${r.round}`, text: `Round ${r.round}: ${r.name}` }),
    el("ol", { class: "bracket-matches" }, r.matches.map((m) => {
      const line = (i) => {
        const id = m.entrants[i];
        const won = m.winner && m.winner === id;
        return el("div", { class: `match-line${won ? " won" : ""}`, dataset: { botId: id || "" } },
          el("span", { class: "seed", text: m.seeds[i] ? String(m.seeds[i]) : "" }),
          el("span", { class: "bot" }, id ? nameLink(id, names) : (m.status === "bye" ? "bye" : "to be decided")),
          el("span", { class: "num", text: m.wins ? String(m.wins[i]) : "" }),
          won ? el("span", { class: "adv", text: "✓" }, el("span", { class: "sr-only", text: " goes through" })) : null);
      };
      const note = m.winner
        ? `${who(m.winner)} goes through (${WHY[m.decided_by] || m.decided_by})`
        : m.status === "waiting" ? "waiting for the earlier round" : m.status;
      const pts = m.points && m.status !== "bye" ? ` · points ${m.points[0]}–${m.points[1]}` : "";
      const extra = m.tiebreak_games ? ` · ${m.tiebreak_games} tiebreak games` : "";
      const games = m.games.length ? el("p", { class: "small match-games" }, "Games: ", m.games.flatMap((g, i) => [i ? " " : "",
        g.game_id
          ? el("a", { href: `/games/${g.game_id}`, "aria-label": `game ${i + 1} of ${who(m.entrants[0])} against ${who(m.entrants[1])}${g.tiebreak ? " (tiebreak)" : ""}, ${g.status}`, text: `${i + 1}${g.tiebreak ? "*" : ""}` })
          : el("span", { class: "muted", text: `${i + 1}` })])) : null;
      return el("li", { class: "match", dataset: { status: m.status, match: String(m.match) } },
        line(0), line(1), el("p", { class: "small muted match-note", text: `${note}${pts}${extra}` }), games);
    })))));
}

function roundsList(t, names) {
  if (!t.rounds || !t.rounds.length) return el("p", { class: "muted", text: "No round scheduled yet." });
  // A duplicate deal is hidden from spectators until every table of it has finished: its
  // live games and results are not linked, and say so (the table page would say the same).
  // A deal is shared when another game of the round deals it too (a final plays its own).
  const shared = (g) => t.rounds.some((r) => r.games.includes(g) && r.games.filter((x) => x.deal === g.deal).length > 1);
  const hidden = (g) => (t.settings.duplicate || t.settings.trusted) && g.game_id && shared(g) &&
    (g.status === "live" || (g.status === "done" && !g.scores)) && !["finished", "cancelled"].includes(t.status);
  const note = t.rounds.some((r) => r.games.some(hidden))
    ? el("p", { class: "small", dataset: { role: "hidden-note" }, text: "Games of a duplicate deal are hidden while the same cards are being played at another table, so that no entrant can learn them from a spectator; each opens, with its result and replay, as soon as every table of its deal has finished." })
    : null;
  return el("div", {}, note, t.rounds.map((r) => {
    const rows = r.games.map((g) => {
      const [a, b] = g.teams;
      const link = hidden(g)
        ? el("span", { class: "small muted", dataset: { role: "hidden-deal" }, title: `deal ${g.deal + 1} of round ${r.round} is still being played at another table`, text: `hidden for now (deal ${g.deal + 1})` })
        : g.game_id
          ? el("a", { href: `/games/${g.game_id}`, text: g.status === "done" ? "result" : g.status === "live" ? "watch live" : g.status === "void" ? "voided" : "table" })
          : el("span", { class: "muted", text: g.status === "done" ? "not played" : g.status });
      // a forfeit: who forfeited (they left, or the clock played all their moves)
      const forfeit = g.forfeit && g.forfeit.length
        ? el("span", { class: "small muted", dataset: { col: "forfeit" }, text: ` (forfeit: ${g.forfeit.map((b) => names[b] || b).join(", ")})` })
        : null;
      const cells = [
        el("td", { class: "opt", text: String(g.pairing + 1) }),
        el("td", {}, el("span", { class: "team-0-text" }, nameLink(a, names)), el("span", { class: "vs", text: " vs " }),
          el("span", { class: "team-1-text" }, nameLink(b, names))),
        el("td", { class: "num", text: g.scores ? `${g.scores[0]}–${g.scores[1]}` : "–" }),
        el("td", {}, g.winner ? nameLink(g.winner, names) : g.status === "done" ? (forfeit ? "nobody" : g.scores ? "draw" : "") : "", forfeit),
        el("td", { class: "opt" }, el("span", { class: `badge status-${g.status === "live" ? "active" : g.status === "done" ? "finished" : g.status === "void" ? "error" : "waiting"}`, text: g.status })),
        el("td", {}, link, g.game_id && g.status === "done" && !hidden(g) ? [" · ", el("a", { href: `/games/${g.game_id}/replay`, text: "replay" })] : null),
      ];
      return el("tr", { dataset: { gameId: g.game_id || "", status: g.status } }, cells);
    });
    const byes = r.byes && r.byes.length ? el("p", { class: "small muted" }, "Bye: ", r.byes.flatMap((b, i) => [i ? ", " : "", nameLink(b, names)])) : null;
    return el("section", { class: "round", dataset: { round: String(r.round) } },
      el("h3", { text: `Round ${r.round}` }), byes,
      el("div", { class: "table-wrap" }, el("table", {},
        el("thead", {}, el("tr", {}, ["Pairing", "Teams", "Score", "Winner", "Status", "Game"].map((h, i) => el("th", { scope: "col", class: i === 0 || i === 4 ? "opt" : "", text: h })))),
        el("tbody", {}, rows))));
  }));
}

// Rounds are counted from 1: "round 1 of 3" while the first is played.
function roundText(t) {
  const p = t.progress;
  if (t.status === "finished" || p.rounds_done >= p.rounds_planned) return `${p.rounds_done} of ${p.rounds_planned} rounds played`;
  if (t.status === "cancelled") return `cancelled after ${p.rounds_done} of ${p.rounds_planned} rounds`;
  return `round ${p.rounds_done + 1} of ${p.rounds_planned}`;
}

// Before the start: when it starts, what it asks of an entrant, who has entered (and who
// the organizer excluded, with the reason), and how a bot enters.
function registrationView(t) {
  const reg = t.registration;
  const when = reg.starts_at
    ? el("p", {}, "Starts ", el("strong", { id: "t-countdown", dataset: { at: String(reg.starts_at) }, text: countdown(reg.starts_at) }), ` (${new Date(reg.starts_at * 1000).toLocaleString()})`)
    : el("p", { text: "Starts when its organizer starts it." });
  const list = t.entrants.length
    ? el("ul", { class: "game-list" }, t.entrants.map((e) => el("li", { dataset: { botId: e.bot_id } }, botLink(e.bot_id, e.bot_name))))
    : el("p", { class: "muted", text: "Nobody has entered yet." });
  const excluded = (t.excluded || []).length
    ? el("p", { class: "small muted" }, "Excluded by the organizer: ", t.excluded.flatMap((x, i) => [i ? "; " : "", botLink(x.bot_id, x.bot_name), ` (${x.reason})`]))
    : null;
  return el("div", {}, when,
    el("p", { class: "small", text: `Conditions: ${conditionsText(reg)}. Fewer than ${reg.min_entrants} entrants at the start${reg.house_fill ? " (after house bots fill it up)" : ""}: cancelled.` }),
    el("h3", { text: `Entrants (${t.entrant_count} of at most ${reg.max_entrants})` }), list, excluded,
    el("p", { class: "small muted" }, "A bot enters with its own token: ", el("code", { text: `POST /tournaments/${t.id}/entrants` }), reg.mode === "private" ? " with the join code as code." : "."));
}

setInterval(() => {
  const node = document.getElementById("t-countdown");
  if (node && !document.hidden) node.textContent = countdown(Number(node.dataset.at));
}, 1000);

async function refresh() {
  try {
    const [t, st] = await Promise.all([api(`/tournaments/${ID}`), api(`/tournaments/${ID}/standings`)]);
    const names = Object.fromEntries((t.entrants || []).map((e) => [e.bot_id, e.bot_name]));
    $("t-name").textContent = t.name || "";
    document.title = `${t.name || ID} · All Fours Arena`;
    const status = $("t-status");
    status.textContent = t.status;
    status.className = `badge status-${STATUS_BADGE[t.status] || "finished"}`;
    const s = t.settings, p = t.progress;
    const left = (t.entrants || []).filter((e) => e.status && e.status !== "in");
    const rules = [s.no_show ? `no-show after ${s.no_show} s` : null, s.max_timeouts ? `disqualified at ${s.max_timeouts} timeouts` : null].filter(Boolean);
    $("t-info").textContent = `${s.format.replace("_", " ")} · ${s.players} players a table · ${t.entrants.length} bots · ${roundText(t)} · ${p.games_done}/${p.games_planned} games (${p.games_live} live)${s.duplicate ? " · duplicate deals" : ""}${rules.length ? ` · ${rules.join(", ")}` : ""}${left.length ? ` · left: ${left.map((e) => `${e.bot_name} (${LEFT[e.status] || e.status})`).join(", ")}` : ""}${t.status === "paused" ? " · paused: no game starts until resumed" : t.status === "cancelled" ? " · cancelled: live games were voided" : ""}`;
    $("registration-panel").hidden = t.status !== "registering";
    if (t.status === "registering") $("registration").replaceChildren(registrationView(t));
    if (t.reason) $("t-info").textContent += ` · ${t.reason}`;
    if (t.settings.format === "arena" && t.ends_at) $("t-info").textContent += t.status === "running" ? ` · pairing ends ${countdown(t.ends_at)}` : "";
    if (t.bracket) {
      $("bracket-panel").hidden = false;
      $("bracket").replaceChildren(bracketView(t.bracket, names));
    }
    $("standings").replaceChildren(standingsTable(st, names));
    $("chart").replaceChildren(chart(st, names));
    lastChart = [st, names];
    $("rounds").replaceChildren(roundsList(t, names));
    document.body.dataset.loaded = "true";
    document.body.dataset.status = t.status;
    return t.status;
  } catch (e) {
    const box = $("error");
    box.hidden = false;
    box.textContent = e instanceof ApiError && e.status === 404 ? "No such tournament." : `Could not load: ${e.message}`;
    return "error";
  }
}

// The chart is drawn for its width: draw it again when that changes (a phone turned).
let lastChart = null;
let resizeTimer = null;
window.addEventListener("resize", () => {
  clearTimeout(resizeTimer);
  resizeTimer = setTimeout(() => { if (lastChart) $("chart").replaceChildren(chart(...lastChart)); }, 150);
});

async function loop() {
  const status = await refresh();
  if (status === "running" || status === "paused" || status === "registering") setTimeout(loop, 3000);
}
loop();
