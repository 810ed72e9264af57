"""The strength ladder of the reference bots, through the engine (no HTTP).

Every pairing plays duplicate deals: each game seed is played twice with the teams'
strategies swapped, so both bots get every set of cards and the luck of the deal largely
cancels. Games are 4-player (partners share a strategy) and 2-player, reported apart, to
the default target, 14. Prints one JSON line: per table size and pairing, games, the
first bot's game win rate with a 95% Wilson interval, and its mean point margin per hand
with a 95% interval (clustered by duplicate pair, since hands of one game are not
independent).

The search bot's move budget is CPU time of the deciding thread (``clock="cpu"``,
``time.thread_time``), not wall-clock time: on a machine shared with other work a wall
budget hands a loaded run fewer samples a move and measures the load, not the bot. Use
``--jobs 1`` on a shared machine.

A strategy is a built-in name or ``module:Class``, optionally with options after ``~``:
``search~infer=0`` (the search bot without inference from the bidding), ``search~epsilon=0.1``,
several as ``search~chain=0~bid_miss=0.05~play_miss=0.2`` (the search before its Markov
chain).

Targets (issue 4): heuristic beats random in >= 90% of >= 400 games; search beats
heuristic in >= 60% of >= 200 games at <= 0.1 s a move on one core; (issue 25) >= 0.65
with the 95% interval's lower bound above 0.62, at each table size.

    python bench/strength.py [--games 400] [--pairings heuristic-random,search-heuristic]
                             [--players 4,2] [--move-time 0.1] [--seed 1] [--jobs 1]
                             [--until 19:05]
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import multiprocessing
import platform
import sys
import time
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from clients.strategies import get_strategy
from clients.strategies.duel import GameResult, duplicate_pair

Z95 = 1.959964


def wilson(wins: int, n: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval: sound at rates near 0 or 1, unlike the normal one."""
    if n == 0:
        return 0.0, 1.0
    p = wins / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return centre - half, centre + half


def margin_interval(pairs: list[list[GameResult]], z: float = Z95) -> tuple[float, float, float]:
    """Mean margin per hand as a ratio estimator over duplicate pairs, with its interval.

    Hands within a game (and the two games of a pair) share cards and scores, so the
    pair, not the hand, is the independent unit: ratio = sum of margins / sum of hands,
    variance by the delta method over pairs.
    """
    m = [sum(sum(g.hand_margins) for g in pair) for pair in pairs]
    h = [sum(len(g.hand_margins) for g in pair) for pair in pairs]
    n = len(pairs)
    ratio = sum(m) / sum(h)
    if n < 2:
        return ratio, -math.inf, math.inf
    h_bar = sum(h) / n
    var = sum((mi - ratio * hi) ** 2 for mi, hi in zip(m, h)) / (n - 1) / n / h_bar**2
    half = z * math.sqrt(var)
    return ratio, ratio - half, ratio + half


def parse_spec(spec: str) -> tuple[str, dict[str, object]]:
    """``name~key=value~key=value`` (or ``,`` between options where the spec is not in a
    list of pairings) -> (name, options); values are read as numbers where they are
    numbers."""
    name, _, opts = spec.partition("~")
    options: dict[str, object] = {}
    for part in filter(None, opts.replace("~", ",").split(",")):
        key, _, raw = part.partition("=")
        value: object = raw
        for cast in (int, float):
            try:
                value = cast(raw)
                break
            except ValueError:
                pass
        options[key] = value
    return name, options


def _options(spec: str, move_time: float, seed: int) -> tuple[str, dict]:
    name, extra = parse_spec(spec)
    if name == "search":
        return name, {"move_time": move_time, "seed": seed, "clock": "cpu", **extra}
    if name == "random":
        return name, {"seed": seed, **extra}
    return name, extra


def make_strategy(spec: str, move_time: float, seed: int):
    name, options = _options(spec, move_time, seed)
    return get_strategy(name, **options)


def play_pair(seed: int, a: str, b: str, move_time: float, players: int = 4) -> list[GameResult]:
    """One duplicate pair (two games) of ``a`` against ``b``; results from ``a``'s side."""
    return duplicate_pair(
        lambda: make_strategy(a, move_time, seed),
        lambda: make_strategy(b, move_time, seed + 1),
        seed,
        players,
    )


def summarise(
    a: str, b: str, players: int, results: list[list[GameResult]], seconds: float, cpu: float
) -> dict[str, object]:
    games = [g for pair in results for g in pair]
    wins = sum(g.winner == 0 for g in games)
    low, high = wilson(wins, len(games))
    mean, m_low, m_high = margin_interval(results) if results else (0.0, 0.0, 0.0)
    return {
        "players": players,
        "pairing": f"{a}-{b}",
        "games": len(games),
        "duplicate_pairs": len(results),
        "wins": wins,
        "win_rate": round(wins / len(games), 4) if games else None,
        "win_rate_ci95": [round(low, 4), round(high, 4)],
        "hands": sum(len(g.hand_margins) for g in games),
        "margin_per_hand": round(mean, 3),
        "margin_per_hand_ci95": [round(m_low, 3), round(m_high, 3)],
        "seconds": round(seconds, 1),
        "cpu_seconds": round(cpu, 1),  # this process's (jobs 1)
    }


def run_pairing(
    a: str, b: str, pairs: int, seed: int, move_time: float, jobs: int, players: int = 4
) -> dict[str, object]:
    start = time.perf_counter()
    cpu = time.process_time()
    seeds = [seed * 1_000_003 + i for i in range(pairs)]
    work = partial(play_pair, a=a, b=b, move_time=move_time, players=players)
    if jobs > 1:
        with multiprocessing.get_context("fork").Pool(jobs) as pool:
            results = pool.map(work, seeds, chunksize=1)
    else:
        results = [work(s) for s in seeds]
    return summarise(
        a, b, players, results, time.perf_counter() - start, time.process_time() - cpu
    )


def run_until(
    combos: list[tuple[int, str, str]], pairs: int, seed: int, move_time: float, until: float
) -> list[dict[str, object]]:
    """One process, the pairings and table sizes in turn a duplicate pair at a time, until
    each has ``pairs`` or the wall clock passes ``until`` (no pair is started after it).
    Every finished pair prints the running summaries to stderr, so a run cut short still
    says what it measured."""
    results: dict[int, list[list[GameResult]]] = {i: [] for i in range(len(combos))}
    spent = dict.fromkeys(results, 0.0)
    cpu = dict.fromkeys(results, 0.0)
    for i in range(pairs):
        for c, (players, a, b) in enumerate(combos):
            if time.time() >= until:
                break
            t, p = time.perf_counter(), time.process_time()
            results[c].append(play_pair(seed * 1_000_003 + i, a, b, move_time, players))
            spent[c] += time.perf_counter() - t
            cpu[c] += time.process_time() - p
        else:
            out = [
                summarise(a, b, players, results[c], spent[c], cpu[c])
                for c, (players, a, b) in enumerate(combos)
            ]
            print(json.dumps({"progress": out}), file=sys.stderr, flush=True)
            continue
        break
    return [
        summarise(a, b, players, results[c], spent[c], cpu[c])
        for c, (players, a, b) in enumerate(combos)
    ]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--games", type=int, default=400, help="games per pairing (even)")
    parser.add_argument(
        "--pairings",
        default="heuristic-random,search-heuristic",
        help="comma-separated A-B pairs, e.g. heuristic-random,search-heuristic,search-random",
    )
    parser.add_argument("--players", default="4,2", help="table sizes, e.g. 4,2 or 2")
    parser.add_argument(
        "--move-time", type=float, default=0.1, help="search CPU seconds a move (thread time)"
    )
    parser.add_argument("--seed", type=int, default=1, help="first deal sequence")
    parser.add_argument("--jobs", type=int, default=1, choices=(1, 2), help="processes (<= 2)")
    parser.add_argument(
        "--until",
        help="UTC HH:MM: play the table sizes and pairings in turn, a pair at a time, and "
        "start no pair after it (jobs 1; --games is then the most per pairing)",
    )
    args = parser.parse_args()
    pairs = max(1, args.games // 2)
    out = []
    tables = [int(p) for p in args.players.split(",")]
    combos = [
        (players, *pairing.strip().partition("-")[::2])
        for players in tables
        for pairing in args.pairings.split(",")
    ]
    if args.until:
        now = datetime.datetime.now(datetime.UTC)
        hh, mm = (int(x) for x in args.until.split(":"))
        until = now.replace(hour=hh, minute=mm, second=0, microsecond=0)
        if until <= now:  # a time already past today is tomorrow's (a run over midnight)
            until += datetime.timedelta(days=1)
        out = run_until(combos, pairs, args.seed, args.move_time, until.timestamp())
    else:
        for players, a, b in combos:
            out.append(run_pairing(a, b, pairs, args.seed, args.move_time, args.jobs, players))
    result = {
        "bench": "strength",
        "python": platform.python_version(),
        "players": tables,
        "target": 14,
        "move_time": args.move_time,
        "move_clock": "thread CPU time",
        "seed": args.seed,
        "jobs": args.jobs,
        "pairings": out,
        "targets": {"heuristic-random": 0.9, "search-heuristic": 0.65},
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
