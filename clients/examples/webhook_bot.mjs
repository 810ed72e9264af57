// The webhook bot of webhook_bot.py in Node (18+), with no dependencies. Copy this file.
//
//   ARENA_WEBHOOK_SECRET=whsec_... PORT=8080 node webhook_bot.mjs
//
// Checks every request before believing it: the HMAC-SHA256 signature over
// "<Arena-Timestamp>." + body with your secret, a timestamp within a minute of this
// machine's clock, and a delivery id not seen before (a replay). It answers the service's
// verification of its URL (event "verify": the challenge echoed). Change choose().
import { createHmac, timingSafeEqual } from "node:crypto";
import { createServer } from "node:http";

const secret = process.env.ARENA_WEBHOOK_SECRET;
const seen = new Set(); // delivery ids of the last minutes
const choose = (view, legal) => legal[Math.floor(Math.random() * legal.length)];

const reply = (res, status, body) => {
  res.writeHead(status, { "Content-Type": "application/json" });
  res.end(body === undefined ? "" : JSON.stringify(body));
};

createServer((req, res) => {
  const chunks = [];
  req.on("data", (c) => chunks.push(c));
  req.on("end", () => {
    const body = Buffer.concat(chunks);
    const ts = req.headers["arena-timestamp"] ?? "";
    const want = Buffer.from("sha256=" + createHmac("sha256", secret)
      .update(ts + ".").update(body).digest("hex"));
    const got = Buffer.from(String(req.headers["arena-signature"] ?? ""));
    if (got.length !== want.length || !timingSafeEqual(got, want)) return reply(res, 401);
    if (!/^\d+$/.test(ts) || Math.abs(Date.now() / 1000 - Number(ts)) > 60) {
      return reply(res, 401); // stale: an old request sent again
    }
    const msg = JSON.parse(body.toString("utf8"));
    if (seen.has(msg.delivery)) return reply(res, 409); // replayed within the minute
    seen.add(msg.delivery);
    if (seen.size > 10000) seen.delete(seen.values().next().value);
    // the URL's verification, before anything else is sent: echo the challenge
    if (msg.event === "verify") return reply(res, 200, { challenge: msg.challenge });
    if (msg.event !== "turn") return reply(res, 204); // start or end: nothing to answer
    reply(res, 200, { action: choose(msg.view, msg.view.legal_actions) });
  });
}).listen(Number(process.env.PORT ?? 8080), process.env.HOST ?? "127.0.0.1");
