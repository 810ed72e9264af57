// The person playing in this browser: their token and their games.
//
// A token is a password: by default it stays in this tab only (session storage). With the
// person's consent ("remember me"), it and the list of their games are kept in local
// storage, so a closed tab can be resumed from the lobby.

const TOKEN = "allfours.token";
const PLAYER = "allfours.player";
const GAMES = "allfours.games";
const FRESH = "allfours.fresh";

function read(store, key) {
  try { return JSON.parse(store.getItem(key)); } catch { return null; }
}

export function remembered() {
  return read(localStorage, PLAYER);
}

export function currentToken() {
  const kept = remembered();
  return sessionStorage.getItem(TOKEN) || (kept && kept.token) || null;
}

export function keepToken(token, player = null, consent = false) {
  sessionStorage.setItem(TOKEN, token);
  if (consent && player) localStorage.setItem(PLAYER, JSON.stringify({ ...player, token }));
}

export function forget() {
  sessionStorage.removeItem(TOKEN);
  localStorage.removeItem(PLAYER);
  localStorage.removeItem(GAMES);
  sessionStorage.removeItem(GAMES);
}

// A token just issued: the play page shows it once, then drops it.
export function markFresh(player) { sessionStorage.setItem(FRESH, JSON.stringify(player)); }
export function takeFresh() {
  const p = read(sessionStorage, FRESH);
  sessionStorage.removeItem(FRESH);
  return p;
}

export function myGames() {
  return read(remembered() ? localStorage : sessionStorage, GAMES) || [];
}

export function addGame(id, seat) {
  const store = remembered() ? localStorage : sessionStorage;
  const games = (read(store, GAMES) || []).filter((g) => g.id !== id);
  games.unshift({ id, seat, at: Math.floor(Date.now() / 1000) });
  store.setItem(GAMES, JSON.stringify(games.slice(0, 20)));
}
