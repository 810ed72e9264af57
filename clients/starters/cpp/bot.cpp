// The smallest complete All Fours Arena bot: C++17, libcurl and nlohmann-json
// (Debian: apt-get install -y g++ libcurl4-openssl-dev nlohmann-json3-dev).
//
// It follows docs/bots.md: find turns with GET /bots/me/turns (a long-poll), read the view,
// send one of its legal_actions with the view's version and a new Idempotency-Key, and keep
// that key for every retry of that action; wait Retry-After on 429/503; a lost connection is
// retried with the same key; a 409 means "look again"; invitations are accepted. Two seats
// in one game, or several games at once, need nothing more: each pass plays the turns due
// now (GET /games/{id} shows the seat whose turn it is) and goes back to the long-poll.
#include <curl/curl.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <thread>

using json = nlohmann::json;

static std::string base_url;
static std::string token;
static std::mt19937_64 rng{std::random_device{}()};

struct Answer {
    long status;
    json body;
};

static size_t on_body(char* data, size_t size, size_t n, void* out) {
    static_cast<std::string*>(out)->append(data, size * n);
    return size * n;
}

static size_t on_header(char* data, size_t size, size_t n, void* out) {
    std::string line(data, size * n);
    std::string lower(line);
    std::transform(lower.begin(), lower.end(), lower.begin(), ::tolower);
    if (lower.rfind("retry-after:", 0) == 0) {
        *static_cast<std::string*>(out) = line.substr(12);
    }
    return size * n;
}

static void sleep_s(double seconds) {
    std::this_thread::sleep_for(std::chrono::milliseconds(static_cast<long>(seconds * 1000)));
}

static std::string new_key() {
    static const char* hex = "0123456789abcdef";
    std::string key;
    for (int i = 0; i < 32; ++i) key += hex[rng() % 16];
    return key;
}

// One request, retried the same way (same key) until the service answers it.
static Answer call(const std::string& method, const std::string& path, const json* body,
                   const std::string& key) {
    std::string data = body ? body->dump() : "";
    for (int attempt = 0; attempt < 60; ++attempt) {
        CURL* curl = curl_easy_init();
        std::string out, retry_after;
        curl_slist* headers = curl_slist_append(nullptr, ("Authorization: Bearer " + token).c_str());
        if (!key.empty()) headers = curl_slist_append(headers, ("Idempotency-Key: " + key).c_str());
        if (body) {
            headers = curl_slist_append(headers, "Content-Type: application/json");
            curl_easy_setopt(curl, CURLOPT_POSTFIELDS, data.c_str());
            curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE, static_cast<long>(data.size()));
        }
        curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, method.c_str());
        curl_easy_setopt(curl, CURLOPT_URL, (base_url + path).c_str());
        curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
        curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_body);
        curl_easy_setopt(curl, CURLOPT_WRITEDATA, &out);
        curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, on_header);
        curl_easy_setopt(curl, CURLOPT_HEADERDATA, &retry_after);
        curl_easy_setopt(curl, CURLOPT_TIMEOUT, 45L);
        curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT, 10L);
        curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
        CURLcode rc = curl_easy_perform(curl);
        long status = 0;
        curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
        curl_slist_free_all(headers);
        curl_easy_cleanup(curl);
        if (rc != CURLE_OK) {  // no answer (refused, reset, timed out): the same request again
            sleep_s(std::min(5.0, 0.25 * (1 << std::min(attempt, 5))));
            continue;
        }
        if (status == 429 || status == 503) {  // nothing was applied: wait as told, again
            sleep_s(retry_after.empty() ? 1.0 : std::atof(retry_after.c_str()));
            continue;
        }
        json parsed = json::parse(out, nullptr, false);
        if (parsed.is_discarded()) continue;  // cut mid-answer: the same request again
        return {status, parsed};
    }
    std::cerr << method << " " << path << ": no answer" << std::endl;
    std::exit(1);
}

static std::string choose(const json& view) {  // your strategy goes here
    const json& legal = view["legal_actions"];
    return legal[rng() % legal.size()].get<std::string>();
}

static bool my_turn(const Answer& a) {
    return a.status == 200 && a.body.value("status", "") == "active" &&
           a.body.value("your_turn", false);
}

static void play(const std::string& game) {
    Answer view = call("GET", "/games/" + game, nullptr, "");
    while (my_turn(view)) {
        json body = {{"action", choose(view.body)},
                     {"version", view.body["version"]},
                     {"seat", view.body["seat"]}};
        Answer answer = call("POST", "/games/" + game + "/actions", &body, new_key());
        if (answer.status == 200) {
            view = answer;  // this seat's view right after the move
        } else if (answer.status == 409 || answer.status == 412) {
            view = call("GET", "/games/" + game, nullptr, "");  // moved on: look again
        } else {
            std::cerr << "game " << game << ": " << answer.status << " " << answer.body.dump()
                      << std::endl;
            return;
        }
    }
}

int main() {
    const char* url = std::getenv("ARENA_URL");
    const char* tok = std::getenv("ARENA_TOKEN");
    base_url = url && *url ? url : "http://127.0.0.1:8000";
    while (!base_url.empty() && base_url.back() == '/') base_url.pop_back();
    token = tok ? tok : "";
    curl_global_init(CURL_GLOBAL_DEFAULT);
    for (;;) {
        Answer turns = call("GET", "/bots/me/turns?timeout=20", nullptr, "");
        if (turns.status != 200) {
            std::cerr << "GET /bots/me/turns: " << turns.status << " " << turns.body.dump()
                      << std::endl;
            return 1;
        }
        // another owner's bot asks for a game: accept (or POST .../decline; unanswered, it
        // expires and the game is cancelled). PUT /bots/me/policy decides who may ask.
        for (const json& inv : turns.body.value("invitations", json::array())) {
            json empty = json::object();
            call("POST", "/invitations/" + inv["id"].get<std::string>() + "/accept", &empty,
                 new_key());
        }
        for (const json& game : turns.body["games"]) play(game.get<std::string>());
    }
}
