"""The state of one game: plain data, JSON in and out without loss.

A ``State`` is a snapshot between two actions. The engine never mutates a state it was
given: ``game.apply`` clones it first. Lists inside a state are never changed in place,
only replaced (copy on write), so a clone is a handful of pointer copies that share every
list. That keeps an action to a few microseconds, which is what lets search bots run
thousands of simulations a move.

Seats are numbered in the order play moves (R3); team of a seat: ``team_of``.
"""

from __future__ import annotations

from typing import Any, Final

from .variants import DEFAULT_VARIANTS, Variants

# Phases. Each names the decision the seat in ``turn`` must make (R7), or the end.
STAND_OR_BEG: Final = "stand_or_beg"  # the beggar: stand or beg (R8)
GIVE_ONE_OR_RUN: Final = "give_one_or_run"  # the dealer, after a beg: give one or run the pack (R9)
PLAY: Final = "play"  # the seat in turn plays a card (R12–R16)
OVER: Final = "over"  # a team reached the target (R22)

# What the beggar decided this hand (``State.beg``).
BEG_PENDING: Final = None
STOOD: Final = "stood"
BEGGED: Final = "begged"
GAVE_ONE: Final = "gave_one"
RAN_PACK: Final = "ran_pack"

_FORMAT = 1  # bump when the saved form changes incompatibly


def team_of(seat: int) -> int:
    """R1/R3: partners sit opposite (0 and 2, 1 and 3); with 2 players each seat is a team."""
    return seat & 1


def partner_of(seat: int, players: int) -> int | None:
    return (seat + 2) % 4 if players == 4 else None


def seats_of(team: int, players: int) -> list[int]:
    return [s for s in range(players) if s & 1 == team]


class State:
    """One game between two actions. Attributes are plain JSON data (ints, lists, None,
    strings) except ``variants``; see the module docstring for the copy-on-write rule."""

    players: int
    seed: int
    variants: Variants
    first_dealer: int
    ply: int  # actions applied so far
    scores: list[int]  # per team
    hand_no: int  # 0 for the first hand
    deal_no: int  # 0, then 1, 2, … after each redeal of this hand (R11)
    dealer: int
    phase: str
    turn: int  # seat to act; -1 when the game is over
    hands: list[int]  # card mask per seat: what it holds now
    dealt: list[int]  # card mask per seat: all it was dealt this deal, runs included
    stock: list[int]  # undealt cards, next card first
    kicks: list[int]  # cards turned up this deal, in order (R5, R9, R11)
    beg: str | None
    trump: int  # suit, or -1 before it is set
    leader: int  # seat that led the current trick
    trick: list[int]  # cards of the current trick, from the leader on
    tricks: list[list[Any]]  # finished tricks of this hand: [leader, cards, winner]
    items: list[list[Any]]  # score items of this hand so far: [item, team, points, card]
    last_items: list[list[Any]]  # score items of the previous hand
    winner: int | None  # winning team

    def clone(self) -> State:
        """A copy sharing every list: steps replace lists, never change them in place.

        Written out field by field: the compiled engine (mypyc) turns this into a few
        pointer copies.
        """
        s = State()
        s.players = self.players
        s.seed = self.seed
        s.variants = self.variants
        s.first_dealer = self.first_dealer
        s.ply = self.ply
        s.scores = self.scores
        s.hand_no = self.hand_no
        s.deal_no = self.deal_no
        s.dealer = self.dealer
        s.phase = self.phase
        s.turn = self.turn
        s.hands = self.hands
        s.dealt = self.dealt
        s.stock = self.stock
        s.kicks = self.kicks
        s.beg = self.beg
        s.trump = self.trump
        s.leader = self.leader
        s.trick = self.trick
        s.tricks = self.tricks
        s.items = self.items
        s.last_items = self.last_items
        s.winner = self.winner
        return s

    @property
    def beggar(self) -> int:
        """R8: the player to the dealer's right."""
        return (self.dealer + 1) % self.players

    @property
    def is_over(self) -> bool:
        return self.phase == OVER

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict; ``State.from_dict`` restores the state exactly."""
        d: dict[str, Any] = {
            "v": _FORMAT,
            "players": self.players,
            "seed": self.seed,
            "first_dealer": self.first_dealer,
            "ply": self.ply,
            "scores": self.scores,
            "hand_no": self.hand_no,
            "deal_no": self.deal_no,
            "dealer": self.dealer,
            "phase": self.phase,
            "turn": self.turn,
            "hands": self.hands,
            "dealt": self.dealt,
            "stock": self.stock,
            "kicks": self.kicks,
            "beg": self.beg,
            "trump": self.trump,
            "leader": self.leader,
            "trick": self.trick,
            "tricks": self.tricks,
            "items": self.items,
            "last_items": self.last_items,
            "winner": self.winner,
        }
        if self.variants != DEFAULT_VARIANTS:
            d["variants"] = self.variants.changed()
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> State:
        if d.get("v") != _FORMAT:
            raise ValueError("unsupported state format")
        missing = _FIELDS.difference(d)
        if missing:
            raise ValueError(f"state lacks {sorted(missing)}")
        s = State()
        v = d.get("variants")
        s.variants = Variants.from_dict(v) if v else DEFAULT_VARIANTS
        s.players = d["players"]
        s.seed = d["seed"]
        s.first_dealer = d["first_dealer"]
        s.ply = d["ply"]
        s.scores = d["scores"]
        s.hand_no = d["hand_no"]
        s.deal_no = d["deal_no"]
        s.dealer = d["dealer"]
        s.phase = d["phase"]
        s.turn = d["turn"]
        s.hands = d["hands"]
        s.dealt = d["dealt"]
        s.stock = d["stock"]
        s.kicks = d["kicks"]
        s.beg = d["beg"]
        s.trump = d["trump"]
        s.leader = d["leader"]
        s.trick = d["trick"]
        s.tricks = d["tricks"]
        s.items = d["items"]
        s.last_items = d["last_items"]
        s.winner = d["winner"]
        return s

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, State):
            return NotImplemented
        return self.to_dict() == other.to_dict()

    __hash__ = None  # type: ignore[assignment]  # mutable: not a dict key

    def __repr__(self) -> str:
        return (
            f"<State players={self.players} hand={self.hand_no} phase={self.phase} "
            f"turn={self.turn} scores={self.scores} ply={self.ply}>"
        )


_FIELDS = frozenset(
    (
        "players",
        "seed",
        "first_dealer",
        "ply",
        "scores",
        "hand_no",
        "deal_no",
        "dealer",
        "phase",
        "turn",
        "hands",
        "dealt",
        "stock",
        "kicks",
        "beg",
        "trump",
        "leader",
        "trick",
        "tricks",
        "items",
        "last_items",
        "winner",
    )
)  # every saved field but variants, which defaults
