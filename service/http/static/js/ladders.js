// The lobby's ladder panel: every ladder with who is queued (waiting, playing, paused)
// and its top standings, refreshed every few seconds from the public API. A module of its
// own, loaded beside lobby.js, so the lobby's script is unchanged.

import { apiOrNull, el } from "./api.js";
import { queueList, standingsTable } from "./ladderviews.js";

const $ = (id) => document.getElementById(id);
const REFRESH_MS = 3000;

async function refresh() {
  const box = $("ladders");
  if (!box) return;
  const all = await apiOrNull("/ladders").catch(() => null);
  $("ladders-panel").hidden = all === null;
  if (!all) return;
  // a ladder nobody has used is listed on one line; the others in full
  const used = all.items.filter((l) => l.waiting || l.playing || l.rated);
  const idle = all.items.filter((l) => !used.includes(l));
  const parts = await Promise.all(used.map(async (l) => {
    const [lad, st] = await Promise.all([apiOrNull(`/ladders/${l.name}`), apiOrNull(`/ladders/${l.name}/standings?limit=10`)]);
    return el("section", { class: "ladder", dataset: { ladder: l.name } },
      el("h3", {}, el("a", { href: `/ladders/${l.name}`, text: l.name }), ` · ${l.players} players · to ${l.variants.target} · ${l.move_limit} s a move`),
      el("p", { class: "muted small", text: `${l.waiting} waiting · ${l.playing} playing · ${l.games} games rated` }),
      lad ? queueList(lad) : null, standingsTable(l.name, st));
  }));
  const quiet = idle.length ? el("p", { class: "muted small" }, "Open, nobody yet: ",
    idle.flatMap((l, i) => [i ? ", " : "", el("a", { href: `/ladders/${l.name}`, text: l.name }), ` (${l.players} players)`]),
    ". Join with allfours bot --ladder NAME.") : null;
  box.replaceChildren(...parts, quiet || "");
  box.dataset.loaded = "true";
}

refresh();
setInterval(() => { if (!document.hidden) refresh(); }, REFRESH_MS);
