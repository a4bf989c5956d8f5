// The Lambda peer: the same handler logic as the `github-webhook` function, as teams write it on
// Node.js today, with its own Lambda Runtime API client loop (what the managed nodejs runtime does
// for a handler), so the benchmark starts it exactly like the Rust binary: a fresh process with
// AWS_LAMBDA_RUNTIME_API set, timed to its first answered invocation.
//   verify  the X-Hub-Signature-256 HMAC over the raw body (@octokit/webhooks `verifyAndReceive`);
//   parse   the JSON (octokit) and hand the typed event to the handler;
//   decide  roughly Beckon's rules (the same regex and roles as server.mjs);
//   record  in DynamoDB (AWS SDK v3): the delivery as a conditional put (a redelivery is a
//           duplicate) and, when triggered, the task in one TransactWriteItems; then the task
//           message on the SQS FIFO queue. Beckon additionally reads a thread snapshot, coalesces,
//           and marks the task enqueued, so the peer does a little less work.
// Environment: AWS_LAMBDA_RUNTIME_API, AWS_REGION, AWS_ENDPOINT_URL (moto), BECKON_TABLE_NAME,
// BECKON_QUEUE_URL, BECKON_GITHUB_WEBHOOK_SECRET.
import http from "node:http";
import { Webhooks } from "@octokit/webhooks";
import { DynamoDBClient, TransactWriteItemsCommand } from "@aws-sdk/client-dynamodb";
import { SQSClient, SendMessageCommand } from "@aws-sdk/client-sqs";

const api = process.env.AWS_LAMBDA_RUNTIME_API;
const table = process.env.BECKON_TABLE_NAME;
const queueUrl = process.env.BECKON_QUEUE_URL;
const secret = process.env.BECKON_GITHUB_WEBHOOK_SECRET;
if (!api || !table || !queueUrl || !secret) {
  console.error("set AWS_LAMBDA_RUNTIME_API, BECKON_TABLE_NAME, BECKON_QUEUE_URL and BECKON_GITHUB_WEBHOOK_SECRET");
  process.exit(2);
}
const dynamo = new DynamoDBClient({});
const sqs = new SQSClient({});
const webhooks = new Webhooks({ secret });

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

let outcome = "ignored:unrouted";
webhooks.on("issue_comment", async ({ id, payload }) => {
  const reason = decide(payload);
  const threadKey = `github:${payload.repository.full_name}#${payload.issue.number}:agent`;
  const now = String(Date.now());
  const items = [{
    Put: {
      TableName: table,
      Item: { pk: { S: `peer-delivery#github:${id}` }, sk: { S: "delivery" }, reason: { S: reason }, at: { N: now } },
      ConditionExpression: "attribute_not_exists(pk)",
    },
  }];
  const taskId = `peer-${id}`;
  if (reason === "enqueued" || reason === "deferred") {
    items.push({
      Put: {
        TableName: table,
        Item: { pk: { S: `peer-task#${taskId}` }, sk: { S: "task" }, thread: { S: threadKey },
          state: { S: reason === "enqueued" ? "queued" : "deferred" }, body: { S: payload.comment.body }, at: { N: now } },
      },
    });
  }
  try {
    await dynamo.send(new TransactWriteItemsCommand({ TransactItems: items }));
  } catch (e) {
    if (e.name === "TransactionCanceledException") { outcome = "duplicate"; return; }
    throw e;
  }
  if (reason === "enqueued") {
    await sqs.send(new SendMessageCommand({
      QueueUrl: queueUrl, MessageBody: JSON.stringify({ task_id: taskId }),
      MessageGroupId: threadKey, MessageDeduplicationId: taskId,
    }));
  }
  outcome = reason;
});

async function handle(event) {
  const h = Object.fromEntries(Object.entries(event.headers || {}).map(([k, v]) => [k.toLowerCase(), v]));
  const body = event.isBase64Encoded ? Buffer.from(event.body || "", "base64").toString("utf8") : event.body || "";
  outcome = "ignored:unrouted";
  try {
    await webhooks.verifyAndReceive({ id: h["x-github-delivery"], name: h["x-github-event"],
      signature: h["x-hub-signature-256"], payload: body });
    return { statusCode: 200, headers: { "content-type": "application/json" }, body: JSON.stringify({ outcome }) };
  } catch (e) {
    const status = e.status === 400 ? 401 : e.status || 500;
    return { statusCode: status, headers: { "content-type": "application/json" }, body: JSON.stringify({ outcome: "rejected" }) };
  }
}

const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
function call(method, path, body) {
  return new Promise((resolve, reject) => {
    const [host, port] = api.split(":");
    const req = http.request({ host, port, path: `/2018-06-01/runtime/${path}`, method, agent,
      headers: body ? { "content-type": "application/json", "content-length": Buffer.byteLength(body) } : {} }, (res) => {
      const chunks = [];
      res.on("data", (c) => chunks.push(c));
      res.on("end", () => resolve({ status: res.statusCode, headers: res.headers, body: Buffer.concat(chunks).toString("utf8") }));
    });
    req.on("error", reject);
    req.end(body);
  });
}

for (;;) {
  const next = await call("GET", "invocation/next");
  if (next.status !== 200) process.exit(0);
  const id = next.headers["lambda-runtime-aws-request-id"];
  const result = await handle(JSON.parse(next.body));
  await call("POST", `invocation/${id}/response`, JSON.stringify(result));
}
