// orval (default settings: axios functions).
import axios from "axios";
import { act, createGame, getGame, registerBot } from "../../gen/orval/api";
import { baseUrl, run, type SeatView } from "./game";

axios.defaults.baseURL = baseUrl();
const auth = (token?: string): { headers: Record<string, string> } =>
  ({ headers: token ? { Authorization: `Bearer ${token}` } : {} });

run("orval", {
  async register(name, token) {
    const { data } = await registerBot({ name }, auth(token));
    return { id: data.id, token: data.token };
  },
  async createGame(token, seats) {
    const { data } = await createGame({ players: 2, seats, variants: { target: 3 } },
                                      auth(token));
    return data.id;
  },
  async view(gameId, token) {
    const { data } = await getGame(gameId, undefined, auth(token));
    return data as SeatView;
  },
  async act(gameId, token, action, version) {
    await act(gameId, { action, version }, undefined, auth(token));
  },
});
