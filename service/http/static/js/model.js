// The table as a pure fold over the game's events: the same events a bot's stream
// carries (redacted for the viewer: another seat's cards arrive as null). Used live (from
// the event stream) and in replays (events rebuilt from the game's record).

export function newModel() {
  return {
    players: 0, teams: [[], []], target: 14,
    hand: 0, deal: 0, dealer: null, beggar: null,
    hands: [], sizes: [], kicks: [], trump: null,
    phase: null, turn: null, beg: null,
    trick: { leader: null, cards: [] }, lastTrick: null, tricksWon: [0, 0],
    items: [], lastItems: [], scores: [0, 0], winner: null, over: false,
    sheet: [], log: [], lastScore: null, ply: 0, handOver: false,
  };
}

const ITEM_NAMES = {
  kick: "Kick", give_one: "Give one", high: "High", low: "Low", jack: "Jack",
  hang_jack: "Hang jack", game: "Game",
};
export function itemName(item) { return ITEM_NAMES[item] || item; }

// Each log line keeps the number of the move (ply) that caused it, when known: a page
// marks the moves the clock played (the view's and the record's ``timeouts``).
function log(m, kind, data) { m.log.push({ kind, ply: m.eventPly, ...data }); }

export function applyEvent(m, e, ply = null) {
  const n = m.players;
  m.eventPly = ply;
  switch (e.type) {
    case "game_started":
      m.players = e.players;
      m.teams = e.teams;
      if (e.variants && e.variants.target) m.target = e.variants.target;
      m.scores = [0, 0];
      log(m, "started", { dealer: e.first_dealer });
      break;
    case "deal": {
      const newHand = e.deal === 0;
      if (newHand) {
        if (m.items.length || m.hand) m.lastItems = m.items;
        m.items = [];
        m.sheet.push({ hand: e.hand, dealer: e.dealer, items: [], scores: [...m.scores] });
        m.tricksWon = [0, 0];
        m.lastTrick = null;
      }
      m.hand = e.hand; m.deal = e.deal; m.dealer = e.dealer;
      m.beggar = (e.dealer + 1) % m.players;
      m.hands = e.cards.map((c) => (c ? [...c] : null));
      m.sizes = e.sizes ? [...e.sizes] : e.cards.map((c) => (c ? c.length : 0));
      m.kicks = []; m.trump = null; m.beg = null;
      m.trick = { leader: m.beggar, cards: [] };
      m.phase = "stand_or_beg"; m.turn = m.beggar; m.handOver = false;
      log(m, newHand ? "deal" : "redeal_deal", { hand: e.hand, dealer: e.dealer });
      break;
    }
    case "run_deal":
      e.cards.forEach((c, s) => {
        if (c && m.hands[s]) m.hands[s].push(...c);
        m.sizes[s] += e.sizes ? e.sizes[s] : (c ? c.length : 0);
      });
      log(m, "run_deal", {});
      break;
    case "kick":
      m.kicks.push({ card: e.card, points: e.points, team: e.team });
      log(m, "kick", { card: e.card, points: e.points, team: e.team });
      break;
    case "stand":
      m.beg = "stood";
      log(m, "stand", { seat: e.seat });
      break;
    case "beg":
      m.beg = "begged"; m.phase = "give_one_or_run"; m.turn = m.dealer;
      log(m, "beg", { seat: e.seat });
      break;
    case "give_one":
      m.beg = "gave_one";
      log(m, "give_one", { seat: e.seat });
      break;
    case "run_pack":
      m.beg = "ran_pack";
      log(m, "run_pack", { seat: e.seat });
      break;
    case "redeal":
      log(m, "redeal", { hand: e.hand });
      break;
    case "trump":
      m.trump = e.suit; m.phase = "play"; m.turn = m.beggar;
      m.trick = { leader: m.beggar, cards: [] };
      log(m, "trump", { suit: e.suit });
      break;
    case "card_played": {
      const h = m.hands[e.seat];
      if (h) {
        const i = h.indexOf(e.card);
        if (i >= 0) h.splice(i, 1);
      }
      m.sizes[e.seat] = Math.max(0, m.sizes[e.seat] - 1);
      if (m.trick.cards.length === 0) m.trick.leader = e.seat;
      m.trick.cards.push({ seat: e.seat, card: e.card });
      m.turn = (e.seat + 1) % n;
      log(m, "card", { seat: e.seat, card: e.card });
      break;
    }
    case "trick_won":
      m.lastTrick = { leader: e.leader, cards: m.trick.cards, winner: e.winner };
      m.tricksWon[e.winner % 2] += 1;
      m.trick = { leader: e.winner, cards: [] };
      m.turn = e.winner;
      log(m, "trick", { winner: e.winner });
      break;
    case "score": {
      const item = { item: e.item, team: e.team, points: e.points };
      if (e.card) item.card = e.card;
      if (e.totals) item.totals = e.totals;
      m.items.push(item);
      if (m.sheet.length) {
        const row = m.sheet[m.sheet.length - 1];
        row.items.push(item);
        row.scores = [...e.scores];
      }
      m.scores = [...e.scores];
      m.lastScore = item;
      log(m, "score", item);
      break;
    }
    case "hand_over":
      m.scores = [...e.scores];
      m.handOver = true;
      log(m, "hand_over", { hand: e.hand, scores: e.scores });
      break;
    case "game_over":
      m.over = true; m.winner = e.winner; m.scores = [...e.scores];
      m.turn = null; m.phase = "over";
      log(m, "game_over", { winner: e.winner, scores: e.scores });
      break;
    default:
      break;
  }
  return m;
}

// --- replay: the record back into steps of events ---------------------------------------

// Steps from a finished game's record: step 0 is the first deal; then one step per
// action (stand, beg, give_one, run_pack or a card), except that the action ending a
// hand is split in two, so the hand's score items can be seen before the next deal.
// Each step: {events, action, ply, label, complete}; `complete` is false for the
// first half of such a split (the state there is mid-action).
export function stepsFromRecord(rec) {
  const steps = [];
  let cur = { events: [], action: null, ply: 0 };
  const players = rec.players;
  const target = (rec.variants && rec.variants.target) || 14;
  const push = (e) => cur.events.push(e);
  const act = (name) => {
    steps.push(cur);
    cur = { events: [], action: name, ply: cur.ply + 1 };
  };
  let over = false;
  const score = (it) => {
    const e = { type: "score", item: it.item, team: it.team, points: it.points };
    if (it.card) e.card = it.card;
    if (it.totals) e.totals = it.totals;
    e.scores = it.scores;
    push(e);
    if (it.team !== null && it.scores[it.team] >= target) {
      push({ type: "game_over", winner: it.team, scores: it.scores });
      over = true;
    }
  };
  push({
    type: "game_started", players, seed: rec.seed, variants: rec.variants,
    teams: rec.teams, cut: rec.cut, first_dealer: rec.first_dealer,
  });
  for (const hand of rec.hands) {
    if (over) break;
    const items = [...hand.items];
    const decisions = hand.beg.map((b) => (typeof b === "string" ? b : b.decision));
    const beggar = hand.beggar;
    let trumpSet = false;
    for (let d = 0; d < hand.deals.length && !over; d++) {
      const deal = hand.deals[d];
      if (d > 0) push({ type: "redeal", hand: hand.hand, deal: d });
      push({ type: "deal", hand: hand.hand, deal: d, dealer: hand.dealer, cards: deal.cards });
      const kick = (k) => {
        push({ type: "kick", card: k.card, points: k.points, team: k.team });
        if (k.points > 0) score(items.shift());
      };
      kick(deal.kicks[0]);
      if (over) break;
      const first = decisions.shift();
      if (!first) break;
      act(first);
      if (first === "stand") {
        push({ type: "stand", seat: beggar });
        push({ type: "trump", suit: deal.kicks[deal.kicks.length - 1].card[1] });
        trumpSet = true;
        break;
      }
      push({ type: "beg", seat: beggar });
      const second = decisions.shift();
      if (!second) break;
      act(second);
      if (second === "give_one") {
        push({ type: "give_one", seat: hand.dealer, team: beggar % 2 });
        score(items.shift());
        if (over) break;
        push({ type: "trump", suit: deal.kicks[deal.kicks.length - 1].card[1] });
        trumpSet = true;
        break;
      }
      push({ type: "run_pack", seat: hand.dealer });
      for (let k = 1; k < deal.kicks.length && !over; k++) {
        if (k - 1 < deal.runs.length) push({ type: "run_deal", cards: deal.runs[k - 1] });
        kick(deal.kicks[k]);
      }
      if (over) break;
      const last = deal.kicks[deal.kicks.length - 1].card[1];
      if (last !== deal.kicks[0].card[1]) {
        push({ type: "trump", suit: last });
        trumpSet = true;
        break;
      }
    }
    if (over || !trumpSet) continue;
    hand.tricks.forEach((t, ti) => {
      t.cards.forEach((pc) => {
        act(pc.card);
        push({ type: "card_played", seat: pc.seat, card: pc.card });
      });
      push({
        type: "trick_won", trick: ti + 1, leader: t.leader,
        cards: t.cards.map((c) => c.card), winner: t.winner, team: t.winner % 2,
      });
    });
    while (items.length && !over) score(items.shift());
    if (over) break;
    push({ type: "hand_over", hand: hand.hand, scores: hand.scores });
    // Split: the hand's end is one step, the next deal another (same action).
    cur.complete = false;
    cur.label = `Hand ${hand.hand} over`;
    steps.push(cur);
    cur = { events: [], action: null, ply: cur.ply, label: "Next deal" };
  }
  steps.push(cur);
  if (steps[steps.length - 1].events.length === 0) steps.pop();
  for (const s of steps) if (s.complete === undefined) s.complete = true;
  return steps;
}

// The model after steps[0..k].
export function modelAt(steps, k) {
  const m = newModel();
  for (let i = 0; i <= k && i < steps.length; i++) {
    for (const e of steps[i].events) applyEvent(m, e, steps[i].ply);
  }
  return m;
}
