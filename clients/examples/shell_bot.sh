#!/bin/sh
# A complete All Fours Arena bot in POSIX sh, with curl and jq: proof that any language
# that speaks HTTP and JSON can play. It plays one game, then exits.
#
#   ARENA_URL    the service (default http://127.0.0.1:8000)
#   ARENA_TOKEN  the bot's bearer token; without one, a bot named $ARENA_NAME (default
#                shell-bot) is registered and {"id":..., "token":...} is printed first
#   ARENA_GAME   the game to play; without one, the bot waits (GET /bots/me/turns) for
#                the first game where it is its turn
#
# The loop: long-poll GET /games/{id}/turn until it is our turn or the game is over; pick
# one of view.legal_actions (at random); POST it with the view's version and a fresh
# Idempotency-Key (reused if the POST must be retried); a 409 means the game moved on,
# so look again. Exits 0 after printing the final view's scores.
set -eu

URL=${ARENA_URL:-http://127.0.0.1:8000}
TOKEN=${ARENA_TOKEN:-}
GAME=${ARENA_GAME:-}
BODY=$(mktemp)
trap 'rm -f "$BODY"' EXIT INT TERM

say() { printf '%s\n' "shell_bot: $*" >&2; }

# call METHOD PATH [JSON [EXTRA_HEADER]] -> status code on stdout, body in $BODY.
# curl itself retries refused connections; 429/503 are waited out here (Retry-After: 1 s).
call() {
    tries=0
    while :; do
        if [ -n "${3:-}" ]; then
            code=$(curl -sS -o "$BODY" -w '%{http_code}' --max-time 40 \
                --retry 3 --retry-connrefused -X "$1" \
                ${TOKEN:+-H "Authorization: Bearer $TOKEN"} -H 'Content-Type: application/json' \
                ${4:+-H "$4"} --data "$3" "$URL$2") || code=000
        else
            code=$(curl -sS -o "$BODY" -w '%{http_code}' --max-time 40 \
                --retry 3 --retry-connrefused -X "$1" \
                ${TOKEN:+-H "Authorization: Bearer $TOKEN"} "$URL$2") || code=000
        fi
        case $code in
            429|503|000)
                tries=$((tries + 1))
                [ "$tries" -lt 10 ] || { echo "$code"; return; }
                sleep 1 ;;
            *) echo "$code"; return ;;
        esac
    done
}

new_key() {
    if [ -r /proc/sys/kernel/random/uuid ]; then cat /proc/sys/kernel/random/uuid
    else echo "sh-$$-$(date +%s)-$(awk 'BEGIN { srand(); print int(rand() * 1e9) }')"; fi
}

if [ -z "$TOKEN" ]; then
    name=$(jq -cn --arg n "${ARENA_NAME:-shell-bot}" '{name: $n}')
    [ "$(call POST /bots "$name")" = 201 ] || { say "register failed: $(cat "$BODY")"; exit 1; }
    TOKEN=$(jq -r .token "$BODY")
    jq -c '{id, name, token}' "$BODY"
fi

while [ -z "$GAME" ]; do
    [ "$(call GET '/bots/me/turns?timeout=25')" = 200 ] || { say "$(cat "$BODY")"; exit 1; }
    GAME=$(jq -r '.games[0] // empty' "$BODY")
done
say "playing game $GAME"

n=0
while :; do
    [ "$(call GET "/games/$GAME/turn?timeout=25")" = 200 ] || { say "$(cat "$BODY")"; exit 1; }
    status=$(jq -r .view.status "$BODY")
    if [ "$status" = finished ]; then
        say "game over after $n actions: $(jq -c '{scores: .view.scores, winner: .view.winner, team: .view.team}' "$BODY")"
        jq -c '.view | {game: .id, scores, winner, team, actions: '"$n"'}' "$BODY"
        exit 0
    fi
    [ "$(jq -r .view.your_turn "$BODY")" = true ] || continue
    version=$(jq -r .view.version "$BODY")
    count=$(jq -r '.view.legal_actions | length' "$BODY")
    pick=$(awk -v seed="$$$n" -v n="$count" 'BEGIN { srand(seed); print int(rand() * n) }')
    action=$(jq -r --argjson i "$pick" '.view.legal_actions[$i]' "$BODY")
    body=$(jq -cn --arg a "$action" --argjson v "$version" '{action: $a, version: $v}')
    code=$(call POST "/games/$GAME/actions" "$body" "Idempotency-Key: $(new_key)")
    case $code in
        200) n=$((n + 1)); say "v$version: $action" ;;
        409|412) say "the game moved on ($(jq -r .type "$BODY")); looking again" ;;
        *) say "action $action refused ($code): $(cat "$BODY")"; exit 1 ;;
    esac
done
