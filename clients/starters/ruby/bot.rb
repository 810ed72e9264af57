# The smallest complete All Fours Arena bot: Ruby, standard library only.
#
# It follows docs/bots.md: find turns with GET /bots/me/turns (a long-poll), read the view,
# send one of its legal_actions with the view's version and a new Idempotency-Key, and keep
# that key for every retry of that action; wait Retry-After on 429/503; a lost connection is
# retried with the same key; a 409 means "look again". Two seats in one game need nothing
# more: GET /games/{id} shows the seat whose turn it is.
require "json"
require "net/http"
require "securerandom"
require "uri"

BASE = URI((ENV["ARENA_URL"] || "http://127.0.0.1:8000").chomp("/"))
TOKEN = ENV.fetch("ARENA_TOKEN")

# One request, retried the same way (same key) until the service answers it.
def call(method, path, body = nil, key = nil)
  60.times do |attempt|
    req = (method == "POST" ? Net::HTTP::Post : Net::HTTP::Get).new(BASE.path + path)
    req["Authorization"] = "Bearer #{TOKEN}"
    req["Idempotency-Key"] = key if key
    if body
      req["Content-Type"] = "application/json"
      req.body = JSON.generate(body)
    end
    begin
      resp = Net::HTTP.start(BASE.host, BASE.port, read_timeout: 45, open_timeout: 10,
                             max_retries: 0) { |http| http.request(req) }
    rescue StandardError  # no answer (refused, reset, timed out): the same request again
      sleep([5, 0.25 * 2**attempt].min)
      next
    end
    if %w[429 503].include?(resp.code)  # nothing was applied: wait as told, send it again
      sleep((resp["Retry-After"] || 1).to_f)
      next
    end
    return [resp.code.to_i, JSON.parse(resp.body)]
  end
  abort "#{method} #{path}: no answer"
end

def choose(view)  # your strategy goes here
  view["legal_actions"].sample
end

def play(game)
  status, view = call("GET", "/games/#{game}")
  while status == 200 && view["status"] == "active" && view["your_turn"]
    body = { action: choose(view), version: view["version"], seat: view["seat"] }
    code, answer = call("POST", "/games/#{game}/actions", body, SecureRandom.uuid)
    if code == 200
      view = answer  # this seat's view right after the move
    elsif [409, 412].include?(code)  # the game moved on: read it again, decide again
      status, view = call("GET", "/games/#{game}")
    else
      warn "game #{game}: #{code} #{answer['type']}"
      return
    end
  end
end

loop do
  status, turns = call("GET", "/bots/me/turns?timeout=20")
  abort "GET /bots/me/turns: #{status} #{turns}" unless status == 200
  # another owner's bot asks for a game: accept (or POST .../decline; unanswered, it
  # expires and the game is cancelled). PUT /bots/me/policy decides who may ask.
  (turns["invitations"] || []).each do |inv|
    call("POST", "/invitations/#{inv["id"]}/accept", {}, SecureRandom.uuid)
  end
  turns["games"].each { |game| play(game) }
end
