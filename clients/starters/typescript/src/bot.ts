// The smallest complete All Fours Arena bot: TypeScript on Node.js 18+, no runtime packages.
// It follows docs/bots.md: find turns with GET /bots/me/turns (a long-poll), read the view,
// send one of its legal_actions with the view's version and a new Idempotency-Key, and keep
// that key for every retry of that action; wait Retry-After on 429/503; a lost connection is
// retried with the same key; a 409 means "look again". Two seats in one game need nothing
// more: GET /games/{id} shows the seat whose turn it is.
import { randomUUID } from "node:crypto";

interface View {
  status: "waiting" | "active" | "finished";
  your_turn: boolean;
  version: number;
  seat: number | null;
  legal_actions: string[];
}
interface Turns { games: string[]; invitations?: { id: string }[] }

const URL = (process.env["ARENA_URL"] ?? "http://127.0.0.1:8000").replace(/\/$/, "");
const TOKEN = process.env["ARENA_TOKEN"] ?? "";
const sleep = (s: number) => new Promise((resolve) => setTimeout(resolve, s * 1000));

// One request, retried the same way (same key) until the service answers it.
async function call<T>(method: string, path: string, body?: object, key?: string
): Promise<[number, T]> {
  const headers: Record<string, string> = { Authorization: `Bearer ${TOKEN}` };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  if (key !== undefined) headers["Idempotency-Key"] = key;
  for (let attempt = 0; attempt < 60; attempt++) {
    let resp: Response;
    try {
      resp = await fetch(URL + path, {
        method, headers, signal: AbortSignal.timeout(45000),
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
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
    return [resp.status, (await resp.json()) as T];
  }
  throw new Error(`${method} ${path}: no answer`);
}

function choose(view: View): string {  // your strategy goes here
  const legal = view.legal_actions;
  return legal[Math.floor(Math.random() * legal.length)] ?? legal[0] ?? "";
}

async function play(game: string): Promise<void> {
  let [status, view] = await call<View>("GET", `/games/${game}`);
  while (status === 200 && view.status === "active" && view.your_turn) {
    const body = { action: choose(view), version: view.version, seat: view.seat };
    const [code, answer] = await call<View & { type?: string }>(
      "POST", `/games/${game}/actions`, body, randomUUID());
    if (code === 200) {
      view = answer;  // this seat's view right after the move
    } else if (code === 409 || code === 412) {  // the game moved on: look again
      [status, view] = await call<View>("GET", `/games/${game}`);
    } else {
      console.error(`game ${game}: ${code} ${answer.type}`);
      return;
    }
  }
}

for (;;) {
  const [status, turns] = await call<Turns>("GET", "/bots/me/turns?timeout=20");
  if (status !== 200) throw new Error(`GET /bots/me/turns: ${status}`);
  // another owner's bot asks for a game: accept (or POST .../decline; unanswered, it
  // expires and the game is cancelled). PUT /bots/me/policy decides who may ask.
  for (const inv of turns.invitations ?? []) {
    await call("POST", `/invitations/${inv.id}/accept`, {}, randomUUID());
  }
  for (const game of turns.games) await play(game);
}
