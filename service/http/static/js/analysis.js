// The replay page's analysis panel (issue 25): GET /games/{id}/analysis, polled while it
// is computed (202 + Retry-After), then every decision marked (colour and symbol, with the
// mark's name for screen readers), the best alternative and the loss beside it, a chart of
// each team's expected outcome (chance to win the game) through the game whose points jump
// to that decision, and each seat's average loss. Public API only; inline SVG, no library.

import { el } from "./api.js";

const SVG = "http://www.w3.org/2000/svg";
export const MARK = {
  inaccuracy: { symbol: "?!", text: "inaccuracy" },
  mistake: { symbol: "?", text: "mistake" },
  blunder: { symbol: "??", text: "blunder" },
};
const $ = (id) => document.getElementById(id);
const TEAM = { 0: "A", 1: "B" }; // as the table names them (seat 0's team is A)

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

const pct = (w) => `${Math.round(w * 100)}%`;
const num = (x) => (Math.round(x * 100) / 100).toFixed(2);

// Each team's chance to win after each of its decisions, by ply; each point a button.
function chart(analysis, onJump) {
  const rows = analysis.decisions;
  const W = Math.round(Math.max(300, Math.min(760, ($("an-chart").clientWidth || 760))));
  const H = W < 500 ? 200 : 240, L = 40, R = 12, T = 10, B = 26;
  const last = Math.max(1, ...rows.map((d) => d.ply));
  const x = (ply) => L + (ply / last) * (W - L - R);
  const y = (w) => T + (1 - w) * (H - T - B);
  const root = svg("svg", { viewBox: `0 0 ${W} ${H}`, role: "group", "aria-labelledby": "an-chart-h" });
  for (const w of [0, 0.25, 0.5, 0.75, 1]) {
    root.append(svg("line", { x1: L, x2: W - R, y1: y(w), y2: y(w), stroke: w === 0.5 ? "#b8b2a6" : "#eee8dc" }));
    root.append(svg("text", { x: L - 6, y: y(w) + 4, "text-anchor": "end", "aria-hidden": "true" }, pct(w)));
  }
  root.append(svg("text", { x: (W + L) / 2, y: H - 6, "text-anchor": "middle", "aria-hidden": "true" }, "decisions through the game (ply)"));
  const byPly = new Map(rows.map((d) => [d.ply, d]));
  for (const [team, points] of Object.entries(analysis.teams || {})) {
    if (!points.length) continue;
    const cls = `team${team}`;
    root.append(svg("polyline", {
      class: `an-line ${cls}`, fill: "none", "stroke-width": 2, "aria-hidden": "true",
      points: points.map((p) => `${x(p.ply).toFixed(1)},${y(p.win).toFixed(1)}`).join(" "),
    }));
    for (const p of points) {
      const d = byPly.get(p.ply);
      const label = `Ply ${p.ply}, Team ${TEAM[team]}: ${pct(p.win)} to win` +
        (d && d.mark ? `, ${MARK[d.mark].text}` : "") + ". Go to this decision";
      const dot = svg("circle", {
        class: `an-dot ${cls}${d && d.mark ? ` mark-${d.mark}` : ""}`, cx: x(p.ply).toFixed(1),
        cy: y(p.win).toFixed(1), r: d && d.mark ? 5 : 3.5, tabindex: 0, role: "button",
        "aria-label": label, "data-ply": p.ply,
      });
      dot.append(svg("title", {}, label));
      dot.addEventListener("click", () => onJump(p.ply));
      dot.addEventListener("keydown", (e) => {
        if (e.key === "Enter" || e.key === " ") { e.preventDefault(); e.stopPropagation(); onJump(p.ply); }
      });
      root.append(dot);
    }
  }
  return root;
}

function seatName(seats, seat) {
  const s = (seats || []).find((x) => x.seat === seat);
  return s && s.bot_name ? `${s.bot_name} (seat ${seat})` : `Seat ${seat}`;
}

function summary(analysis, seats) {
  const head = el("tr", {}, ...["Seat", "Decisions", "Average loss", "?! inaccuracies", "? mistakes", "?? blunders"]
    .map((h) => el("th", { scope: "col", text: h })));
  const body = Object.entries(analysis.seats || {}).map(([seat, s]) => el("tr", {},
    el("th", { scope: "row", text: seatName(seats, Number(seat)) }),
    el("td", { text: String(s.decisions) }), el("td", { text: num(s.average_loss) }),
    el("td", { text: String(s.inaccuracy) }), el("td", { text: String(s.mistake) }),
    el("td", { text: String(s.blunder) })));
  return el("table", { class: "grid" }, el("caption", { class: "sr-only", text: "Each seat's decisions" }),
    el("thead", {}, head), el("tbody", {}, ...body));
}

function decisionText(d, seats) {
  const best = d.best === d.chosen ? "the best" : `best ${d.best}, loss ${num(d.loss)}`;
  return `${seatName(seats, d.seat)}: ${d.chosen} (${best})`;
}

function decisionList(analysis, seats, onJump) {
  const head = el("tr", {}, ...["Ply", "Seat", "Decision", "Chosen", "Mark", "Best", "Loss", ""]
    .map((h) => el("th", { scope: "col", text: h || " " }, h ? null : el("span", { class: "sr-only", text: "Go" }))));
  const body = analysis.decisions.map((d) => el("tr", { "data-ply": d.ply, class: d.mark ? `marked mark-row-${d.mark}` : null },
    el("td", { text: String(d.ply) }), el("td", { text: String(d.seat) }),
    el("td", { text: d.kind || d.decision }), el("td", {}, el("code", { text: d.chosen })),
    el("td", {}, markBadge(d.mark)),
    el("td", {}, d.best === d.chosen ? el("span", { class: "muted", text: "= chosen" }) : el("code", { text: d.best })),
    el("td", { text: num(d.loss) }),
    el("td", {}, el("button", { type: "button", class: "link-button", "aria-label": `Go to ply ${d.ply}`, onclick: () => onJump(d.ply), text: "Go" }))));
  return el("table", { class: "grid an-decisions" },
    el("caption", { class: "sr-only", text: "Every decision: the action chosen, its mark, the best alternative and the loss" }),
    el("thead", {}, head), el("tbody", {}, ...body));
}

// Start the panel: ``jump(ply)`` moves the replay to the step of the decision at ``ply``.
// Returns ``onPly(ply)``: the replay tells it which decision is next, to show it.
export function startAnalysis(gameId, seats, jump) {
  const panel = $("analysis");
  if (!panel) return () => {};
  panel.hidden = false;
  const status = $("an-status");
  let analysis = null;
  let current = null;
  const byPly = new Map();
  const showCurrent = () => {
    const box = $("an-current");
    const d = current === null ? null : byPly.get(current);
    if (!analysis) return;
    if (!d) { box.replaceChildren(el("span", { class: "muted", text: "No decision here (a forced move or a deal)." })); return; }
    box.replaceChildren(markBadge(d.mark), " ", `Next decision, ply ${d.ply}: `, decisionText(d, seats),
      d.hindsight ? el("span", { class: "muted small" }, ` · in hindsight (every card known): ${d.hindsight.best}`) : null);
    for (const row of panel.querySelectorAll("tr[data-ply]")) row.classList.toggle("current", Number(row.dataset.ply) === d.ply);
  };
  const draw = () => {
    for (const d of analysis.decisions) byPly.set(d.ply, d);
    $("an-chart").replaceChildren(chart(analysis, jump));
    $("an-seats").replaceChildren(summary(analysis, seats));
    $("an-list").replaceChildren(decisionList(analysis, seats, jump));
    const t = analysis.thresholds || {};
    status.textContent = `Every decision valued from what its seat could know (${analysis.quality.samples} sampled deals each). ` +
      `Loss in expected points of the hand: ?! from ${t.inaccuracy}, ? from ${t.mistake}, ?? from ${t.blunder}.`;
    panel.dataset.state = "done";
    showCurrent();
  };
  const poll = async () => {
    let resp;
    try {
      resp = await fetch(`/games/${gameId}/analysis`, { headers: { Accept: "application/json" }, cache: "no-store" });
    } catch {
      status.textContent = "The analysis could not be loaded."; return;
    }
    const data = await resp.json().catch(() => null);
    if (resp.status === 200 && data) { analysis = data; draw(); return; }
    if (resp.status === 202 && data) {
      panel.dataset.state = data.status;
      status.textContent = data.status === "running" && data.total
        ? `Analysing: ${data.done} of ${data.total} decisions valued…` : "Queued for analysis…";
      setTimeout(poll, 1000 * Math.max(1, Math.min(10, data.retry_after || 2)));
      return;
    }
    panel.dataset.state = "unavailable";
    status.textContent = (data && (data.detail || data.title)) || `No analysis (HTTP ${resp.status}).`;
    if (resp.status === 503) setTimeout(poll, 1000 * Number(resp.headers.get("Retry-After") || 30));
  };
  poll();
  return (ply) => { current = ply; showCurrent(); };
}
