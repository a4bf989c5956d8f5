// The benchmark peer: a GitHub webhook receiver as teams write it today, on @octokit/webhooks
// (`verifyAndReceive`), doing the same work as Beckon's ingest:
//   verify  the X-Hub-Signature-256 HMAC over the raw body (octokit does it);
//   parse   the JSON (octokit does it) and hand the typed event to the handler;
//   decide  roughly Beckon's rules: bots ignored; `@agent` at a word boundary outside fenced code,
//           inline code and `>` quotes; OWNER/MEMBER/COLLABORATOR enqueue, other authors deferred;
//   record  in SQLite (better-sqlite3, WAL, synchronous=FULL, the durability Beckon's ledger has):
//           the delivery (primary key: redeliveries are duplicates) and, when triggered, the task,
//           in one transaction. Beckon additionally reads a thread snapshot, enqueues, and marks
//           the task enqueued (three more statements), so the peer does a little less work.
// Single process (Node runs JavaScript on one thread); loopback only. Prints "listening <port>".
import http from "node:http";
import { Webhooks } from "@octokit/webhooks";
import Database from "better-sqlite3";

const secret = process.env.PEER_SECRET;
const dbPath = process.env.PEER_DB;
const port = Number(process.env.PEER_PORT || 0);
if (!secret || !dbPath) {
  console.error("set PEER_SECRET and PEER_DB");
  process.exit(2);
}

const db = new Database(dbPath);
db.pragma("journal_mode = WAL");
db.pragma("synchronous = FULL");
db.exec(`CREATE TABLE IF NOT EXISTS deliveries (id TEXT PRIMARY KEY, event TEXT NOT NULL, reason TEXT NOT NULL,
           thread_key TEXT, received_at INTEGER NOT NULL);
         CREATE TABLE IF NOT EXISTS tasks (id INTEGER PRIMARY KEY AUTOINCREMENT, thread_key TEXT NOT NULL,
           state TEXT NOT NULL, trigger_body TEXT NOT NULL, created_at INTEGER NOT NULL);`);
const insertDelivery = db.prepare(
  "INSERT OR IGNORE INTO deliveries (id, event, reason, thread_key, received_at) VALUES (?, ?, ?, ?, ?)");
const insertTask = db.prepare("INSERT INTO tasks (thread_key, state, trigger_body, created_at) VALUES (?, ?, ?, ?)");
const record = db.transaction((id, reason, threadKey, body) => {
  const now = Date.now();
  if (insertDelivery.run(id, "issue_comment", reason, threadKey, now).changes === 0) return "duplicate";
  if (reason === "enqueued" || reason === "deferred") insertTask.run(threadKey, reason === "enqueued" ? "queued" : "deferred", body, now);
  return reason;
});

const MENTION = /(^|[^\w@.\/-])@agent(?![\w-])/;
const TRUSTED = new Set(["OWNER", "MEMBER", "COLLABORATOR"]);
function visibleText(body) {
  return body
    .replace(/```[\s\S]*?(```|$)/g, "")
    .replace(/`[^`\n]*`/g, "")
    .split("\n")
    .filter((line) => !line.trimStart().startsWith(">"))
    .join("\n");
}
function decide(payload) {
  const c = payload.comment;
  if (payload.action !== "created") return "ignored:unrouted";
  if (c.user?.type === "Bot") return "ignored:bot";
  if (!MENTION.test(visibleText(c.body || ""))) return "ignored:no_mention";
  return TRUSTED.has(c.author_association) ? "enqueued" : "deferred";
}

// Outcomes by delivery id: requests interleave across the awaits, so no shared "last outcome".
const outcomes = new Map();
const webhooks = new Webhooks({ secret });
webhooks.on("issue_comment", ({ id, payload }) => {
  const reason = decide(payload);
  const threadKey = `github:${payload.repository.full_name}#${payload.issue.number}:agent`;
  outcomes.set(id, record(`github:${id}`, reason, threadKey, payload.comment.body));
});

const server = http.createServer((req, res) => {
  if (req.method !== "POST" || req.url !== "/webhooks/github") {
    res.writeHead(404).end();
    return;
  }
  const chunks = [];
  req.on("data", (c) => chunks.push(c));
  req.on("end", async () => {
    const h = req.headers;
    try {
      await webhooks.verifyAndReceive({
        id: h["x-github-delivery"],
        name: h["x-github-event"],
        signature: h["x-hub-signature-256"],
        payload: Buffer.concat(chunks).toString("utf8"),
      });
      const outcome = outcomes.get(h["x-github-delivery"]) ?? "ignored:unrouted";
      outcomes.delete(h["x-github-delivery"]);
      res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ outcome }));
    } catch (e) {
      const status = e.status || 500;
      res.writeHead(status === 400 ? 401 : status, { "content-type": "application/json" })
        .end(JSON.stringify({ outcome: "rejected" }));
    }
  });
});
server.listen(port, "127.0.0.1", () => console.log(`listening ${server.address().port}`));
for (const sig of ["SIGINT", "SIGTERM"]) process.on(sig, () => server.close(() => { db.close(); process.exit(0); }));
