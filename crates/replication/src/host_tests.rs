//! Unit tests of the host's pure parts: node ids from server ids.

use super::*;

#[test]
fn node_id_is_the_uuid_first_half() {
    let id = node_id("0123abcd-ef01-2345-6789-abcdef012345").unwrap();
    assert_eq!(id, 0x0123_abcd_ef01_2345);
    // The same id without hyphens or in capitals names the same server.
    assert_eq!(node_id("0123ABCDEF0123456789ABCDEF012345").unwrap(), id);
}

#[test]
fn node_id_refuses_what_is_not_a_uuid() {
    for bad in [
        "",
        "alpha",
        "0123abcd-ef01-2345-6789",
        "0123abcd-ef01-2345-6789-abcdef01234g",
    ] {
        assert_eq!(node_id(bad), Err(NodeIdError(bad.to_owned())), "{bad}");
    }
}

#[test]
fn node_id_is_never_zero_and_differs_between_random_servers() {
    assert_eq!(node_id("00000000-0000-0000-ffff-ffffffffffff").unwrap(), 1);
    let ids: std::collections::HashSet<NodeId> = (0..1000)
        .map(|i| {
            node_id(&format!(
                "{:016x}{:016x}",
                (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1,
                i
            ))
            .unwrap()
        })
        .collect();
    assert_eq!(ids.len(), 1000);
}

#[test]
fn member_ids_keep_the_server_and_differ_by_incarnation() {
    let s = "0123abcd-ef01-2345-6789-abcdef012345";
    let first = member_id(s, 0).unwrap();
    assert_eq!(first, node_id(s).unwrap());
    let again = member_id(s, 0xdead_beef_0000_0007).unwrap();
    assert_eq!(again, 0x0123_abcd_0000_0007);
    assert_ne!(again, first);
    assert!(same_server(first, again));
    // An incarnation whose low half is zero is still not the server's first id.
    assert_eq!(member_id(s, 1 << 40).unwrap(), 0x0123_abcd_0000_0001);
    let other = member_id("9999abcd-ef01-2345-6789-abcdef012345", 7).unwrap();
    assert!(!same_server(first, other));
    assert!(member_id("nope", 3).is_err());
}
