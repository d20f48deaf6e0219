//! The cluster port with TLS on loopback, certificates made at test time (`certs`):
//! a 3-node group replicates over it, strangers of every kind are refused before any
//! Raft traffic, and a recording proxy shows that the bytes on the wire are encrypted.

mod certs;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use certs::{Ca, Leaf};
use parking_lot::Mutex;
use replication::kv::{read_map, KvCommand, KvMachine};
use replication::openraft::raft::{AppendEntriesRequest, VoteRequest};
use replication::openraft::{CommittedLeaderId, Config, EntryPayload};
use replication::*;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use storage::{Engine, Memory};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const CLUSTER: &str = "test-cluster";

fn cluster_id(id: &str) -> ClusterId {
    ClusterId::new(id).unwrap()
}

/// Loads a server's `ClusterTls` from its leaf, trusting `trusted`.
fn tls_of(leaf: &Leaf, trusted: &str) -> ClusterTls {
    let dir = tempfile::tempdir().unwrap();
    let f = leaf.write(dir.path(), "node", trusted);
    ClusterTls::from_pem_files(&f.key, &f.cert, &f.ca).unwrap()
}

fn tls_config(ca: &Ca) -> PeerConfig {
    PeerConfig::tls(
        cluster_id(CLUSTER),
        tls_of(&ca.server(SERVER_NAME), &ca.pem),
    )
}

/// A cluster port whose router has no group: a request that gets through is answered
/// `Refused("no member of group ...")`.
async fn empty_server(config: PeerConfig) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    tokio::spawn(serve_tcp(listener, Arc::new(Router::new()), config));
    addr
}

fn vote() -> RaftRequest {
    RaftRequest::Vote(VoteRequest::new(Vote::new(1, 1), None))
}

async fn call(config: PeerConfig, addr: &str) -> Result<RaftResponse, TransportError> {
    let transport = TcpTransport::new(config, Duration::from_secs(3));
    transport
        .call(2, &Node::new(addr), GroupId(1), vote())
        .await
}

fn got_through(answer: &Result<RaftResponse, TransportError>) -> bool {
    matches!(answer, Ok(RaftResponse::Refused(why)) if why.contains("no member of group"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_nodes_over_tls_elect_a_leader_and_replicate() {
    let ca = Ca::new("cluster CA");
    let group = GroupId(1);
    let raft_config = Arc::new(
        Config {
            heartbeat_interval: 100,
            election_timeout_min: 400,
            election_timeout_max: 800,
            ..Default::default()
        }
        .validate()
        .unwrap(),
    );
    let mut nodes = Vec::new();
    for id in 1..=3u64 {
        // Each server has its own certificate and key from the one cluster CA.
        let peers = PeerConfig::tls(
            cluster_id(CLUSTER),
            tls_of(&ca.server(&format!("node{id}")), &ca.pem),
        );
        let engine: Arc<dyn Engine> = Arc::new(Memory::new());
        let log = LogStore::open(engine.clone(), "raft.g1", Durability::Inline).unwrap();
        let sm = StateMachineStore::open(
            engine.clone(),
            "raft.g1",
            KvMachine::default(),
            Durability::Inline,
        )
        .unwrap();
        let transport = Arc::new(TcpTransport::new(peers.clone(), Duration::from_secs(2)));
        let network = Network::new(transport, group);
        let raft = Raft::new(id, raft_config.clone(), network, log, sm)
            .await
            .unwrap();
        let router = Arc::new(Router::new());
        router.add_group(group, raft.clone());
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        tokio::spawn(serve_tcp(listener, router, peers));
        nodes.push((engine, raft, addr));
    }
    let members: BTreeMap<NodeId, Node> = (1..=3u64)
        .map(|id| (id, Node::new(nodes[id as usize - 1].2.clone())))
        .collect();
    nodes[0].1.initialize(members).await.unwrap();
    nodes[0]
        .1
        .wait(Some(Duration::from_secs(10)))
        .metrics(|m| m.current_leader.is_some(), "a leader")
        .await
        .unwrap();
    for i in 0..20 {
        let leader = nodes[0].1.current_leader().await.unwrap();
        let cmd = KvCommand::Put {
            key: format!("k{i}"),
            value: format!("v{i}"),
        };
        nodes[leader as usize - 1]
            .1
            .client_write(Command(cmd.encode().unwrap()))
            .await
            .unwrap();
    }
    let map_of = |engine: &Arc<dyn Engine>| {
        let spaces = state_spaces(&**engine, "raft.g1", &[KvMachine::KIND.to_owned()]).unwrap();
        read_map(&**engine, &spaces[0]).unwrap()
    };
    let mut converged = false;
    for _ in 0..200 {
        let first = map_of(&nodes[0].0);
        if first.len() == 20 && nodes.iter().all(|n| map_of(&n.0) == first) {
            converged = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(converged, "the three replicas hold the 20 writes");
    for (_, raft, _) in &nodes {
        raft.shutdown().await.unwrap();
    }
}

/// Sets up TLS by hand with `client` (not through `ClusterTls`), then the hello and one
/// Raft call.
async fn raw_tls_call(
    addr: &str,
    client: rustls::ClientConfig,
) -> Result<RaftResponse, TransportError> {
    let tcp = TcpStream::connect(addr).await?;
    let name = ServerName::try_from(SERVER_NAME).unwrap();
    let mut tls = tokio_rustls::TlsConnector::from(Arc::new(client))
        .connect(name, tcp)
        .await
        .map_err(TransportError::Tls)?;
    hello::dial(&mut tls, &cluster_id(CLUSTER)).await?;
    call_on(&mut tls, GroupId(1), 0, &vote()).await
}

#[tokio::test]
async fn a_peer_without_a_certificate_is_refused() {
    let ca = Ca::new("cluster CA");
    let addr = empty_server(tls_config(&ca)).await;
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_slice(ca.pem.as_bytes()).unwrap())
        .unwrap();
    let builder = || {
        rustls::ClientConfig::builder_with_provider(tlsfiles::provider())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots.clone())
    };
    // The same client with a certificate of the cluster gets through (the control).
    let leaf = ca.server("client");
    let with_cert = builder()
        .with_client_auth_cert(
            vec![CertificateDer::from_pem_slice(leaf.cert_pem.as_bytes()).unwrap()],
            PrivateKeyDer::from_pem_slice(leaf.key_pem.as_bytes()).unwrap(),
        )
        .unwrap();
    let answer = raw_tls_call(&addr, with_cert).await;
    assert!(got_through(&answer), "{answer:?}");

    let answer = raw_tls_call(&addr, builder().with_no_client_auth()).await;
    assert!(answer.is_err(), "no certificate, no answer: {answer:?}");
}

#[tokio::test]
async fn a_certificate_of_another_ca_is_refused_in_both_directions() {
    let (ca, other) = (Ca::new("cluster CA"), Ca::new("stranger CA"));
    let addr = empty_server(tls_config(&ca)).await;
    let answer = call(tls_config(&ca), &addr).await;
    assert!(got_through(&answer), "control: {answer:?}");

    // A stranger whose certificate is signed by its own CA, and which trusts ours too
    // (so that only the server's check of the stranger can refuse it).
    let both = format!("{}{}", other.pem, ca.pem);
    let stranger = PeerConfig::tls(
        cluster_id(CLUSTER),
        tls_of(&other.server(SERVER_NAME), &both),
    );
    let answer = call(stranger.clone(), &addr).await;
    assert!(
        answer.is_err(),
        "the server refuses the stranger: {answer:?}"
    );

    // A stranger's server: a member refuses to talk to it.
    let stranger_addr = empty_server(stranger).await;
    let answer = call(tls_config(&ca), &stranger_addr).await;
    assert!(
        matches!(&answer, Err(TransportError::Tls(e)) if e.to_string().contains("UnknownIssuer")),
        "the member refuses the stranger's server: {answer:?}"
    );
}

#[tokio::test]
async fn a_plain_tcp_client_gets_no_raft_traffic_from_a_tls_port() {
    let ca = Ca::new("cluster CA");
    let addr = empty_server(tls_config(&ca)).await;
    let answer = call(PeerConfig::plain(cluster_id(CLUSTER)), &addr).await;
    assert!(answer.is_err(), "{answer:?}");

    // By hand: a hello and a Raft request in the clear; the port answers neither and
    // drops the connection.
    let mut tcp = TcpStream::connect(&addr).await.unwrap();
    let mut out = Vec::new();
    let hello = async {
        let _ = hello::dial(&mut tcp, &cluster_id(CLUSTER)).await;
    };
    // The hello's answer never comes; what follows is read as raw bytes.
    let _ = tokio::time::timeout(Duration::from_millis(500), hello).await;
    let _ = replication::codec::write_frame(
        &mut tcp,
        &replication::codec::encode_message(&(1u64, GroupId(1), vote())).unwrap(),
    )
    .await;
    let read = tokio::time::timeout(
        HANDSHAKE_TIMEOUT + Duration::from_secs(2),
        tcp.read_to_end(&mut out),
    )
    .await;
    assert!(read.is_ok(), "the connection is dropped");
    assert!(
        !out.windows(hello::MAGIC.len()).any(|w| w == hello::MAGIC),
        "no hello in the answer: {out:?}"
    );
    // What did come back (a TLS alert, if anything) is not a Raft answer.
    let mut rest = &out[..];
    let frame = replication::codec::read_frame(&mut rest).await;
    assert!(
        !matches!(&frame, Ok(Some(body)) if replication::codec::decode_message::<(u64, RaftResponse)>(body).is_ok()),
        "{out:?}"
    );
}

#[tokio::test]
async fn a_tls_peer_of_another_cluster_is_refused() {
    let ca = Ca::new("cluster CA");
    let addr = empty_server(tls_config(&ca)).await;
    let other = PeerConfig::tls(
        cluster_id("another-cluster"),
        tls_of(&ca.server(SERVER_NAME), &ca.pem),
    );
    let answer = call(other, &addr).await;
    match answer {
        Err(TransportError::Hello(HelloError::Refused(why))) => {
            assert!(
                why.contains("another-cluster") && why.contains(CLUSTER),
                "{why}"
            );
        }
        other => panic!("expected a refusal naming both clusters, got {other:?}"),
    }
    assert!(got_through(&call(tls_config(&ca), &addr).await));
}

/// Forwards one connection to `to`, recording every byte in both directions.
async fn recording_proxy(to: String) -> (String, Arc<Mutex<Vec<u8>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = seen.clone();
    tokio::spawn(async move {
        let (client, _) = listener.accept().await.unwrap();
        let server = TcpStream::connect(&to).await.unwrap();
        let (cr, cw) = client.into_split();
        let (sr, sw) = server.into_split();
        let pump = |mut from: tokio::net::tcp::OwnedReadHalf,
                    mut to: tokio::net::tcp::OwnedWriteHalf,
                    seen: Arc<Mutex<Vec<u8>>>| async move {
            let mut buf = [0u8; 4096];
            while let Ok(n) = from.read(&mut buf).await {
                if n == 0 || to.write_all(&buf[..n]).await.is_err() {
                    break;
                }
                seen.lock().extend_from_slice(&buf[..n]);
            }
        };
        let up = tokio::spawn(pump(cr, sw, record.clone()));
        pump(sr, cw, record).await;
        let _ = up.await;
    });
    (addr, seen)
}

/// Sends a write carrying `marker` through a recording proxy and returns what crossed it.
async fn bytes_on_the_wire(config: PeerConfig, marker: &str) -> Vec<u8> {
    let server = empty_server(config.clone()).await;
    let (proxy, seen) = recording_proxy(server).await;
    let cmd = KvCommand::Put {
        key: "secret".into(),
        value: marker.into(),
    };
    let entry = Entry {
        log_id: LogId::new(CommittedLeaderId::new(1, 1), 1),
        payload: EntryPayload::Normal(Command(cmd.encode().unwrap())),
    };
    let request = RaftRequest::AppendEntries(AppendEntriesRequest {
        vote: Vote::new_committed(1, 1),
        prev_log_id: None,
        entries: vec![entry],
        leader_commit: None,
    });
    let transport = TcpTransport::new(config, Duration::from_secs(3));
    let answer = transport
        .call(2, &Node::new(proxy), GroupId(1), request)
        .await;
    assert!(got_through(&answer), "the write crossed: {answer:?}");
    let bytes = seen.lock().clone();
    bytes
}

#[tokio::test]
async fn the_bytes_on_the_wire_are_encrypted() {
    let marker = "the-known-payload-4f1c9a";
    let contains = |hay: &[u8]| hay.windows(marker.len()).any(|w| w == marker.as_bytes());
    let plain = bytes_on_the_wire(PeerConfig::plain(cluster_id(CLUSTER)), marker).await;
    assert!(contains(&plain), "without TLS the payload is readable");
    let ca = Ca::new("cluster CA");
    let tls = bytes_on_the_wire(tls_config(&ca), marker).await;
    assert!(tls.len() > marker.len(), "bytes crossed the proxy");
    assert!(!contains(&tls), "with TLS the payload is not readable");
    let has_id = |hay: &[u8]| hay.windows(CLUSTER.len()).any(|w| w == CLUSTER.as_bytes());
    assert!(
        has_id(&plain),
        "without TLS the hello's cluster id is readable"
    );
    assert!(!has_id(&tls), "with TLS the hello is encrypted too");
}
