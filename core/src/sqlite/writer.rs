//! The one writer: every write a handle pair ([`super::open`]) makes to the file goes through one
//! thread that owns the write connection and commits in groups.
//!
//! SQLite lets one connection write at a time, and in WAL mode with `synchronous = FULL` every
//! commit costs an `fsync`. Under concurrent webhooks that `fsync`, not the SQL, bounds throughput,
//! and two connections of one process taking turns at the file lock wait on SQLite's busy handler
//! (sleeps of milliseconds). So writes are jobs sent to one thread. It takes every job waiting (up
//! to [`MAX_BATCH`]), opens one `BEGIN IMMEDIATE` transaction, runs each job inside its own
//! savepoint, commits once, and only then answers each caller:
//! - durability is unchanged: no caller hears "done" before the commit holding its write is on disk;
//! - jobs run one after another inside the transaction, so each sees the writes of those before it,
//!   exactly as if they had run serially (and other processes still serialize on the file lock);
//! - a job that fails (or panics) rolls back its own savepoint only and gets its own error; a
//!   failed `BEGIN` or `COMMIT` fails every job of the batch, none of which then took effect.
//!
//! It must not answer before the commit, keep a job past its batch, or run reads (those use their
//! own connection and never wait for a commit).

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc;

use rusqlite::{Connection, TransactionBehavior};
use tokio::sync::oneshot;

/// The most jobs one transaction takes, so a long queue of writers still sees commits often.
const MAX_BATCH: usize = 256;

/// Why a write did not happen: the group transaction failed to begin or commit, the job panicked,
/// or the writer thread is gone. Nothing of the job was kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct WriteError(pub(super) String);

/// A handle on the writer thread; the thread stops (closing its connection) when the last handle
/// is dropped. Cheap to share behind an `Arc`.
#[derive(Debug)]
pub(super) struct Writer {
    jobs: mpsc::Sender<Box<dyn Job>>,
}

impl Writer {
    /// Starts the writer thread over `conn`, which must already be configured (WAL, busy timeout).
    pub(super) fn spawn(conn: Connection) -> std::io::Result<Writer> {
        let (jobs, queue) = mpsc::channel();
        std::thread::Builder::new().name("beckon-sqlite-writer".into()).spawn(move || run(conn, &queue))?;
        Ok(Writer { jobs })
    }

    /// Runs `f` in the next group transaction and answers once that transaction has committed:
    /// `f`'s own result, or a [`WriteError`] converted into `E` when the group failed.
    pub(super) async fn write<T, E, F>(&self, f: F) -> Result<T, E>
    where
        T: Send + 'static,
        E: From<WriteError> + Send + 'static,
        F: FnOnce(&Connection) -> Result<T, E> + Send + 'static,
    {
        let (reply, answer) = oneshot::channel();
        let job = Pending { work: Some(f), result: None, reply };
        self.jobs.send(Box::new(job)).map_err(|_| E::from(WriteError("the writer thread has stopped".into())))?;
        answer.await.map_err(|_| E::from(WriteError("the writer thread dropped the write".into())))?
    }
}

/// One caller's write: run inside the group transaction, answered after it ends.
trait Job: Send {
    /// Runs the write on `conn` (a savepoint); true when it succeeded and should be kept.
    fn run(&mut self, conn: &Connection) -> bool;
    /// Answers the caller: `Ok` when the group committed, else why it did not.
    fn finish(self: Box<Self>, group: Result<(), &WriteError>);
}

struct Pending<T, E, F> {
    work: Option<F>,
    result: Option<Result<T, E>>,
    reply: oneshot::Sender<Result<T, E>>,
}

impl<T, E, F> Job for Pending<T, E, F>
where
    T: Send,
    E: From<WriteError> + Send,
    F: FnOnce(&Connection) -> Result<T, E> + Send,
{
    fn run(&mut self, conn: &Connection) -> bool {
        let Some(work) = self.work.take() else { return false };
        let result = work(conn);
        let ok = result.is_ok();
        self.result = Some(result);
        ok
    }

    fn finish(self: Box<Self>, group: Result<(), &WriteError>) {
        let answer = match (self.result, group) {
            // Its own failure stands whatever the group did: its savepoint was rolled back.
            (Some(Err(e)), _) => Err(e),
            (Some(Ok(value)), Ok(())) => Ok(value),
            (Some(Ok(_)), Err(e)) => Err(E::from(e.clone())),
            (None, Ok(())) => Err(E::from(WriteError("the write panicked and was rolled back".into()))),
            (None, Err(e)) => Err(E::from(e.clone())),
        };
        // The caller may have gone away (a dropped request); its write stands or falls regardless.
        let _ = self.reply.send(answer);
    }
}

/// The thread: one group per wake-up until every handle is dropped.
fn run(mut conn: Connection, queue: &mpsc::Receiver<Box<dyn Job>>) {
    while let Ok(first) = queue.recv() {
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH {
            match queue.try_recv() {
                Ok(job) => batch.push(job),
                Err(_) => break,
            }
        }
        let group = commit_group(&mut conn, &mut batch).map_err(|e| WriteError(e.to_string()));
        for job in batch {
            job.finish(group.as_ref().map(|_| ()));
        }
    }
}

fn commit_group(conn: &mut Connection, batch: &mut [Box<dyn Job>]) -> rusqlite::Result<()> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    for job in batch.iter_mut() {
        // Cached statements rather than rusqlite's `Savepoint`, which parses its SQL every time:
        // these run twice per write.
        tx.prepare_cached("SAVEPOINT job")?.execute([])?;
        let kept = catch_unwind(AssertUnwindSafe(|| job.run(&tx))).unwrap_or(false);
        if !kept {
            tx.prepare_cached("ROLLBACK TO job")?.execute([])?;
        }
        tx.prepare_cached("RELEASE job")?.execute([])?;
    }
    tx.commit()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    fn writer(dir: &tempfile::TempDir) -> (Arc<Writer>, Connection) {
        let path = dir.path().join("w.sqlite3");
        let conn = Connection::open(&path).unwrap();
        conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get::<_, String>(0)).unwrap();
        conn.execute_batch("CREATE TABLE t (k TEXT PRIMARY KEY, v INTEGER NOT NULL)").unwrap();
        conn.pragma_update(None, "foreign_keys", true).unwrap();
        let reader = Connection::open(&path).unwrap();
        (Arc::new(Writer::spawn(conn).unwrap()), reader)
    }

    fn count(reader: &Connection) -> i64 {
        reader.query_row("SELECT COUNT(*) FROM t", [], |r| r.get(0)).unwrap()
    }

    impl From<WriteError> for String {
        fn from(e: WriteError) -> String {
            e.0
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn concurrent_writes_all_land_and_see_each_other() {
        let dir = tempfile::tempdir().unwrap();
        let (writer, reader) = writer(&dir);
        let mut joins = Vec::new();
        for i in 0..200 {
            let writer = Arc::clone(&writer);
            joins.push(tokio::spawn(async move {
                writer
                    .write(move |c| {
                        // A read-modify-write: lost updates would show as a wrong final value.
                        c.execute("INSERT INTO t (k, v) VALUES ('sum', 0) ON CONFLICT DO NOTHING", [])
                            .map_err(|e| e.to_string())?;
                        c.execute("UPDATE t SET v = v + 1 WHERE k = 'sum'", []).map_err(|e| e.to_string())?;
                        c.execute("INSERT INTO t (k, v) VALUES (?1, ?2)", rusqlite::params![format!("k{i}"), i])
                            .map_err(|e| e.to_string())?;
                        Ok::<_, String>(i)
                    })
                    .await
            }));
        }
        for (i, join) in joins.into_iter().enumerate() {
            assert_eq!(join.await.unwrap(), Ok(i));
        }
        assert_eq!(count(&reader), 201);
        let sum: i64 = reader.query_row("SELECT v FROM t WHERE k = 'sum'", [], |r| r.get(0)).unwrap();
        assert_eq!(sum, 200);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn a_failing_or_panicking_write_rolls_back_only_itself() {
        let dir = tempfile::tempdir().unwrap();
        let (writer, reader) = writer(&dir);
        let mut joins = Vec::new();
        for i in 0..60 {
            let writer = Arc::clone(&writer);
            joins.push(tokio::spawn(async move {
                writer
                    .write(move |c| {
                        c.execute("INSERT INTO t (k, v) VALUES (?1, ?2)", rusqlite::params![format!("k{i}"), i])
                            .map_err(|e| e.to_string())?;
                        match i % 3 {
                            1 => Err(format!("refused {i}")),
                            2 if i % 2 == 0 => panic!("job {i} panics after writing"),
                            _ => Ok(i),
                        }
                    })
                    .await
            }));
        }
        let mut kept = 0;
        for (i, join) in joins.into_iter().enumerate() {
            let got = join.await.unwrap();
            match i % 3 {
                1 => assert_eq!(got, Err(format!("refused {i}"))),
                2 if i % 2 == 0 => assert!(got.unwrap_err().contains("panicked"), "job {i}"),
                _ => {
                    assert_eq!(got, Ok(i));
                    kept += 1;
                }
            }
        }
        assert_eq!(count(&reader), kept, "only the successful writes are in the file");
        // The thread survived the panics and still writes.
        let after = writer
            .write(|c| c.execute("INSERT INTO t (k, v) VALUES ('after', 1)", []).map_err(|e| e.to_string()))
            .await;
        assert_eq!(after, Ok(1));
    }

    #[tokio::test]
    async fn a_failed_commit_fails_every_write_of_the_group() {
        let dir = tempfile::tempdir().unwrap();
        let (writer, reader) = writer(&dir);
        // A deferred foreign key makes the group's COMMIT fail after every job succeeded.
        reader
            .execute_batch(
                "CREATE TABLE child (id INTEGER PRIMARY KEY, parent TEXT REFERENCES t (k) DEFERRABLE INITIALLY DEFERRED)",
            )
            .unwrap();
        let w = Arc::clone(&writer);
        let result = w
            .write(|c| {
                c.execute("INSERT INTO t (k, v) VALUES ('x', 1)", []).map_err(|e| e.to_string())?;
                c.execute("INSERT INTO child (parent) VALUES ('nobody')", []).map_err(|e| e.to_string())?;
                Ok::<_, String>(())
            })
            .await;
        assert!(result.unwrap_err().contains("FOREIGN KEY"), "the commit's error reaches the caller");
        assert_eq!(count(&reader), 0, "nothing of the failed group was kept");
    }
}
