// One 2-player game played through a generated client: what each generator's adapter
// (the other files here) must do, and the loop they share. Run with tsx:
// `tsx src/play/<generator>.ts <base url>`; prints one JSON line (the test reads it).

export interface SeatView {
  status: string;
  turn?: number | null;
  version: number;
  your_turn?: boolean | null;
  legal_actions: string[];
  seats: { bot_id?: string | null }[];
  winner?: number | null;
  scores: number[];
}

export interface Adapter {
  register(name: string, token?: string): Promise<{ id: string; token: string }>;
  createGame(token: string, seats: string[]): Promise<string>;
  view(gameId: string, token?: string): Promise<SeatView>;
  act(gameId: string, token: string, action: string, version: number): Promise<void>;
}

const MAX_ACTIONS = 2000; // a 3-point game is far shorter; the bound only stops a broken loop

export async function play(generator: string, adapter: Adapter): Promise<void> {
  const a = await adapter.register(`${generator}-a`);
  const b = await adapter.register(`${generator}-b`, a.token); // the same owner: seated at once
  const tokens: Record<string, string> = { [a.id]: a.token, [b.id]: b.token };
  const gameId = await adapter.createGame(a.token, [a.id, b.id]);
  let actions = 0;
  for (; actions < MAX_ACTIONS; actions++) {
    const seen = await adapter.view(gameId); // a spectator's view: no token
    if (seen.status === "finished") {
      console.log(JSON.stringify({ generator, game: gameId, actions, winner: seen.winner,
                                   scores: seen.scores }));
      return;
    }
    const mover = seen.seats[seen.turn ?? -1]?.bot_id;
    if (!mover) throw new Error(`no seat in turn: ${JSON.stringify(seen)}`);
    const mine = await adapter.view(gameId, tokens[mover]);
    if (!mine.your_turn) throw new Error(`not ${mover}'s turn: ${JSON.stringify(mine)}`);
    await adapter.act(gameId, tokens[mover], mine.legal_actions[0], mine.version);
  }
  throw new Error(`game ${gameId} not over after ${MAX_ACTIONS} actions`);
}

export function baseUrl(): string {
  const url = process.argv[2];
  if (!url) throw new Error("usage: tsx src/play/<generator>.ts <base url>");
  return url;
}

export function run(generator: string, adapter: Adapter): void {
  play(generator, adapter).catch((err: unknown) => {
    console.error(err instanceof Error ? err.stack ?? err.message : String(err));
    process.exit(1);
  });
}
