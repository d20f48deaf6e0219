//! The peer set: which servers this one knows, where to reach them, what they last
//! said about themselves, and whether they are connected — pure bookkeeping, no I/O,
//! so its rules are unit tested.
//!
//! Rules (RethinkDB's): every server connects to every other, so a server learns its
//! peers' addresses from any member (`learn`) and pings them all; a peer is connected
//! while it was heard from (its answer to a ping, or its own ping) within the heartbeat
//! timeout, and is marked disconnected after it (`expire`); a disconnected peer stays
//! known (for `connected_to`) and is pinged again, so it reconnects when it is back.
//!
//! Invariants: this server never appears among its peers (answers from its own
//! addresses are recognised by id and those addresses are not pinged again); a
//! peer's addresses are those it announces (its canonical addresses) plus those other
//! servers reported, without duplicates.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use cluster::system::ServerRecord;
use serde::{Deserialize, Serialize};

/// A server another server told about.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Known {
    /// Its server id.
    pub id: String,
    /// Where to reach its cluster port (`host:port`).
    pub addresses: Vec<String>,
}

/// One peer.
#[derive(Debug, Clone)]
struct Peer {
    record: ServerRecord,
    addresses: Vec<String>,
    last_seen: Option<Instant>,
    /// Seconds since the epoch when it was last (re)connected.
    since: f64,
    connected: bool,
}

/// This server's peers.
#[derive(Debug)]
pub struct PeerSet {
    me: String,
    seeds: Vec<String>,
    own_addresses: BTreeSet<String>,
    peers: BTreeMap<String, Peer>,
}

/// `host:port` of a canonical address.
pub(super) fn address((host, port): &(String, u16)) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

impl PeerSet {
    /// The peer set of server `me`, which was told to join `seeds` (`--join`).
    pub fn new(me: &str, seeds: Vec<String>) -> Self {
        Self {
            me: me.to_string(),
            seeds,
            own_addresses: BTreeSet::new(),
            peers: BTreeMap::new(),
        }
    }

    /// An answer from `addr` came from this server itself: stop pinging it.
    pub fn is_me(&mut self, addr: &str) {
        self.own_addresses.insert(addr.to_string());
    }

    /// Heard from a server (its ping, or its answer to ours) at `now` (`epoch`: the
    /// same instant in seconds since the epoch). Returns whether it is newly connected.
    pub fn heard_from(&mut self, record: ServerRecord, now: Instant, epoch: f64) -> bool {
        if record.id == self.me {
            return false;
        }
        let announced: Vec<String> = record.canonical_addresses.iter().map(address).collect();
        let peer = self.peers.entry(record.id.clone()).or_insert_with(|| Peer {
            record: record.clone(),
            addresses: Vec::new(),
            last_seen: None,
            since: epoch,
            connected: false,
        });
        for a in announced {
            if !peer.addresses.contains(&a) {
                peer.addresses.push(a);
            }
        }
        let newly = !peer.connected;
        if newly {
            peer.since = epoch;
        }
        peer.record = record;
        peer.record.time_connected = peer.since;
        peer.last_seen = Some(now);
        peer.connected = true;
        newly
    }

    /// Learns the servers another server knows (their addresses), for pinging.
    pub fn learn(&mut self, known: Vec<Known>) {
        for k in known {
            if k.id == self.me {
                continue;
            }
            let peer = self.peers.entry(k.id.clone()).or_insert_with(|| Peer {
                record: ServerRecord {
                    id: k.id.clone(),
                    ..ServerRecord::default()
                },
                addresses: Vec::new(),
                last_seen: None,
                since: 0.0,
                connected: false,
            });
            for a in k.addresses {
                if !peer.addresses.contains(&a) {
                    peer.addresses.push(a);
                }
            }
        }
    }

    /// Marks the peers not heard from within `timeout` disconnected; returns their names.
    pub fn expire(&mut self, now: Instant, timeout: Duration) -> Vec<String> {
        let mut lost = Vec::new();
        for p in self.peers.values_mut() {
            let stale = p
                .last_seen
                .is_none_or(|seen| now.saturating_duration_since(seen) > timeout);
            if p.connected && stale {
                p.connected = false;
                lost.push(p.record.name.clone());
            }
        }
        lost
    }

    /// Marks disconnected, at once, the connected peers none of whose addresses could be
    /// reached this round (`refused`: the addresses whose connection was refused or
    /// closed, not merely slow), as RethinkDB does when a peer's connection drops; the
    /// heartbeat timeout (`expire`) is for peers that go silent. Returns their names.
    pub fn unreachable(&mut self, refused: &BTreeSet<String>) -> Vec<String> {
        let mut lost = Vec::new();
        for p in self.peers.values_mut() {
            if p.connected
                && !p.addresses.is_empty()
                && p.addresses.iter().all(|a| refused.contains(a))
            {
                p.connected = false;
                lost.push(p.record.name.clone());
            }
        }
        lost
    }

    /// The addresses to ping this round: the seeds and every peer's addresses.
    pub fn targets(&self) -> Vec<String> {
        let mut all: Vec<String> = Vec::new();
        for a in self
            .seeds
            .iter()
            .chain(self.peers.values().flat_map(|p| p.addresses.iter()))
        {
            if !self.own_addresses.contains(a) && !all.contains(a) {
                all.push(a.clone());
            }
        }
        all
    }

    /// The connected peers' records.
    pub fn connected(&self) -> Vec<ServerRecord> {
        self.peers
            .values()
            .filter(|p| p.connected)
            .map(|p| p.record.clone())
            .collect()
    }

    /// A connected peer's addresses.
    pub fn addresses_of(&self, id: &str) -> Option<Vec<String>> {
        self.peers
            .get(id)
            .filter(|p| p.connected)
            .map(|p| p.addresses.clone())
    }

    /// Applies a rename or retag of a peer that it confirmed.
    pub fn renamed(&mut self, id: &str, name: &str, tags: &[String]) {
        if let Some(p) = self.peers.get_mut(id) {
            p.record.name = name.to_string();
            p.record.tags = tags.to_vec();
        }
    }

    /// id → name, for every peer that ever described itself (connected or not).
    pub fn names(&self) -> BTreeMap<String, String> {
        self.peers
            .values()
            .filter(|p| !p.record.name.is_empty())
            .map(|p| (p.record.id.clone(), p.record.name.clone()))
            .collect()
    }

    /// name → connected, for every peer that ever described itself.
    pub fn connected_to(&self) -> BTreeMap<String, bool> {
        self.peers
            .values()
            .filter(|p| !p.record.name.is_empty())
            .map(|p| (p.record.name.clone(), p.connected))
            .collect()
    }

    /// What this server tells others: every peer with its addresses.
    pub fn known(&self) -> Vec<Known> {
        self.peers
            .values()
            .filter(|p| !p.addresses.is_empty())
            .map(|p| Known {
                id: p.record.id.clone(),
                addresses: p.addresses.clone(),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(id: &str, name: &str, port: u16) -> ServerRecord {
        ServerRecord {
            id: id.into(),
            name: name.into(),
            canonical_addresses: vec![("127.0.0.1".into(), port)],
            ..ServerRecord::default()
        }
    }

    #[test]
    fn a_joiner_learns_the_others_through_one_member() {
        let t0 = Instant::now();
        let mut set = PeerSet::new("a", vec!["127.0.0.1:1".into()]);
        assert_eq!(set.targets(), vec!["127.0.0.1:1".to_string()]);
        assert!(set.heard_from(rec("b", "B", 1), t0, 100.0));
        assert!(
            !set.heard_from(rec("b", "B", 1), t0, 101.0),
            "not new twice"
        );
        // B knows C (and A itself, which is skipped).
        set.learn(vec![
            Known {
                id: "c".into(),
                addresses: vec!["127.0.0.1:3".into()],
            },
            Known {
                id: "a".into(),
                addresses: vec!["127.0.0.1:9".into()],
            },
        ]);
        assert_eq!(set.targets(), vec!["127.0.0.1:1", "127.0.0.1:3"]);
        assert_eq!(set.connected().len(), 1, "C is known, not yet connected");
        assert!(
            !set.connected_to().contains_key("C"),
            "C never described itself"
        );
        set.heard_from(rec("c", "C", 3), t0, 102.0);
        let names: Vec<_> = set.connected().into_iter().map(|r| r.name).collect();
        assert_eq!(names, vec!["B", "C"]);
        assert_eq!(set.connected()[0].time_connected, 100.0);
    }

    #[test]
    fn silence_past_the_timeout_disconnects_and_a_ping_reconnects() {
        let t0 = Instant::now();
        let mut set = PeerSet::new("a", vec![]);
        set.heard_from(rec("b", "B", 1), t0, 0.0);
        let timeout = Duration::from_secs(2);
        assert!(set.expire(t0 + Duration::from_secs(1), timeout).is_empty());
        assert_eq!(set.expire(t0 + Duration::from_secs(3), timeout), vec!["B"]);
        assert!(
            set.expire(t0 + Duration::from_secs(4), timeout).is_empty(),
            "once"
        );
        assert_eq!(set.connected_to().get("B"), Some(&false));
        assert!(set.connected().is_empty());
        assert!(set.addresses_of("b").is_none());
        // Still pinged, so it comes back.
        assert_eq!(set.targets(), vec!["127.0.0.1:1"]);
        assert!(set.heard_from(rec("b", "B", 1), t0 + Duration::from_secs(5), 9.0));
        assert_eq!(set.connected_to().get("B"), Some(&true));
        assert_eq!(set.connected()[0].time_connected, 9.0);
    }

    #[test]
    fn a_peer_whose_every_address_refuses_is_disconnected_at_once() {
        let t0 = Instant::now();
        let mut set = PeerSet::new("a", vec![]);
        set.heard_from(rec("b", "B", 1), t0, 0.0);
        set.heard_from(rec("c", "C", 2), t0, 0.0);
        set.learn(vec![Known {
            id: "c".into(),
            addresses: vec!["10.0.0.3:2".into()],
        }]);
        let refused: BTreeSet<String> = ["127.0.0.1:1".into(), "127.0.0.1:2".into()].into();
        // C still answers at its other address.
        assert_eq!(set.unreachable(&refused), vec!["B"]);
        assert!(set.unreachable(&refused).is_empty(), "once");
        assert_eq!(set.connected_to().get("B"), Some(&false));
        assert_eq!(set.connected_to().get("C"), Some(&true));
        // Still named, for the replicas it holds.
        assert_eq!(set.names().get("b").map(String::as_str), Some("B"));
        // It comes back with its next answer.
        assert!(set.heard_from(rec("b", "B", 1), t0, 1.0));
    }

    #[test]
    fn this_server_is_never_its_own_peer() {
        let mut set = PeerSet::new("a", vec!["127.0.0.1:5".into()]);
        assert!(!set.heard_from(rec("a", "A", 5), Instant::now(), 0.0));
        set.is_me("127.0.0.1:5");
        assert!(set.targets().is_empty());
        assert!(set.connected().is_empty());
    }

    #[test]
    fn renames_update_the_record_and_the_names_map() {
        let mut set = PeerSet::new("a", vec![]);
        set.heard_from(rec("b", "B", 1), Instant::now(), 0.0);
        set.renamed("b", "Bee", &["x".into()]);
        assert_eq!(set.connected()[0].name, "Bee");
        assert_eq!(set.connected()[0].tags, vec!["x".to_string()]);
        assert!(set.connected_to().contains_key("Bee"));
    }
}
