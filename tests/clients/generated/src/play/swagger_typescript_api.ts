// swagger-typescript-api (default settings: its fetch HttpClient).
import { Api } from "../../gen/sta/api";
import { baseUrl, run, type SeatView } from "./game";

const api = new Api({ baseUrl: baseUrl() });
const auth = (token?: string): { headers: Record<string, string> } =>
  ({ headers: token ? { Authorization: `Bearer ${token}` } : {} });

run("swagger-typescript-api", {
  async register(name, token) {
    const { data } = await api.bots.registerBot({ name }, auth(token));
    return { id: data.id, token: data.token };
  },
  async createGame(token, seats) {
    const { data } = await api.games.createGame({ players: 2, seats, variants: { target: 3 } },
                                                auth(token));
    return data.id;
  },
  async view(gameId, token) {
    const { data } = await api.games.getGame(gameId, {}, auth(token));
    return data as SeatView;
  },
  async act(gameId, token, action, version) {
    await api.games.act(gameId, { action, version }, {}, auth(token));
  },
});
