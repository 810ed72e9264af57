"""The key layout: every key the service keeps, under one key prefix, and the invariants
that hold between them on a single Redis and on a Redis/Valkey Cluster.

Names (``p`` = ``ARENA_KEY_PREFIX``; ``T(x)`` = ``{x}``, a hash tag, in cluster mode and
plain ``x`` on a single Redis, so a single Redis keeps the names it always had):

Per game (all in the game's slot: ``T(id)``):
- ``{p}game:T(id)``          hash: state, meta, status, version, log, deadline, updated
                              (cluster mode also: ``seq`` its creation sequence, ``turn``
                              the bot in turn, '' none)
- ``{p}game:T(id):idem``     hash: the retry memory, one record per bot
- ``{p}game:T(id):changed``  the game's channel (a sharded channel of the game's slot in
                              cluster mode, published by the same script that commits)

Cross-game indexes (each one key, so each in one slot, but not the game's):
- ``{p}games:all``, ``{p}games:{status}``  sorted sets, score = creation sequence
- ``{p}games:seq``                          the creation sequence
- ``{p}deadlines``                          sorted set ``{id}:{version}`` -> due time
- ``{p}bot:{id}:turns``   (single Redis)    set of games where it is that bot's turn
- ``{p}bot:{id}:games``   (cluster)         set of live games the bot sits in
- ``{p}bot:{id}:finished``                   sorted set: the bot's finished games by when
                                             each ended (``service.storage.finished``)
- ``{p}bot:{id}:live``                       set: the live games the bot sits in (a superset,
                                             read with repair; ``GET /owners/me``)

Per bot / per client (single-key operations only): ``{p}bot:{id}`` (hash; ``token`` its
token's hash), ``{p}token:{sha256}`` -> bot id, ``{p}rl:{who}:{window}`` (rate counters),
``{p}quota:{what}:{who}:{window}`` (creation quotas), ``{p}owner:{id}`` (an owner's record,
``service.arena.accounts.owners``), ``{p}invitation:{id}`` and ``{p}bot:{id}:invitations`` (games a
bot is invited to, ``service.arena.accounts.invitations``), ``{p}suspended``/``{p}suspensions`` (the
operator's suspensions), ``{p}tours:seeds`` and ``{p}ratings:version`` (under the tours tag:
used tournament seeds, the rules the published ratings follow), ``{p}hookverify`` (callback
URLs awaiting verification). docs/operations.md's table lists every family, and
tests/service/storage/test_key_space.py holds the code to it.

**Expiry** (``Store.Retention``; every family and its reason in docs/operations.md, "What
is kept, and for how long"). A key gets its TTL from the same script or transaction that
writes it, so no written key is ever without one for a moment:

- a bot and its token: ``bot_unused_s`` at registration (a person's account
  ``person_s``); ``Store.bots_played`` PERSISTs both (and the owner's record) when the bot
  is first seated in a game that starts (``Arena.announce_status``) or enters a tournament
  or a ladder; a person's account is given ``person_s`` again at every game instead;
- a casual game (no ``tournament``, no ``ladder`` in its meta) and its retry memory: the
  TTL for the status it is written with (``Store.game_ttl``: waiting, idle, finished, a
  person's finished game), set by ``add_game`` and by the commit script with the status
  (``COMMIT``/``COMMIT_CLUSTER`` ARGV[20]); a tournament's or a ladder's game has none;
- ``bot:{id}:turns``: at least each casual game's TTL in it, none once a kept game is
  (``COMMIT``, ``TURN_ADD``); a person's sets expire with the account.

**The retention pass** (``Store.forget_expired``, from the sweeper): the cross-game
indexes are not a game's keys, so an expired game leaves its entries in them; the pass
goes round ``games:all`` a batch at a time and removes, from it and every status index,
the games whose hash is gone. Nothing else needs it: ``bot_turns`` drops a gone game when
it reads the set (``TURNS`` on a single Redis; in a cluster it already did), and the
sweeper drops a deadline entry whose game is gone when it falls due. In a cluster an
index entry is written before its game (rule 1 below), so a game missing at one visit is a
suspect, removed only if still missing at the next.

Tournaments, the leaderboard and the embargo set are read and written together in one
MULTI (WATCH on the tournament and the leaderboard): their keys share the tag
``T(tours)`` (``Keys.tours_prefix``), so they are one slot by construction.

**Single Redis.** ``COMMIT`` (``service.storage.scripts``) checks the version and writes
the game, its retry memory, every index above and the rate counter in one script: the
indexes are exact at every instant.

**Cluster.** A script may only touch one slot, so ``COMMIT_CLUSTER`` writes the game's
own keys only (version check, state, log, status, deadline field, retry memory, turn
field, publish), and the cross-game indexes are moved in steps around it by the store.
The rule that makes a crash between the steps harmless:

1. *Additions before the truth, removals after it.* Before the commit the store adds
   what the new version needs (the new status index, the new version's deadline entry,
   a joining bot's ``bot:{id}:games``); after it, it removes what the old version
   needed (the old status index, a finished game from its bots' sets). So each index is
   always a *superset* of the truth: a process killed between the steps leaves an extra
   entry, never a missing one.
2. *Readers check the truth and repair.* ``list_games`` keeps only games whose status is
   the index's, and deletes an entry whose game has moved past it (statuses only move
   forward: waiting -> active -> finished, so such an entry can never become true again);
   ``bot_turns`` reads the ``turn`` field of the bot's games and drops finished or gone
   games; the sweeper treats a deadline entry whose version is not current (or whose
   game's deadline is later) as void and re-arms the game's true deadline
   (``Store.settle_deadline``).
3. ``Store.reconcile`` rebuilds the indexes from the per-game truth for the games it is
   given (the live games by default): run by the sweeper's repair pass, and by tests
   after killing a process between the steps (``ARENA_FAILPOINT``).

A tournament's game in cluster mode gets an id derived from (tournament, slot), and is
created only if absent, before the tournament's MULTI: a losing or killed MULTI leaves a
game that the retried MULTI adopts, never a second game for the slot.
"""

from __future__ import annotations


class Keys:
    """Key names for one prefix, with hash tags in cluster mode (see the module docstring)."""

    def __init__(self, prefix: str, cluster: bool = False) -> None:
        if "{" in prefix or "}" in prefix:
            raise ValueError("ARENA_KEY_PREFIX must not contain '{' or '}' (hash tags)")
        self.p = prefix
        self.cluster = cluster

    def tag(self, text: str) -> str:
        return f"{{{text}}}" if self.cluster else text

    def game(self, game_id: str) -> str:
        return f"{self.p}game:{self.tag(game_id)}"

    def retry(self, game_id: str) -> str:
        return f"{self.p}game:{self.tag(game_id)}:idem"

    def channel(self, game_id: str) -> str:
        return f"{self.p}game:{self.tag(game_id)}:changed"

    def index(self, status: str) -> str:
        """``status`` is waiting, active, finished or all."""
        return f"{self.p}games:{status}"

    @property
    def seq(self) -> str:
        return f"{self.p}games:seq"

    @property
    def deadlines(self) -> str:
        return f"{self.p}deadlines"

    def bot(self, bot_id: str) -> str:
        return f"{self.p}bot:{bot_id}"

    def bot_turns(self, bot_id: str) -> str:
        return f"{self.p}bot:{bot_id}:turns"

    def bot_games(self, bot_id: str) -> str:
        """Cluster mode: the live games ``bot_id`` sits in (a superset, see above)."""
        return f"{self.p}bot:{bot_id}:games"

    def token(self, digest: str) -> str:
        return f"{self.p}token:{digest}"

    def rate(self, who: str, window: int) -> str:
        return f"{self.p}rl:{who}:{window}"

    def quota(self, who: str, window: int) -> str:
        """A creation quota's counter (``service.http.quotas``), expiring with its window."""
        return f"{self.p}quota:{who}:{window}"

    def owner(self, owner_id: str) -> str:
        """An owner's record (written by ``service.arena.accounts.owners``; read here only to keep
        it once one of its bots has played)."""
        return f"{self.p}owner:{owner_id}"

    @property
    def tours_prefix(self) -> str:
        """The prefix of every tournament key (and the embargo set and the leaderboard):
        the prefix itself on a single Redis, the prefix and one hash tag in a cluster."""
        return f"{self.p}{{tours}}:" if self.cluster else self.p


# Statuses in the only order a game moves through them (``list_games``' read-repair).
STATUS_ORDER = {"waiting": 0, "active": 1, "finished": 2}
