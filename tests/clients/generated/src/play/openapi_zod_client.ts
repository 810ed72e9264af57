// openapi-zod-client (default template: a Zodios client, which validates every answer).
import { createApiClient } from "../../gen/openapi-zod-client/api";
import { baseUrl, run, type SeatView } from "./game";

const api = createApiClient(baseUrl());
const auth = (token?: string): { headers: Record<string, string> } =>
  ({ headers: token ? { Authorization: `Bearer ${token}` } : {} });

run("openapi-zod-client", {
  async register(name, token) {
    const bot = await api.registerBot({ name }, auth(token));
    return { id: bot.id, token: bot.token };
  },
  async createGame(token, seats) {
    const game = await api.createGame({ players: 2, seats, variants: { target: 3 } },
                                      auth(token));
    return game.id;
  },
  async view(gameId, token) {
    return await api.getGame({ params: { game_id: gameId }, ...auth(token) }) as SeatView;
  },
  async act(gameId, token, action, version) {
    await api.act({ action, version }, { params: { game_id: gameId }, ...auth(token) });
  },
});
