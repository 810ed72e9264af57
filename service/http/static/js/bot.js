// A bot's page: its rating on every ladder it has played, a chart of the rating (mu, with
// a band of ± sigma) game by game, and its recent ladder games. Public API only.

import { count, KIND_NAME, markBadge } from "./analysis.js";
import { ago, api, ApiError, el } from "./api.js";

const $ = (id) => document.getElementById(id);
const ID = document.body.dataset.botId;
const COLORS = ["#1b7a34", "#8e3bb5", "#0f8a8a", "#c2185b", "#6b6b00", "#795548"];
const SVG = "http://www.w3.org/2000/svg";
const MAX_GAMES = 500; // the chart's span: the newest games, at most this many

function svg(tag, attrs = {}, text = null) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
  if (text !== null) node.textContent = text;
  return node;
}

async function history(name) {
  const items = [];
  let cursor = 0;
  while (cursor !== null && items.length < MAX_GAMES) {
    const page = await api(`/ladders/${name}/bots/${ID}/history?limit=100&cursor=${cursor}`);
    items.push(...page.items);
    cursor = page.next_cursor;
  }
  return items.reverse(); // oldest first
}

// One line of mu per ladder over its games (1, 2, ...), with a band of ± sigma.
function chart(series) {
  const drawn = series.filter((s) => s.games.length);
  if (!drawn.length) return el("p", { class: "muted", text: "No ladder game yet." });
  const W = Math.round(Math.max(320, Math.min(720, $("chart").clientWidth || 720)));
  const H = W < 500 ? 240 : 300, L = 44, R = 24, T = 12, B = 30;
  let lo = Infinity, hi = -Infinity, n = 1;
  for (const s of drawn) {
    n = Math.max(n, s.games.length);
    for (const g of s.games) for (const r of [g.before, g.after]) { lo = Math.min(lo, r.mu - r.sigma); hi = Math.max(hi, r.mu + r.sigma); }
  }
  if (hi - lo < 1) { hi += 0.5; lo -= 0.5; }
  const x = (i) => L + 8 + (i / n) * (W - L - R - 16);
  const y = (v) => T + (1 - (v - lo) / (hi - lo)) * (H - T - B);
  const root = svg("svg", { viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": "Rating over ladder games" });
  root.append(svg("title", {}, "Rating (mu, with a band of plus or minus sigma) after each ladder game"));
  for (let i = 0; i <= 5; i++) {
    const v = lo + ((hi - lo) * i) / 5;
    root.append(svg("line", { x1: L, x2: W - R, y1: y(v), y2: y(v), stroke: "#eee8dc" }));
    root.append(svg("text", { x: L - 6, y: y(v) + 4, "text-anchor": "end" }, v.toFixed(1)));
  }
  root.append(svg("text", { x: x(0), y: H - 10, "text-anchor": "middle" }, "0"));
  root.append(svg("text", { x: x(n), y: H - 10, "text-anchor": "middle" }, `${n} games`));
  root.append(svg("line", { class: "axis", x1: L, x2: L, y1: T, y2: H - B }));
  drawn.forEach((s, k) => {
    const color = COLORS[k % COLORS.length];
    const pts = [[0, s.games[0].before], ...s.games.map((g, i) => [i + 1, g.after])];
    const band = [...pts.map(([i, r]) => `${x(i)},${y(r.mu + r.sigma)}`), ...pts.slice().reverse().map(([i, r]) => `${x(i)},${y(r.mu - r.sigma)}`)];
    root.append(svg("polygon", { points: band.join(" "), fill: color, "fill-opacity": 0.12, stroke: "none" }));
    root.append(svg("polyline", { class: "mu", points: pts.map(([i, r]) => `${x(i)},${y(r.mu)}`).join(" "), fill: "none", stroke: color, "stroke-width": 2.5 }));
    const last = pts[pts.length - 1];
    const dot = svg("circle", { cx: x(last[0]), cy: y(last[1].mu), r: 4, fill: color });
    dot.append(svg("title", {}, `${s.name}, after game ${last[0]}: ${last[1].mu.toFixed(2)} ± ${last[1].sigma.toFixed(2)}`));
    root.append(dot);
  });
  const legend = el("div", { class: "legend" }, drawn.map((s, k) => {
    const sw = el("span", { class: "sw" });
    sw.style.background = COLORS[k % COLORS.length];
    return el("span", {}, sw, `ladder ${s.name}`);
  }));
  return el("div", {}, root, legend);
}

function ratingsTable(entries) {
  const rows = entries.filter((e) => e.rating.games);
  if (!rows.length) return el("p", { class: "muted", text: "No rated ladder game yet." });
  const head = el("tr", {}, ["Ladder", "Rating (μ ± σ)", "Ordinal", "Games", "Wins"].map((h, i) =>
    el("th", { scope: "col", class: `${i >= 1 ? "num" : ""}${i === 1 ? " nocaps" : ""}`, text: h })));
  return el("table", {}, el("thead", {}, head), el("tbody", {}, rows.map((e) => el("tr", { dataset: { ladder: e.ladder } },
    el("td", { text: e.ladder }),
    el("td", { class: "num", dataset: { col: "rating" } }, `${e.rating.mu.toFixed(2)} `, el("span", { class: "pm", text: `± ${e.rating.sigma.toFixed(2)}` })),
    el("td", { class: "num", text: e.rating.ordinal.toFixed(2) }),
    el("td", { class: "num", dataset: { col: "games" }, text: String(e.rating.games) }),
    el("td", { class: "num", text: String(e.rating.wins) })))));
}

function gamesTable(series) {
  const all = series.flatMap((s) => s.games.map((g) => ({ ...g, ladder: s.name })))
    .sort((a, b) => b.finished - a.finished).slice(0, 20);
  if (!all.length) return el("p", { class: "muted", text: "No ladder game yet." });
  const head = el("tr", {}, ["Ladder", "Opponent", "Result", "Score", "Rating after", "When", "Game"].map((h) => el("th", { scope: "col", text: h })));
  return el("table", {}, el("thead", {}, head), el("tbody", {}, all.map((g) => el("tr", { dataset: { gameId: g.game_id } },
    el("td", { text: g.ladder }),
    el("td", {}, el("a", { href: `/bots/${g.opponent.bot_id}`, text: g.opponent.bot_name || g.opponent.bot_id })),
    el("td", { text: g.won ? "won" : "lost" }),
    el("td", { text: `${g.scores[0]}–${g.scores[1]}` }),
    el("td", { text: `${g.after.mu.toFixed(2)} ± ${g.after.sigma.toFixed(2)}` }),
    el("td", { class: "muted small", text: ago(g.finished) }),
    el("td", {}, el("a", { href: `/games/${g.game_id}/replay`, "aria-label": `Replay game ${g.game_id}`, text: "replay" }))))));
}

// Its average loss per decision over its analysed games (GET /bots/{id}/analysis), by kind.
function analysisTable(a) {
  if (!a.games) return el("p", { class: "muted", text: "No analysed game yet: open one of its finished games' replay and press Review this game." });
  const row = (name, n, loss) => el("tr", {}, el("th", { scope: "row", text: name }),
    el("td", { text: String(n) }), el("td", { text: loss === null ? "–" : loss.toFixed(3) }));
  return el("div", {},
    el("p", { class: "small", "data-role": "analysis-summary" },
      `${a.games} analysed game${a.games === 1 ? "" : "s"}, ${a.decisions} decision${a.decisions === 1 ? "" : "s"}: average loss ${a.average_loss === null ? "–" : a.average_loss.toFixed(3)} points a decision; `,
      markBadge("inaccuracy"), ` ${count(a.inaccuracy, "inaccuracy")}, `, markBadge("mistake"), ` ${count(a.mistake, "mistake")}, `,
      markBadge("blunder"), ` ${count(a.blunder, "blunder")}.`),
    el("table", { class: "grid" },
      el("caption", { class: "sr-only", text: "Average loss per decision, by kind of decision" }),
      el("thead", {}, el("tr", {}, ...["Decision", "Decisions", "Average loss"].map((h) => el("th", { scope: "col", text: h })))),
      el("tbody", {}, row("every decision", a.decisions, a.average_loss),
        ...Object.entries(a.by_kind).map(([k, v]) => row(KIND_NAME[k] || k, v.decisions, v.average_loss)))));
}

let last = null;
async function refresh() {
  try {
    const bot = await api(`/bots/${ID}`);
    $("b-name").textContent = bot.name;
    // a person's account (the pages' players) is a player, not a bot
    if (bot.person) $("b-kind").textContent = "Player";
    document.title = `${bot.person ? "Player" : "Bot"} ${bot.name} · All Fours Arena`;
    const ladders = (await api("/ladders")).items;
    const series = await Promise.all(ladders.map(async (l) => ({ name: l.name, games: await history(l.name) })));
    // the rating after its newest game (the history is public; the entry needs its token)
    const entries = series.map((s) => {
      const newest = s.games[s.games.length - 1];
      return { ladder: s.name, rating: newest ? { ...newest.after, games: s.games.length, wins: s.games.filter((g) => g.won).length } : { games: 0 } };
    });
    $("ratings").replaceChildren(ratingsTable(entries));
    last = series;
    $("chart").replaceChildren(chart(series));
    $("games").replaceChildren(gamesTable(series));
    $("analysis").replaceChildren(analysisTable(await api(`/bots/${ID}/analysis`)));
    document.body.dataset.loaded = "true";
  } catch (e) {
    const box = $("error");
    box.hidden = false;
    box.textContent = e instanceof ApiError && e.status === 404 ? "No such bot." : `Could not load: ${e.message}`;
    document.body.dataset.failed = "true";
  }
}

let resizeTimer = null;
window.addEventListener("resize", () => {
  clearTimeout(resizeTimer);
  resizeTimer = setTimeout(() => { if (last) $("chart").replaceChildren(chart(last)); }, 150);
});
refresh();
setInterval(() => { if (!document.hidden) refresh(); }, 10000);
