// The same with @hey-api/openapi-ts (default settings: its types and its SDK). Compiled
// only (`tsc --noEmit`); the functions are never called.
import { getGame, createGame } from "../gen/hey-api/sdk.gen";
import type { GameCreate, VariantsIn, View } from "../gen/hey-api/types.gen";

export const oneRule: VariantsIn = { target: 7 };
export const game: GameCreate = { players: 2, variants: oneRule };

export async function create(): Promise<void> {
  await createGame({ body: { players: 4, variants: { void_may_discard: true } } });
  // a token is optional for a game's view: no auth needed to call it
  await getGame({ path: { game_id: "0123456789ab" } });
}

// @ts-expect-error a house rule keeps its type
export const wrongType: VariantsIn = { target: "7" };

export function target(view: View): number {
  return view.variants.target;
}
