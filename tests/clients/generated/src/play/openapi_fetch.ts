// openapi-typescript's types with openapi-fetch (default settings).
import createClient from "openapi-fetch";
import type { paths } from "../../gen/openapi-typescript";
import { baseUrl, run, type SeatView } from "./game";

const client = createClient<paths>({ baseUrl: baseUrl() });
const auth = (token?: string): Record<string, string> =>
  (token ? { Authorization: `Bearer ${token}` } : {});

function ok<T>(r: { data?: T; error?: unknown; response: Response }): T {
  if (r.data === undefined) throw new Error(`${r.response.status}: ${JSON.stringify(r.error)}`);
  return r.data;
}

run("openapi-fetch", {
  async register(name, token) {
    const bot = ok(await client.POST("/bots", { body: { name }, headers: auth(token) }));
    return { id: bot.id, token: bot.token };
  },
  async createGame(token, seats) {
    const game = ok(await client.POST("/games", {
      body: { players: 2, seats, variants: { target: 3 } }, headers: auth(token) }));
    return game.id;
  },
  async view(gameId, token) {
    return ok(await client.GET("/games/{game_id}", {
      params: { path: { game_id: gameId } }, headers: auth(token) })) as SeatView;
  },
  async act(gameId, token, action, version) {
    ok(await client.POST("/games/{game_id}/actions", {
      params: { path: { game_id: gameId } }, body: { action, version }, headers: auth(token) }));
  },
});
