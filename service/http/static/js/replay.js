// The replay: a finished game from its record, step by step, with the review (analysis.js)
// beside it. One numbering everywhere: "move n" is the n-th action of the game (stand, beg,
// give one, run the pack or a card), the replay's position and the analysis's decisions
// alike, and the address says it (?move=n), so a shared link opens at that decision.

import { modelAt, stepsFromRecord } from "./model.js";
import { startAnalysis } from "./analysis.js";

const $ = (id) => document.getElementById(id);
const TEAM = ["A", "B"];

// env: what the table page shares (its context, rendering and words).
export async function startReplay(env) {
  const { GAME, ctx, api, showError, render, logText, setModel } = env;
  const body = document.body;
  const [v, rec] = await Promise.all([api(`/games/${GAME}`), api(`/games/${GAME}/record`)]);
  ctx.seats = v.seats;
  ctx.view = v;
  if (!rec.complete) {
    ctx.status = v.status;
    showError("This game is still being played: its replay opens when it ends. Watch it live meanwhile.");
    $("analysis").hidden = true;
    render();
    return;
  }
  ctx.status = "active";
  for (const t of rec.timeouts || []) ctx.clockPlies.add(t.ply);
  const steps = stepsFromRecord(rec);
  const acted = steps.filter((s) => s.action !== null).map((s) => s.action);
  if (acted.join() !== rec.actions.join()) {
    showError("The record could not be replayed step by step (an unknown shape).");
  }
  const moves = rec.actions.length;
  const slider = $("rp-slider");
  slider.max = String(steps.length - 1);
  let k = 0;
  let timer = null;
  let model = null;

  // The step a move is shown at: the one whose action it is (move 0: the first deal).
  const stepOfMove = (move) => {
    if (move <= 0) return 0;
    const i = steps.findIndex((s) => s.action !== null && s.ply === move);
    return i < 0 ? steps.length - 1 : i;
  };

  const show = (i, { from = null } = {}) => {
    k = Math.max(0, Math.min(steps.length - 1, i));
    model = modelAt(steps, k);
    setModel(model);
    ctx.status = model.over ? "finished" : "active";
    slider.value = String(k);
    const s = steps[k];
    const pos = $("rp-pos");
    pos.dataset.step = String(k);
    pos.dataset.ply = String(s.ply);
    pos.dataset.move = String(s.ply);
    pos.dataset.complete = String(s.complete);
    pos.dataset.hand = String(model.hand);
    let what = s.label || "Deal";
    if (s.action) {
      const last = [...model.log].reverse().find((x) => ["stand", "beg", "give_one", "run_pack", "card"].includes(x.kind));
      what = last ? logText(last) : s.action;
    }
    const score = `Team ${TEAM[0]} ${model.scores[0]}–${model.scores[1]} Team ${TEAM[1]}`;
    pos.textContent = `Move ${s.ply} of ${moves} · hand ${model.hand || 1} · ${what} · ${score}`;
    slider.setAttribute("aria-valuetext", `Move ${s.ply} of ${moves}, hand ${model.hand || 1}`);
    render();
    review.onStep(s, k);
    const url = new URL(location.href);
    url.searchParams.set("move", String(s.ply));
    url.searchParams.delete("review");
    history.replaceState(null, "", url.pathname + url.search);
    if (from === "review") keepBoardInView();
  };

  // On a phone the board and the review are stacked: a jump from the review brings the
  // board back into view with the explanation's verdict under it, or, where both do not
  // fit, as much of the board above the verdict as the screen holds.
  const keepBoardInView = () => {
    const felt = $("felt").getBoundingClientRect();
    const verdict = ($("an-current").querySelector(".an-verdict") || $("an-current")).getBoundingClientRect();
    const h = window.innerHeight;
    if (felt.top >= 0 && verdict.bottom <= h) return; // both in view already
    if (verdict.bottom - felt.top <= h) window.scrollBy(0, felt.top);
    else window.scrollBy(0, verdict.bottom - h + 8);
  };

  const review = startAnalysis({
    gameId: GAME, seats: ctx.seats, steps, moves, rec,
    jump: (move) => { stop(); show(stepOfMove(move), { from: "review" }); },
    currentMove: () => steps[k].ply,
  });
  const hands = () => steps.map((s, i) => [i, s]).filter(([, s]) => s.events.some((e) => e.type === "deal" && e.deal === 0)).map(([i]) => i);
  const stop = () => { clearInterval(timer); timer = null; $("rp-play").textContent = "Play"; $("rp-play").setAttribute("aria-label", "Play"); };
  const toggle = () => {
    if (timer) { stop(); return; }
    $("rp-play").textContent = "Pause";
    $("rp-play").setAttribute("aria-label", "Pause");
    timer = setInterval(() => { if (k >= steps.length - 1) stop(); else show(k + 1); }, 600);
  };
  const prevHand = () => show([...hands()].reverse().find((i) => i < k) ?? 0);
  const nextHand = () => show(hands().find((i) => i > k) ?? steps.length - 1);
  $("rp-start").onclick = () => show(0);
  $("rp-end").onclick = () => show(steps.length - 1);
  $("rp-prev").onclick = () => show(k - 1);
  $("rp-next").onclick = () => show(k + 1);
  $("rp-prev-hand").onclick = prevHand;
  $("rp-next-hand").onclick = nextHand;
  $("rp-play").onclick = toggle;
  slider.oninput = () => show(Number(slider.value));
  document.addEventListener("keydown", (e) => {
    const t = e.target;
    if (t instanceof HTMLInputElement && t.type !== "range") return;
    if (t instanceof HTMLSelectElement || t instanceof HTMLTextAreaElement) return;
    if (e.ctrlKey || e.metaKey || e.altKey) return;
    const keys = {
      ArrowRight: () => show(k + 1), ArrowLeft: () => show(k - 1), Home: () => show(0),
      End: () => show(steps.length - 1), PageDown: nextHand, PageUp: prevHand, " ": toggle,
      n: () => review.next(), N: () => review.next(), p: () => review.prev(), P: () => review.prev(),
    };
    // Space and Enter on a button are the button's own
    if (e.key === " " && t instanceof HTMLButtonElement) return;
    if (keys[e.key]) { e.preventDefault(); if (e.key !== " ") stop(); keys[e.key](); }
  });
  body.dataset.steps = String(steps.length);
  const asked = Number(new URLSearchParams(location.search).get("move"));
  show(Number.isFinite(asked) && asked > 0 ? stepOfMove(Math.min(asked, moves)) : 0);
}
