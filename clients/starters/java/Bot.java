// The smallest complete All Fours Arena bot: Java 17+, its standard library (java.net.http)
// and Gson for JSON (the JDK has no JSON parser; Debian: libgoogle-gson-java).
//
// It follows docs/bots.md: find turns with GET /bots/me/turns (a long-poll), read the view,
// send one of its legal_actions with the view's version and a new Idempotency-Key, and keep
// that key for every retry of that action; wait Retry-After on 429/503; a lost connection is
// retried with the same key; a 409 means "look again"; invitations are accepted. Two seats
// in one game, or several games at once, need nothing more: each pass plays the turns due
// now (GET /games/{id} shows the seat whose turn it is) and goes back to the long-poll.
import com.google.gson.JsonArray;
import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonParseException;
import com.google.gson.JsonParser;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.Random;
import java.util.UUID;

public final class Bot {
    static final String URL = env("ARENA_URL", "http://127.0.0.1:8000").replaceAll("/+$", "");
    static final String TOKEN = System.getenv("ARENA_TOKEN");
    static final HttpClient HTTP = HttpClient.newBuilder()
            .version(HttpClient.Version.HTTP_1_1)
            .connectTimeout(Duration.ofSeconds(10))
            .build();
    static final Random RANDOM = new Random();

    record Answer(int status, JsonObject body) {}

    static String env(String name, String fallback) {
        String value = System.getenv(name);
        return value == null || value.isEmpty() ? fallback : value;
    }

    /** One request, retried the same way (same key) until the service answers it. */
    static Answer call(String method, String path, JsonObject body, String key)
            throws InterruptedException {
        for (int attempt = 0; attempt < 60; attempt++) {
            HttpRequest.Builder req = HttpRequest.newBuilder(URI.create(URL + path))
                    .timeout(Duration.ofSeconds(45))
                    .header("Authorization", "Bearer " + TOKEN);
            if (key != null) {
                req.header("Idempotency-Key", key);
            }
            if (body != null) {
                req.header("Content-Type", "application/json")
                   .method(method, HttpRequest.BodyPublishers.ofString(body.toString()));
            } else {
                req.method(method, HttpRequest.BodyPublishers.noBody());
            }
            HttpResponse<String> resp;
            try {
                resp = HTTP.send(req.build(), HttpResponse.BodyHandlers.ofString());
            } catch (IOException e) { // no answer (refused, reset, timed out): the same again
                Thread.sleep(Math.min(5000L, 250L << Math.min(attempt, 5)));
                continue;
            }
            int status = resp.statusCode();
            if (status == 429 || status == 503) { // nothing was applied: wait as told, again
                double wait = resp.headers().firstValue("Retry-After")
                        .map(Double::parseDouble).orElse(1.0);
                Thread.sleep((long) (wait * 1000));
                continue;
            }
            JsonElement parsed;
            try {
                parsed = JsonParser.parseString(resp.body());
            } catch (JsonParseException e) { // cut mid-answer: the same request again
                continue;
            }
            return new Answer(status, parsed.isJsonObject() ? parsed.getAsJsonObject()
                                                            : new JsonObject());
        }
        throw new IllegalStateException(method + " " + path + ": no answer");
    }

    static String choose(JsonObject view) { // your strategy goes here
        JsonArray legal = view.getAsJsonArray("legal_actions");
        return legal.get(RANDOM.nextInt(legal.size())).getAsString();
    }

    static boolean active(Answer a) {
        return a.status() == 200 && "active".equals(a.body().get("status").getAsString())
                && a.body().get("your_turn").getAsBoolean();
    }

    static void play(String game) throws InterruptedException {
        Answer view = call("GET", "/games/" + game, null, null);
        while (active(view)) {
            JsonObject body = new JsonObject();
            body.addProperty("action", choose(view.body()));
            body.add("version", view.body().get("version"));
            body.add("seat", view.body().get("seat"));
            Answer answer = call("POST", "/games/" + game + "/actions", body,
                                 UUID.randomUUID().toString());
            if (answer.status() == 200) {
                view = answer; // this seat's view right after the move
            } else if (answer.status() == 409 || answer.status() == 412) {
                view = call("GET", "/games/" + game, null, null); // moved on: look again
            } else {
                System.err.println("game " + game + ": " + answer.status() + " " + answer.body());
                return;
            }
        }
    }

    public static void main(String[] args) throws InterruptedException {
        while (true) {
            Answer turns = call("GET", "/bots/me/turns?timeout=20", null, null);
            if (turns.status() != 200) {
                System.err.println("GET /bots/me/turns: " + turns.status() + " " + turns.body());
                System.exit(1);
            }
            // another owner's bot asks for a game: accept (or POST .../decline; unanswered,
            // it expires and the game is cancelled). PUT /bots/me/policy decides who may ask.
            JsonArray invitations = turns.body().getAsJsonArray("invitations");
            if (invitations != null) {
                for (JsonElement inv : invitations) {
                    String id = inv.getAsJsonObject().get("id").getAsString();
                    call("POST", "/invitations/" + id + "/accept", new JsonObject(),
                         UUID.randomUUID().toString());
                }
            }
            for (JsonElement game : turns.body().getAsJsonArray("games")) {
                play(game.getAsString());
            }
        }
    }
}
