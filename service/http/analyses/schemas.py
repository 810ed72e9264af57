"""Shapes of the post-game analysis (``service.http.analyses.routes``): the analysis of a
game, the progress while it is computed, a bot's averages. Kept apart from ``schemas``
as the feature's own module; the same conventions (responses closed ``Out``). The
analysis's inner members are the analyser's (``service.analysis``, docs/analysis.md):
open objects here, so that a refinement of the analyser is not a contract break."""

from __future__ import annotations

from marshmallow import fields

from service.http.schemas.common import Out, one_of

DECISIONS_DOC = (
    "every decision with two or more legal actions, in play order: `ply`, `hand`, "
    "`trick`, `seat`, `team`, `decision` (the engine's phase), `kind` (stand_or_beg, "
    "give_one_or_run, lead, follow), `rules` (the rule ids it exists by), `chosen`, "
    "`alternatives` (each legal action's `points`, `margin` and `win`, best first, valued "
    "from the seat's own information), `best`, `loss` (best's margin minus the chosen "
    "one's, in expected points of the hand), `win_loss`, `mark` (null, `inaccuracy`, "
    "`mistake` or `blunder`, by `thresholds`), `expected` (the chosen action's margin and "
    "win), `hindsight` (the best action with every card known, labelled as such)")


class Analysis(Out):
    game_id = fields.Str(required=True)
    version = fields.Int(required=True, metadata={"description": "the analysis format"})
    quality = fields.Dict(required=True, metadata={
        "description": "how it was computed: `name`, `samples` (sampled deals a decision), "
        "`hindsight_rollouts`, `sampling_seed` (the same game and quality give the same "
        "numbers)"})
    thresholds = fields.Dict(required=True, metadata={
        "description": "the losses at which a decision is marked an inaccuracy, a mistake, "
        "a blunder (`unit`: expected points of the hand, team margin)"})
    decisions = fields.List(fields.Dict(), required=True,
                            metadata={"description": DECISIONS_DOC})
    seats = fields.Dict(required=True, metadata={
        "description": "per seat (\"0\"..): `decisions`, `average_loss`, the count of each "
        "mark, and `by_kind` (the same per decision kind)"})
    teams = fields.Dict(required=True, metadata={
        "description": "per team (\"0\", \"1\"): the team's expected outcome after each of "
        "its decisions (`ply`, `hand`, `seat`, `margin`, `win`): the chart of the game"})


class AnalysisPending(Out):
    game_id = fields.Str(required=True)
    status = one_of(["queued", "running"], required=True, metadata={
        "description": "queued: waiting for a worker; running: being computed"})
    done = fields.Int(required=True, metadata={"description": "decisions valued so far"})
    total = fields.Int(required=True, metadata={
        "description": "decisions to value (0 until a worker has started)"})
    retry_after = fields.Int(required=True, metadata={
        "description": "seconds to wait before asking again (as `Retry-After`)"})
    href = fields.Str(required=True, metadata={"description": "where to ask again"})


class KindAverage(Out):
    decisions = fields.Int(required=True)
    average_loss = fields.Float(required=True)


class BotAnalysis(Out):
    bot_id = fields.Str(required=True)
    games = fields.Int(required=True, metadata={"description": "analysed games counted"})
    decisions = fields.Int(required=True)
    average_loss = fields.Float(required=True, allow_none=True, metadata={
        "description": "average loss per decision (expected points of the hand); null "
        "before any analysed game"})
    inaccuracy = fields.Int(required=True)
    mistake = fields.Int(required=True)
    blunder = fields.Int(required=True)
    by_kind = fields.Dict(keys=fields.Str(), values=fields.Nested(KindAverage),
                          required=True, metadata={
                              "description": "per decision kind (the engine's decision and "
                              "the analyser's kind: lead, follow, ...)"})
