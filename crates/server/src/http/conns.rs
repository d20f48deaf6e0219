//! `ConnTable`: the open `/ajax/reql` connections by id, with RethinkDB's idle expiry
//! (`http_conn_cache_t`: a connection not used for more than its timeout, 300 s by
//! default, is dropped and its queries interrupted) and Ponder's bounds: at most
//! `max_total` connections, at most `max_per_client` per client address.
//!
//! Pure: time is passed in, so expiry is tested without waiting. Ids come from the
//! caller (16 bytes from the OS's CSPRNG, base64, as RethinkDB makes them).

use std::collections::HashMap;
use std::net::IpAddr;
use std::time::{Duration, Instant};

/// Why a connection could not be opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpenError {
    /// The client has `max_per_client` connections open.
    PerClient(usize),
    /// The server has `max_total` connections open.
    Total(usize),
}

impl OpenError {
    /// The text of the 429/503 answer.
    pub fn message(self) -> String {
        match self {
            OpenError::PerClient(n) => format!(
                "Too many open HTTP ReQL connections from this client (at most {n}); close some first.\n"
            ),
            OpenError::Total(n) => {
                format!("Too many open HTTP ReQL connections (at most {n}).\n")
            }
        }
    }
}

struct Entry<T> {
    value: T,
    client: IpAddr,
    last_used: Instant,
}

/// Open connections by id.
pub struct ConnTable<T> {
    conns: HashMap<String, Entry<T>>,
    per_client: HashMap<IpAddr, usize>,
    timeout: Duration,
    max_total: usize,
    max_per_client: usize,
}

impl<T: Clone> ConnTable<T> {
    /// An empty table whose connections expire after `timeout` unused.
    pub fn new(timeout: Duration, max_total: usize, max_per_client: usize) -> ConnTable<T> {
        ConnTable {
            conns: HashMap::new(),
            per_client: HashMap::new(),
            timeout,
            max_total,
            max_per_client,
        }
    }

    /// Adds a connection of `client` under `id`, unless a bound forbids it.
    pub fn insert(
        &mut self,
        id: String,
        client: IpAddr,
        value: T,
        now: Instant,
    ) -> Result<(), OpenError> {
        if self.conns.len() >= self.max_total {
            return Err(OpenError::Total(self.max_total));
        }
        let n = self.per_client.get(&client).copied().unwrap_or(0);
        if n >= self.max_per_client {
            return Err(OpenError::PerClient(self.max_per_client));
        }
        let old = self.conns.insert(
            id,
            Entry {
                value,
                client,
                last_used: now,
            },
        );
        if let Some(old) = old {
            // Ids are random: a collision replaces the entry (never happens in practice).
            self.forget_client(old.client);
        }
        *self.per_client.entry(client).or_default() += 1;
        Ok(())
    }

    /// The connection `id`, marked used at `now` (RethinkDB's `get_query_cache`).
    pub fn get(&mut self, id: &str, now: Instant) -> Option<T> {
        let e = self.conns.get_mut(id)?;
        e.last_used = now;
        Some(e.value.clone())
    }

    /// Removes connection `id`.
    pub fn remove(&mut self, id: &str) -> Option<T> {
        let e = self.conns.remove(id)?;
        self.forget_client(e.client);
        Some(e.value)
    }

    /// Removes and returns every connection unused for more than the timeout at `now`
    /// (RethinkDB: `difftime(now, last_accessed) > timeout`).
    pub fn expire(&mut self, now: Instant) -> Vec<T> {
        let timeout = self.timeout;
        let expired: Vec<String> = self
            .conns
            .iter()
            .filter(|(_, e)| now.saturating_duration_since(e.last_used) > timeout)
            .map(|(id, _)| id.clone())
            .collect();
        expired.iter().filter_map(|id| self.remove(id)).collect()
    }

    /// Removes and returns every connection (the server is stopping).
    pub fn drain(&mut self) -> Vec<T> {
        self.per_client.clear();
        self.conns.drain().map(|(_, e)| e.value).collect()
    }

    /// Open connections.
    pub fn len(&self) -> usize {
        self.conns.len()
    }

    fn forget_client(&mut self, client: IpAddr) {
        if let Some(n) = self.per_client.get_mut(&client) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.per_client.remove(&client);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(127, 0, 0, 1));
    const B: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(127, 0, 0, 2));

    #[test]
    fn idle_connections_expire_and_used_ones_stay() {
        let t0 = Instant::now();
        let mut t = ConnTable::new(Duration::from_secs(300), 10, 10);
        t.insert("a".into(), A, 1, t0).unwrap();
        t.insert("b".into(), A, 2, t0).unwrap();
        // Exactly the timeout is not expired yet (RethinkDB compares with `>`).
        assert!(t.expire(t0 + Duration::from_secs(300)).is_empty());
        assert_eq!(t.get("b", t0 + Duration::from_secs(200)), Some(2));
        let gone = t.expire(t0 + Duration::from_secs(301));
        assert_eq!(gone, vec![1]);
        assert_eq!(t.get("a", t0 + Duration::from_secs(301)), None);
        assert_eq!(t.get("b", t0 + Duration::from_secs(301)), Some(2));
        assert!(t.expire(t0 + Duration::from_secs(601)).is_empty());
        assert_eq!(t.expire(t0 + Duration::from_secs(602)), vec![2]);
        assert_eq!(t.len(), 0);
    }

    #[test]
    fn connections_are_bounded_per_client_and_in_total() {
        let now = Instant::now();
        let mut t = ConnTable::new(Duration::from_secs(1), 3, 2);
        t.insert("1".into(), A, (), now).unwrap();
        t.insert("2".into(), A, (), now).unwrap();
        assert_eq!(
            t.insert("3".into(), A, (), now),
            Err(OpenError::PerClient(2))
        );
        t.insert("3".into(), B, (), now).unwrap();
        assert_eq!(t.insert("4".into(), B, (), now), Err(OpenError::Total(3)));
        // Closing one frees its client's slot.
        assert_eq!(t.remove("1"), Some(()));
        t.insert("5".into(), A, (), now).unwrap();
        assert_eq!(t.drain().len(), 3);
        t.insert("6".into(), A, (), now).unwrap();
    }
}
