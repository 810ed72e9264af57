// The smallest complete All Fours Arena bot: Node.js 18+, no packages.
// It follows docs/bots.md: find turns with GET /bots/me/turns (a long-poll), read the view,
// send one of its legal_actions with the view's version and a new Idempotency-Key, and keep
// that key for every retry of that action; wait Retry-After on 429/503; a lost connection is
// retried with the same key; a 409 means "look again"; invitations are accepted. Two seats in
// one game need nothing more: GET /games/{id} shows the seat whose turn it is. With
// ARENA_ENTER=next it also enters tournaments by itself (see the end).
import { randomUUID } from "node:crypto";

const URL = (process.env.ARENA_URL || "http://127.0.0.1:8000").replace(/\/$/, "");
const TOKEN = process.env.ARENA_TOKEN;
const sleep = (s) => new Promise((resolve) => setTimeout(resolve, s * 1000));

// One request, retried the same way (same key) until the service answers it.
async function call(method, path, body, key) {
  const headers = { Authorization: `Bearer ${TOKEN}` };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  if (key) headers["Idempotency-Key"] = key;
  for (let attempt = 0; attempt < 60; attempt++) {
    let resp;
    try {
      resp = await fetch(URL + path, {
        method, headers, body: body === undefined ? undefined : JSON.stringify(body),
        signal: AbortSignal.timeout(45000),
      });
    } catch {  // no answer (refused, reset, timed out): the same request again
      await sleep(Math.min(5, 0.25 * 2 ** attempt));
      continue;
    }
    if (resp.status === 429 || resp.status === 503) {  // nothing applied: wait as told
      await resp.arrayBuffer();
      await sleep(Number(resp.headers.get("Retry-After")) || 1);
      continue;
    }
    return [resp.status, await resp.json()];
  }
  throw new Error(`${method} ${path}: no answer`);
}

function choose(view) {  // your strategy goes here
  const legal = view.legal_actions;
  return legal[Math.floor(Math.random() * legal.length)];
}

async function play(game) {
  let [status, view] = await call("GET", `/games/${game}`);
  while (status === 200 && view.status === "active" && view.your_turn) {
    const body = { action: choose(view), version: view.version, seat: view.seat };
    const [code, answer] = await call("POST", `/games/${game}/actions`, body, randomUUID());
    if (code === 200) {
      view = answer;  // this seat's view right after the move
    } else if (code === 409 || code === 412) {  // the game moved on: look again
      [status, view] = await call("GET", `/games/${game}`);
    } else {
      console.error(`game ${game}: ${code} ${answer.type}`);
      return;
    }
  }
}

// ARENA_ENTER=next: enter the open tournament that starts soonest and admits this bot, and
// the next one whenever yours is over (its notice comes with the turns: "finished",
// "cancelled"). An entry a condition refuses (its problem `type` says which) is skipped.
const ENTER = process.env.ARENA_ENTER === "next";
let entered = null;
let noticesAfter = Date.now() / 1000;

async function enterNext() {
  const [status, list] = await call("GET", "/tournaments?status=registering&limit=50");
  if (status !== 200) return;
  for (const t of list.items) {
    if (!t.registration || t.registration.mode !== "open") continue;
    let resp;
    try {  // one try each: a refusal (a condition, full, your quota) moves on to the next
      resp = await fetch(`${URL}/tournaments/${t.id}/entrants`, {
        method: "POST", body: "{}", signal: AbortSignal.timeout(45000),
        headers: { Authorization: `Bearer ${TOKEN}`, "Content-Type": "application/json" },
      });
    } catch {
      continue;
    }
    const answer = await resp.json();
    if (resp.status === 201) {
      entered = t.id;
      console.log(`entered tournament ${t.id} (${t.name}), starting ${t.registration.starts_at}`);
      return;
    }
    console.error(`tournament ${t.id}: ${resp.status} ${answer.type}`);
  }
}

for (;;) {
  if (ENTER && entered === null) await enterNext();
  const [status, turns] = await call("GET", `/bots/me/turns?timeout=20&notices_after=${noticesAfter}`);
  if (status !== 200) throw new Error(`GET /bots/me/turns: ${status} ${JSON.stringify(turns)}`);
  // another owner's bot asks for a game: accept (or POST .../decline; unanswered, it
  // expires and the game is cancelled). PUT /bots/me/policy decides who may ask.
  for (const inv of turns.invitations || []) {
    await call("POST", `/invitations/${inv.id}/accept`, {}, randomUUID());
  }
  for (const note of turns.tournaments || []) {
    if (note.at <= noticesAfter) continue;
    noticesAfter = note.at;
    console.log(`tournament ${note.tournament_id}: ${note.event}${note.reason ? ` (${note.reason})` : ""}`);
    if (note.tournament_id === entered && note.event !== "starting") entered = null;
  }
  for (const game of turns.games) await play(game);
}
