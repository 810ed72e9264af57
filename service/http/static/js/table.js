// The table page: watch a game live, replay a finished one, or play a seat.
// Everything comes from the public API: the view, the event stream, the record.

import { api, apiOrNull, ApiError, openEvents, el, fill } from "./api.js";
import { cardEl, cardName, hiddenHand, sortCards, suitBadge, suitName } from "./cards.js";
import { applyEvent, itemName, modelAt, newModel, stepsFromRecord } from "./model.js";
import { startAnalysis } from "./analysis.js";
import { addGame, currentToken, keepToken, remembered, takeFresh } from "./player.js";

const body = document.body;
const GAME = body.dataset.gameId;
const MODE = body.dataset.mode;
const $ = (id) => document.getElementById(id);
const TEAM_NAMES = ["Team A", "Team B"];
const DECISION_LABEL = {
  stand: "Stand", beg: "Beg", give_one: "Give one", run_pack: "Run the pack",
};
const POSITIONS = { 2: ["bottom", "top"], 4: ["bottom", "right", "top", "left"] };

const ctx = {
  view: null,        // the latest view (spectator's, or the played seat's)
  viewAt: 0,         // performance.now() when it arrived
  seats: [],         // [{seat, bot_id, bot_name}]
  me: null,          // the seat played from this page
  token: null,
  busy: false,       // an action is on its way
  revealed: null,    // every remaining hand, once the game is over
  dealt: null,       // what each seat was dealt in the last hand, once the game is over
  lastEventAt: performance.now(),
  status: "loading",
};

let model = newModel();

// --- small helpers -----------------------------------------------------------------------

function seatName(s) {
  const info = ctx.seats[s];
  const name = info && info.bot_name ? info.bot_name : "open seat";
  // Partners (or one bot in several seats) can share a name: then say which seat.
  const shared = ctx.seats.filter((x) => (x.bot_name || "open seat") === name).length > 1;
  return shared ? `${name} (seat ${s})` : name;
}
function seatLabel(s) { const n = seatName(s); return n.endsWith(`(seat ${s})`) ? n : `${n} (seat ${s})`; }
function teamOf(s) { return s % 2; }
function teamMembers(t) {
  const n = model.players || (ctx.view && ctx.view.players) || 0;
  const out = [];
  for (let s = t; s < n; s += 2) out.push(seatName(s));
  return out.join(" & ");
}
// The live region: each message is added as its own line (a polite live region reads
// additions in order), so a batch of events is a queue of messages, none overwritten.
function announce(text) {
  const region = $("announce");
  const line = document.createElement("p");
  line.textContent = text;
  region.append(line);
  while (region.childElementCount > 20) region.firstElementChild.remove();
}
function spoken(ev) {
  const d = ev.data;
  switch (ev.type) {
    case "card_played": return `${seatName(d.seat)} plays ${cardName(d.card)}`;
    case "trick_won": return `${seatName(d.winner)} wins the trick`;
    case "score": return d.item === "kick" ? null : itemText(d);
    case "stand": case "beg": case "give_one": case "run_pack": case "trump":
      return logText(model.log[model.log.length - 1]);
    case "kick": return `Kick: ${cardName(d.card)}${d.points ? `, ${TEAM_NAMES[d.team]} +${d.points}` : ""}`;
    case "game_over": return logText(model.log[model.log.length - 1]);
    default: return null;
  }
}

function showError(msg) {
  const box = $("error");
  if (!msg) { box.hidden = true; box.textContent = ""; return; }
  box.hidden = false;
  box.textContent = msg;
}

function problemText(e) {
  if (e instanceof ApiError) {
    const p = e.problem || {};
    const rule = p.rule ? `${p.rule}: ` : "";
    const detail = p.detail || p.title || `HTTP ${e.status}`;
    return `Refused (${e.status}${p.title ? ` ${p.title}` : ""}): ${rule && !detail.startsWith(p.rule) ? rule : ""}${detail}`;
  }
  return String(e && e.message ? e.message : e);
}

function positionOf(seat) {
  const n = model.players || 2;
  const base = ctx.me === null ? 0 : ctx.me;
  return POSITIONS[n][(seat - base + n) % n];
}

function itemText(it) {
  const who = it.team === null || it.team === undefined ? "nobody" : TEAM_NAMES[it.team];
  let detail = "";
  if (it.card) detail = ` (${cardName(it.card)})`;
  if (it.totals) detail = ` (${it.totals[0]}–${it.totals[1]})`;
  return `${itemName(it.item)}: ${who} ${it.points ? `+${it.points}` : "scores nothing"}${detail}`;
}

function itemEl(it) {
  const li = el("li", {
    class: `item team-${it.team ?? "none"}`,
    dataset: {
      item: it.item, team: String(it.team ?? ""), points: String(it.points),
      card: it.card || "", totals: it.totals ? it.totals.join("-") : "",
    },
  });
  li.append(el("span", { class: "item-name", text: itemName(it.item) }));
  if (it.card) li.append(cardEl(it.card, { extra: "tiny" }));
  if (it.totals) li.append(el("span", { class: "muted small", text: `${it.totals[0]}–${it.totals[1]}` }));
  li.append(el("span", {
    class: "item-pts",
    text: it.team === null || it.team === undefined ? "–" : `${TEAM_NAMES[it.team]} +${it.points}`,
  }));
  return li;
}

// --- rendering -----------------------------------------------------------------------------

function handCards(seat) {
  if (ctx.revealed && ctx.revealed[seat]) return ctx.revealed[seat];
  if (MODE === "play" && seat === ctx.me && ctx.view && ctx.view.hand) return ctx.view.hand;
  return model.hands[seat] || null;
}

function renderSeat(seat) {
  const turn = !model.over && model.turn === seat && ctx.status === "active";
  const box = el("div", {
    class: `seat team-${teamOf(seat)}${turn ? " to-act" : ""}${seat === ctx.me ? " mine" : ""}`,
    dataset: { seat: String(seat) },
    "aria-label": `${seatLabel(seat)}, ${TEAM_NAMES[teamOf(seat)]}`,
    role: "group",
  });
  const head = el("div", { class: "seat-head" },
    el("span", { class: "seat-name", text: seatName(seat) }),
    el("span", { class: "seat-meta muted", text: `seat ${seat} · ${TEAM_NAMES[teamOf(seat)]}` }));
  if (model.dealer === seat) head.append(el("span", { class: "chip dealer", title: "Dealer", text: "Dealer", dataset: { role: "dealer" } }));
  if (model.beggar === seat) {
    const said = { stood: "Stood", begged: "Begged", gave_one: "Begged", ran_pack: "Begged" }[model.beg];
    head.append(el("span", { class: `chip beggar${said ? " decided" : ""}`, title: said ? `The beggar ${said.toLowerCase()}` : "Beggar (stands or begs, then leads)", text: said || "Beggar", dataset: { role: "beggar", decision: model.beg === "stood" ? "stand" : said ? "beg" : "" } }));
  }
  if (model.dealer === seat && (model.beg === "gave_one" || model.beg === "ran_pack")) {
    head.append(el("span", { class: "chip decided", text: model.beg === "gave_one" ? "Gave one" : "Ran the pack", dataset: { role: "decision", decision: model.beg === "gave_one" ? "give_one" : "run_pack" } }));
  }
  if (turn) head.append(el("span", { class: "chip turn", text: "to act", dataset: { role: "turn" } }));
  box.append(head);

  const cards = handCards(seat);
  const legal = MODE === "play" && seat === ctx.me && ctx.view && ctx.view.your_turn && !ctx.busy
    ? new Set(ctx.view.legal_actions) : null;
  let hand;
  if (cards) {
    hand = el("div", { class: "card-row hand", role: "group", tabindex: seat === ctx.me ? "-1" : null, dataset: { role: "hand", seat: String(seat) }, "aria-label": seat === ctx.me ? "Your hand" : `${seatName(seat)}'s hand` });
    for (const c of sortCards(cards, model.trump)) {
      if (MODE === "play" && seat === ctx.me) {
        hand.append(cardEl(c, { onPlay: act, legal: !!(legal && legal.has(c)) }));
      } else {
        hand.append(cardEl(c));
      }
    }
    if (!cards.length) hand.append(el("span", { class: "muted small", text: "no cards" }));
  } else {
    hand = hiddenHand(model.sizes[seat] || 0);
    hand.dataset.role = "hand";
    hand.dataset.seat = String(seat);
  }
  box.append(hand);
  if (ctx.dealt && ctx.dealt[seat] && model.over) {
    const dealt = el("div", { class: "card-row small-cards dealt", dataset: { role: "dealt", seat: String(seat) }, "aria-label": `${seatName(seat)} was dealt` },
      el("span", { class: "label", text: "dealt this hand" }));
    for (const c of sortCards(ctx.dealt[seat], model.trump)) dealt.append(cardEl(c));
    box.append(dealt);
  }

  if (MODE === "play" && seat === ctx.me && ctx.view && ctx.view.your_turn) {
    const decisions = ctx.view.legal_actions.filter((a) => DECISION_LABEL[a]);
    if (decisions.length) {
      const bar = el("div", { class: "decisions", role: "group", "aria-label": "Your decision" });
      for (const d of decisions) {
        bar.append(el("button", { type: "button", class: "decision", disabled: ctx.busy, dataset: { action: d }, onclick: () => act(d), text: DECISION_LABEL[d] }));
      }
      box.append(bar);
    }
  }
  return box;
}

// Seats are built afresh on every change, but a seat whose markup has not changed keeps its
// nodes: a click whose press and release straddle a redraw would otherwise reach neither the
// old button nor the new one, and the person's move would be lost without a word.
function place(slot, node) {
  const old = slot.childElementCount === 1 ? slot.firstElementChild : null;
  if (node && old && old.outerHTML === node.outerHTML) return;
  slot.replaceChildren(...(node ? [node] : []));
}

const shownCards = new Set(); // trick cards already drawn: only new ones drop in

function renderCenter() {
  const kicks = $("kicks");
  kicks.replaceChildren(...model.kicks.map((k) => {
    const wrap = el("div", { class: "kick", dataset: { kick: k.card, points: String(k.points || 0) } }, cardEl(k.card));
    if (k.points) wrap.append(el("span", { class: `pts team-${k.team}`, text: `+${k.points} ${TEAM_NAMES[k.team]}` }));
    return wrap;
  }));
  kicks.classList.toggle("small-cards", model.kicks.length > 2);
  const trump = $("trump");
  trump.replaceChildren(model.trump ? suitBadge(model.trump) : el("span", { class: "muted", text: "–" }));
  if (model.trump) trump.append(el("span", { class: "trump-name", text: suitName(model.trump) }));

  const trick = $("trick");
  const cells = (POSITIONS[model.players] || POSITIONS[2]).map((p) => el("div", { class: `trick-cell at-${p}` }));
  for (const pc of model.trick.cards) {
    const p = positionOf(pc.seat);
    const cell = cells.find((c) => c.classList.contains(`at-${p}`));
    const key = `${model.hand}.${model.deal}.${pc.seat}.${pc.card}`;
    const card = cardEl(pc.card, { extra: shownCards.has(key) ? "played" : "played fresh" });
    card.setAttribute("aria-label", `${seatName(pc.seat)}: ${cardName(pc.card)}`);
    cell.append(card);
    shownCards.add(key);
    cell.dataset.seat = String(pc.seat);
  }
  trick.replaceChildren(...cells);
  trick.dataset.count = String(model.trick.cards.length);
  trick.setAttribute("aria-label", model.trick.cards.length
    ? `Current trick: ${model.trick.cards.map((c) => `${seatName(c.seat)} ${cardName(c.card)}`).join(", ")}`
    : "Current trick: empty");

  const last = $("last-trick");
  if (model.lastTrick) {
    last.replaceChildren(...model.lastTrick.cards.map((pc) =>
      el("figure", { class: "played-by", dataset: { seat: String(pc.seat) } },
        cardEl(pc.card, { extra: pc.seat === model.lastTrick.winner ? "winner" : "" }),
        el("figcaption", { text: seatName(pc.seat) }))));
    last.append(el("span", { class: "small muted", text: `won by ${seatName(model.lastTrick.winner)}` }));
  } else {
    last.replaceChildren(el("span", { class: "muted small", text: "–" }));
  }
}

function renderScore() {
  $("target").textContent = `to ${model.target}`;
  const rows = [0, 1].map((t) => {
    const pct = Math.min(100, (100 * model.scores[t]) / model.target);
    const bar = el("div", { class: "bar" }, el("div", { class: `fill team-${t}` }));
    bar.firstChild.style.width = `${pct}%`;
    return el("div", { class: `team-score team-${t}${model.winner === t ? " won" : ""}`, dataset: { team: String(t) } },
      el("div", { class: "team-line" },
        el("span", { class: "team-name", text: TEAM_NAMES[t] }),
        el("span", { class: "team-members muted small", text: teamMembers(t) }),
        el("span", { class: "team-points", dataset: { role: "score" }, text: String(model.scores[t]) })),
      bar,
      el("div", { class: "small muted", text: `tricks this hand: ${model.tricksWon[t]}` }));
  });
  $("scoreboard").replaceChildren(...rows);
  $("hand-no").textContent = model.hand ? `(hand ${model.hand})` : "";
  fill($("hand-items"), model.items.map(itemEl));
  fill($("last-items"), model.lastItems.map(itemEl));
}

function logText(x) {
  switch (x.kind) {
    case "started": return `Game starts; ${seatName(x.dealer)} deals first`;
    case "deal": return `Hand ${x.hand}: ${seatName(x.dealer)} deals`;
    case "redeal_deal": return `Hand ${x.hand}: redealt by ${seatName(x.dealer)}`;
    case "run_deal": return "Three more cards each";
    case "kick": return `Kick: ${cardName(x.card)}${x.points ? ` (+${x.points} ${TEAM_NAMES[x.team]})` : ""}`;
    case "stand": return `${seatName(x.seat)} stands`;
    case "beg": return `${seatName(x.seat)} begs`;
    case "give_one": return `${seatName(x.seat)} gives one`;
    case "run_pack": return `${seatName(x.seat)} runs the pack`;
    case "redeal": return "The pack ran out: redeal";
    case "trump": return `Trump: ${suitName(x.suit)}`;
    case "card": return `${seatName(x.seat)} plays ${cardName(x.card)}`;
    case "trick": return `${seatName(x.winner)} wins the trick`;
    case "score": return itemText(x);
    case "hand_over": return `Hand ${x.hand} over: ${x.scores[0]}–${x.scores[1]}`;
    case "game_over": return `${TEAM_NAMES[x.winner]} (${teamMembers(x.winner)}) wins ${x.scores[0]}–${x.scores[1]}`;
    default: return x.kind;
  }
}

function renderLog() {
  const items = model.log.filter((x) => !(x.kind === "score" && x.item === "kick")).slice(-40).reverse().map((x) => el("li", { class: `log-${x.kind}`, text: logText(x) }));
  $("log").replaceChildren(...items);
}

function renderSheet() {
  if (!model.sheet.length) { $("sheet").replaceChildren(el("p", { class: "muted", text: "No hand yet." })); return; }
  const table = el("table", { class: "sheet-table" },
    el("thead", {}, el("tr", {}, el("th", { scope: "col", text: "Hand" }), el("th", { scope: "col", text: "Dealer" }),
      el("th", { scope: "col", text: "Items" }), el("th", { scope: "col", text: "Score" }))));
  const tb = el("tbody");
  for (const row of model.sheet) {
    const items = el("ul", { class: "items inline" }, row.items.map(itemEl));
    tb.append(el("tr", { dataset: { hand: String(row.hand) } },
      el("td", { text: String(row.hand) }), el("td", { text: seatName(row.dealer) }),
      el("td", {}, items), el("td", { class: "num", text: `${row.scores[0]}–${row.scores[1]}` })));
  }
  table.append(tb);
  $("sheet").replaceChildren(table);
}

function renderStatus() {
  const st = $("status");
  let text = ctx.status;
  if (model.over) {
    const mine = MODE === "play" && ctx.me !== null ? teamOf(ctx.me) : null;
    text = mine === null
      ? `finished · ${TEAM_NAMES[model.winner]} wins ${model.scores[0]}–${model.scores[1]}`
      : `finished · you ${mine === model.winner ? "won" : "lost"} ${model.scores[mine]}–${model.scores[1 - mine]}`;
  }
  else if (ctx.status === "active") text = MODE === "replay" ? "replay" : "live";
  else if (ctx.status === "waiting") text = "waiting for players";
  st.textContent = text;
  st.className = `badge status-${model.over ? "finished" : ctx.status}`;
  st.dataset.status = model.over ? "finished" : ctx.status;
  renderTurn();
}

function renderTurn() {
  const info = $("turn-info");
  if (MODE === "replay" || model.over || ctx.status !== "active" || model.turn === null) {
    info.textContent = "";
    return;
  }
  const what = { stand_or_beg: "to stand or beg", give_one_or_run: "to give one or run the pack", play: "to play" }[model.phase] || "to act";
  let clock = "";
  const v = ctx.view;
  if (v && v.time_left !== undefined && v.time_left !== null && v.turn === model.turn) {
    const left = Math.max(0, v.time_left - (performance.now() - ctx.viewAt) / 1000);
    clock = ` · ${left.toFixed(0)} s left`;
  } else {
    const since = ctx.updatedAt ? Date.now() / 1000 - ctx.updatedAt : (performance.now() - ctx.lastEventAt) / 1000;
    clock = ` · thinking ${Math.max(0, Math.floor(since))} s`;
  }
  const you = MODE === "play" && model.turn === ctx.me ? " (you)" : "";
  info.textContent = `${seatName(model.turn)}${you} ${what}${clock}`;
  info.dataset.turn = String(model.turn);
}

// --- the end of the game --------------------------------------------------------------------

const MID_HAND = new Set(["kick", "give_one", "hang_jack"]);

function gameOverWhy() {
  const t = model.winner;
  const last = [...model.items].reverse().find((it) => it.team === t) || model.lastScore;
  const side = ctx.me !== null && MODE === "play" ? (teamOf(ctx.me) === t ? "Your side" : "The other side") : TEAM_NAMES[t];
  if (!last) return `${side} reached ${model.target}.`;
  const when = MID_HAND.has(last.item)
    ? "before the hand was played out: the game ends the moment a side reaches the target"
    : "at the count after the last trick; nothing after it was counted";
  return `${side} reached ${model.target} with ${itemName(last.item)} in hand ${model.hand}, ${when}.`;
}

function houseOpponents() {
  const names = ctx.seats.map((s) => s.bot_name || "");
  const strategy = (n) => (n.match(/^house-([a-z]+)(-partner)?$/) || [])[1];
  const opponent = strategy(names[1] || "");
  if (!opponent) return null;
  const out = { players: ctx.seats.length, opponent };
  if (ctx.seats.length === 4) out.partner = strategy(names[2] || "") || opponent;
  return out;
}

function renderGameOver() {
  const box = $("game-over");
  if (!model.over || model.winner === null || MODE === "replay") { box.hidden = true; return; }
  const t = model.winner;
  const mine = MODE === "play" && ctx.me !== null ? teamOf(ctx.me) : null;
  const other = mine === null ? null : 1 - mine;
  let head;
  let score;
  if (mine !== null) {
    head = mine === t ? "You won" : "You lost";
    score = `You ${model.scores[mine]} – ${model.scores[other]} ${teamMembers(other)}`;
  } else {
    head = `${TEAM_NAMES[t]} (${teamMembers(t)}) won`;
    score = `${TEAM_NAMES[0]} ${model.scores[0]} – ${model.scores[1]} ${TEAM_NAMES[1]}`;
  }
  $("game-over-h").textContent = head;
  box.dataset.result = mine === null ? `team-${t}` : (mine === t ? "won" : "lost");
  $("game-over-score").textContent = score;
  $("game-over-why").textContent = gameOverWhy();
  fill($("game-over-items"), model.items.map(itemEl));
  $("rematch").hidden = !(MODE === "play" && ctx.token && houseOpponents());
  box.hidden = false;
}

async function rematch() {
  const how = houseOpponents();
  if (!how || !ctx.view) return;
  $("rematch").disabled = true;
  try {
    const made = await api("/house/games", {
      method: "POST", token: ctx.token,
      body: { ...how, variants: ctx.view.variants, move_limit: ctx.view.move_limit || 60 },
    });
    addGame(made.game.id, made.seat);
    location.assign(`/games/${made.game.id}/play`);
  } catch (e) {
    showError(problemText(e));
    $("rematch").disabled = false;
  }
}
$("rematch").addEventListener("click", rematch);

// Seats are redrawn on every change: keep the keyboard focus in the person's hand (on the
// same card when it is still there) instead of letting it fall back to the page body.
function focusInHand() {
  const a = document.activeElement;
  if (!a || !a.closest || !a.closest("#felt .seat.mine")) return null;
  return { card: a.dataset.card || null, action: a.dataset.action || null };
}
function restoreFocus(was) {
  if (!was && !ctx.focusHand) return;
  ctx.focusHand = false;
  const mine = document.querySelector("#felt .seat.mine");
  if (!mine) return;
  const target = (was && was.card && mine.querySelector(`button[data-card="${was.card}"]:not([disabled])`))
    || (was && was.action && mine.querySelector(`button[data-action="${was.action}"]:not([disabled])`))
    || mine.querySelector(".decisions button:not([disabled]), button.card:not([disabled])")
    || mine.querySelector("[data-role=hand]");
  if (target) target.focus({ preventScroll: true });
}

function render() {
  const focused = focusInHand();
  const n = model.players || (ctx.view && ctx.view.players) || 2;
  const boxes = {};
  if (model.players) for (let s = 0; s < n; s++) boxes[positionOf(s)] = renderSeat(s);
  for (const p of ["bottom", "right", "top", "left"]) place($(`pos-${p}`), boxes[p]);
  $("felt").dataset.players = String(n);
  if (model.players) renderCenter();
  renderScore();
  renderLog();
  renderSheet();
  renderStatus();
  renderGameOver();
  restoreFocus(focused);
  // State for scripts and tests: what the page shows, in one place.
  body.dataset.status = model.over ? "finished" : ctx.status;
  if (ctx.view) body.dataset.version = String(ctx.view.version);
  body.dataset.yourTurn = String(!!(MODE === "play" && ctx.view && ctx.view.your_turn && !ctx.busy));
  body.dataset.busy = String(ctx.busy);
}

let renderQueued = false;
function scheduleRender() {
  if (renderQueued) return;
  renderQueued = true;
  requestAnimationFrame(() => { renderQueued = false; render(); });
}

// A batch's score items pop up together, at once, in their own row of the table (never
// over a seat); a new deal drops whatever is still shown of the hand before.
let toastTimer = null;
function toast(text, team, hand) {
  const box = $("toast");
  box.textContent = text;
  box.className = `toast show team-${team ?? "none"}`;
  box.dataset.hand = String(hand);
  clearTimeout(toastTimer);
  toastTimer = setTimeout(dropToast, 2500);
}
function dropToast() {
  const box = $("toast");
  box.classList.remove("show");
  box.textContent = "";
  delete box.dataset.hand;
}

// --- live: watch and play ------------------------------------------------------------------

let refreshing = false;
let refreshAgain = false;
async function refreshView() {
  if (refreshing) { refreshAgain = true; return; }
  refreshing = true;
  try {
    do {
      refreshAgain = false;
      const q = MODE === "play" && ctx.me !== null ? `?seat=${ctx.me}` : "";
      const v = await api(`/games/${GAME}${q}`, { token: MODE === "play" ? ctx.token : null });
      setView(v);
    } while (refreshAgain);
  } catch (e) {
    showError(problemText(e));
  } finally {
    refreshing = false;
  }
}

function setView(v) {
  if (MODE === "play" && v.your_turn && v.seat === ctx.me && ctx.announcedTurn !== v.version && v.status === "active") {
    ctx.announcedTurn = v.version;
    const what = { stand_or_beg: "stand or beg", give_one_or_run: "give one or run the pack", play: "play a card" }[v.phase] || "act";
    announce(`Your turn: ${what}`);
  }
  if (!ctx.view || v.version !== ctx.view.version || !ctx.updatedAt) ctx.updatedAt = v.updated_at || null;
  ctx.view = v;
  ctx.viewAt = performance.now();
  ctx.seats = v.seats;
  ctx.status = v.status;
  if (v.hands && v.status === "finished") {
    ctx.revealed = v.hands;
    if (!ctx.dealt && MODE !== "replay") revealDealt();
  }
  scheduleRender();
}

// Once the game is over its record is complete: show what every seat held in the last hand.
async function revealDealt() {
  ctx.dealt = [];
  try {
    const rec = await api(`/games/${GAME}/record`);
    const hand = rec.hands[rec.hands.length - 1];
    if (!rec.complete || !hand) return;
    const deal = hand.deals[hand.deals.length - 1];
    ctx.dealt = deal.cards.map((c, s) => [...(c || []), ...deal.runs.flatMap((r) => r[s] || [])]);
    scheduleRender();
  } catch (e) {
    showError(problemText(e));
  }
}

function onEvents(events, live) {
  const scored = [];
  for (const ev of events) {
    applyEvent(model, ev.data);
    if (ev.type === "deal" && ev.data.deal === 0) { scored.length = 0; dropToast(); }
    if (live && ev.type === "score") scored.push(ev.data);
    if (live) {
      const said = spoken(ev);
      if (said) announce(said);
    }
  }
  if (scored.length && !events.some((e) => e.type === "game_over")) {
    const teams = new Set(scored.map((x) => x.team));
    toast(scored.map(itemText).join(" · "), teams.size === 1 ? scored[0].team : null, model.hand);
  }
  ctx.lastEventAt = performance.now();
  if (live) ctx.updatedAt = Date.now() / 1000;
  const over = events.some((e) => e.type === "game_over");
  if (over) {
    ctx.status = "finished";
    if (live) toast(`${TEAM_NAMES[model.winner]} wins ${model.scores[0]}–${model.scores[1]}`, model.winner, model.hand);
  }
  // The view carries what events do not: legal actions, the move clock, final hands.
  if (MODE === "play" || over || (ctx.view && ctx.view.move_limit) || ctx.status === "waiting") refreshView();
  scheduleRender();
}

let stream = null;
function startStream(path, token) {
  // The backlog (the game so far, up to the view just read) is not news: no pop-ups or
  // read-outs for it, however many batches it arrives in.
  const seenPly = ctx.view ? ctx.view.ply : 0;
  const plyOf = (e) => Number(String(e.id || "0").split(".")[0]);
  stream = openEvents(path, {
    token,
    onEvents: (evs) => {
      const old = evs.filter((e) => plyOf(e) <= seenPly);
      const fresh = evs.filter((e) => plyOf(e) > seenPly);
      if (old.length) onEvents(old, false);
      if (fresh.length) onEvents(fresh, true);
    },
    onState: (state, err) => {
      body.dataset.stream = state;
      if (state === "error" && err) showError(problemText(err));
    },
  });
}

async function watch() {
  const v = await api(`/games/${GAME}`);
  setView(v);
  startStream(`/games/${GAME}/events`, null);
  // Joins are not events: until every seat is taken, look again now and then.
  const poll = setInterval(() => {
    if (ctx.status === "waiting") refreshView(); else clearInterval(poll);
  }, 2000);
}

async function act(action) {
  if (ctx.busy || !ctx.view) return;
  ctx.busy = true;
  scheduleRender();
  try {
    const v = await api(`/games/${GAME}/actions`, {
      method: "POST", token: ctx.token,
      body: { action, version: ctx.view.version, seat: ctx.me },
      headers: { "Idempotency-Key": crypto.randomUUID() },
    });
    showError(null);
    setView(v);
  } catch (e) {
    showError(problemText(e));
    refreshView();
  } finally {
    ctx.focusHand = true;
    ctx.busy = false;
    scheduleRender();
  }
}

function readToken() {
  const m = location.hash.match(/token=([^&]+)/);
  if (m) {
    keepToken(decodeURIComponent(m[1]));
    history.replaceState(null, "", location.pathname + location.search);
  }
  return currentToken();
}

// A token just issued by the lobby is shown once, in a field that can be copied, with a
// link that takes this seat back from any browser.
function showFreshToken(player) {
  const box = $("new-token");
  if (!player || !box) return;
  const link = `${location.origin}/games/${GAME}/play#token=${encodeURIComponent(player.token)}`;
  $("new-token-value").value = player.token;
  $("resume-link").value = link;
  $("new-token-who").textContent = player.name;
  $("new-token-kept").textContent = remembered()
    ? "This browser remembers it (local storage); the lobby lists your games."
    : "This tab keeps it until you close it. Copy it, or the resume link, to come back later.";
  box.hidden = false;
  for (const [button, field] of [["copy-token", "new-token-value"], ["copy-link", "resume-link"]]) {
    $(button).addEventListener("click", async () => {
      const input = $(field);
      input.select();
      try { await navigator.clipboard.writeText(input.value); } catch { document.execCommand("copy"); }
      announce("Copied");
      $(button).textContent = "Copied";
    });
  }
}

async function play() {
  const form = $("token-form");
  const input = $("token");
  const saved = readToken();
  showFreshToken(takeFresh());
  form.addEventListener("submit", (e) => { e.preventDefault(); startPlaying(input.value.trim()); });
  $("new-bot").addEventListener("click", async () => {
    const name = prompt("A name for your player", "human");
    if (!name) return;
    try {
      const bot = await api("/bots", { method: "POST", body: { name, person: true } });
      showError(null);
      showFreshToken(bot);
      startPlaying(bot.token);
    } catch (e) { showError(problemText(e)); }
  });
  // Before a seat is taken, the table is drawn live as a spectator sees it.
  await watch();
  if (saved) startPlaying(saved);
}

async function startPlaying(token) {
  if (!token) return;
  showError(null);
  let me;
  try {
    me = await api("/bots/me", { token });
  } catch (e) { showError(problemText(e)); return; }
  ctx.token = token;
  keepToken(token);
  const v = await api(`/games/${GAME}`);
  setView(v);
  const held = v.seats.filter((s) => s.bot_id === me.id).map((s) => s.seat);
  const choice = $("seat-choice");
  choice.replaceChildren();
  const wanted = Number(new URLSearchParams(location.search).get("seat"));
  if (held.length) {
    sit(held.includes(wanted) ? wanted : held[0], me);
    if (held.length > 1) {
      choice.append(el("span", { class: "small", text: "Your bot holds several seats: " }),
        ...held.map((s) => el("a", { href: `?seat=${s}`, text: `seat ${s}` })));
    }
    return;
  }
  const open = v.seats.filter((s) => !s.bot_id).map((s) => s.seat);
  if (!open.length || v.status !== "waiting") {
    showError(`${me.name} holds no seat in this game, and no seat is open.`);
    return;
  }
  choice.append(el("span", { text: `Sit ${me.name} down: ` }),
    ...open.map((s) => el("button", {
      type: "button", class: "take-seat", dataset: { seat: String(s) }, text: `Take seat ${s}`,
      onclick: async () => {
        try {
          await api(`/games/${GAME}/seats/${s}`, { method: "POST", token, body: {} });
          choice.replaceChildren();
          sit(s, me);
        } catch (e) { showError(problemText(e)); }
      },
    })));
}

function sit(seat, me) {
  ctx.me = seat;
  addGame(GAME, seat);
  body.dataset.seat = String(seat);
  $("token-form").classList.add("seated");
  $("token-help").textContent = `Playing seat ${seat} as ${me.name}.`;
  ctx.seated = true;
  if (stream) stream.close();
  model = newModel();
  startStream(`/games/${GAME}/events?seat=${seat}`, ctx.token);
  refreshView();
  const poll = setInterval(() => {
    if (ctx.status === "waiting") refreshView(); else clearInterval(poll);
  }, 2000);
}

// --- replay --------------------------------------------------------------------------------

async function replay() {
  const [v, rec] = await Promise.all([api(`/games/${GAME}`), api(`/games/${GAME}/record`)]);
  ctx.seats = v.seats;
  ctx.view = v;
  if (!rec.complete) {
    ctx.status = v.status;
    showError("This game is still being played: its replay opens when it ends. Watch it live meanwhile.");
    render();
    return;
  }
  ctx.status = "active";
  const steps = stepsFromRecord(rec);
  const acted = steps.filter((s) => s.action !== null).map((s) => s.action);
  if (acted.join() !== rec.actions.join()) {
    showError("The record could not be replayed step by step (an unknown shape).");
  }
  const slider = $("rp-slider");
  slider.max = String(steps.length - 1);
  let k = 0;
  let timer = null;
  const show = (i) => {
    k = Math.max(0, Math.min(steps.length - 1, i));
    model = modelAt(steps, k);
    ctx.status = model.over ? "finished" : "active";
    slider.value = String(k);
    const s = steps[k];
    const pos = $("rp-pos");
    pos.dataset.step = String(k);
    pos.dataset.ply = String(s.ply);
    pos.dataset.complete = String(s.complete);
    pos.dataset.hand = String(model.hand);
    let what = s.label || "Deal";
    if (s.action) {
      const last = [...model.log].reverse().find((x) => ["stand", "beg", "give_one", "run_pack", "card"].includes(x.kind));
      what = last ? logText(last) : s.action;
    }
    pos.textContent = `Step ${k} of ${steps.length - 1} · ${what}`;
    render();
    onPly(s.complete ? s.ply : null); // the decision made next, in the analysis panel
  };
  // the analysis: a decision at ply p is the action of the step of ply p + 1; jumping to
  // it shows the table just before it
  let onPly = () => {};
  onPly = startAnalysis(GAME, ctx.seats, (ply) => {
    stop();
    const i = steps.findIndex((x) => x.action !== null && x.ply === ply + 1);
    if (i > 0) show(i - 1);
  });
  const hands = () => steps.map((s, i) => [i, s]).filter(([, s]) => s.events.some((e) => e.type === "deal" && e.deal === 0)).map(([i]) => i);
  const stop = () => { clearInterval(timer); timer = null; $("rp-play").textContent = "Play"; $("rp-play").setAttribute("aria-label", "Play"); };
  const toggle = () => {
    if (timer) { stop(); return; }
    $("rp-play").textContent = "Pause";
    $("rp-play").setAttribute("aria-label", "Pause");
    timer = setInterval(() => { if (k >= steps.length - 1) stop(); else show(k + 1); }, 600);
  };
  const prevHand = () => show([...hands()].reverse().find((i) => i < k) ?? 0);
  const nextHand = () => show(hands().find((i) => i > k) ?? steps.length - 1);
  $("rp-start").onclick = () => show(0);
  $("rp-end").onclick = () => show(steps.length - 1);
  $("rp-prev").onclick = () => show(k - 1);
  $("rp-next").onclick = () => show(k + 1);
  $("rp-prev-hand").onclick = prevHand;
  $("rp-next-hand").onclick = nextHand;
  $("rp-play").onclick = toggle;
  slider.oninput = () => show(Number(slider.value));
  document.addEventListener("keydown", (e) => {
    if (e.target instanceof HTMLInputElement && e.target.type !== "range") return;
    const keys = {
      ArrowRight: () => show(k + 1), ArrowLeft: () => show(k - 1), Home: () => show(0),
      End: () => show(steps.length - 1), PageDown: nextHand, PageUp: prevHand, " ": toggle,
    };
    if (keys[e.key]) { e.preventDefault(); if (e.key !== " ") stop(); keys[e.key](); }
  });
  body.dataset.steps = String(steps.length);
  show(0);
}

// --- start ---------------------------------------------------------------------------------

setInterval(renderTurn, 1000);
const start = { watch, play, replay }[MODE];
start().catch((e) => {
  const unknown = e instanceof ApiError && e.status === 404;
  showError(unknown ? "No such game." : problemText(e));
  const badge = $("status");
  badge.textContent = unknown ? "not found" : "could not load";
  badge.dataset.status = unknown ? "not-found" : "error";
  badge.className = "badge status-error";
  body.dataset.failed = "true";
});
window.__arena = { get model() { return model; }, ctx, render };
