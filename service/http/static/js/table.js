// The table page: watch a game live, replay a finished one, or play a seat.
// Everything comes from the public API: the view, the event stream, the record.

import { api, ApiError, openEvents, el, fill } from "./api.js";
import { cardEl, cardName, hiddenHand, sortCards, suitBadge, suitName } from "./cards.js";
import { applyEvent, itemName, newModel } from "./model.js";
import { startReplay } from "./replay.js";
import { addGame } from "./player.js";
import { startPlay } from "./play.js";

const body = document.body;
const GAME = body.dataset.gameId;
const MODE = body.dataset.mode;
const $ = (id) => document.getElementById(id);
const TEAM_NAMES = ["Team A", "Team B"];
const DECISION_LABEL = {
  stand: "Stand", beg: "Beg", give_one: "Give one", run_pack: "Run the pack",
};
const POSITIONS = { 2: ["bottom", "top"], 4: ["bottom", "right", "top", "left"] };
const WARN_S = 10; // the clock turns red, and says so, this many seconds before it plays
const MOVES = new Set(["stand", "beg", "give_one", "run_pack", "card"]);

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
  clockPlies: new Set(), // moves the clock played (the view's or the record's timeouts)
  warned: null,      // "version:seconds" of the last clock warning read out
  overShown: false,  // the end-of-game box has been shown (and focused) once
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
// Who a team is, in a few words: "guest & house-random-partner", or, one bot in both
// seats, "heuristic-2 (seats 1 and 3)".
function teamMembers(t) {
  const n = model.players || (ctx.view && ctx.view.players) || 0;
  const seats = [];
  for (let s = t; s < n; s += 2) seats.push(s);
  const names = seats.map((s) => (ctx.seats[s] && ctx.seats[s].bot_name) || "open seat");
  if (seats.length > 1 && names.every((x) => x === names[0])) return `${names[0]} (seats ${seats.join(" and ")})`;
  return seats.map(seatName).join(" & ");
}
// The live region: each message is added as its own line (a polite live region reads
// additions in order), so a batch of events is a queue of messages, none overwritten.
function announce(text, region = "announce") {
  const box = $(region);
  const line = document.createElement("p");
  line.textContent = text;
  box.append(line);
  while (box.childElementCount > 20) box.firstElementChild.remove();
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
  let detail = "";
  if (it.card) detail = ` (${cardName(it.card)})`;
  if (it.team === null || it.team === undefined) {
    // a tied Game (R20): nobody scores it
    const tie = it.totals ? ` (tied ${it.totals[0]}–${it.totals[1]})` : "";
    return `${itemName(it.item)}: no one scores${tie}`;
  }
  if (it.totals) detail = ` (${it.totals[0]}–${it.totals[1]})`;
  return `${itemName(it.item)}: ${TEAM_NAMES[it.team]} ${it.points ? `+${it.points}` : "scores nothing"}${detail}`;
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
    text: it.team === null || it.team === undefined ? "tie: no one" : `${TEAM_NAMES[it.team]} +${it.points}`,
  }));
  return li;
}

// Seconds left for the seat in turn, from the view's clock, or null without a limit.
function secondsLeft() {
  const v = ctx.view;
  if (!v || v.time_left === undefined || v.time_left === null || v.turn !== model.turn) return null;
  return Math.max(0, v.time_left - (performance.now() - ctx.viewAt) / 1000);
}

// --- rendering -----------------------------------------------------------------------------

function handCards(seat) {
  if (ctx.revealed && ctx.revealed[seat]) return ctx.revealed[seat];
  if (MODE === "play" && seat === ctx.me && ctx.view && ctx.view.hand) return ctx.view.hand;
  return model.hands[seat] || null;
}

function turnChip(seat) {
  const mine = MODE === "play" && seat === ctx.me;
  const left = secondsLeft();
  const warn = left !== null && left <= WARN_S;
  const text = `${mine ? "your turn" : "to act"}${left !== null ? ` · ${left.toFixed(0)} s` : ""}`;
  return el("span", { class: `chip turn${warn ? " warn" : ""}`, text, dataset: { role: "turn" } });
}

function renderSeat(seat) {
  const turn = !model.over && model.turn === seat && ctx.status === "active";
  const mine = seat === ctx.me;
  const box = el("div", {
    class: `seat team-${teamOf(seat)}${turn ? " to-act" : ""}${mine ? " mine" : ""}`,
    dataset: { seat: String(seat) },
    "aria-label": `${seatLabel(seat)}, ${TEAM_NAMES[teamOf(seat)]}`,
    role: "group",
  });
  const head = el("div", { class: "seat-head" },
    el("span", { class: "seat-name", text: MODE === "play" && mine ? `${seatName(seat)} (you)` : seatName(seat) }),
    el("span", { class: "seat-meta muted", text: `seat ${seat} · ${TEAM_NAMES[teamOf(seat)]}` }));
  if (model.dealer === seat) head.append(el("span", { class: "chip dealer", title: "Dealer", text: "Dealer", dataset: { role: "dealer" } }));
  if (model.beggar === seat) {
    const said = { stood: "Stood", begged: "Begged", gave_one: "Begged", ran_pack: "Begged" }[model.beg];
    head.append(el("span", { class: `chip beggar${said ? " decided" : ""}`, title: said ? `The beggar ${said.toLowerCase()}` : "Beggar (stands or begs, then leads)", text: said || "Beggar", dataset: { role: "beggar", decision: model.beg === "stood" ? "stand" : said ? "beg" : "" } }));
  }
  if (model.dealer === seat && (model.beg === "gave_one" || model.beg === "ran_pack")) {
    head.append(el("span", { class: "chip decided", text: model.beg === "gave_one" ? "Gave one" : "Ran the pack", dataset: { role: "decision", decision: model.beg === "gave_one" ? "give_one" : "run_pack" } }));
  }
  if (turn) head.append(turnChip(seat));
  box.append(head);

  const cards = handCards(seat);
  const playing = MODE === "play" && mine;
  const legal = playing && ctx.view && ctx.view.your_turn && !ctx.busy
    ? new Set(ctx.view.legal_actions) : null;
  let hand;
  if (cards) {
    hand = el("div", { class: `card-row hand${playing ? " my-hand" : ""}`, role: "group", tabindex: mine ? "-1" : null, dataset: { role: "hand", seat: String(seat) }, "aria-label": mine ? "Your hand" : `${seatName(seat)}'s hand` });
    for (const c of sortCards(cards, model.trump)) {
      hand.append(playing ? cardEl(c, { onPlay: act, legal: !!(legal && legal.has(c)) }) : cardEl(c));
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

  if (playing && ctx.view && ctx.view.your_turn) {
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
    last.append(el("span", { class: "small muted won-by", text: `won by ${seatName(model.lastTrick.winner)}` }));
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

const BY_CLOCK = " (time ran out: the clock played it)";

function logText(x) {
  const clock = MOVES.has(x.kind) && x.ply !== undefined && ctx.clockPlies.has(x.ply) ? BY_CLOCK : "";
  switch (x.kind) {
    case "started": return `Game starts; ${seatName(x.dealer)} deals first`;
    case "deal": return `Hand ${x.hand}: ${seatName(x.dealer)} deals`;
    case "redeal_deal": return `Hand ${x.hand}: redealt by ${seatName(x.dealer)}`;
    case "run_deal": return "Three more cards each";
    case "kick": return `Kick: ${cardName(x.card)}${x.points ? ` (+${x.points} ${TEAM_NAMES[x.team]})` : ""}`;
    case "stand": return `${seatName(x.seat)} stands${clock}`;
    case "beg": return `${seatName(x.seat)} begs${clock}`;
    case "give_one": return `${seatName(x.seat)} gives one${clock}`;
    case "run_pack": return `${seatName(x.seat)} runs the pack${clock}`;
    case "redeal": return "The pack ran out: redeal";
    case "trump": return `Trump: ${suitName(x.suit)}`;
    case "card": return `${seatName(x.seat)} plays ${cardName(x.card)}${clock}`;
    case "trick": return `${seatName(x.winner)} wins the trick`;
    case "score": return itemText(x);
    case "hand_over": return `Hand ${x.hand} over: ${x.scores[0]}–${x.scores[1]}`;
    case "game_over": return `${TEAM_NAMES[x.winner]} wins ${x.scores[0]}–${x.scores[1]} (${teamMembers(x.winner)})`;
    default: return x.kind;
  }
}

function renderLog() {
  const items = model.log.filter((x) => !(x.kind === "score" && x.item === "kick")).slice(-40).reverse()
    .map((x) => el("li", { class: `log-${x.kind}${MOVES.has(x.kind) && ctx.clockPlies.has(x.ply) ? " log-clock" : ""}`, text: logText(x) }));
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

// Each second: who is to act and the clock; in the last seconds of the person's own turn the
// clock turns red (here and on their seat) and says so, once at each threshold.
function renderTurn() {
  const info = $("turn-info");
  if (MODE === "replay" || model.over || ctx.status !== "active" || model.turn === null) {
    info.textContent = "";
    info.classList.remove("warn");
    return;
  }
  const what = { stand_or_beg: "to stand or beg", give_one_or_run: "to give one or run the pack", play: "to play" }[model.phase] || "to act";
  let clock = "";
  const left = secondsLeft();
  if (left !== null) {
    clock = ` · ${left.toFixed(0)} s left`;
  } else {
    const since = ctx.updatedAt ? Date.now() / 1000 - ctx.updatedAt : (performance.now() - ctx.lastEventAt) / 1000;
    clock = ` · thinking ${Math.max(0, Math.floor(since))} s`;
  }
  const you = MODE === "play" && model.turn === ctx.me;
  info.textContent = `${seatName(model.turn)}${you ? " (you)" : ""} ${what}${clock}`;
  info.dataset.turn = String(model.turn);
  const warn = left !== null && left <= WARN_S;
  info.classList.toggle("warn", warn);
  const chip = document.querySelector(`#felt .seat[data-seat="${model.turn}"] [data-role=turn]`);
  if (chip) {
    chip.textContent = `${you ? "your turn" : "to act"}${left !== null ? ` · ${left.toFixed(0)} s` : ""}`;
    chip.classList.toggle("warn", warn);
  }
  if (you && warn && ctx.view && ctx.view.your_turn) {
    const mark = left <= 5 ? 5 : WARN_S;
    const key = `${ctx.view.version}:${mark}`;
    if (ctx.warned !== key && !(mark === WARN_S && ctx.warned === `${ctx.view.version}:5`)) {
      ctx.warned = key;
      announce(mark === 5 ? "5 seconds left: then the clock plays for you"
        : `${WARN_S} seconds left to ${what.replace(/^to /, "")}`, "alert");
    }
  }
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

// The result where the person is looking: above the table, scrolled into view and focused
// the moment the game ends (a screen reader reads it from its heading), with what next.
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
    head = `${TEAM_NAMES[t]} won: ${teamMembers(t)}`;
    score = `${TEAM_NAMES[0]} ${model.scores[0]} – ${model.scores[1]} ${TEAM_NAMES[1]}`;
  }
  $("game-over-h").textContent = head;
  box.dataset.result = mine === null ? `team-${t}` : (mine === t ? "won" : "lost");
  $("game-over-score").textContent = score;
  $("game-over-why").textContent = gameOverWhy();
  fill($("game-over-items"), model.items.map(itemEl));
  $("rematch").hidden = !(MODE === "play" && ctx.token && houseOpponents());
  box.hidden = false;
  if (!ctx.overShown && ctx.status === "finished") {
    ctx.overShown = true;
    // only a game that ended while watched takes the focus; one opened finished keeps it
    if (ctx.sawLive) {
      box.scrollIntoView({ block: "start" });
      box.focus({ preventScroll: true });
    }
  }
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
  if (model.over) return; // the end-of-game box takes it
  const mine = document.querySelector("#felt .seat.mine");
  if (!mine) return;
  const target = (was && was.card && mine.querySelector(`button[data-card="${was.card}"]:not([disabled])`))
    || (was && was.action && mine.querySelector(`button[data-action="${was.action}"]:not([disabled])`))
    || mine.querySelector(".decisions button:not([disabled]), button.card:not([disabled])")
    || mine.querySelector("[data-role=hand]");
  if (target) target.focus({ preventScroll: true });
}

// The person's hand and decision are in view from their first turn: on a small screen the
// page scrolls (once) so that their seat's bottom edge is on screen.
function keepHandInView() {
  if (MODE !== "play" || ctx.handShown || !ctx.view || !ctx.view.your_turn) return;
  const mine = document.querySelector("#felt .seat.mine");
  if (!mine) return;
  ctx.handShown = true;
  const r = mine.getBoundingClientRect();
  if (r.bottom > window.innerHeight || r.top < 0) mine.scrollIntoView({ block: "end" });
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
  keepHandInView();
  // State for scripts and tests: what the page shows, in one place.
  body.dataset.status = model.over ? "finished" : ctx.status;
  if (ctx.view) body.dataset.version = String(ctx.view.version);
  // A turn is "yours" once the table that shows it is drawn: the view can come before the
  // event stream's first batch, which is what draws the seats.
  body.dataset.yourTurn = String(!!(MODE === "play" && model.players && ctx.view && ctx.view.your_turn && !ctx.busy));
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
  noteClock(v.timeouts || []);
  ctx.view = v;
  ctx.viewAt = performance.now();
  ctx.seats = v.seats;
  ctx.status = v.status;
  if (v.status === "active") ctx.sawLive = true;
  if (v.hands && v.status === "finished") {
    ctx.revealed = v.hands;
    if (!ctx.dealt && MODE !== "replay") revealDealt();
  }
  scheduleRender();
}

// The moves the clock played: marked in the log; one played for the person is said aloud.
function noteClock(timeouts) {
  const fresh = timeouts.filter((t) => !ctx.clockPlies.has(t.ply));
  for (const t of fresh) ctx.clockPlies.add(t.ply);
  if (!ctx.view || MODE !== "play") return; // the first view: that is the backlog, not news
  for (const t of fresh) {
    if (t.seat !== ctx.me) continue;
    const what = DECISION_LABEL[t.action] ? DECISION_LABEL[t.action].toLowerCase() : cardName(t.action);
    announce(`Time ran out: the clock played ${what} for you`, "alert");
    toast(`Time ran out: the clock played ${what} for you`, null, model.hand);
  }
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
    applyEvent(model, ev.data, Number(String(ev.id || "0").split(".")[0]));
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
  if (live) { ctx.updatedAt = Date.now() / 1000; ctx.sawLive = true; }
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

// A game of a duplicate deal still played at another table is nobody's to watch: say so
// plainly, without an empty table, and look again now and then until it opens.
function showHidden(e) {
  $("hidden-game-why").textContent = "This is a tournament game of a duplicate deal: the same " +
    "cards are being played at another table of the tournament, so that the bots can be " +
    "compared. Until every table of the deal has finished, only the bots at this table see " +
    "anything of it: a spectator could otherwise tell them the cards.";
  $("hidden-game-when").textContent = "It opens here, with every card, once every table of " +
    "the deal has finished; this page looks again every 10 seconds. Meanwhile the " +
    "tournament's page lists the games of deals already played everywhere.";
  $("hidden-game").hidden = false;
  for (const part of document.querySelectorAll(".table-layout, .sheet")) part.hidden = true;
  const badge = $("status");
  badge.textContent = "hidden until the deal is played everywhere";
  badge.className = "badge status-waiting";
  badge.dataset.status = "embargoed";
  body.dataset.embargoed = "true";
  setTimeout(async () => {
    try { await api(`/games/${GAME}`); location.reload(); } catch { showHidden(e); }
  }, 10000);
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

// --- play a seat (play.js): the token, the seat, its own stream ------------------------------

function play() {
  return startPlay({
    GAME, ctx, showError, problemText, announce, watch, setView,
    seated: (seat) => {
      if (stream) stream.close();
      model = newModel();
      startStream(`/games/${GAME}/events?seat=${seat}`, ctx.token);
      refreshView();
      const poll = setInterval(() => {
        if (ctx.status === "waiting") refreshView(); else clearInterval(poll);
      }, 2000);
    },
  });
}

// --- replay (replay.js): the record, step by step, and the review beside it -----------------

function replay() {
  return startReplay({
    GAME, ctx, api, showError, render, logText, seatName, teamMembers,
    setModel: (m) => { model = m; },
  });
}

// --- start ---------------------------------------------------------------------------------

setInterval(renderTurn, 1000);
const start = { watch, play, replay }[MODE];
start().catch((e) => {
  if (e instanceof ApiError && e.status === 403 && e.problem && e.problem.type === "/problems/embargoed") {
    showHidden(e);
    return;
  }
  const unknown = e instanceof ApiError && e.status === 404;
  showError(unknown ? "No such game." : problemText(e));
  const badge = $("status");
  badge.textContent = unknown ? "not found" : "could not load";
  badge.dataset.status = unknown ? "not-found" : "error";
  badge.className = "badge status-error";
  body.dataset.failed = "true";
});
window.__arena = { get model() { return model; }, ctx, render };
