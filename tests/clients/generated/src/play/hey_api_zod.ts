// @hey-api/openapi-ts with its zod plugin: every answer is parsed by the generated schema.
import { client } from "../../gen/hey-api-zod/client.gen";
import { act, createGame, getGame, registerBot } from "../../gen/hey-api-zod/sdk.gen";
import { zBotCreated, zGameSummary, zView } from "../../gen/hey-api-zod/zod.gen";
import { baseUrl, run, type SeatView } from "./game";

client.setConfig({ baseUrl: baseUrl(), throwOnError: true });

run("hey-api-zod", {
  async register(name, token) {
    const { data } = await registerBot({ body: { name }, auth: token, throwOnError: true });
    const bot = zBotCreated.parse(data);
    return { id: bot.id, token: bot.token };
  },
  async createGame(token, seats) {
    const { data } = await createGame({
      body: { players: 2, seats, variants: { target: 3 } }, auth: token, throwOnError: true });
    return zGameSummary.parse(data).id;
  },
  async view(gameId, token) {
    const { data } = await getGame({ path: { game_id: gameId }, auth: token,
                                     throwOnError: true });
    return zView.parse(data) as SeatView;
  },
  async act(gameId, token, action, version) {
    const { data } = await act({ path: { game_id: gameId }, body: { action, version },
                                 auth: token, throwOnError: true });
    zView.parse(data);
  },
});
