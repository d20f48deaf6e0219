//! How a replicated shard's failures reach the client: [`RouteError`] and its mapping to
//! RethinkDB's errors ([`RouteError::to_reql`]).
//!
//! RethinkDB's rule (`clustering/query_routing`, `rdb_protocol`): a failure is
//! `ReqlOpFailedError` when the operation certainly did not happen, and
//! `ReqlOpIndeterminateError` when a write was sent and its outcome is unknown. Reads are
//! never indeterminate. The texts are RethinkDB's, prefixed with "Cannot perform read: "
//! or "Cannot perform write: " as its `table_t` does.

use reql::error::{ErrorKind, ReqlError};
use store::{KeyRange, StoreError};

/// Whether an operation reads or writes (it decides the message's prefix, and whether
/// a lost answer is indeterminate).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// A read.
    Read,
    /// A write.
    Write,
}

impl Op {
    fn name(self) -> &'static str {
        match self {
            Op::Read => "read",
            Op::Write => "write",
        }
    }
}

/// Why a routed operation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RouteError {
    /// No leader could be reached before the request was sent (none elected, every
    /// hint unreachable, retries or time used up): nothing happened.
    #[error("primary replica for shard {range} not available")]
    PrimaryUnavailable {
        /// What was attempted.
        op: Op,
        /// The shard's key range, as RethinkDB prints it.
        range: String,
    },
    /// The leader has not heard from a quorum lately and refused: nothing happened.
    #[error("the primary replica isn't connected to a quorum of replicas")]
    NoQuorum(Op),
    /// The request was sent and no answer came back (connection lost, deadline passed).
    #[error("lost contact with primary replica")]
    LostContact(Op),
    /// The leader appended the write but could not learn whether it was committed.
    #[error("the primary replica lost contact with the secondary replicas: {0}")]
    CommitUnknown(String),
    /// The shard refused the write before the log (malformed, key outside the shard).
    #[error("the write was refused: {0}")]
    Refused(String),
    /// The read failed on the replica that ran it.
    #[error("the read failed: {0}")]
    ReadFailed(String),
    /// A local store error (key encoding, storage).
    #[error(transparent)]
    Store(#[from] StoreErrorText),
}

/// A store error kept as its class and text (`StoreError` is not `Clone`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{text}")]
pub struct StoreErrorText {
    /// Whether the query's key was at fault (a logic error) rather than the storage.
    pub key: bool,
    /// The message.
    pub text: String,
}

impl From<StoreError> for RouteError {
    fn from(e: StoreError) -> Self {
        let key = matches!(e, StoreError::Key(_));
        let text = match e {
            StoreError::Key(m) => m,
            other => other.to_string(),
        };
        RouteError::Store(StoreErrorText { key, text })
    }
}

impl RouteError {
    /// Whether the operation may have taken effect (RethinkDB's `INDETERMINATE`).
    pub fn indeterminate(&self) -> bool {
        matches!(
            self,
            RouteError::LostContact(Op::Write) | RouteError::CommitUnknown(_)
        )
    }

    /// The error as RethinkDB reports it.
    pub fn to_reql(&self) -> ReqlError {
        let kind = if self.indeterminate() {
            ErrorKind::OpIndeterminate
        } else {
            ErrorKind::OpFailed
        };
        let message = match self {
            RouteError::PrimaryUnavailable { op, range } => format!(
                "Cannot perform {}: primary replica for shard {range} not available",
                op.name()
            ),
            RouteError::NoQuorum(Op::Write) => "Cannot perform write: The primary replica \
                isn't connected to a quorum of replicas. The write was not performed."
                .to_string(),
            RouteError::NoQuorum(Op::Read) => "Cannot perform read: The primary replica \
                isn't connected to a quorum of replicas. The read was not performed, you can \
                do an outdated read using `read_mode=\"outdated\"`."
                .to_string(),
            RouteError::LostContact(op) => {
                format!(
                    "Cannot perform {}: lost contact with primary replica",
                    op.name()
                )
            }
            RouteError::CommitUnknown(_) => "Cannot perform write: The primary replica lost \
                contact with the secondary replicas. The write may or may not have been \
                performed."
                .to_string(),
            RouteError::Refused(why) => format!("Cannot perform write: {why}"),
            RouteError::ReadFailed(why) => format!("Cannot perform read: {why}"),
            RouteError::Store(StoreErrorText { key: true, text }) => {
                return reql::error::logic(text.clone())
            }
            RouteError::Store(StoreErrorText { text, .. }) => {
                return reql::error::op_failed(format!("Storage failure: {text}"))
                    .nondeterministic()
            }
        };
        // Availability depends on the moment, not on the query; except for a refusal by
        // the shard itself (before the log, or a failed read), the table was not
        // reachable, which ends the whole query (RethinkDB throws `Cannot perform write:
        // ...` rather than counting it in a write's `errors`).
        let error = ReqlError::new(kind, message);
        match self {
            RouteError::Refused(_) | RouteError::ReadFailed(_) => error.nondeterministic(),
            _ => error.table_unavailable(),
        }
    }
}

/// A key range as RethinkDB's `key_range_to_string` prints it: `["", +inf)` for a whole
/// table; bounds are the encoded keys, quoted and escaped.
pub fn range_text(range: &KeyRange) -> String {
    let quote = |k: &[u8]| {
        let mut s = String::from("\"");
        for c in String::from_utf8_lossy(k).chars() {
            match c {
                '"' | '\\' => {
                    s.push('\\');
                    s.push(c);
                }
                c if (' '..='~').contains(&c) => s.push(c),
                c => s.push_str(&format!("\\x{:02x}", u32::from(c) & 0xff)),
            }
        }
        s.push('"');
        s
    };
    let lower = quote(range.lower.as_deref().unwrap_or_default());
    let upper = range.upper.as_deref().map_or("+inf".to_string(), quote);
    format!("[{lower}, {upper})")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn whole() -> String {
        range_text(&KeyRange::all())
    }

    #[test]
    fn unavailable_primary_is_op_failed_with_rethinkdbs_text() {
        let e = RouteError::PrimaryUnavailable {
            op: Op::Write,
            range: whole(),
        }
        .to_reql();
        assert_eq!(e.kind, ErrorKind::OpFailed);
        assert_eq!(
            e.message,
            "Cannot perform write: primary replica for shard [\"\", +inf) not available"
        );
        let e = RouteError::PrimaryUnavailable {
            op: Op::Read,
            range: whole(),
        }
        .to_reql();
        assert_eq!(
            e.message,
            "Cannot perform read: primary replica for shard [\"\", +inf) not available"
        );
        assert!(!e.deterministic);
    }

    #[test]
    fn no_quorum_is_op_failed_for_reads_and_writes() {
        let w = RouteError::NoQuorum(Op::Write).to_reql();
        assert_eq!(w.kind, ErrorKind::OpFailed);
        assert_eq!(
            w.message,
            "Cannot perform write: The primary replica isn't connected to a quorum of \
             replicas. The write was not performed."
        );
        let r = RouteError::NoQuorum(Op::Read).to_reql();
        assert_eq!(r.kind, ErrorKind::OpFailed);
        assert_eq!(
            r.message,
            "Cannot perform read: The primary replica isn't connected to a quorum of \
             replicas. The read was not performed, you can do an outdated read using \
             `read_mode=\"outdated\"`."
        );
    }

    #[test]
    fn a_lost_write_is_indeterminate_a_lost_read_is_not() {
        let w = RouteError::LostContact(Op::Write).to_reql();
        assert_eq!(w.kind, ErrorKind::OpIndeterminate);
        assert_eq!(
            w.message,
            "Cannot perform write: lost contact with primary replica"
        );
        let r = RouteError::LostContact(Op::Read).to_reql();
        assert_eq!(r.kind, ErrorKind::OpFailed);
        assert_eq!(
            r.message,
            "Cannot perform read: lost contact with primary replica"
        );
        let c = RouteError::CommitUnknown("timeout".into()).to_reql();
        assert_eq!(c.kind, ErrorKind::OpIndeterminate);
        assert_eq!(
            c.message,
            "Cannot perform write: The primary replica lost contact with the secondary \
             replicas. The write may or may not have been performed."
        );
    }

    #[test]
    fn store_errors_keep_their_classes() {
        let key: RouteError = StoreError::Key("Primary key too long".into()).into();
        assert_eq!(key.to_reql().kind, ErrorKind::QueryLogic);
        assert_eq!(key.to_reql().message, "Primary key too long");
        let refused = RouteError::Refused("key outside the shard".into()).to_reql();
        assert_eq!(refused.kind, ErrorKind::OpFailed);
        assert_eq!(
            refused.message,
            "Cannot perform write: key outside the shard"
        );
    }

    #[test]
    fn only_an_unreachable_table_ends_the_whole_query() {
        let unreachable = [
            RouteError::PrimaryUnavailable {
                op: Op::Write,
                range: whole(),
            },
            RouteError::NoQuorum(Op::Write),
            RouteError::LostContact(Op::Write),
            RouteError::CommitUnknown("deadline passed".into()),
        ];
        for e in unreachable {
            let q = e.to_reql();
            assert!(q.unavailable && !q.deterministic, "{e:?}");
        }
        let by_the_shard = [
            RouteError::Refused("key outside the shard".into()),
            RouteError::ReadFailed("bad".into()),
            StoreError::Key("Primary key too long".into()).into(),
        ];
        for e in by_the_shard {
            assert!(!e.to_reql().unavailable, "{e:?}");
        }
    }

    #[test]
    fn ranges_print_like_rethinkdb() {
        assert_eq!(whole(), "[\"\", +inf)");
        let r = KeyRange {
            lower: Some(b"Sa\"b".to_vec()),
            upper: Some(vec![b'N', 0x01]),
        };
        assert_eq!(range_text(&r), "[\"Sa\\\"b\", \"N\\x01\")");
    }
}
