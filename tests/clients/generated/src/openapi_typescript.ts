// What a TypeScript bot writes with openapi-typescript's types (default settings): each
// request with only the fields it means to send. `tsc --noEmit` must accept it, and must
// refuse the lines marked @ts-expect-error (so the types are real, not `any`).
import type { components, paths } from "../gen/openapi-typescript";

type S = components["schemas"];
type Body<P extends keyof paths> = paths[P] extends {
  post: { requestBody?: { content: { "application/json": infer B } } };
}
  ? B
  : never;

// a game that changes ONE house rule (the rest stay the service's defaults)
export const oneRule: Body<"/games"> = { players: 2, variants: { target: 7 } };
export const fourPlayers: S["GameCreate"] = { players: 4, variants: { tobago_kick: true } };
export const justPlayers: S["GameCreate"] = { players: 2 };
export const house: Body<"/house/games"> = { players: 2, variants: { under_trumping: false } };
export const tournament: Body<"/tournaments"> = {
  format: "round_robin",
  entrants: ["0123456789ab", "ba9876543210"],
  variants: { game_tie: "non_dealer" },
};
export const action: Body<"/games/{game_id}/actions"> = { action: "AS" };

// @ts-expect-error a house rule keeps its type (target is a number)
export const wrongType: S["VariantsIn"] = { target: "7" };
// @ts-expect-error an unknown house rule is refused
export const unknownRule: S["VariantsIn"] = { targte: 7 };
// @ts-expect-error players is 2 or 4
export const threePlayers: S["GameCreate"] = { players: 3 };

// answers keep every house rule in force as required
export function target(view: S["View"]): number {
  return view.variants.target;
}
