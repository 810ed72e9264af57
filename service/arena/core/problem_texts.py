"""What each problem type means and what a bot should do about it: the one text behind
the page its ``type`` URI answers (``GET /problems/<kind>``: HTML for people, Markdown or
JSON for tools) and behind docs/reference.md's table of errors, whose rows must read the same
(tests/service/http/test_problem_pages.py). Beside ``problems.KINDS``, which holds each
kind's status and title; every kind there has its text here, so a new kind cannot ship
without saying what a client should do.
"""

from __future__ import annotations

# kind -> (when it is answered, what a bot should do), as Markdown; in docs/reference.md's order
TEXTS: dict[str, tuple[str, str]] = {
    'validation': (
        'the body, query or a header does not fit the contract (`errors` says which field '
        'and why): an action not in [card notation](bots.md#card-notation), a bad variant, an '
        '`Idempotency-Key` longer than 100 characters, an `If-Match` or `Last-Event-ID` of '
        'the wrong form',
        'fix the request; resending it unchanged gets the same answer'),
    'malformed-json': (
        'the body is not JSON',
        'fix the request'),
    'bad-request': (
        'another malformed request',
        'fix the request'),
    'not-found': (
        'no such game, bot, seat or tournament (or path)',
        'check the id; a game that is gone will not come back'),
    'method-not-allowed': (
        'a method the path does not have (see `Allow`)',
        'fix the request'),
    'not-acceptable': (
        '`Accept` asks for a type the service cannot send',
        'accept `application/json` (`*/*` or no `Accept` is fine)'),
    'unsupported-media-type': (
        'a body that is not `application/json`',
        'send `Content-Type: application/json`'),
    'unauthorized': (
        'no bearer token, a malformed one, or one the service does not know, where a token '
        'is needed',
        'fix the token; a lost token cannot be shown again: register a new bot'),
    'forbidden-seat': (
        'the bot does not hold that seat (or no seat in this game)',
        'act only for your own seats; check `seats` in the view'),
    'embargoed': (
        'a tournament game whose duplicate deal is still being played at another table: '
        'only the seats at this table may read it until every table has finished',
        'nothing to do for a bot: read your own games with your token; the game opens to '
        'everyone once its deal is over'),
    'not-a-player': (
        'the first `GET /games/{id}/analysis` of a game (the one that queues its analysis) '
        'without the token of a bot that played it '
        '([analysis.md](analysis.md#asking-for-an-analysis))',
        'ask for your own games with your token, or with `POST /games/{id}/analysis` '
        '(anyone, within `ARENA_ANALYSIS_ASKS` an hour); anyone may read an analysis once '
        'it is asked for'),
    'forbidden-entrant': (
        "`POST /tournaments/{id}/entrants/{bot}/withdraw` with another bot's token: only "
        'the entrant itself may withdraw it',
        "send the entrant's own token"),
    'suspended': (
        'the operator suspended this bot or its owner (`detail` gives the reason); every '
        'call with its token but `GET /bots/me`',
        'nothing to do by API: ask the operator'),
    'owner-admission': (
        '`POST /bots` without a bot token where the service admits no new owners that way '
        '(`ARENA_OWNER_ADMISSION`: `invite` needs an `invitation` code, `closed` none)',
        'register with the token of one of your bots, or ask the operator for a code'),
    'invitation-refused': (
        '`POST /games` names a bot whose policy refuses invitations from you (or a '
        'suspended bot)',
        'leave it out; invite bots that accept you'),
    'tournament-over': (
        'pausing, resuming, cancelling or withdrawing from a tournament that is finished or '
        'cancelled',
        'nothing to do: read its standings'),
    'seed-reused': (
        'creating a tournament with the `seed` of an earlier one (its deals are public once '
        'it is over), without `trusted`',
        'not for bots: the organizer omits the seed, or sets `trusted` for its own bots '
        '([ratings](ratings.md#fair-deals-chosen-seeds-and-the-seed-commitment))'),
    'not-organizer': (
        'starting, pausing, resuming, cancelling a tournament or excluding an entrant with '
        'the token of a bot whose owner did not organize it '
        '([tournaments](tournaments.md#organize-one-an-owner))',
        "send a token of one of the organizer's bots"),
    'tournament-quota': (
        'creating a tournament when your owner already organized '
        '`ARENA_TOURNAMENTS_PER_OWNER_DAY` today or has `ARENA_TOURNAMENTS_OPEN_PER_OWNER` '
        'not yet over',
        'wait `Retry-After` seconds, or cancel one of yours'),
    'entry-closed': (
        'entering a tournament that is not registering (started, finished or cancelled; an '
        'arena takes late entrants until its clock ends)',
        'look for another: `GET /tournaments?status=registering`'),
    'entry-code': (
        'entering a private tournament without its join code, or with a wrong one',
        'ask the organizer for the code and send it as `code`'),
    'entry-not-validated': (
        'entering a tournament open to validated bots only with a bot that never passed a '
        'validation game',
        'join any ladder once (`POST /ladders/{name}/entry`): one game against a house bot '
        'validates the bot for good ([ladder](ladder.md))'),
    'entry-rated-games': (
        'entering a tournament that asks for more rated games than the bot has on the '
        'leaderboard (`min_rated_games`)',
        'play rated games first (the ladder, other tournaments)'),
    'entry-rating-band': (
        'entering a tournament whose `rating_min`/`rating_max` (leaderboard ordinal) the '
        'bot is outside',
        'enter another tournament'),
    'entry-one-per-owner': (
        'entering a tournament (one bot per owner, the default) in which another bot of '
        'your owner is entered',
        'enter one bot only, or leave with the other first'),
    'entry-quota': (
        'entering more tournaments not yet over than `ARENA_TOURNAMENT_ENTRIES_PER_BOT`',
        'leave one, or wait `Retry-After` seconds and try again once one is over'),
    'tournament-full': (
        'entering a tournament that has `max_entrants` already',
        'enter another tournament'),
    'not-started': (
        'pausing or resuming a tournament still registering',
        'nothing to do: start it or cancel it'),
    'too-few-entrants': (
        "the organizer's `POST /tournaments/{id}/start` with fewer entrants than "
        '`min_entrants`',
        'wait for more entrants'),
    'forbidden': (
        "the call needs the admin token (suspensions, owner invitations, the operator's "
        'settings); the detail says when the service has no admin token configured at all',
        'not for bots'),
    'seat-taken': (
        'the seat was taken, or the game has started',
        'pick another open seat or game'),
    'game-not-started': (
        'the game is still waiting for players',
        'wait (`/turn` long-poll) until `status` is `active`'),
    'game-not-over': (
        '`GET /games/{id}/analysis` of a game still being played: a game is analysed once '
        'it is over ([analysis.md](analysis.md))',
        "ask again after the game's end"),
    'not-your-turn': (
        'another seat must act ([R23](rules.md#r23)); `rule` and `rule_doc` say so',
        'read the view again and wait for your turn'),
    'illegal-action': (
        'the rules refuse it: `rule` names the rule (e.g. `R14`) and `rule_doc` where it is '
        'explained (`docs/rules.md#r14`); `R22` once the game is over',
        "send only one of the view's `legal_actions`; this is a bug in the bot"),
    'version-conflict': (
        "the body's `version` is not the game's (`current_version`)",
        'read the view again and decide again'),
    'precondition-failed': (
        "`If-Match` is not the game's version (`current_version`)",
        'read the view again and decide again'),
    'idempotency-key-reused': (
        'this key was used in this game with a different request',
        'use a new key for every new decision; reuse a key only to retry the same request'),
    'payload-too-large': (
        'the body is larger than the service accepts (16 KiB)',
        'send less'),
    'rate-limited': (
        'too many requests ([rate limits](bots.md#rate-limits)); also too many new owners from '
        "your network, too many house games an hour, the service's minute of new accounts "
        "or games spent (and your network's reserve), an invited bot with too many pending "
        'invitations (or from you, or declined by it), too many of your analyses waiting, '
        'or too many bytes of analyses downloaded this minute',
        'wait `Retry-After` seconds, then retry the same request'),
    'too-many-connections': (
        'your address (an IPv6 /64 counts as one) or your bot holds as many open event '
        'streams or long-polls (`/bots/me/turns` and `/turn` unless `timeout=0`, actions '
        'with `?wait`) as it may at once (by default, per server process, 64 streams and '
        '256 polls an address, 16 streams and 64 polls a bot), or your network (an IPv4 '
        "/24, an IPv6 /64) holds its share of the server's streams and long-polls (186 per "
        'process by default), or your address holds as many connections as it may; the '
        'connection closes',
        'close streams or polls you no longer need (a runner needs one poll, plus one per '
        'game it plays); wait `Retry-After` seconds, then retry'),
    'request-timeout': (
        'the request body did not arrive within 10 s of its head; the connection closes',
        'send the whole body at once (they are at most 16 KiB)'),
    'malformed-body': (
        "the body's framing cannot be read (a malformed chunk, a bad `Content-Length`); the "
        'connection closes',
        "fix the client's HTTP; retrying it unchanged gets the same answer"),
    'uri-too-long': (
        'the request line is longer than the server reads (4,094 bytes)',
        'send a shorter query'),
    'header-fields-too-large': (
        'too many header fields, or one too large',
        'send fewer or shorter headers'),
    'over-capacity': (
        'the server process is at its connection limit (`ARENA_WORKER_CONNECTIONS`: refused '
        "before the request is read), or spectators' event streams fill their share, or "
        'event streams and long-polls together fill theirs (ordinary requests and actions '
        'are still served then: an action with `?wait` is applied and answered at once, '
        'without its wait); the connection closes. Not the game store: that is '
        '`service-unavailable`',
        'wait `Retry-After` seconds, then send the same request again (with the same '
        '`Idempotency-Key`): nothing was applied. A long-poll refused this way can be '
        'replaced meanwhile by short requests (`GET /games/{id}`, `GET /bots/me/turns` '
        'without `timeout`)'),
    'shutting-down': (
        'the server process is stopping (a deploy, a restart): a request on a new '
        'connection, or one it could not finish; the connection closes',
        'wait `Retry-After` seconds, then retry the same request with the same '
        '`Idempotency-Key` (another process, or this one restarted, answers it)'),
    'service-unavailable': (
        'the game store is unreachable, or too many writers at once',
        'wait `Retry-After` seconds, then retry the same request with the same '
        '`Idempotency-Key`'),
    'internal': (
        'a bug in the service; never expected',
        'retry later with the same `Idempotency-Key`, and report it'),
    'unknown-api-version': (
        'the `Arena-Api-Version` header names a version this service does not serve '
        '(`detail` lists those it does)',
        'send a served version, or leave the header out for the newest '
        '([versions](versions.md))'),
}
