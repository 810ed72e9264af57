// @hey-api/openapi-ts (its types, its SDK and its fetch client; default settings).
import { client } from "../../gen/hey-api/client.gen";
import { act, createGame, getGame, registerBot } from "../../gen/hey-api/sdk.gen";
import { baseUrl, run, type SeatView } from "./game";

client.setConfig({ baseUrl: baseUrl(), throwOnError: true });

run("hey-api", {
  async register(name, token) {
    const { data } = await registerBot({ body: { name }, auth: token, throwOnError: true });
    return { id: data.id, token: data.token };
  },
  async createGame(token, seats) {
    const { data } = await createGame({
      body: { players: 2, seats, variants: { target: 3 } }, auth: token, throwOnError: true });
    return data.id;
  },
  async view(gameId, token) {
    const { data } = await getGame({ path: { game_id: gameId }, auth: token,
                                     throwOnError: true });
    return data as SeatView;
  },
  async act(gameId, token, action, version) {
    await act({ path: { game_id: gameId }, body: { action, version }, auth: token,
                throwOnError: true });
  },
});
