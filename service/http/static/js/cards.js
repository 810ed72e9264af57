// Cards drawn with HTML and CSS: rank and suit in the corners, a big pip in the middle,
// four suit colours, and a text alternative ("Ace of spades") for screen readers.

export const SUITS = { C: "clubs", D: "diamonds", H: "hearts", S: "spades" };
export const SUIT_SYMBOL = { C: "♣", D: "♦", H: "♥", S: "♠" };
const RANK_NAME = {
  2: "Two", 3: "Three", 4: "Four", 5: "Five", 6: "Six", 7: "Seven", 8: "Eight",
  9: "Nine", T: "Ten", J: "Jack", Q: "Queen", K: "King", A: "Ace",
};
const RANK_SHOWN = { T: "10" };
const RANK_ORDER = "23456789TJQKA";
const SUIT_ORDER = "SHCD"; // alternate colours when a hand is sorted

export function cardName(code) {
  return `${RANK_NAME[code[0]]} of ${SUITS[code[1]]}`;
}

export function suitName(suit) {
  return SUITS[suit] || suit;
}

export function sortCards(cards, trump) {
  const order = trump ? trump + SUIT_ORDER.replace(trump, "") : SUIT_ORDER;
  return [...cards].sort((a, b) =>
    order.indexOf(a[1]) - order.indexOf(b[1]) ||
    RANK_ORDER.indexOf(b[0]) - RANK_ORDER.indexOf(a[0]));
}

function faces(el, code) {
  const rank = RANK_SHOWN[code[0]] || code[0];
  const sym = SUIT_SYMBOL[code[1]];
  for (const cls of ["corner tl", "pip", "corner br"]) {
    const span = document.createElement("span");
    span.className = cls;
    span.setAttribute("aria-hidden", "true");
    if (cls === "pip") span.textContent = sym;
    else {
      const r = document.createElement("b");
      r.textContent = rank;
      span.append(r, document.createTextNode(sym));
    }
    el.append(span);
  }
}

// A face-up card (a <div role=img>), or a <button> when onPlay is given.
export function cardEl(code, { onPlay = null, legal = false, extra = "" } = {}) {
  const el = document.createElement(onPlay ? "button" : "div");
  el.className = `card suit-${code[1]} ${extra}`.trim();
  el.dataset.card = code;
  if (onPlay) {
    el.type = "button";
    // The name is the button's own (screen-reader-only) text, not an aria-label: the
    // corners and pip are hidden from assistive technology.
    const name = document.createElement("span");
    name.className = "sr-only";
    name.textContent = `${legal ? "Play" : "Cannot play"} ${cardName(code)}`;
    el.append(name);
    el.disabled = !legal;
    el.classList.add(legal ? "legal" : "illegal");
    if (legal) el.addEventListener("click", () => onPlay(code));
  } else {
    el.setAttribute("role", "img");
    el.setAttribute("aria-label", cardName(code));
  }
  faces(el, code);
  return el;
}

export function backEl(extra = "") {
  const el = document.createElement("div");
  el.className = `card back ${extra}`.trim();
  el.setAttribute("aria-hidden", "true");
  return el;
}

// A group of face-down cards with their count, read out once ("5 cards, face down").
export function hiddenHand(count) {
  const wrap = document.createElement("div");
  wrap.className = `card-row hidden-hand${count > 6 ? " many" : ""}`;
  wrap.setAttribute("role", "img");
  wrap.setAttribute("aria-label", `${count} ${count === 1 ? "card" : "cards"}, face down`);
  wrap.dataset.count = String(count);
  for (let i = 0; i < count; i++) wrap.append(backEl());
  const n = document.createElement("span");
  n.className = "count-badge";
  n.setAttribute("aria-hidden", "true");
  n.textContent = String(count);
  wrap.append(n);
  return wrap;
}

export function suitBadge(suit) {
  const el = document.createElement("span");
  el.className = `suit-badge suit-${suit}`;
  el.setAttribute("role", "img");
  el.setAttribute("aria-label", suitName(suit));
  el.dataset.suit = suit;
  el.textContent = SUIT_SYMBOL[suit];
  return el;
}

// A card inside a sentence: its rank and suit symbol in the suit's colour ("6♦"), named in
// full for screen readers ("Six of diamonds").
export function cardText(code) {
  const el = document.createElement("span");
  el.className = `ctext suit-${code[1]}`;
  el.setAttribute("role", "img");
  el.setAttribute("aria-label", cardName(code));
  el.textContent = `${RANK_SHOWN[code[0]] || code[0]}${SUIT_SYMBOL[code[1]]}`;
  return el;
}
