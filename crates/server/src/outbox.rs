//! `Outbox`: the responses of one connection waiting to be written, bounded in bytes.
//!
//! Every response frame takes permits for its size (in KiB, at least one, at most the
//! whole budget) before it is queued, and gives them back once written. A client that
//! sends queries without reading the answers therefore stops the queries' tasks at
//! `send` once `OUT_BUDGET_KIB` is queued, and (with the limit on queries started per
//! connection, `Session::started`) the server's memory for that connection stays
//! bounded instead of growing with every pipelined query.
//!
//! A connection's outbox may also write a small frame itself (`Outbox::with_sink`):
//! when every frame sent before it has been written and nobody is writing, `send`
//! writes it to the socket at once, sparing the hand-off to the writer task (a point
//! read is answered with no task switch). The order of frames is the order of their
//! `send` calls either way: a frame is written directly only once all earlier ones
//! are on the socket (`Sink::queued` counts frames from `send` to written), and the
//! sink's lock keeps frames whole.

use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::{mpsc, Mutex, OwnedSemaphorePermit, Semaphore};

/// Responses (in KiB) queued per connection before senders wait for the client.
pub const OUT_BUDGET_KIB: u32 = 32 * 1024;

/// Frames queued per connection (a second bound, for many tiny frames).
const OUT_QUEUE: usize = 1024;

/// The largest frame `send` writes itself: one the socket's buffer takes at once, so
/// that writing it does not hold up the sender.
const DIRECT_MAX: usize = 16 * 1024;

/// A response frame and the budget it holds until written.
pub struct Outgoing {
    /// The frame's bytes.
    pub frame: Vec<u8>,
    _held: OwnedSemaphorePermit,
}

/// The writing half of a connection.
pub type Writer = Pin<Box<dyn AsyncWrite + Send>>;

/// A connection's socket as its outbox and its writer task share it.
pub struct Sink {
    writer: Mutex<Writer>,
    /// Frames sent through the queue and not yet written.
    queued: AtomicUsize,
}

impl Sink {
    /// `writer`, shared.
    pub fn new(writer: Writer) -> Arc<Sink> {
        Arc::new(Sink {
            writer: Mutex::new(writer),
            queued: AtomicUsize::new(0),
        })
    }

    /// Writes a frame the writer task took from the queue; false when the
    /// connection is gone.
    pub async fn write_queued(&self, out: Outgoing) -> bool {
        let ok = self.writer.lock().await.write_all(&out.frame).await.is_ok();
        self.queued.fetch_sub(1, Ordering::SeqCst);
        ok
    }

    /// Closes the writing side.
    pub async fn shutdown(&self) {
        let _ = self.writer.lock().await.shutdown().await;
    }
}

/// The sending side of a connection's responses.
#[derive(Clone)]
pub struct Outbox {
    tx: mpsc::Sender<Outgoing>,
    budget: Arc<Semaphore>,
    /// Set when `send` may write to the socket itself.
    sink: Option<Arc<Sink>>,
}

impl Outbox {
    /// An outbox and the receiver its writer drains.
    pub fn new() -> (Outbox, mpsc::Receiver<Outgoing>) {
        let (tx, rx) = mpsc::channel(OUT_QUEUE);
        let budget = Arc::new(Semaphore::new(OUT_BUDGET_KIB as usize));
        let out = Outbox {
            tx,
            budget,
            sink: None,
        };
        (out, rx)
    }

    /// As `new`, for a writer task that writes through `sink` (`Sink::write_queued`),
    /// which `send` then also writes small frames to directly.
    pub fn with_sink(sink: Arc<Sink>) -> (Outbox, mpsc::Receiver<Outgoing>) {
        let (mut out, rx) = Outbox::new();
        out.sink = Some(sink);
        (out, rx)
    }

    /// Queues a frame, waiting while the connection's budget is spent (or writes it
    /// at once, see the module's note). Returns false when the connection is gone.
    pub async fn send(&self, frame: Vec<u8>) -> bool {
        if let Some(sink) = &self.sink {
            if frame.len() <= DIRECT_MAX && sink.queued.load(Ordering::SeqCst) == 0 {
                if let Ok(mut w) = sink.writer.try_lock() {
                    // Nothing queued may have slipped in before the lock was taken.
                    if sink.queued.load(Ordering::SeqCst) == 0 {
                        return w.write_all(&frame).await.is_ok();
                    }
                }
            }
            sink.queued.fetch_add(1, Ordering::SeqCst);
        }
        let kib = u32::try_from(frame.len().div_ceil(1024))
            .unwrap_or(u32::MAX)
            .clamp(1, OUT_BUDGET_KIB);
        let sent = match self.budget.clone().acquire_many_owned(kib).await {
            Ok(held) => self.tx.send(Outgoing { frame, _held: held }).await.is_ok(),
            Err(_) => false,
        };
        if !sent {
            // Never to be written: later frames need not wait for it.
            if let Some(sink) = &self.sink {
                sink.queued.fetch_sub(1, Ordering::SeqCst);
            }
        }
        sent
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    #[tokio::test]
    async fn frames_keep_their_order_whether_written_directly_or_queued() {
        let (client, server) = tokio::io::duplex(64 * 1024);
        let sink = Sink::new(Box::pin(server));
        let (out, mut rx) = Outbox::with_sink(sink.clone());
        let writer = {
            let sink = sink.clone();
            tokio::spawn(async move {
                while let Some(o) = rx.recv().await {
                    if !sink.write_queued(o).await {
                        break;
                    }
                }
                sink.shutdown().await;
            })
        };
        // Written at once: nothing is queued.
        assert!(out.send(b"a".to_vec()).await);
        assert_eq!(sink.queued.load(Ordering::SeqCst), 0);
        // Too big to write directly: queued, and a small frame after it waits its turn.
        let big = vec![b'b'; DIRECT_MAX + 1];
        let guard = sink.writer.lock().await;
        assert!(out.send(big.clone()).await);
        assert!(out.send(b"c".to_vec()).await);
        assert_eq!(sink.queued.load(Ordering::SeqCst), 2);
        drop(guard);
        drop(out);
        writer.await.unwrap();
        let mut got = Vec::new();
        let mut client = client;
        client.read_to_end(&mut got).await.unwrap();
        let mut want = b"a".to_vec();
        want.extend_from_slice(&big);
        want.push(b'c');
        assert_eq!(got, want);
    }

    #[tokio::test]
    async fn senders_wait_once_the_budget_is_queued_and_resume_as_frames_are_written() {
        let (out, mut rx) = Outbox::new();
        let big = vec![0u8; (OUT_BUDGET_KIB as usize - 1) * 1024];
        assert!(out.send(big).await);
        // One more KiB fits, the next does not until something is written.
        assert!(out.send(vec![1u8; 1024]).await);
        let blocked = tokio::time::timeout(
            std::time::Duration::from_millis(50),
            out.send(vec![2u8; 10]),
        )
        .await;
        assert!(blocked.is_err(), "a send past the budget must wait");
        let first = rx.recv().await.map(|o| o.frame.len());
        assert_eq!(first, Some((OUT_BUDGET_KIB as usize - 1) * 1024));
        assert!(out.send(vec![3u8; 10]).await);
    }
}
