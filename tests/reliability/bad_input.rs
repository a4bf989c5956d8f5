//! Bad input. Property tests (proptest, a fixed number of cases so CI time is fixed; `cargo fuzz`
//! needs nightly, which CI does not have) over the webhook decoders, signature checks and the
//! Codex JSON-RPC reader: no input panics. A corpus of malformed, truncated, huge, wrongly encoded
//! and wrongly signed requests into `beckon serve` gets the right 4xx and records nothing. Linear
//! replays outside the window are refused. Comment bodies, titles and author names cannot leave
//! the untrusted block of the prompt.

use std::time::Duration;

use beckon::codex::protocol::{IncomingMessage, ServerNotification, ServerRequest};
use beckon_core::clock::Millis;
use beckon_core::event::{GithubSubject, LinearSubject, Placement, Subject};
use beckon_core::ingest::{github as gh, linear as lin};
use beckon_core::prompt::{self, PromptInput};
use beckon_core::task::{Permission, Task, ThreadKey, Trigger, TriggerKind};
use beckon_core::verify;
use pretty_assertions::assert_eq;
use proptest::prelude::*;
use secrecy::SecretString;
use serde_json::{json, Value};

use crate::support::{self, client, fixture, github_signature, hmac_hex, now_ms, post, Beckon};

/// Cases per property: about two seconds each in a debug build on the CI machine.
const CASES: u32 = 2_000;

fn config() -> ProptestConfig {
    ProptestConfig { cases: CASES, failure_persistence: None, ..ProptestConfig::default() }
}

/// Arbitrary JSON up to a few levels deep, biased towards the keys the decoders look for.
fn json_value() -> impl Strategy<Value = Value> {
    let key = prop_oneof![
        Just("action".to_owned()),
        Just("comment".to_owned()),
        Just("issue".to_owned()),
        Just("body".to_owned()),
        Just("user".to_owned()),
        Just("login".to_owned()),
        Just("id".to_owned()),
        Just("repository".to_owned()),
        Just("type".to_owned()),
        Just("data".to_owned()),
        Just("webhookTimestamp".to_owned()),
        Just("changes".to_owned()),
        Just("pull_request".to_owned()),
        Just("assignee".to_owned()),
        "[a-zA-Z_]{1,12}",
    ];
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<f64>().prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        ".{0,40}".prop_map(Value::String),
        Just(json!("@agent please fix")),
        Just(json!("created")),
        Just(json!("Comment")),
    ];
    leaf.prop_recursive(4, 48, 8, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map(key.clone(), inner, 0..8).prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// A real payload with one field replaced by arbitrary JSON: close to valid, where bugs hide.
fn mutated(base: Value) -> impl Strategy<Value = Vec<u8>> {
    (json_value(), 0usize..64, any::<bool>()).prop_map(move |(v, pick, truncate)| {
        let mut doc = base.clone();
        let mut paths = vec![];
        collect_paths(&doc, &mut vec![], &mut paths);
        if let Some(path) = paths.get(pick % paths.len().max(1)) {
            if let Some(slot) = pointer_mut(&mut doc, path) {
                *slot = v;
            }
        }
        let mut bytes = serde_json::to_vec(&doc).unwrap();
        if truncate {
            bytes.truncate(pick * bytes.len() / 64);
        }
        bytes
    })
}

fn collect_paths(v: &Value, at: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    out.push(at.clone());
    if let Value::Object(m) = v {
        for (k, child) in m {
            at.push(k.clone());
            collect_paths(child, at, out);
            at.pop();
        }
    }
}

fn pointer_mut<'v>(v: &'v mut Value, path: &[String]) -> Option<&'v mut Value> {
    path.iter().try_fold(v, |v, k| v.get_mut(k))
}

const GITHUB_EVENTS: [&str; 6] =
    ["issue_comment", "pull_request_review_comment", "issues", "ping", "installation", "push"];

proptest! {
    #![proptest_config(config())]

    #[test]
    fn github_decoding_never_panics(
        bytes in prop_oneof![
            mutated(fixture("github/issue_comment.created.json")),
            mutated(fixture("github/pull_request_review_comment.created.json")),
            mutated(fixture("github/issues.assigned.json")),
            json_value().prop_map(|v| serde_json::to_vec(&v).unwrap()),
            prop::collection::vec(any::<u8>(), 0..256),
        ],
        event in 0usize..GITHUB_EVENTS.len(),
        content_type in prop_oneof![
            Just(Some("application/json".to_owned())),
            Just(Some("application/x-www-form-urlencoded".to_owned())),
            Just(None),
            ".{0,30}".prop_map(Some),
        ],
    ) {
        if let Ok(doc) = gh::payload_bytes(content_type.as_deref(), &bytes) {
            let _ = gh::decode(GITHUB_EVENTS[event], "d-1", &doc);
        }
        let _ = gh::decode(GITHUB_EVENTS[event], "d-1", &bytes);
    }

    #[test]
    fn linear_decoding_never_panics(
        bytes in prop_oneof![
            mutated(fixture("linear/Comment.create.json")),
            mutated(fixture("linear/Comment.update.json")),
            mutated(fixture("linear/Issue.update.delegate.json")),
            mutated(fixture("linear/AgentSessionEvent.created.json")),
            json_value().prop_map(|v| serde_json::to_vec(&v).unwrap()),
            prop::collection::vec(any::<u8>(), 0..256),
        ],
        now in any::<i64>(),
    ) {
        if let Ok(decoded) = lin::decode("d-1", &bytes) {
            let _ = verify::linear_timestamp(decoded.webhook_timestamp, Millis(now), Duration::from_secs(60));
        }
    }

    #[test]
    fn signature_checks_never_panic_and_only_the_right_mac_passes(
        body in prop::collection::vec(any::<u8>(), 0..512),
        signature in prop_oneof![Just(None), ".{0,80}".prop_map(Some), "sha256=[0-9a-fA-F]{0,70}".prop_map(Some)],
    ) {
        let secrets = [SecretString::from("s3cret".to_owned())];
        let good_gh = github_signature("s3cret", &body);
        let good_lin = hmac_hex("s3cret", &body);
        prop_assert_eq!(verify::github(&secrets, &body, signature.as_deref()).is_ok(), signature.as_deref() == Some(good_gh.as_str()));
        prop_assert_eq!(
            verify::linear(&secrets, &body, signature.as_deref()).is_ok(),
            signature.as_deref().is_some_and(|s| s.eq_ignore_ascii_case(&good_lin))
        );
        prop_assert!(verify::github(&secrets, &body, Some(&good_gh)).is_ok());
        prop_assert!(verify::linear(&secrets, &body, Some(&good_lin)).is_ok());
    }

    #[test]
    fn the_json_rpc_reader_never_panics(
        line in prop_oneof![
            ".{0,200}",
            json_value().prop_map(|v| v.to_string()),
            (prop_oneof![
                Just("item/tool/call"), Just("turn/completed"), Just("item/completed"), Just("item/started"),
                Just("thread/started"), Just("turn/started"), Just("error"), Just("item/agentMessage/delta"),
                Just("thread/tokenUsage/updated"), Just("item/commandExecution/requestApproval"),
                Just("item/fileChange/requestApproval"), Just("execCommandApproval"), Just("nope"),
             ], json_value(), prop::option::of(any::<i64>()))
                .prop_map(|(m, p, id)| json!({"jsonrpc": "2.0", "id": id, "method": m, "params": p}).to_string()),
        ],
    ) {
        if let Ok(msg) = IncomingMessage::parse(&line) {
            match msg {
                IncomingMessage::Request { method, params, .. } => {
                    let _ = ServerRequest::decode(method, params);
                }
                IncomingMessage::Notification { method, params } => {
                    let _ = ServerNotification::decode(method, params);
                }
                IncomingMessage::Response { .. } | IncomingMessage::Error { .. } => {}
            }
        }
    }

    /// For arbitrary bodies, titles and author names: exactly one END marker per trigger, each
    /// after its whole body, and the lines outside the blocks are the same whatever the tracker
    /// text says (so a title cannot add an instruction line outside the untrusted block).
    #[test]
    fn tracker_text_stays_inside_the_untrusted_blocks(
        bodies in prop::collection::vec(prop_oneof![".{0,200}", "(END UNTRUSTED[ 0-9a-f]{0,20}\n|BEGIN UNTRUSTED\n|.{0,10}\n){0,8}"], 1..4),
        title in prop_oneof![".{0,60}", "[^\n]{0,10}\n(SYSTEM|END UNTRUSTED)[^\n]{0,20}\n?.{0,10}"],
        author in prop_oneof!["[a-z-]{1,12}", ".{0,30}"],
        linear in any::<bool>(),
    ) {
        let nonce = prompt::fresh_nonce();
        let task = task_with(&bodies, &title, &author, linear);
        let text = prompt::build(&PromptInput { task: &task, handle: "agent", branch: "b", nonce: &nonce }).text;
        let end = format!("END UNTRUSTED {nonce}\n");
        prop_assert_eq!(text.matches(&end).count(), bodies.len());
        let mut rest = text.as_str();
        for body in &bodies {
            let begin = rest.find(&format!("BEGIN UNTRUSTED {nonce}")).unwrap();
            let after_begin = &rest[begin..];
            let header_end = after_begin.find('\n').unwrap() + 1;
            let block = &after_begin[header_end..];
            prop_assert!(block.starts_with(body.as_str()), "the body starts right after its BEGIN line");
            let close = block.find(&end).unwrap();
            prop_assert!(close >= body.len(), "END comes after the whole body");
            rest = &block[close + end.len()..];
        }
        let benign = prompt::build(&PromptInput {
            task: &task_with(&bodies, "t", "a", linear), handle: "agent", branch: "b", nonce: &nonce,
        }).text;
        prop_assert_eq!(outside_lines(&text, &nonce), outside_lines(&benign, &nonce));
    }
}

fn task_with(bodies: &[String], title: &str, author: &str, linear: bool) -> Task {
    let subject = if linear {
        Subject::Linear(LinearSubject {
            organization_id: "org".into(),
            issue_id: "iss".into(),
            identifier: Some("ENG-1".into()),
            title: Some(title.into()),
        })
    } else {
        Subject::Github(GithubSubject {
            owner: "acme".into(),
            repo: "app".into(),
            repository_id: 1,
            number: 7,
            is_pull_request: false,
            title: Some(title.into()),
            installation_id: None,
        })
    };
    let mut triggers = bodies.iter().enumerate().map(|(i, body)| Trigger {
        delivery_id: format!("d-{i}"),
        comment_id: Some(format!("{}", 100 + i)),
        kind: TriggerKind::Mention,
        author: author.into(),
        body: body.clone(),
        placement: Placement::TopLevel,
        at: Millis(0),
    });
    let first = triggers.next().unwrap();
    let mut task = Task::new(ThreadKey::new(&subject, "agent"), subject, first, Permission::Trusted, Millis(0));
    task.triggers.extend(triggers);
    task
}

/// How many lines the prompt has outside its untrusted blocks (BEGIN lines included).
fn outside_lines(text: &str, nonce: &str) -> usize {
    let (mut inside, mut n) = (false, 0);
    for line in text.lines() {
        if line.starts_with(&format!("BEGIN UNTRUSTED {nonce}")) {
            inside = true;
            n += 1;
        } else if line == format!("END UNTRUSTED {nonce}") {
            inside = false;
        } else if !inside {
            n += 1;
        }
    }
    n
}

type Headers = Vec<(&'static str, String)>;

fn gh_headers(sig: String, ct: &str, delivery: &str) -> Headers {
    vec![
        ("content-type", ct.to_owned()),
        ("x-github-event", "issue_comment".to_owned()),
        ("x-github-delivery", delivery.to_owned()),
        ("x-hub-signature-256", sig),
    ]
}

fn lin_headers(sig: String, delivery: &str) -> Headers {
    vec![
        ("content-type", "application/json".to_owned()),
        ("linear-delivery", delivery.to_owned()),
        ("linear-event", "Comment".to_owned()),
        ("linear-signature", sig),
    ]
}

/// Every request here is refused with the status the README promises, nothing is recorded, and
/// the server still answers afterwards.
#[tokio::test]
async fn a_corpus_of_bad_requests_gets_the_right_4xx_and_records_nothing() {
    let b = Beckon::start(&[("BECKON_MAX_BODY_BYTES", "1048576")]);
    let c = client();
    let sign = |body: &[u8]| github_signature(support::GITHUB_SECRET, body);
    let good = serde_json::to_vec(&crate::world::comment("@agent fix", 4001)).unwrap();
    let utf16: Vec<u8> = std::iter::once(0xFEFFu16)
        .chain(String::from_utf8(good.clone()).unwrap().encode_utf16())
        .flat_map(u16::to_le_bytes)
        .collect();
    let mut latin1 = good.clone();
    let at = latin1.windows(6).position(|w| w == b"@agent").unwrap();
    latin1[at + 7] = 0xE9; // a lone 0xE9 byte: valid Latin-1, invalid UTF-8, inside the body string
    let nested: Vec<u8> = std::iter::repeat_n(b'[', 100_000).chain(std::iter::repeat_n(b']', 100_000)).collect();
    let huge_string = serde_json::to_vec(&crate::world::comment(&"x".repeat(900_000), 4002)).unwrap();
    let over_cap = vec![b'{'; 1_048_577];
    let truncated = good[..good.len() / 2].to_vec();
    let cases: Vec<(&str, Headers, Vec<u8>, u16)> = vec![
        ("truncated JSON", gh_headers(sign(&truncated), "application/json", "c1"), truncated.clone(), 400),
        ("non-UTF-8 body", gh_headers(sign(&latin1), "application/json", "c2"), latin1.clone(), 400),
        ("UTF-16 body", gh_headers(sign(&utf16), "application/json", "c3"), utf16.clone(), 400),
        ("UTF-16 declared", gh_headers(sign(&utf16), "application/json; charset=utf-16", "c4"), utf16.clone(), 400),
        ("100k nested arrays", gh_headers(sign(&nested), "application/json", "c5"), nested.clone(), 400),
        ("JSON null", gh_headers(sign(b"null"), "application/json", "c6"), b"null".to_vec(), 400),
        ("JSON array", gh_headers(sign(b"[]"), "application/json", "c7"), b"[]".to_vec(), 400),
        ("empty body", gh_headers(sign(b""), "application/json", "c8"), vec![], 400),
        ("huge, unsigned", gh_headers(String::new(), "application/json", "c10"), huge_string.clone(), 401),
        (
            "huge, wrong secret",
            gh_headers(github_signature("nope", &huge_string), "application/json", "c11"),
            huge_string.clone(),
            401,
        ),
        (
            "sha1 signature",
            gh_headers(format!("sha1={}", &sign(&good)[7..47]), "application/json", "c12"),
            good.clone(),
            401,
        ),
        ("bare hex signature", gh_headers(sign(&good)[7..].to_owned(), "application/json", "c13"), good.clone(), 401),
        ("signature not hex", gh_headers("sha256=zz".to_owned(), "application/json", "c14"), good.clone(), 401),
        (
            "linear secret on github",
            gh_headers(github_signature(support::LINEAR_SECRET, &good), "application/json", "c15"),
            good.clone(),
            401,
        ),
        ("signed, then a byte flipped", gh_headers(sign(&good), "application/json", "c16"), flip(&good), 401),
        (
            "form without payload",
            gh_headers(sign(b"x=1"), "application/x-www-form-urlencoded", "c17"),
            b"x=1".to_vec(),
            400,
        ),
        ("xml", gh_headers(sign(&good), "application/xml", "c18"), good.clone(), 415),
        ("no content type", gh_headers(sign(&good), "", "c19"), good.clone(), 415),
    ];
    let url = format!("{}/webhooks/github", b.base);
    for (name, headers, body, status) in cases {
        let headers: Headers =
            headers.into_iter().filter(|(k, v)| !(v.is_empty() && *k != "x-github-delivery")).collect();
        let r = post(&c, &url, &headers, body).await;
        assert_eq!(r.status, status, "{name}: {:?}", r.body);
    }

    // Over the cap: the server answers 413 without reading the body, so a client still writing
    // it may see the connection close; read the status off the socket.
    let head = gh_headers(sign(&over_cap), "application/json", "c9");
    assert_eq!(raw_post_status(&b.base, "/webhooks/github", &head, &over_cap).await, 413, "over the cap");

    // Linear: wrong signatures, and replays outside the 60 s window in both directions.
    let linear_url = format!("{}/webhooks/linear", b.base);
    let mut fresh = fixture("linear/Comment.create.json");
    fresh["webhookTimestamp"] = json!(now_ms());
    let at_offset = |offset_ms: i64| {
        let mut p = fresh.clone();
        p["webhookTimestamp"] = json!(now_ms() + offset_ms);
        serde_json::to_vec(&p).unwrap()
    };
    let fresh_bytes = serde_json::to_vec(&fresh).unwrap();
    let mut no_ts = fresh.clone();
    no_ts.as_object_mut().unwrap().remove("webhookTimestamp");
    let no_ts = serde_json::to_vec(&no_ts).unwrap();
    let lsign = |body: &[u8]| hmac_hex(support::LINEAR_SECRET, body);
    let cases: Vec<(&str, Headers, Vec<u8>, u16)> = vec![
        ("replayed 61 s later", lin_headers(lsign(&at_offset(-61_000)), "l1"), at_offset(-61_000), 401),
        ("replayed a day later", lin_headers(lsign(&at_offset(-86_400_000)), "l2"), at_offset(-86_400_000), 401),
        ("from 5 minutes in the future", lin_headers(lsign(&at_offset(300_000)), "l3"), at_offset(300_000), 401),
        ("no timestamp", lin_headers(lsign(&no_ts), "l4"), no_ts.clone(), 401),
        (
            "github secret on linear",
            lin_headers(hmac_hex(support::GITHUB_SECRET, &fresh_bytes), "l5"),
            fresh_bytes.clone(),
            401,
        ),
        ("sha256= prefix", lin_headers(format!("sha256={}", lsign(&fresh_bytes)), "l6"), fresh_bytes.clone(), 401),
        ("not JSON", lin_headers(lsign(b"\xff\xfe{"), "l7"), b"\xff\xfe{".to_vec(), 400),
    ];
    for (name, headers, body, status) in cases {
        let r = post(&c, &linear_url, &headers, body).await;
        assert_eq!(r.status, status, "linear {name}: {:?}", r.body);
    }

    assert_eq!(b.deliveries(), Vec::<Value>::new(), "nothing recorded");
    assert_eq!(b.tasks(), Vec::<Value>::new());
    let ok = c.get(format!("{}/healthz", b.base)).send().await.unwrap();
    assert_eq!(ok.status().as_u16(), 200, "still serving");
}

fn flip(bytes: &[u8]) -> Vec<u8> {
    let mut out = bytes.to_vec();
    let i = out.len() / 3;
    out[i] ^= 0x01;
    out
}

/// POSTs over a plain socket, writing as much of `body` as the server takes, and returns the
/// response's status code.
async fn raw_post_status(base: &str, path: &str, headers: &Headers, body: &[u8]) -> u16 {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let addr = base.trim_start_matches("http://");
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let mut head = format!("POST {path} HTTP/1.1\r\nhost: {addr}\r\ncontent-length: {}\r\n", body.len());
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("connection: close\r\n\r\n");
    stream.write_all(head.as_bytes()).await.unwrap();
    for chunk in body.chunks(64 * 1024) {
        if stream.write_all(chunk).await.is_err() {
            break;
        }
    }
    let mut response = vec![];
    let read = tokio::time::timeout(Duration::from_secs(20), stream.read_to_end(&mut response)).await;
    assert!(read.is_ok(), "no answer within 20 s");
    let text = String::from_utf8_lossy(&response);
    text.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or_else(|| panic!("no status line: {text:.200}"))
}
