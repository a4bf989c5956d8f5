//! The embedded backend: the ledger and the queue in one SQLite file (WAL), for `beckon serve` and
//! single-VM installs. Same contracts as DynamoDB + SQS, proven by [`crate::conformance`].
//!
//! [`open`] creates the file (and its directory), sets `journal_mode=WAL`, `busy_timeout` and
//! `foreign_keys`, and migrates the schema by `PRAGMA user_version` inside a `BEGIN IMMEDIATE`
//! transaction, so two processes opening one file at once migrate it once. Every write of the
//! ledger and the queue it returns goes through one [`writer`] thread, which batches concurrent
//! writes into one `BEGIN IMMEDIATE` transaction and one `fsync` (group commit); writers of other
//! processes serialize with it on the file lock. The ledger's reads use a second connection, on
//! `spawn_blocking` (WAL keeps readers unblocked by the writer).
//! Schema v1: `tasks` (queried columns + the whole task as JSON, the JSON being the record),
//! `deliveries`, `threads` (assigned flag), `participations`, `queue_messages` (see [`SqliteQueue`]).
//! v2: the Codex thread per conversation, `transcript`. v3: `tasks.trigger_count`/`trigger_bytes`
//! and `trigger_comments`, so a trigger is decided without decoding the thread's tasks. v4: no
//! index on `deliveries.expires_at` (the purge reads `received_at`'s), one index write fewer per
//! delivery, and `tasks_by_thread` ends in `created_at`, so a thread's oldest or newest task in a
//! state is read in index order, not sorted.

mod ledger;
mod queue;
mod writer;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rusqlite::{Connection, ErrorCode, TransactionBehavior};

use crate::clock::Clock;
use crate::ledger::LedgerError;

pub use ledger::SqliteLedger;
pub use queue::SqliteQueue;

use self::writer::{WriteError, Writer};

/// The file name `beckon serve` uses under `BECKON_DATA_DIR`.
pub const DB_FILE_NAME: &str = "beckon.sqlite3";

/// How long a write waits for another writer (another task or process) before giving up with
/// [`LedgerError::Unavailable`]: transactions here take milliseconds, so 10 s means something is stuck.
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// The schema this build writes; a file with a newer version is refused rather than misread.
const SCHEMA_VERSION: i32 = 4;

const SCHEMA_V1: &str = "
CREATE TABLE tasks (
    id          TEXT PRIMARY KEY,
    thread_key  TEXT NOT NULL,
    state       TEXT NOT NULL,
    created_at  INTEGER NOT NULL,
    version     INTEGER NOT NULL,
    body        TEXT NOT NULL
);
CREATE INDEX tasks_by_thread ON tasks (thread_key, state);
CREATE INDEX tasks_by_created ON tasks (created_at);

CREATE TABLE deliveries (
    id          TEXT PRIMARY KEY,
    tracker     TEXT NOT NULL,
    event       TEXT NOT NULL,
    thread_key  TEXT,
    reason      TEXT NOT NULL,
    task_id     TEXT REFERENCES tasks (id),
    received_at INTEGER NOT NULL,
    expires_at  INTEGER NOT NULL
);
CREATE INDEX deliveries_by_received ON deliveries (received_at);
CREATE INDEX deliveries_by_expiry ON deliveries (expires_at);

CREATE TABLE threads (
    thread_key  TEXT PRIMARY KEY,
    assigned    INTEGER NOT NULL
);

CREATE TABLE participations (
    thread_key  TEXT NOT NULL,
    root_id     TEXT NOT NULL,
    PRIMARY KEY (thread_key, root_id)
);

CREATE TABLE queue_messages (
    seq           INTEGER PRIMARY KEY AUTOINCREMENT,
    task_id       TEXT NOT NULL UNIQUE,
    grp           TEXT NOT NULL,
    sent_at       INTEGER NOT NULL,
    visible_at    INTEGER NOT NULL,
    receipt       TEXT,
    receive_count INTEGER NOT NULL,
    deleted_at    INTEGER
);
CREATE INDEX queue_live_by_group ON queue_messages (grp, seq) WHERE deleted_at IS NULL;
";

/// Version 2: the Codex thread a conversation continues on, and task transcripts.
const SCHEMA_V2: &str = "
ALTER TABLE threads ADD COLUMN codex_thread_id TEXT;

CREATE TABLE transcript (
    task_id     TEXT NOT NULL REFERENCES tasks (id),
    seq         INTEGER NOT NULL,
    body        TEXT NOT NULL,
    PRIMARY KEY (task_id, seq)
);
";

/// Version 3: what the trigger path needs without decoding tasks: each task's trigger count and
/// body bytes, and which comments asked for which task (filled from the stored tasks on upgrade).
const SCHEMA_V3: &str = "
ALTER TABLE tasks ADD COLUMN trigger_count INTEGER NOT NULL DEFAULT 0;
ALTER TABLE tasks ADD COLUMN trigger_bytes INTEGER NOT NULL DEFAULT 0;

CREATE TABLE trigger_comments (
    thread_key  TEXT NOT NULL,
    comment_id  TEXT NOT NULL,
    task_id     TEXT NOT NULL REFERENCES tasks (id),
    PRIMARY KEY (thread_key, comment_id, task_id)
);
";

/// Version 4: every delivery expires [`crate::ledger::DELIVERY_TTL`] after it was received, so
/// expiry order is receipt order and the purge finds expired records on `deliveries_by_received`;
/// and the thread snapshot's "oldest queued" and window count read `tasks_by_thread` in order.
const SCHEMA_V4: &str = "
DROP INDEX deliveries_by_expiry;
DROP INDEX tasks_by_thread;
CREATE INDEX tasks_by_thread ON tasks (thread_key, state, created_at);
";

/// Opens (creating and migrating when needed) the database file at `path` and returns the ledger
/// and queue handles over it. Several `open`s of one file, in one process or several, are safe.
/// The ledger reads "now" from `clock`; the queue uses the system clock, as SQS does.
///
/// # Errors
/// [`LedgerError::Unavailable`] when the file or its directory cannot be created or opened;
/// [`LedgerError::Corrupt`] when it is not a database or was written by a newer schema.
pub fn open(path: &Path, clock: Arc<dyn Clock>) -> Result<(SqliteLedger, SqliteQueue), LedgerError> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .map_err(|e| LedgerError::Unavailable(format!("creating {}: {e}", dir.display())))?;
    }
    let mut first = connect(path)?;
    migrate(&mut first)?;
    let writer = Arc::new(
        Writer::spawn(first).map_err(|e| LedgerError::Unavailable(format!("starting the writer thread: {e}")))?,
    );
    let reader = connect(path)?;
    Ok((SqliteLedger::new(Arc::clone(&writer), reader, clock), SqliteQueue::new(writer)))
}

fn connect(path: &Path) -> Result<Connection, LedgerError> {
    let conn = Connection::open(path)?;
    conn.busy_timeout(BUSY_TIMEOUT)?;
    let mode: String = conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(LedgerError::Unavailable(format!("{}: journal_mode is {mode}, not wal", path.display())));
    }
    conn.pragma_update(None, "foreign_keys", true)?;
    // Room for every statement the ledger and queue prepare (`prepare_cached`), so none is re-parsed.
    conn.set_prepared_statement_cache_capacity(64);
    Ok(conn)
}

fn migrate(conn: &mut Connection) -> Result<(), LedgerError> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let version: i32 = tx.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    if version > SCHEMA_VERSION {
        return Err(LedgerError::Corrupt(format!(
            "schema version {version} is newer than {SCHEMA_VERSION}: written by a newer Beckon"
        )));
    }
    if version < 1 {
        tx.execute_batch(SCHEMA_V1)?;
    }
    if version < 2 {
        tx.execute_batch(SCHEMA_V2)?;
    }
    if version < 3 {
        tx.execute_batch(SCHEMA_V3)?;
        ledger::index_stored_tasks(&tx)?;
    }
    if version < 4 {
        tx.execute_batch(SCHEMA_V4)?;
    }
    tx.pragma_update(None, "user_version", SCHEMA_VERSION)?;
    tx.commit()?;
    Ok(())
}

impl From<WriteError> for LedgerError {
    fn from(e: WriteError) -> Self {
        LedgerError::Unavailable(e.0)
    }
}

/// The one place a SQLite error becomes a ledger error: damaged files and unreadable values are
/// [`LedgerError::Corrupt`]; everything else (busy past the timeout, I/O, full disk) is
/// [`LedgerError::Unavailable`], which callers retry.
impl From<rusqlite::Error> for LedgerError {
    fn from(e: rusqlite::Error) -> Self {
        let damaged = matches!(&e, rusqlite::Error::SqliteFailure(f, _)
            if matches!(f.code, ErrorCode::DatabaseCorrupt | ErrorCode::NotADatabase));
        let unreadable = matches!(
            &e,
            rusqlite::Error::FromSqlConversionFailure(..)
                | rusqlite::Error::InvalidColumnType(..)
                | rusqlite::Error::IntegralValueOutOfRange(..)
        );
        if damaged || unreadable {
            LedgerError::Corrupt(e.to_string())
        } else {
            LedgerError::Unavailable(e.to_string())
        }
    }
}

#[cfg(test)]
mod tests {
    use rusqlite::params;

    use super::*;
    use crate::clock::{ManualClock, Millis};
    use crate::decision::{Effect, NewTrigger, ReasonCode};
    use crate::event::{GithubSubject, Placement, Subject, Tracker};
    use crate::ledger::{Applied, Ledger, NewDelivery};
    use crate::task::{Permission, Task, TaskState, ThreadKey, Trigger, TriggerKind};

    fn subject() -> Subject {
        Subject::Github(GithubSubject {
            owner: "acme".into(),
            repo: "app".into(),
            repository_id: 1,
            number: 3,
            is_pull_request: false,
            title: None,
            installation_id: None,
        })
    }

    fn comment(id: &str) -> Trigger {
        Trigger {
            delivery_id: format!("d-{id}"),
            comment_id: Some(id.into()),
            kind: TriggerKind::Mention,
            author: "alice".into(),
            body: "@agent go".into(),
            placement: Placement::TopLevel,
            at: Millis(1),
        }
    }

    async fn apply(ledger: &SqliteLedger, key: &ThreadKey, id: &str) -> Applied {
        let delivery = NewDelivery {
            id: format!("again-{id}"),
            tracker: Tracker::Github,
            event: "issue_comment.created".into(),
            thread_key: Some(key.clone()),
            reason: ReasonCode::Enqueued,
        };
        let effect = Effect::Trigger(NewTrigger {
            thread_key: key.clone(),
            subject: subject(),
            trigger: comment(id),
            permission: Permission::Trusted,
            participates_in: None,
            marks_assigned: false,
        });
        ledger.apply(&delivery, &effect).await.unwrap()
    }

    /// A version 2 file (before the trigger index) with a running task asked for by two comments:
    /// after the upgrade, those comments are known and a new one queues a follow-up.
    #[tokio::test]
    async fn upgrading_from_v2_indexes_the_stored_tasks() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(DB_FILE_NAME);
        let key = ThreadKey::new(&subject(), "agent");
        let mut running = Task::new(key.clone(), subject(), comment("c1"), Permission::Trusted, Millis(1));
        running.coalesce(&comment("c2"), &Permission::Trusted, Millis(2));
        running.state = TaskState::Running;
        {
            let conn = Connection::open(&path).unwrap();
            conn.execute_batch(SCHEMA_V1).unwrap();
            conn.execute_batch(SCHEMA_V2).unwrap();
            conn.pragma_update(None, "user_version", 2).unwrap();
            conn.execute(
                "INSERT INTO tasks (id, thread_key, state, created_at, version, body) VALUES (?1, ?2, 'running', 1, 1, ?3)",
                params![running.id.as_str(), key.as_str(), serde_json::to_string(&running).unwrap()],
            )
            .unwrap();
            // More tasks than the upgrade reads per page, each asked for by one comment.
            for n in 0..2500 {
                let other =
                    Task::new(key.clone(), subject(), comment(&format!("old-{n}")), Permission::Trusted, Millis(0));
                conn.execute(
                    "INSERT INTO tasks (id, thread_key, state, created_at, version, body) VALUES (?1, ?2, 'completed', 0, 1, ?3)",
                    params![other.id.as_str(), key.as_str(), serde_json::to_string(&other).unwrap()],
                )
                .unwrap();
            }
        }
        let (ledger, _queue) = open(&path, Arc::new(ManualClock::new(Millis(10)))).unwrap();
        let check = Connection::open(&path).unwrap();
        let (version, count, indexed): (i32, i64, i64) = check
            .query_row(
                "SELECT (SELECT user_version FROM pragma_user_version), trigger_count,
                        (SELECT COUNT(*) FROM trigger_comments) FROM tasks WHERE id = ?1",
                [running.id.as_str()],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .unwrap();
        assert_eq!((version, count, indexed), (SCHEMA_VERSION, 2, 2502));
        assert_eq!(apply(&ledger, &key, "c2").await, Applied::KnownComment(running.id.clone()));
        assert_eq!(apply(&ledger, &key, "c1").await, Applied::KnownComment(running.id.clone()));
        assert!(matches!(apply(&ledger, &key, "c3").await, Applied::Enqueued(t) if t.id != running.id));
    }

    /// A version 3 file keeps its deliveries through the upgrade; the purge then forgets the
    /// expired one, keeps the live one, and finds them on the `received_at` index. The thread
    /// index gains `created_at`.
    #[tokio::test]
    async fn upgrading_from_v3_purges_by_receipt_and_orders_tasks_by_thread() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(DB_FILE_NAME);
        let now = Millis(1_000_000_000_000);
        {
            let conn = Connection::open(&path).unwrap();
            for schema in [SCHEMA_V1, SCHEMA_V2, SCHEMA_V3] {
                conn.execute_batch(schema).unwrap();
            }
            conn.pragma_update(None, "user_version", 3).unwrap();
            let received = |d: Duration| now.minus(d).0;
            let ttl = crate::ledger::DELIVERY_TTL;
            for (id, at) in
                [("old", received(ttl + Duration::from_secs(1))), ("live", received(Duration::from_secs(60)))]
            {
                conn.execute(
                    "INSERT INTO deliveries (id, tracker, event, reason, received_at, expires_at)
                     VALUES (?1, 'github', 'issue_comment.created', 'ignored', ?2, ?3)",
                    params![id, at, Millis(at).plus(ttl).0],
                )
                .unwrap();
            }
        }
        let (ledger, _queue) = open(&path, Arc::new(ManualClock::new(now))).unwrap();
        let check = Connection::open(&path).unwrap();
        let version: i32 = check.query_row("PRAGMA user_version", [], |r| r.get(0)).unwrap();
        assert_eq!(version, SCHEMA_VERSION);
        let index_count = |name: &str| -> i64 {
            check.query_row("SELECT COUNT(*) FROM sqlite_master WHERE name = ?1", [name], |r| r.get(0)).unwrap()
        };
        assert_eq!((index_count("deliveries_by_expiry"), index_count("deliveries_by_received")), (0, 1));
        let strings = |sql: &str| -> Vec<String> {
            let mut stmt = check.prepare(sql).unwrap();
            let rows = stmt.query_map([], |r| r.get(0)).unwrap();
            rows.collect::<Result<_, _>>().unwrap()
        };
        let columns = strings("SELECT name FROM pragma_index_info('tasks_by_thread') ORDER BY seqno");
        assert_eq!(columns, ["thread_key", "state", "created_at"]);
        let plan: String =
            check.query_row(&format!("EXPLAIN QUERY PLAN {}", ledger::PURGE_EXPIRED), [0, 0], |r| r.get(3)).unwrap();
        assert!(plan.contains("deliveries_by_received"), "the purge scans: {plan}");

        apply(&ledger, &ThreadKey::new(&subject(), "agent"), "c1").await;
        let ids = strings("SELECT id FROM deliveries ORDER BY received_at");
        assert_eq!(ids, ["live", "again-c1"]);
    }

    /// Writes purge at most once per `PURGE_EVERY`. In between, an expired record stays in the
    /// file but counts for nothing: its id is new again, and recording it replaces the old row.
    #[tokio::test]
    async fn an_expired_delivery_not_yet_purged_is_new_again() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(DB_FILE_NAME);
        let start = Millis(1_000_000_000_000);
        let clock = Arc::new(ManualClock::new(start));
        let (ledger, _queue) = open(&path, clock.clone()).unwrap();
        let check = Connection::open(&path).unwrap();
        let rows = |id: &str| -> Vec<i64> {
            let mut stmt = check.prepare("SELECT received_at FROM deliveries WHERE id = ?1").unwrap();
            let rows = stmt.query_map([id], |r| r.get(0)).unwrap();
            rows.collect::<Result<_, _>>().unwrap()
        };
        let record = |id: &str| {
            let delivery = NewDelivery {
                id: id.into(),
                tracker: Tracker::Github,
                event: "issue_comment.created".into(),
                thread_key: None,
                reason: ReasonCode::Ignored(crate::decision::IgnoreReason::NoMention),
            };
            let ledger = ledger.clone();
            async move { ledger.apply(&delivery, &Effect::Nothing).await.unwrap() }
        };
        let ttl = crate::ledger::DELIVERY_TTL;
        assert_eq!(record("d-old").await, Applied::Recorded);
        assert_eq!(record("d-again").await, Applied::Recorded);
        // A purge just before the two expire, then a write just after: no purge due yet.
        clock.advance(ttl - Duration::from_millis(1));
        assert_eq!(record("d-purging").await, Applied::Recorded);
        clock.advance(Duration::from_millis(2));
        assert_eq!(record("d-again").await, Applied::Recorded, "expired, so new again");
        assert_eq!(rows("d-again"), [clock.now().0], "the old row was replaced");
        assert_eq!(rows("d-old"), [start.0], "expired but not purged yet");
        assert_eq!(ledger.delivery("d-old").await.unwrap(), None, "and not returned");
        assert_eq!(record("d-again").await, Applied::Duplicate, "the new record counts");
        clock.advance(ledger::PURGE_EVERY);
        assert_eq!(record("d-later").await, Applied::Recorded);
        assert_eq!(rows("d-old"), Vec::<i64>::new(), "purged by the first write a PURGE_EVERY later");
    }
}
