// Playing a seat (the play page): the person's token, taken from the lobby, a resume link
// or the form, shown once with a way to copy it; the seat taken or found; the seat's own
// event stream. The table itself is table.js's; this module gets what it needs in ``env``.

import { api, el } from "./api.js";
import { addGame, currentToken, keepToken, remembered, takeFresh } from "./player.js";

const $ = (id) => document.getElementById(id);

// env: {GAME, ctx, showError, problemText, announce, watch, setView, seated(seat)}
export function startPlay(env) {
  const { GAME, ctx, showError, problemText, announce, watch, setView } = env;
  const body = document.body;

  function readToken() {
    const m = location.hash.match(/token=([^&]+)/);
    if (m) {
      keepToken(decodeURIComponent(m[1]));
      history.replaceState(null, "", location.pathname + location.search);
    }
    return currentToken();
  }

  // A token just issued by the lobby is shown once, in a field that can be copied, with a
  // link that takes this seat back from any browser: beside the table, never above it.
  function showFreshToken(player) {
    const box = $("new-token");
    if (!player || !box) return;
    const link = `${location.origin}/games/${GAME}/play#token=${encodeURIComponent(player.token)}`;
    $("new-token-value").value = player.token;
    $("resume-link").value = link;
    $("new-token-who").textContent = player.name;
    $("new-token-kept").textContent = remembered()
      ? "This browser remembers it (local storage); the lobby lists your games."
      : "This tab keeps it until you close it. Copy it, or the resume link, to come back later.";
    box.hidden = false;
    for (const [button, field] of [["copy-token", "new-token-value"], ["copy-link", "resume-link"]]) {
      $(button).addEventListener("click", async () => {
        const input = $(field);
        input.select();
        try { await navigator.clipboard.writeText(input.value); } catch { document.execCommand("copy"); }
        announce("Copied");
        $(button).textContent = "Copied";
      });
    }
  }

  async function play() {
    const form = $("token-form");
    const input = $("token");
    const saved = readToken();
    showFreshToken(takeFresh());
    if (saved) form.classList.add("seated"); // no form to flash while the seat is taken
    form.addEventListener("submit", (e) => { e.preventDefault(); startPlaying(input.value.trim()); });
    $("new-bot").addEventListener("click", async () => {
      const name = prompt("A name for your player", "human");
      if (!name) return;
      try {
        const bot = await api("/bots", { method: "POST", body: { name, person: true } });
        showError(null);
        showFreshToken(bot);
        startPlaying(bot.token);
      } catch (e) { showError(problemText(e)); }
    });
    // Before a seat is taken, the table is drawn live as a spectator sees it.
    await watch();
    if (saved) startPlaying(saved);
  }

  async function startPlaying(token) {
    if (!token) return;
    showError(null);
    const form = $("token-form");
    let me;
    try {
      me = await api("/bots/me", { token });
    } catch (e) { form.classList.remove("seated"); showError(problemText(e)); return; }
    ctx.token = token;
    keepToken(token);
    const v = await api(`/games/${GAME}`);
    setView(v);
    const held = v.seats.filter((s) => s.bot_id === me.id).map((s) => s.seat);
    const choice = $("seat-choice");
    choice.replaceChildren();
    const wanted = Number(new URLSearchParams(location.search).get("seat"));
    if (held.length) {
      sit(held.includes(wanted) ? wanted : held[0], me);
      if (held.length > 1) {
        const line = $("seat-line");
        line.append(" · your bot holds several seats: ", ...held.flatMap((s, i) => [i ? ", " : "", el("a", { href: `?seat=${s}`, text: `seat ${s}` })]));
      }
      return;
    }
    form.classList.remove("seated");
    const open = v.seats.filter((s) => !s.bot_id).map((s) => s.seat);
    if (!open.length || v.status !== "waiting") {
      showError(`${me.name} holds no seat in this game, and no seat is open.`);
      return;
    }
    choice.append(el("span", { text: `Sit ${me.name} down: ` }),
      ...open.map((s) => el("button", {
        type: "button", class: "take-seat", dataset: { seat: String(s) }, text: `Take seat ${s}`,
        onclick: async () => {
          try {
            await api(`/games/${GAME}/seats/${s}`, { method: "POST", token, body: {} });
            choice.replaceChildren();
            sit(s, me);
          } catch (e) { showError(problemText(e)); }
        },
      })));
  }

  function sit(seat, me) {
    ctx.me = seat;
    addGame(GAME, seat);
    body.dataset.seat = String(seat);
    $("token-form").classList.add("seated");
    const line = $("seat-line");
    line.textContent = `You play seat ${seat} as ${me.name}`;
    line.hidden = false;
    ctx.seated = true;
    env.seated(seat);
  }

  return play();
}
