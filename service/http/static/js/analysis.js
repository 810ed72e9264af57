// The review beside the replay: the game's analysis (GET /games/{id}/analysis; "Review this
// game" asks for it with POST and shows the progress), read as a lesson. Each move shown is
// explained in the site's words and card symbols (what was played, its mark, what was
// better and by how much, the chance to win either way); a chart of Team A's chance to win
// (Team B's is the rest) with hand boundaries, axis ticks, the move shown and every mark's
// symbol; the marked moves of a chosen side, to jump between (N and P); each seat's figures
// and every decision in a table. Public API only; inline SVG, no library.

import { api, ApiError, el } from "./api.js";
import { cardText } from "./cards.js";
import { currentToken } from "./player.js";

const SVG = "http://www.w3.org/2000/svg";
export const MARK = {
  inaccuracy: { symbol: "?!", text: "inaccuracy", plural: "inaccuracies" },
  mistake: { symbol: "?", text: "mistake", plural: "mistakes" },
  blunder: { symbol: "??", text: "blunder", plural: "blunders" },
};
const LEVEL = { inaccuracy: 1, mistake: 2, blunder: 3 };
// The decisions as the rest of the site says them.
export const KIND_NAME = {
  stand_or_beg: "Stand or beg", give_one_or_run: "Give one or run the pack",
  play: "Play a card", lead: "Lead a card", follow: "Follow to a trick",
};
const DECISION = { stand: "Stand", beg: "Beg", give_one: "Give one", run_pack: "Run the pack" };
const PAST = { stand: "stood", beg: "begged", give_one: "gave one", run_pack: "ran the pack" };
const TEAM = ["Team A", "Team B"];
const $ = (id) => document.getElementById(id);

function svg(tag, attrs = {}, text = null) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
  if (text !== null) node.textContent = text;
  return node;
}

// A mark as shown everywhere: the symbol in the mark's colour, its name for screen readers.
export function markBadge(mark) {
  if (!mark || !MARK[mark]) return el("span", { class: "mark mark-none" }, el("span", { class: "sr-only", text: "no mark" }));
  return el("span", { class: `mark mark-${mark}`, title: MARK[mark].text },
    el("span", { "aria-hidden": "true", text: MARK[mark].symbol }),
    el("span", { class: "sr-only", text: MARK[mark].text }));
}

// "n mistakes", "1 mistake"
export function count(n, mark) { return `${n} ${n === 1 ? MARK[mark].text : MARK[mark].plural}`; }

// An action in the site's words: a card as "6♦" (named in full for screen readers), a
// decision as "Give one".
export function actionEl(action) {
  return DECISION[action] ? el("span", { class: "act", text: DECISION[action] }) : cardText(action);
}

const pct = (w) => `${Math.round(w * 100)}%`;
const pts = (x) => (Math.round(x * 100) / 100).toFixed(2);
const teamWin = (d) => (d.team === 0 ? d.expected.win : 1 - d.expected.win); // Team A's

function seatName(seats, seat) {
  const s = (seats || []).find((x) => x.seat === seat);
  return s && s.bot_name ? `${s.bot_name} (seat ${seat})` : `Seat ${seat}`;
}

// --- the move shown, explained -----------------------------------------------------------

function explain(d, seats, clock) {
  const who = seatName(seats, d.seat);
  const did = DECISION[d.chosen]
    ? [`${who} ${PAST[d.chosen]}`]
    : [`${who} played `, cardText(d.chosen)];
  const head = el("p", { class: "an-head" }, markBadge(d.mark), " ",
    el("b", {}, `Move ${d.ply + 1}: `, ...did), clock ? el("span", { class: "clock-note", text: " — time ran out: the clock played it" }) : null);
  const kind = el("p", { class: "small muted" }, `${KIND_NAME[d.kind] || KIND_NAME[d.decision] || d.decision} · ${TEAM[d.team]} · hand ${d.hand}${d.trick ? `, trick ${d.trick}` : ""}`);
  let verdict;
  if (d.mark) {
    verdict = el("p", { class: `an-verdict mark-text-${d.mark}` },
      `${MARK[d.mark].symbol} ${d.mark === "inaccuracy" ? "An" : "A"} ${MARK[d.mark].text}: from what ${who.replace(/ \(seat \d\)$/, "")} could know, it cost ${pts(d.loss)} points of this hand on average against the best choice.`);
  } else if (d.chosen === d.best) {
    verdict = el("p", { class: "an-verdict" }, "The best choice, from what this seat could know.");
  } else {
    verdict = el("p", { class: "an-verdict" }, `Close to the best: ${pts(d.loss)} points of this hand on average (a mark starts at 0.3).`);
  }
  const better = d.best !== d.chosen ? el("p", {}, "Better: ", actionEl(d.best),
    `. ${TEAM[d.team]}'s chance to win the game: ${pct(byAction(d, d.best).win)} with it, ${pct(d.expected.win)} after what was played.`) : null;
  const hind = d.hindsight && d.hindsight.best !== d.best
    ? el("p", { class: "small muted" }, "In hindsight, every card known, the best was ", actionEl(d.hindsight.best), ".") : null;
  return [head, kind, verdict, better, alternatives(d), hind];
}

function byAction(d, action) {
  return (d.alternatives || []).find((a) => a.action === action) || { points: 0, margin: 0, win: d.expected.win };
}

// The choices side by side, best first (at most four, and the one played).
function alternatives(d) {
  const alts = d.alternatives || [];
  if (alts.length < 2) return null;
  const shown = alts.slice(0, 4);
  if (!shown.some((a) => a.action === d.chosen)) shown.push(byAction(d, d.chosen));
  return el("table", { class: "grid an-alts" },
    el("caption", { class: "small", text: "Each choice, valued on the same deals" }),
    el("thead", {}, el("tr", {}, ["Choice", "Points this hand", "Margin", "Chance to win"].map((h) => el("th", { scope: "col", text: h })))),
    el("tbody", {}, shown.map((a) => el("tr", { class: a.action === d.chosen ? "chosen" : null },
      el("th", { scope: "row" }, actionEl(a.action), a.action === d.chosen ? el("span", { class: "small muted", text: " played" }) : null,
        a.action === d.best ? el("span", { class: "small muted", text: " best" }) : null),
      el("td", { class: "num", text: pts(a.points) }), el("td", { class: "num", text: pts(a.margin) }),
      el("td", { class: "num", text: pct(a.win) })))));
}

// --- the chart: Team A's chance to win, move by move ---------------------------------------

function chart(analysis, ctx) {
  const rows = analysis.decisions;
  const box = $("an-chart");
  const W = Math.round(Math.max(300, Math.min(760, box.clientWidth || 760)));
  const H = W < 500 ? 210 : 240, L = 40, R = 12, T = 22, B = 30;
  const last = Math.max(1, ctx.moves);
  const x = (move) => L + (move / last) * (W - L - R);
  const y = (w) => T + (1 - w) * (H - T - B);
  const marked = rows.filter((d) => d.mark);
  const summary = `Team A's chance to win the game after each decision, from ${pct(rows.length ? teamWin(rows[0]) : 0.5)} to ${pct(rows.length ? teamWin(rows[rows.length - 1]) : 0.5)}; ` +
    `${marked.length} marked moves. Use the marked moves list, or N and P, to go to them.`;
  const root = svg("svg", { viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": summary });
  for (const w of [0, 0.25, 0.5, 0.75, 1]) {
    root.append(svg("line", { x1: L, x2: W - R, y1: y(w), y2: y(w), class: w === 0.5 ? "grid-mid" : "grid-line" }));
    root.append(svg("text", { x: L - 6, y: y(w) + 4, "text-anchor": "end" }, pct(w)));
  }
  // hand boundaries: a dashed line where each hand is dealt, labelled with its number
  ctx.hands.forEach((move, i) => {
    if (i === 0) return;
    root.append(svg("line", { x1: x(move + 0.5), x2: x(move + 0.5), y1: T - 4, y2: H - B, class: "hand-line" }));
    root.append(svg("text", { x: x(move + 0.5) + 3, y: T - 8, class: "hand-label" }, `H${i + 1}`));
  });
  const every = last > 150 ? 25 : last > 60 ? 10 : 5;
  for (let m = 0; m <= last; m += every) {
    root.append(svg("line", { x1: x(m), x2: x(m), y1: H - B, y2: H - B + 4, class: "tick" }));
    root.append(svg("text", { x: x(m), y: H - B + 15, "text-anchor": "middle" }, String(m)));
  }
  root.append(svg("text", { x: W - R, y: H - 3, "text-anchor": "end", class: "axis-title" }, "move"));
  root.append(svg("line", { x1: L, x2: L, y1: T, y2: H - B, class: "axis" }));
  root.append(svg("line", { x1: L, x2: W - R, y1: H - B, y2: H - B, class: "axis" }));
  if (rows.length) {
    root.append(svg("polyline", { class: "an-line", fill: "none", points: rows.map((d) => `${x(d.ply + 1).toFixed(1)},${y(teamWin(d)).toFixed(1)}`).join(" ") }));
  }
  const here = svg("line", { class: "an-here", y1: T - 4, y2: H - B, x1: L, x2: L });
  root.append(here);
  for (const d of rows) {
    const cx = x(d.ply + 1).toFixed(1), cy = y(teamWin(d)).toFixed(1);
    root.append(svg("circle", { class: `an-dot team${d.team}${d.mark ? ` mark-${d.mark}` : ""}`, cx, cy, r: d.mark ? 5 : 3, "data-move": d.ply + 1 }));
    if (d.mark) {
      const above = teamWin(d) < 0.85;
      root.append(svg("text", { class: `mark-sym mark-${d.mark}`, x: cx, y: above ? Number(cy) - 9 : Number(cy) + 18, "text-anchor": "middle", "data-move": d.ply + 1 }, MARK[d.mark].symbol));
    }
  }
  // one target for pointer and touch: the nearest decision to where the chart was chosen
  const hit = svg("rect", { class: "an-hit", x: L, y: 0, width: W - L - R, height: H - B + 4 });
  hit.addEventListener("click", (e) => {
    const r = root.getBoundingClientRect();
    const move = ((e.clientX - r.left) / r.width * W - L) / (W - L - R) * last;
    let best = null;
    for (const d of rows) if (best === null || Math.abs(d.ply + 1 - move) < Math.abs(best.ply + 1 - move)) best = d;
    if (best) ctx.jump(best.ply + 1);
  });
  root.append(hit);
  const setHere = (move) => { const hx = x(move).toFixed(1); here.setAttribute("x1", hx); here.setAttribute("x2", hx); };
  return { root, setHere };
}

// --- the tables ------------------------------------------------------------------------------

function seatsTable(analysis, seats) {
  const head = el("tr", {}, ...["Seat", "Decisions", "Average loss", "?! inaccuracies", "? mistakes", "?? blunders"]
    .map((h) => el("th", { scope: "col", text: h })));
  const rows = Object.entries(analysis.seats || {}).map(([seat, s]) => {
    const info = (seats || []).find((x) => x.seat === Number(seat));
    return el("tr", {},
      el("th", { scope: "row" }, info && info.bot_id ? el("a", { href: `/bots/${info.bot_id}`, text: seatName(seats, Number(seat)) }) : seatName(seats, Number(seat))),
      el("td", { text: String(s.decisions) }), el("td", { text: pts(s.average_loss) }),
      el("td", { text: String(s.inaccuracy) }), el("td", { text: String(s.mistake) }),
      el("td", { text: String(s.blunder) }));
  });
  return el("table", { class: "grid" }, el("caption", { class: "sr-only", text: "Each seat's decisions" }),
    el("thead", {}, head), el("tbody", {}, ...rows));
}

function decisionList(analysis, seats, jump) {
  const head = el("tr", {}, ...["Move", "Seat", "Decision", "Played", "Mark", "Better", "Loss", ""]
    .map((h) => el("th", { scope: "col", text: h || " " }, h ? null : el("span", { class: "sr-only", text: "Go" }))));
  const body = analysis.decisions.map((d) => el("tr", { "data-ply": d.ply, "data-move": d.ply + 1, class: d.mark ? `marked mark-row-${d.mark}` : null },
    el("td", { text: String(d.ply + 1) }), el("td", { text: seatName(seats, d.seat) }),
    el("td", { text: KIND_NAME[d.kind] || KIND_NAME[d.decision] || d.decision }), el("td", {}, actionEl(d.chosen)),
    el("td", {}, markBadge(d.mark)),
    el("td", {}, d.best === d.chosen ? el("span", { class: "muted", text: "= played" }) : actionEl(d.best)),
    el("td", { text: pts(d.loss) }),
    el("td", {}, el("button", { type: "button", class: "link-button go", "aria-label": `Go to move ${d.ply + 1}`, onclick: () => jump(d.ply + 1), text: "Go" }))));
  return el("table", { class: "grid an-decisions" },
    el("caption", { class: "sr-only", text: "Every decision: what was played, its mark, what was better and the loss" }),
    el("thead", {}, head), el("tbody", {}, ...body));
}

// --- the panel ---------------------------------------------------------------------------------

// Start the review. ``opts``: gameId, seats, steps, moves, rec; ``jump(move)`` moves the
// replay to that move; ``currentMove()`` says where it is. Returns {onStep, next, prev}.
export function startAnalysis(opts) {
  const panel = $("analysis");
  const status = $("an-status");
  let analysis = null;
  let drawn = null;
  let current = { ply: 0, action: null };
  const byMove = new Map();
  const hands = opts.steps.filter((s) => s.events.some((e) => e.type === "deal" && e.deal === 0)).map((s) => s.ply);
  const clockPlies = new Set((opts.rec.timeouts || []).map((t) => t.ply));
  const ctx = { moves: opts.moves, hands, jump: opts.jump };

  const marked = () => {
    const side = $("an-side").value, min = LEVEL[$("an-min").value];
    return analysis.decisions.filter((d) => d.mark && LEVEL[d.mark] >= min && (side === "all" || String(d.team) === side));
  };
  const said = (text) => { const p = el("p", { text }); $("announce").append(p); };

  const showCurrent = () => {
    const box = $("an-current");
    if (!analysis) return;
    const d = current.action !== null ? byMove.get(current.ply) : null;
    if (drawn) drawn.setHere(current.ply);
    for (const row of panel.querySelectorAll("tr[data-move]")) row.classList.toggle("current", Number(row.dataset.move) === current.ply);
    for (const b of panel.querySelectorAll("#an-marks button")) b.setAttribute("aria-current", String(Number(b.dataset.move) === current.ply));
    box.dataset.move = String(current.ply);
    if (!d) {
      const why = current.action === null ? "a deal: no decision here." : "no choice here (a forced move: the only legal card).";
      box.replaceChildren(el("p", { class: "muted" }, `Move ${current.ply}: ${why}`));
      return;
    }
    box.replaceChildren(...explain(d, opts.seats, clockPlies.has(d.ply + 1)).filter(Boolean));
  };

  const drawMarks = () => {
    const list = marked();
    const side = $("an-side").value;
    const whose = side === "all" ? "both teams" : TEAM[Number(side)];
    const byMark = Object.keys(MARK).map((m) => [m, list.filter((d) => d.mark === m).length]).filter(([, n]) => n);
    $("an-count").textContent = list.length
      ? `${list.length} marked ${list.length === 1 ? "move" : "moves"} of ${whose}: ${byMark.map(([m, n]) => `${MARK[m].symbol} ${count(n, m)}`).join(", ")}. Keys: N next, P previous.`
      : `No marked move of ${whose} at this level.`;
    const items = list.map((d) => el("li", {}, el("button", {
      type: "button", class: `an-mark-go mark-row-${d.mark}`, dataset: { move: String(d.ply + 1) },
      onclick: () => opts.jump(d.ply + 1),
    }, markBadge(d.mark), ` Move ${d.ply + 1} · ${seatName(opts.seats, d.seat)}: `, actionEl(d.chosen),
    d.best !== d.chosen ? [" (better ", actionEl(d.best), ")"] : null)));
    $("an-marks").replaceChildren(...(items.length ? items : [el("li", { class: "muted small", text: "None." })]));
    showCurrent();
  };

  const draw = () => {
    for (const d of analysis.decisions) byMove.set(d.ply + 1, d);
    $("an-body").hidden = false;
    $("an-ask").hidden = true;
    $("an-progress").hidden = true;
    drawn = chart(analysis, ctx);
    $("an-chart").replaceChildren(drawn.root);
    $("an-legend").replaceChildren(
      el("span", { class: "key team0", text: "a Team A decision" }), " ",
      el("span", { class: "key team1", text: "a Team B decision" }),
      " · the dark line: the move shown · dashed: a new hand (H2, H3…). Each chance is the deciding seat's own estimate, from its cards and what it had seen; Team B's chance is the rest (100% − Team A's). Choose a point to go to it.");
    $("an-seats").replaceChildren(seatsTable(analysis, opts.seats));
    $("an-list").replaceChildren(decisionList(analysis, opts.seats, opts.jump));
    const t = analysis.thresholds || {};
    $("an-about").textContent = `Every decision valued from what its seat could know (${analysis.quality.samples} sampled deals each), in points of the hand's expected margin: ?! from ${t.inaccuracy}, ? from ${t.mistake}, ?? from ${t.blunder} lost.`;
    const totals = [0, 1].map((team) => {
      const mine = analysis.decisions.filter((d) => d.team === team && d.mark);
      const parts = Object.keys(MARK).map((m) => [m, mine.filter((d) => d.mark === m).length]).filter(([, n]) => n);
      return `${TEAM[team]}: ${parts.length ? parts.map(([m, n]) => count(n, m)).join(", ") : "no marked move"}`;
    });
    status.textContent = `Reviewed: ${totals.join(" · ")}.`;
    panel.dataset.state = "done";
    drawMarks();
    const focusLost = !document.activeElement || document.activeElement === document.body || document.activeElement.id === "an-review";
    if (asked) {
      said("The review is ready.");
      if (focusLost) $("an-h").focus();
    }
  };

  let asked = false;
  const pending = (data) => {
    panel.dataset.state = data.status;
    $("an-ask").hidden = true;
    const bar = $("an-progress");
    bar.hidden = false;
    if (data.total) { bar.max = data.total; bar.value = data.done; } else bar.removeAttribute("value");
    status.textContent = data.status === "running" && data.total
      ? `Analysing: ${data.done} of ${data.total} decisions valued…`
      : "Queued: waiting for a free analysis worker…";
    // at most every 2 s whatever Retry-After says: a person is waiting, and a pending
    // analysis is one small read
    setTimeout(poll, 1000 * Math.max(1, Math.min(2, data.retry_after || 2)));
  };
  const answer = (data) => { if (data && data.decisions) { analysis = data; draw(); } else pending(data); };
  const refused = (e) => {
    const p = (e instanceof ApiError && e.problem) || {};
    if (e instanceof ApiError && e.status === 403 && p.type === "/problems/not-a-player") {
      panel.dataset.state = "unasked";
      status.textContent = "This game has not been reviewed yet.";
      $("an-ask").hidden = false;
      return;
    }
    panel.dataset.state = "unavailable";
    if (e instanceof ApiError && e.status === 429) {
      status.textContent = "This address has asked for as many reviews as the service computes for one visitor in an hour: try again later (a game you played yourself is always reviewed).";
      $("an-ask").hidden = false;
      return;
    }
    status.textContent = (e instanceof ApiError ? p.detail || p.title : null) || `The analysis could not be loaded (${e.message || e}).`;
    if (e instanceof ApiError && e.status === 503) setTimeout(poll, 30000);
  };
  async function poll() {
    try { answer(await api(`/games/${opts.gameId}/analysis`)); } catch (e) { refused(e); }
  }
  async function ask() {
    asked = true;
    $("an-review").disabled = true;
    status.textContent = "Asking for the review…";
    try {
      answer(await api(`/games/${opts.gameId}/analysis`, { method: "POST", token: currentToken() }));
    } catch (e) {
      refused(e);
    } finally {
      $("an-review").disabled = false;
    }
  }
  $("an-review").addEventListener("click", ask);
  for (const id of ["an-side", "an-min"]) $(id).addEventListener("change", () => { if (analysis) drawMarks(); });
  $("an-prev").addEventListener("click", () => go(-1));
  $("an-next").addEventListener("click", () => go(1));
  let resizeTimer = null;
  window.addEventListener("resize", () => {
    clearTimeout(resizeTimer);
    resizeTimer = setTimeout(() => { if (analysis) { drawn = chart(analysis, ctx); $("an-chart").replaceChildren(drawn.root); showCurrent(); } }, 150);
  });

  // The next (dir 1) or previous (-1) marked move of the chosen side and level.
  function go(dir) {
    if (!analysis) { said("No review yet: press Review this game."); return; }
    const at = opts.currentMove();
    const list = marked().map((d) => d.ply + 1);
    const target = dir > 0 ? list.find((m) => m > at) : [...list].reverse().find((m) => m < at);
    if (target === undefined) { said(dir > 0 ? "No later marked move." : "No earlier marked move."); return; }
    opts.jump(target);
  }

  if (new URLSearchParams(location.search).has("review")) ask(); else poll();
  return {
    onStep: (step) => { current = { ply: step.ply, action: step.action }; showCurrent(); },
    next: () => go(1),
    prev: () => go(-1),
  };
}
