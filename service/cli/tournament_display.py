"""What ``allfours tournament`` (``service.cli.tournament``) shows: progress while the games
run (``rich`` bars and tables, or a line per round), the bracket and the standings at the
end, and the JSON results document.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from service.cli.tournament_setup import Entrant, _say


class Display:
    """Progress while the games run: rich bars and tables, or (quiet) a line per round."""

    def __init__(self, quiet: bool, console: Any) -> None:
        self.quiet = quiet
        self.console = console
        self.live: Any = None
        self.progress: Any = None
        self.task: Any = None
        self._rounds_done = -1

    def __enter__(self) -> Display:
        if not self.quiet:
            from rich.live import Live
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )

            self.progress = Progress(
                TextColumn("[bold]{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("games"),
                TimeElapsedColumn(),
                TextColumn("eta"),
                TimeRemainingColumn(),
                console=self.console,
            )
            self.task = self.progress.add_task("games", total=None)
            self.live = Live(self.progress, console=self.console, refresh_per_second=4,
                             transient=False)
            self.live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.live is not None:
            self.live.__exit__(*exc)
            self.live = None

    def update(self, tour: Any, scores: dict[str, list[int]], entrants: list[Entrant]) -> None:
        prog = tour.progress
        if self.quiet:
            if prog["rounds_done"] != self._rounds_done:
                self._rounds_done = prog["rounds_done"]
                _say(f"round {prog['rounds_done']}/{prog['rounds_planned']} done, "
                     f"{prog['games_done']}/{prog['games_planned']} games finished")
            return
        from rich.console import Group
        from rich.table import Table
        from rich.text import Text

        self.progress.update(
            self.task, total=prog["games_planned"], completed=prog["games_done"],
            description=f"round {min(prog['rounds_done'] + 1, prog['rounds_planned'])}"
                        f"/{prog['rounds_planned']}",
        )
        names = {e.bot_id: e.name for e in entrants}
        games = Table(box=None, show_header=False, padding=(0, 1), pad_edge=False)
        for rnd in tour.rounds:
            for g in rnd["games"]:
                if g["status"] != "live":
                    continue
                a, b = (names.get(t, t) for t in g["teams"])
                sc = scores.get(g["game_id"] or "")
                games.add_row(
                    Text("▶", style="green"), f"round {rnd['round']}", f"game {g['slot'] + 1}",
                    Text(a, style="bold"), Text(f"{sc[0]:>2} – {sc[1]:<2}" if sc else "  –  "),
                    Text(b, style="bold"), Text(g["game_id"] or "", style="dim"),
                )
        # per entrant: results from the tournament (authoritative), moves from its runner
        tally = {e.bot_id: {"played": 0, "won": 0, "live": 0} for e in entrants}
        for rnd in tour.rounds:
            for g in rnd["games"]:
                for bot in g["teams"]:
                    t = tally.setdefault(bot, {"played": 0, "won": 0, "live": 0})
                    if g["status"] == "done":
                        t["played"] += 1
                        t["won"] += g["winner"] == bot
                    elif g["status"] == "live":
                        t["live"] += 1
        over = tour.status != "running"
        bots = Table(box=None, show_header=False, padding=(0, 1), pad_edge=False)
        for e in entrants:
            st, t = e.stats(), tally[e.bot_id]
            if e.crashed:
                state = Text("runner crashed", style="red")
            elif over:
                state = Text("done", style="green")
            else:
                state = Text(f"in {t['live']} games" if t["live"] else "waiting", style="dim")
            bots.add_row(
                Text(e.name, style="cyan"), Text(e.shown_strategy, style="dim"),
                f"{t['played']} played", f"{t['won']} won", f"{st.get('actions', 0)} moves",
                f"{st.get('errors', 0)} errors", state,
            )
        self.live.update(Group(self.progress, games, bots))


def standings_table(standings: Any, entrants: list[Entrant], width: int = 120) -> Any:
    """The final table; on a narrow terminal (80 columns) with one space between columns."""
    from rich import box
    from rich.table import Table

    strategies = {e.bot_id: e.shown_strategy for e in entrants}
    knockout = any(row.place is not None or row.eliminated is not None
                   for row in standings.items)
    table = Table(
        title="Standings", box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False,
        padding=(0, 0) if width < 90 else (0, 1), collapse_padding=True,
        caption=("score: matches won (a bye counts 1) · place: by the round reached · "
                 if knockout else
                 "score: match points (1 a pairing won, ½ drawn, 1 a bye) · ") + "mp: matchpoints, "
        "duplicate deals compared across tables, of the most possible · hands: hands won · "
        "for/agst: game points for and against · t/o: timeouts · rating: OpenSkill μ ± σ · "
        "ordinal: μ − 3σ, the conservative estimate",
    )
    for header, justify in [
        ("#", "right"), ("entrant", "left"), ("score", "right"), ("mp", "right"),
        ("games", "right"),
        ("won", "right"), ("win%", "right"), ("hands", "right"), ("for", "right"),
        ("agst", "right"), ("t/o", "right"), ("rating", "right"),
        ("ordinal", "right"),
    ]:
        # only the names may wrap, so a tight fit never cuts a number short
        table.add_column(header, justify=justify,  # type: ignore[arg-type]
                         no_wrap=header != "entrant")
    if knockout:
        table.add_column("place", justify="right", no_wrap=True)
    for row in standings.items:
        name = row.bot_name
        if strategies.get(row.bot_id, name) != name:
            name = f"{name} ({strategies[row.bot_id]})"
        pct = f"{100 * row.won / row.played:.0f}" if row.played else "–"
        table.add_row(
            str(row.rank), name, f"{row.score:g}",
            f"{row.matchpoints:g}/{row.comparisons}" if row.comparisons else "–",
            str(row.played), str(row.won), pct,
            str(row.hands_won), str(row.points_for), str(row.points_against),
            str(row.timeouts), f"{row.rating.mu:.1f} ± {row.rating.sigma:.1f}",
            f"{row.rating.ordinal:.1f}", *([row.place or "in"] if knockout else []),
        )
    return table


def bracket_tables(bracket: dict[str, Any], entrants: list[Entrant]) -> Any:
    """A knockout's bracket for the terminal: per round, each match with the seeds, the
    games won (then the points), the tiebreak games and who went through, and why."""
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    names = {e.bot_id: e.name for e in entrants}

    def side(bot: str | None, seed: int | None) -> str:
        return f"({seed}) {names.get(bot, bot)}" if bot else "–"

    parts: list[Any] = [Text("Bracket", style="bold italic", justify="center")]
    for rnd in bracket["rounds"]:
        table = Table(title=f"round {rnd['round']}: {rnd['name']}", box=None,
                      show_header=False, padding=(0, 1), title_justify="left")
        for m in rnd["matches"]:
            a, b = m["entrants"]
            if m["status"] == "bye":
                score, result = "bye", f"→ {names.get(m['winner'], m['winner'])}"
            else:
                score = (f"{m['wins'][0]}–{m['wins'][1]} ({m['points'][0]}–{m['points'][1]} "
                         f"pts)" if m["wins"] is not None else "–")
                if m["tiebreak_games"]:
                    score += f", {m['tiebreak_games']} tiebreak games"
                result = (f"→ {names.get(m['winner'], m['winner'])} (by {m['decided_by']})"
                          if m["winner"] else m["status"])
            table.add_row(side(a, m["seeds"][0]), score, side(b, m["seeds"][1]), result)
        parts.append(table)
    champion = bracket.get("champion")
    if champion:
        parts.append(Text(f"champion: {names.get(champion, champion)}", style="bold"))
    return Group(*parts)


def _live_scores(viewer: Any, tour: Any) -> dict[str, list[int]]:
    """Scores of the tournament's live games, from one page of ``GET /games``."""
    live = {g["game_id"] for r in tour.rounds for g in r["games"] if g["status"] == "live"}
    if not live:
        return {}
    try:
        page = viewer.games(status="active", limit=100)
    except Exception:
        return {}
    return {g.id: g.scores for g in page.items if g.id in live}


def results_document(tour: Any, standings: Any, entrants: list[Entrant], server: str,
                     started: float, finished: float) -> dict[str, Any]:
    """What ``--json-out`` gets: settings, every game with its result, standings, ratings."""
    names = {e.bot_id: e.name for e in entrants}
    games = []
    for rnd in tour.rounds:
        for g in rnd["games"]:
            games.append({
                "round": rnd["round"],
                **g,
                "team_names": [names.get(t, t) for t in g["teams"]],
                "winner_name": names.get(g["winner"]) if g["winner"] else None,
            })
    return {
        "tournament_id": tour.id,
        "name": tour.name,
        "status": tour.status,
        "server": server,
        "started": round(started, 3),
        "finished": round(finished, 3),
        "elapsed_seconds": round(finished - started, 3),
        "settings": tour.settings,
        "progress": tour.progress,
        "entrants": [
            {"name": e.name, "strategy": e.strategy, "bot_id": e.bot_id, "runner": e.stats()}
            for e in entrants
        ],
        "byes": [{"round": r["round"], "byes": r["byes"]} for r in tour.rounds if r["byes"]],
        "bracket": tour.raw.get("bracket"),
        "games": games,
        "standings": [dataclasses.asdict(row) for row in standings.items],
        "ratings_history": standings.history,
    }
