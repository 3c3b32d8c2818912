//! Proof that a replication link request comes from a member of the cluster: in cluster mode
//! the primary answers `REPLCONF RDMA-PORT` with a fresh random challenge, and the replica's
//! `REPLCONF RDMA-LINK` must carry
//! `HMAC-SHA256(cluster-secret, "repl-link\0" | challenge | endpoint | LinkRequest)`.
//! The challenge is used once, so a recorded proof cannot be replayed; the endpoint and the
//! request (ring advert, PSYNC) are covered, so a proof cannot be moved to another link.

use hmac::{Hmac, Mac};
use sha2::Sha256;

/// Bytes of a challenge.
pub const CHALLENGE_LEN: usize = 16;
/// Bytes of a proof.
pub const PROOF_LEN: usize = 32;
const DOMAIN: &[u8] = b"repl-link\0";

type HmacSha256 = Hmac<Sha256>;

fn mac(secret: &[u8], challenge: &[u8], endpoint: &[u8], request: &[u8]) -> HmacSha256 {
    // HMAC takes keys of any length (longer ones are hashed), so this cannot fail.
    let mut mac = <HmacSha256 as Mac>::new_from_slice(secret).expect("hmac accepts any key");
    for part in [DOMAIN, challenge, endpoint, request] {
        // Lengths first: no two different splits of the same bytes give the same MAC.
        mac.update(&(part.len() as u64).to_be_bytes());
        mac.update(part);
    }
    mac
}

/// The proof a replica sends.
pub fn link_proof(secret: &[u8], challenge: &[u8], endpoint: &[u8], request: &[u8]) -> Vec<u8> {
    mac(secret, challenge, endpoint, request)
        .finalize()
        .into_bytes()
        .to_vec()
}

/// Whether `proof` is right (compared in constant time).
pub fn check_link_proof(
    secret: &[u8],
    challenge: &[u8],
    endpoint: &[u8],
    request: &[u8],
    proof: &[u8],
) -> bool {
    mac(secret, challenge, endpoint, request)
        .verify_slice(proof)
        .is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Goal: only the same secret, challenge, endpoint and request give a proof that checks.
    #[test]
    fn proofs_bind_every_part() {
        let p = link_proof(b"s", b"challenge-16byte", b"ofi/tcp/1", b"req");
        assert_eq!(p.len(), PROOF_LEN);
        assert!(check_link_proof(
            b"s",
            b"challenge-16byte",
            b"ofi/tcp/1",
            b"req",
            &p
        ));
        // Each part changed alone, and a byte moved across the endpoint/request boundary.
        // secret, challenge, endpoint, request
        type Parts<'a> = (&'a [u8], &'a [u8], &'a [u8], &'a [u8]);
        let others: [Parts<'_>; 6] = [
            (b"t", b"challenge-16byte", b"ofi/tcp/1", b"req"),
            (b"s", b"challenge-16bytf", b"ofi/tcp/1", b"req"),
            (b"s", b"challenge-16byte", b"ofi/tcp/2", b"req"),
            (b"s", b"challenge-16byte", b"ofi/tcp/1", b"reqx"),
            (b"s", b"challenge-16byte", b"ofi/tcp/1r", b"eq"),
            (b"s", b"challenge-16byte", b"ofi/tcp/1", b"req"),
        ];
        for (i, (secret, challenge, endpoint, request)) in others.iter().enumerate() {
            // The last case keeps every part and cuts the proof short.
            let proof = if i == others.len() - 1 {
                &p[1..]
            } else {
                &p[..]
            };
            assert!(
                !check_link_proof(secret, challenge, endpoint, request, proof),
                "case {i}"
            );
        }
    }
}
