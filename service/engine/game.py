"""The rules of Trinidad All Fours as steps: state and action in, new state and events out.

Reading order follows a hand: ``new_game`` (R4 cut) → ``deal_hand`` (R5 deal, R6 kick) →
``_stand`` / ``_beg`` (R8) → ``_give_one`` / ``_run_pack`` (R9–R11) → ``_play_card``
(R12–R16) → ``score_hand`` (R17–R22, in ``scoring``) → the next ``deal_hand``.

Randomness comes only from the game's seed: the cut and each deal's shuffle are drawn
from SHAKE-256 of (seed, hand, deal) (see ``shuffled_deck``), so a game replays card for
card from its seed and its actions.

Events are JSON-ready dicts, each with a ``type``. They carry everything (the cards each
seat was dealt too); ``views.redact_event`` cuts them down to what one seat may see.
"""

from __future__ import annotations

import struct
from hashlib import shake_256
from typing import Any, Final

from . import play, scoring
from .actions import BEG, GIVE_ONE, RUN_PACK, STAND, Action, action_name
from .cards import ACE, CARD_NAMES, DECK, JACK, SIX, SUITS, TWO, Card, cards_of
from .errors import IllegalAction
from .play import legal_play_mask, winning_index
from .state import (
    BEGGED,
    GAVE_ONE,
    GIVE_ONE_OR_RUN,
    OVER,
    PLAY,
    RAN_PACK,
    STAND_OR_BEG,
    STOOD,
    State,
    team_of,
)
from .variants import DEFAULT_VARIANTS, PACK_OUT_ONE_BY_ONE, Variants

Event = dict[str, Any]

MAX_SEED: Final = 2**63 - 1
_BIT: Final = tuple(1 << c for c in range(52))


# --- chance: the cut and the shuffle, from the seed only ---------------------------------


_WORDS = struct.Struct("<51I").unpack


def _shuffle(material: bytes) -> list[Card]:
    """A uniform shuffle of the 52 cards driven by 51 random 32-bit words of SHAKE-256.

    Fisher–Yates, each swap index drawn as ``(word * (i + 1)) >> 32`` (Lemire's multiply
    and shift): the bias is below (i + 1) / 2**32, about one part in a hundred million;
    portable across platforms and Python versions, and a few microseconds compiled.
    """
    words: tuple[int, ...] = _WORDS(shake_256(material).digest(204))
    deck: list[int] = list(DECK)
    for i in range(51, 0, -1):
        word: int = words[i - 1]
        j: int = (word * (i + 1)) >> 32
        deck[i], deck[j] = deck[j], deck[i]
    return deck


def shuffled_deck(seed: int, hand_no: int, deal_no: int) -> list[Card]:
    """The deck for one deal of one hand, in dealing order (R5). Pure function of its inputs."""
    return _shuffle(b"allfours/deal/%d/%d/%d" % (seed, hand_no, deal_no))


def cut_for_dealer(seed: int, players: int) -> tuple[int, list[list[list[Any]]]]:
    """R4: every player cuts; the highest rank deals; those tied for highest cut again.

    Returns the first dealer and the rounds of the cut, each a list of [seat, card].
    """
    cutting = list(range(players))
    rounds: list[list[list[Any]]] = []
    while True:
        drawn = _shuffle(b"allfours/cut/%d/%d" % (seed, len(rounds)))[: len(cutting)]
        rounds.append([[seat, c] for seat, c in zip(cutting, drawn)])
        top = max(c % 13 for c in drawn)
        cutting = [seat for seat, c in zip(cutting, drawn) if c % 13 == top]
        if len(cutting) == 1:
            return cutting[0], rounds


# --- creating a game -----------------------------------------------------------------------


def new_game(
    players: int, seed: int, variants: Variants | None = None
) -> tuple[State, list[Event]]:
    """A new game: the cut for dealer (R4), the first deal and kick (R5, R6).

    ``players`` is 2 or 4 (R1); ``seed`` a whole number from 0 to 2**63 − 1.
    """
    if players not in (2, 4):
        raise ValueError("R1: All Fours is played by 2 or 4 players")
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= MAX_SEED:
        raise ValueError("seed must be a whole number from 0 to 2**63 - 1")
    variants = variants or DEFAULT_VARIANTS
    first_dealer, cut = cut_for_dealer(seed, players)
    s = State()
    s.players = players
    s.seed = seed
    s.variants = variants
    s.first_dealer = first_dealer
    s.ply = 0
    s.scores = [0, 0]
    s.hand_no = 0
    s.deal_no = 0
    s.dealer = first_dealer
    s.winner = None
    s.last_items = []
    s.items = []
    events: list[Event] = [
        {
            "type": "game_started",
            "players": players,
            "seed": seed,
            "variants": variants.to_dict(),
            "teams": [[t for t in range(players) if t & 1 == team] for team in (0, 1)],
            "cut": [[{"seat": seat, "card": CARD_NAMES[c]} for seat, c in r] for r in cut],
            "first_dealer": first_dealer,
        }
    ]
    deal_hand(s, shuffled_deck(seed, 0, 0), events)
    return s, events


# --- asking the state ---------------------------------------------------------------------


def current_seat(state: State) -> int | None:
    """The seat that must act now, or ``None`` when the game is over."""
    return None if state.phase == OVER else state.turn


def decision(state: State) -> str | None:
    """What kind of decision the seat in turn faces: a phase name, or None when over."""
    return None if state.phase == OVER else state.phase


def legal_actions(state: State, seat: int | None = None) -> list[Action]:
    """The legal actions, sorted, for the seat in turn (or for ``seat``: empty if not its turn)."""
    phase = state.phase
    if phase == PLAY:
        if seat is not None and seat != state.turn:
            return []
        return cards_of(
            legal_play_mask(state.hands[state.turn], state.trick, state.trump, state.variants)
        )
    if phase == OVER or (seat is not None and seat != state.turn):
        return []
    if phase == STAND_OR_BEG:
        return [STAND, BEG]
    if _give_one_allowed(state):
        return [GIVE_ONE, RUN_PACK]
    return [RUN_PACK]


def _give_one_allowed(state: State) -> bool:
    """R9 and its variant: giving one at target − 1 would hand the beggar's team the game."""
    v = state.variants
    return v.give_one_at_target_minus_one or (state.scores[team_of(state.beggar)] != v.target - 1)


# --- applying an action -------------------------------------------------------------------


def apply(
    state: State, action: object, seat: object = None, deal_next: bool = True
) -> tuple[State, list[Event]]:
    """Apply ``action`` for the seat in turn; returns the new state and the events it caused.

    ``seat``, when given, is the seat that asks to act: anyone else's turn is refused
    (R23). Refused actions raise ``IllegalAction`` and leave ``state`` as it was. Both
    are typed ``object`` because they may come straight from a client: anything that is
    not a legal action is refused by the rules, never by a ``TypeError``.

    ``deal_next=False`` is for simulations that only need a hand's result: the last card
    of a hand is scored (R17–R22) but the next hand is not dealt, leaving a state with
    every hand empty that no further action applies to (``hand_done``). Dealing — the
    SHAKE-256 shuffle and the deal's events — is two thirds of that last card's cost.
    """
    phase = state.phase
    if phase == OVER:
        raise IllegalAction("R22", "the game is over")
    if seat is not None and seat != state.turn:
        raise IllegalAction("R23", f"it is seat {state.turn}'s turn, not seat {seat}'s")
    if phase == PLAY:
        if type(action) is not int or not 0 <= action < 52:
            raise IllegalAction("R12", f"{_describe(action)} is not a card; play a card")
        card: int = action  # a native int from here on, in the compiled engine
        if (
            not legal_play_mask(state.hands[state.turn], state.trick, state.trump, state.variants)
            >> card
            & 1
        ):
            play.check_play(state, card)  # raises, naming the rule broken
        s = state.clone()
        events: list[Event] = []
        _play_card(s, card, events, deal_next)
    elif phase == STAND_OR_BEG:
        s = state.clone()
        events = []
        if action == STAND:
            _stand(s, events)
        elif action == BEG:
            _beg(s, events)
        else:
            raise IllegalAction("R8", f"the beggar must stand or beg, not {_describe(action)}")
    else:  # GIVE_ONE_OR_RUN
        if action == GIVE_ONE:
            if not _give_one_allowed(state):
                raise IllegalAction(
                    "R9",
                    "house rule: the dealer may not give one when it would hand the beggar's "
                    "team the game; run the pack",
                )
            s = state.clone()
            events = []
            _give_one(s, events)
        elif action == RUN_PACK:
            s = state.clone()
            events = []
            _run_pack(s, events)
        else:
            raise IllegalAction(
                "R9", f"the dealer must give one or run the pack, not {_describe(action)}"
            )
    s.ply += 1
    return s, events


def _describe(action: object) -> str:
    try:
        return repr(action_name(action))  # type: ignore[arg-type]
    except (KeyError, IndexError, TypeError):
        return repr(action)


# --- scoring as it happens (R22) ----------------------------------------------------------


def award(s: State, team: int, points: int, item: str, detail: Any, events: list[Event]) -> bool:
    """Score ``points`` to ``team`` at once; True when that ends the game (R22).

    The game ends the instant a team reaches the target, so nothing after this point is
    scored and two teams never both reach it.
    """
    scores = s.scores = s.scores.copy()
    scores[team] += points
    s.items = [*s.items, [item, team, points, detail]]
    events.append(scoring.score_event(item, team, points, detail, s.scores))
    if s.scores[team] >= s.variants.target:
        s.phase = OVER
        s.turn = -1
        s.winner = team
        events.append({"type": "game_over", "winner": team, "scores": list(s.scores)})
        return True
    return False


# --- the deal and the kick (R5, R6) -------------------------------------------------------


def kick_points(c: Card, variants: Variants) -> int:
    """R6: Ace 1, Six 2, Jack 3; the Tobago variant scores the Two instead of the Six."""
    rank = c % 13
    if rank == ACE:
        return 1
    if rank == JACK:
        return 3
    if rank == (TWO if variants.tobago_kick else SIX):
        return 2
    return 0


def deal_hand(s: State, deck: list[Card], events: list[Event]) -> None:
    """R5: six cards each in two rounds of three from the dealer's right, then the kick.

    ``start_hand`` and the R11 redeal call this with the seeded shuffle; tests call it
    with a stacked deck.
    """
    n = s.players
    first = s.dealer + 1
    hands = [0] * n
    bit = _BIT
    pos = 0
    for _ in range(2):
        for k in range(n):
            seat = (first + k) % n
            hands[seat] |= bit[deck[pos]] | bit[deck[pos + 1]] | bit[deck[pos + 2]]
            pos += 3
    s.hands = hands
    s.dealt = hands.copy()
    s.beg = None
    s.trump = -1
    s.trick = []
    s.tricks = []
    events.append(
        {
            "type": "deal",
            "hand": s.hand_no + 1,
            "deal": s.deal_no,
            "dealer": s.dealer,
            "cards": [[CARD_NAMES[c] for c in cards_of(h)] for h in hands],
        }
    )
    kick = deck[pos]
    s.stock = deck[pos + 1 :]
    s.kicks = []
    s.phase = STAND_OR_BEG
    s.turn = s.leader = s.beggar
    _turn_up(s, kick, events)  # may end the game (R22)


def _turn_up(s: State, kick: Card, events: list[Event]) -> bool:
    """Turn up a kick and score its points for the dealer's team (R6); True if that wins."""
    s.kicks = [*s.kicks, kick]
    points = kick_points(kick, s.variants)
    team = team_of(s.dealer)
    events.append({"type": "kick", "card": CARD_NAMES[kick], "points": points, "team": team})
    return points > 0 and award(s, team, points, "kick", kick, events)


def start_hand(s: State, events: list[Event]) -> None:
    """The deal passes to the right after every hand (R4)."""
    s.hand_no += 1
    s.deal_no = 0
    s.dealer = (s.dealer + 1) % s.players
    s.last_items = s.items
    s.items = []
    deal_hand(s, shuffled_deck(s.seed, s.hand_no, 0), events)


# --- begging (R8–R11) ---------------------------------------------------------------------


def _set_trump(s: State, events: list[Event]) -> None:
    """The last kick's suit is trump; the beggar leads the first trick (R12)."""
    s.trump = s.kicks[-1] // 13
    events.append({"type": "trump", "suit": SUITS[s.trump]})
    s.phase = PLAY
    s.turn = s.leader = s.beggar


def _stand(s: State, events: list[Event]) -> None:
    s.beg = STOOD
    events.append({"type": "stand", "seat": s.beggar})
    _set_trump(s, events)


def _beg(s: State, events: list[Event]) -> None:
    s.beg = BEGGED
    events.append({"type": "beg", "seat": s.beggar})
    s.phase = GIVE_ONE_OR_RUN
    s.turn = s.dealer


def _give_one(s: State, events: list[Event]) -> None:
    """R9: the beggar's team scores 1 and the kick's suit stays trump."""
    s.beg = GAVE_ONE
    team = team_of(s.beggar)
    events.append({"type": "give_one", "seat": s.dealer, "team": team})
    if award(s, team, 1, "give_one", None, events):
        return
    _set_trump(s, events)


def _run_pack(s: State, events: list[Event]) -> None:
    """R9–R11: three more cards each and a new kick, until a new suit turns up.

    Every kick scores for the dealer's team (R6). When a full run is no longer possible
    the remaining cards are turned one at a time (or, by variant, the hand is redealt at
    once); a pack exhausted with no new suit is redealt by the same dealer (R11).
    """
    s.beg = RAN_PACK
    events.append({"type": "run_pack", "seat": s.dealer})
    n = s.players
    begged_suit = s.kicks[0] // 13
    one_by_one = s.variants.pack_runs_out == PACK_OUT_ONE_BY_ONE
    stock = s.stock
    while True:
        if len(stock) >= 3 * n + 1:
            first = s.dealer + 1
            hands = s.hands = s.hands.copy()
            dealt = s.dealt.copy()
            run_cards: list[list[str]] = [[] for _ in range(n)]
            pos = 0
            bit = _BIT
            for k in range(n):
                seat = (first + k) % n
                packet = stock[pos : pos + 3]
                m = bit[packet[0]] | bit[packet[1]] | bit[packet[2]]
                hands[seat] |= m
                dealt[seat] |= m
                run_cards[seat] = [CARD_NAMES[c] for c in sorted(packet)]
                pos += 3
            s.dealt = dealt
            events.append({"type": "run_deal", "cards": run_cards})
            kick = stock[pos]
            stock = stock[pos + 1 :]
        elif stock and one_by_one:
            kick = stock[0]
            stock = stock[1:]
        else:
            s.stock = stock
            _redeal(s, events)
            return
        s.stock = stock
        if _turn_up(s, kick, events):
            return
        if kick // 13 != begged_suit:
            _set_trump(s, events)
            return


def _redeal(s: State, events: list[Event]) -> None:
    """R11: the pack ran out with no new suit: same dealer, fresh shuffle; points stand."""
    s.deal_no += 1
    events.append({"type": "redeal", "hand": s.hand_no + 1, "deal": s.deal_no})
    deal_hand(s, shuffled_deck(s.seed, s.hand_no, s.deal_no), events)


# --- play (R12–R16) -----------------------------------------------------------------------


def hand_done(state: State) -> bool:
    """Has the hand been played out and scored, its successor not dealt (``deal_next``)?"""
    return state.phase == PLAY and not state.trick and state.hands[state.turn] == 0


def play_in_place(s: State, c: Card) -> None:
    """Play ``c`` for the seat in turn into ``s`` itself: no copy, no events, no legality
    check, and no next deal after the hand's last card (it is scored, as with
    ``apply(..., deal_next=False)``).

    For simulations only — the search bot's rollouts (clients/strategies/playout.py)
    choose legal cards themselves and read only the hand's end, so the copy and the
    events of every card are work for nothing there. ``s`` must be a state nobody else holds
    (a ``clone``): a step replaces the lists it changes, so the state it was cloned
    from stays as it was.
    """
    _play_card(s, c, None, False)
    s.ply += 1


def _play_card(s: State, c: Card, events: list[Event] | None, deal_next: bool = True) -> None:
    seat = s.turn
    hands = s.hands = s.hands.copy()
    hands[seat] ^= _BIT[c]
    trick = s.trick = [*s.trick, c]
    if events is not None:
        events.append({"type": "card_played", "seat": seat, "card": CARD_NAMES[c]})
    n = s.players
    if len(trick) < n:
        s.turn = (seat + 1) % n
        return
    leader = s.leader
    winner = (leader + winning_index(trick, s.trump)) % n
    s.tricks = [*s.tricks, [leader, trick, winner]]
    if events is not None:
        events.append(
            {
                "type": "trick_won",
                "trick": len(s.tricks),
                "leader": leader,
                "cards": [CARD_NAMES[x] for x in trick],
                "winner": winner,
                "team": winner & 1,
            }
        )
    s.trick = []
    s.leader = s.turn = winner
    if hands[winner] == 0:  # every hand is empty: the hand is over
        said: list[Event] = [] if events is None else events
        if scoring.score_hand(s, said, award):
            return
        said.append({"type": "hand_over", "hand": s.hand_no + 1, "scores": list(s.scores)})
        if deal_next:
            start_hand(s, said)


__all__ = [
    "Event",
    "apply",
    "award",
    "current_seat",
    "cut_for_dealer",
    "deal_hand",
    "decision",
    "hand_done",
    "kick_points",
    "legal_actions",
    "new_game",
    "play_in_place",
    "shuffled_deck",
    "start_hand",
]
