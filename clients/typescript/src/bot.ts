/**
 * A small All Fours Arena bot in strict TypeScript: the request and answer types are generated
 * from openapi.yaml (openapi-typescript), the calls are made by openapi-fetch, and every answer
 * is validated against openapi.yaml at run time (src/contract.ts).
 *
 * The protocol, as a bot author outside the project would follow it:
 *   1. `POST /bots` once for a token (or take $ARENA_TOKEN).
 *   2. `GET /bots/me/turns` (long-poll) for the games where it is our turn (or play $ARENA_GAME).
 *   3. Per game: `GET /games/{id}/turn` (long-poll) until `view.your_turn` or the game is over.
 *   4. `POST /games/{id}/actions` with one of `view.legal_actions`, the view's `version` and an
 *      `Idempotency-Key`; a lost answer is retried with the same key (applied once). A 409
 *      `not-your-turn`/`version-conflict` (or 412) means the game moved on: read it again.
 *
 * Environment: ARENA_URL (required); ARENA_TOKEN, or ARENA_NAME to register; ARENA_GAME (play
 * that game only); ARENA_GAMES (finished games before exiting, default 1); ARENA_SEED (the
 * random choices); ARENA_OPENAPI (the contract file, default the repository's openapi.yaml).
 *
 * stdout: the registration `{"id","name","token"}` (only when it registered) and, at the end,
 * one summary line in JSON. Progress goes to stderr. Exit status 1 on any contract mismatch,
 * illegal action or unexpected problem.
 */

import { randomUUID } from "node:crypto";
import { fileURLToPath } from "node:url";
import createClient, { type Client } from "openapi-fetch";
import { Contract } from "./contract.js";
import type { components, paths } from "./generated/openapi.js";

type View = components["schemas"]["View"];
/**
 * What the bot reads of any problem answer (RFC 9457). Structural on purpose: whether the
 * contract keeps one Problem schema or gives each error kind its own, every error body the
 * generated types allow must fit this, and the compiler checks that it does.
 */
interface Problem {
  type: string;
  title: string;
  status: number;
  detail?: string;
}

const POLL_SECONDS = 25;
const MAX_TRIES = 8;
/** The game moved on under us: read it again and decide again. */
const STALE = new Set(["not-your-turn", "version-conflict", "precondition-failed",
                       "game-not-started"]);
/** The service asks us to come back later (Retry-After). */
const LATER = new Set(["rate-limited", "service-unavailable"]);

interface GameResult {
  game: string;
  seat: number | null;
  winner: number | null;
  scores: number[];
  actions: number;
}

interface Summary {
  bot: string;
  games: GameResult[];
  actions: number;
  conflicts: number;
  retries: number;
  illegal: number;
  validated: number;
  contract_failures: number;
}

class BotError extends Error {
  override name = "BotError";
}

function log(message: string): void {
  process.stderr.write(`ts-bot: ${message}\n`);
}

function sleep(seconds: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, seconds * 1000));
}

/** The problem's kind: the last segment of its `type` (`/problems/version-conflict`). */
function kind(problem: Problem): string {
  return problem.type.split("/").pop() ?? problem.type;
}

function retryAfter(response: Response, fallback: number): number {
  const seconds = Number(response.headers.get("Retry-After"));
  return Number.isFinite(seconds) && seconds > 0 ? Math.min(seconds, 30) : fallback;
}

/** mulberry32: a small seeded PRNG, so a run can be repeated. */
function random(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * Network trouble (no answer at all) is retried with a growing pause; an answer, even an
 * error, is returned. Idempotent only with the same request: callers that change state pass
 * the same Idempotency-Key on every try.
 */
async function retrying<T>(what: string, call: () => Promise<T>, stats: Summary): Promise<T> {
  for (let attempt = 1; ; attempt += 1) {
    try {
      return await call();
    } catch (err: unknown) {
      if (!(err instanceof TypeError) || attempt >= MAX_TRIES) throw err;
      stats.retries += 1;
      log(`${what}: no answer (${err.message}); retry ${attempt}`);
      await sleep(Math.min(0.2 * 2 ** attempt, 5));
    }
  }
}

export class Bot {
  private readonly stats: Summary;
  private readonly pick: () => number;

  constructor(private readonly client: Client<paths>, private readonly contract: Contract,
              botId: string, seed: number) {
    this.stats = { bot: botId, games: [], actions: 0, conflicts: 0, retries: 0, illegal: 0,
                   validated: 0, contract_failures: 0 };
    this.pick = random(seed);
  }

  summary(): Summary {
    return { ...this.stats, validated: this.contract.checked,
             contract_failures: this.contract.failures.length };
  }

  /** Serve turns from `GET /bots/me/turns` until `games` games we play in are over. */
  async serve(games: number): Promise<void> {
    const done = new Set<string>();
    while (done.size < games) {
      const { data, error, response } = await retrying("my turns", () =>
        this.client.GET("/bots/me/turns", { params: { query: { timeout: POLL_SECONDS } } }),
        this.stats);
      if (error !== undefined) {
        await this.problem(error, response, "GET /bots/me/turns");
        continue;
      }
      for (const game of data.games) {
        if (done.has(game)) continue;
        await this.play(game);
        done.add(game);
      }
    }
  }

  /** Play one game to its end: long-poll for the turn, act, repeat. */
  async play(gameId: string): Promise<GameResult> {
    log(`playing game ${gameId}`);
    let actions = 0;
    for (;;) {
      const { data, error, response } = await retrying("turn", () =>
        this.client.GET("/games/{game_id}/turn", {
          params: { path: { game_id: gameId }, query: { timeout: POLL_SECONDS } },
        }), this.stats);
      if (error !== undefined) {
        await this.problem(error, response, `GET /games/${gameId}/turn`);
        continue;
      }
      let view: View | null = data.view;
      // While the answers say it is still our turn, act on them without polling again.
      while (view !== null && view.status !== "finished" && view.your_turn) {
        const next = await this.act(view);
        if (next !== null) actions += 1;
        view = next;
      }
      if (view !== null && view.status === "finished") {
        const result = { game: gameId, seat: view.seat, winner: view.winner,
                         scores: view.scores, actions };
        this.stats.games.push(result);
        log(`game ${gameId} over: winner team ${String(view.winner)}, scores ` +
            `${view.scores.join("-")}, ${actions} actions by us`);
        return result;
      }
    }
  }

  /**
   * One decision: a legal action sent with the view's version and a fresh Idempotency-Key
   * (kept across retries). The new view, or null when the game moved on (read it again).
   */
  private async act(view: View): Promise<View | null> {
    const legal = view.legal_actions;
    const action = legal[Math.floor(this.pick() * legal.length)];
    if (action === undefined) throw new BotError(`game ${view.id}: our turn but no legal action`);
    const key = randomUUID();
    for (let attempt = 1; attempt <= MAX_TRIES; attempt += 1) {
      const { data, error, response } = await retrying("action", () =>
        this.client.POST("/games/{game_id}/actions", {
          params: { path: { game_id: view.id }, header: { "Idempotency-Key": key } },
          body: { action, version: view.version },
        }), this.stats);
      if (error === undefined) {
        this.stats.actions += 1;
        return data;
      }
      const problemKind = kind(error);
      if (problemKind === "illegal-action") {
        this.stats.illegal += 1;
        const rule = "rule" in error ? String(error.rule) : "no rule named";
        throw new BotError(`game ${view.id}: ${action} refused as illegal (${rule}): ` +
                           `${error.detail ?? error.title}`);
      }
      if (STALE.has(problemKind)) {
        this.stats.conflicts += 1;
        log(`game ${view.id}: ${problemKind} at version ${view.version}; reading it again`);
        return null;
      }
      await this.problem(error, response, `POST /games/${view.id}/actions`);
    }
    throw new BotError(`game ${view.id}: gave up on ${action} after ${MAX_TRIES} tries`);
  }

  /** A problem answer that is not about the game: wait if asked to, else stop loudly. */
  private async problem(error: Problem, response: Response, what: string): Promise<void> {
    if (LATER.has(kind(error))) {
      this.stats.retries += 1;
      await sleep(retryAfter(response, 1));
      return;
    }
    throw new BotError(`${what}: ${response.status} ${error.type}: ${error.detail ?? error.title}`);
  }
}

function env(name: string): string | undefined {
  const value = process.env[name];
  return value === undefined || value === "" ? undefined : value;
}

async function main(): Promise<number> {
  const baseUrl = env("ARENA_URL");
  if (baseUrl === undefined) throw new BotError("set ARENA_URL (e.g. http://127.0.0.1:8000)");
  const contractPath = env("ARENA_OPENAPI")
    ?? fileURLToPath(new URL("../../../openapi.yaml", import.meta.url));
  const contract = Contract.fromFile(contractPath);

  let token = env("ARENA_TOKEN");
  if (token === undefined) {
    const name = env("ARENA_NAME") ?? "ts-bot";
    const anonymous = createClient<paths>({ baseUrl });
    anonymous.use(contract.middleware());
    const { data, error } = await anonymous.POST("/bots", { body: { name } });
    if (error !== undefined) throw new BotError(`registering: ${error.type}: ${error.title}`);
    process.stdout.write(`${JSON.stringify({ id: data.id, name: data.name, token: data.token })}\n`);
    token = data.token;
  }
  const client = createClient<paths>({ baseUrl, headers: { Authorization: `Bearer ${token}` } });
  client.use(contract.middleware());
  const me = await client.GET("/bots/me");
  if (me.error !== undefined) throw new BotError(`GET /bots/me: ${me.error.type}`);
  log(`bot ${me.data.name} (${me.data.id}) at ${baseUrl}`);

  const bot = new Bot(client, contract, me.data.id, Number(env("ARENA_SEED") ?? Date.now()));
  let status = 0;
  try {
    const game = env("ARENA_GAME");
    if (game !== undefined) await bot.play(game);
    else await bot.serve(Number(env("ARENA_GAMES") ?? "1"));
  } catch (err: unknown) {
    log(err instanceof Error ? `${err.name}: ${err.message}` : String(err));
    status = 1;
  }
  process.stdout.write(`${JSON.stringify(bot.summary())}\n`);
  return status;
}

main().then(
  (status) => { process.exitCode = status; },
  (err: unknown) => {
    log(err instanceof Error ? `${err.name}: ${err.message}` : String(err));
    process.exitCode = 1;
  },
);
