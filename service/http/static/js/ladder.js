// The ladder pages: /ladders (every ladder) and /ladders/{name} (its queue and its whole
// standings, a page of them at a time), refreshed every few seconds. Public API only.

import { api, ApiError, el, fill } from "./api.js";
import { columnsExplained, queueList, standingsTable } from "./ladderviews.js";

const $ = (id) => document.getElementById(id);
const NAME = document.body.dataset.ladder;
const PAGE = 50;
let shown = PAGE; // standings rows asked for: "Show more" adds a page

function describe(l) {
  return `${l.players} players · to ${l.variants.target} points · ${l.move_limit} s a move` +
    `${l.time_bank ? ` (+ ${l.time_bank} s bank)` : ""} · ${l.waiting} waiting · ${l.playing} playing · ${l.games} games rated`;
}

async function standings() {
  const items = [];
  let cursor = 0;
  while (cursor !== null && items.length < shown) {
    const page = await api(`/ladders/${NAME}/standings?limit=${Math.min(100, shown - items.length)}&cursor=${cursor}`);
    items.push(...page.items);
    cursor = page.next_cursor;
  }
  return { items, more: cursor !== null };
}

async function refresh() {
  try {
    if (!NAME) {
      const all = await api("/ladders");
      fill($("ladder-list"), all.items.map((l) => el("li", { dataset: { ladder: l.name } },
        el("a", { class: "who", href: `/ladders/${l.name}`, text: `Ladder ${l.name}` }),
        el("span", { class: "muted small", text: describe(l) }))));
    } else {
      const [lad, st] = await Promise.all([api(`/ladders/${NAME}`), standings()]);
      $("l-info").textContent = describe(lad);
      $("queue").replaceChildren(queueList(lad));
      $("standings").replaceChildren(standingsTable(NAME, st, { caption: `Ladder ${NAME}: every rated bot` }));
      $("more").hidden = !st.more;
      if (!$("explain").childElementCount) $("explain").append(columnsExplained());
    }
    document.body.dataset.loaded = "true";
  } catch (e) {
    const box = $("error");
    box.hidden = false;
    box.textContent = e instanceof ApiError && e.status === 404 ? "No such ladder." : `Could not load: ${e.message}`;
    document.body.dataset.failed = "true";
  }
}

if ($("more")) $("more").addEventListener("click", () => { shown += PAGE; refresh(); });
refresh();
setInterval(() => { if (!document.hidden) refresh(); }, 5000);
