//! The HyperLogLog string, byte for byte as Redis lays it out, so that a value written by
//! redis-server (GET/SET, DUMP/RESTORE) works here and the other way round:
//!
//! ```text
//! "HYLL" | encoding (0 dense, 1 sparse) | 3 unused | cached cardinality, u64 little-endian
//!        (its top bit set: stale) | registers
//! ```
//!
//! 16384 registers of 6 bits. Dense: the registers packed least significant bit first (12288
//! bytes). Sparse: run-length opcodes: `00xxxxxx` ZERO (1-64 zero registers), `01xxxxxx
//! yyyyyyyy` XZERO (1-16384 zero registers), `1vvvvvxx` VAL (1-4 registers of value 1-32).
//! A sparse value is promoted to dense when a register needs more than 32, or when it would
//! grow past `hll-sparse-max-bytes`.

use super::estimate::cardinality;
use super::murmur::murmur_hash64a;
use crate::command_framework::CmdError;

/// Register index bits (2^14 registers).
pub const P: u32 = 14;
pub const REGISTERS: usize = 1 << P;
/// Hash bits left for the run of zeroes.
pub const Q: usize = 64 - P as usize;
pub const HEADER_LEN: usize = 16;
pub const DENSE_LEN: usize = HEADER_LEN + (REGISTERS * 6).div_ceil(8);
const REGISTER_MAX: u32 = 63;
const DENSE: u8 = 0;
const SPARSE: u8 = 1;
const ENCODING_AT: usize = 4;
const CARD_AT: usize = 8;
/// The seed Redis hashes elements with.
const SEED: u64 = 0xadc83b19;
const SPARSE_VAL_MAX_VALUE: u8 = 32;
const SPARSE_VAL_MAX_LEN: usize = 4;
const SPARSE_ZERO_MAX_LEN: usize = 64;

/// What is wrong with a value used as a HyperLogLog.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum HllError {
    /// Not a string in HLL layout (bad magic, encoding or dense length).
    #[error("WRONGTYPE Key is not a valid HyperLogLog string value.")]
    NotHll,
    /// A sparse HLL whose opcodes do not cover exactly the 16384 registers.
    #[error("INVALIDOBJ Corrupted HLL object detected")]
    Corrupt,
}

impl From<HllError> for CmdError {
    fn from(e: HllError) -> Self {
        CmdError::new(e.to_string())
    }
}

/// Redis's `isHLLObjectOrReply`: the header checks (the sparse opcodes are checked when read).
pub fn validate(bytes: &[u8]) -> Result<(), HllError> {
    if bytes.len() < HEADER_LEN
        || &bytes[..4] != b"HYLL"
        || bytes[ENCODING_AT] > SPARSE
        || (bytes[ENCODING_AT] == DENSE && bytes.len() != DENSE_LEN)
    {
        return Err(HllError::NotHll);
    }
    Ok(())
}

pub fn is_dense(bytes: &[u8]) -> bool {
    bytes[ENCODING_AT] == DENSE
}

/// A new, empty HLL: sparse, one XZERO covering every register, cached cardinality 0.
pub fn new_sparse() -> Vec<u8> {
    let mut s = Vec::with_capacity(HEADER_LEN + 2);
    s.extend_from_slice(b"HYLL");
    s.extend_from_slice(&[SPARSE, 0, 0, 0]);
    s.extend_from_slice(&[0; 8]);
    push_xzero(&mut s, REGISTERS);
    s
}

/// The cached cardinality, if it is current.
pub fn cached(bytes: &[u8]) -> Option<u64> {
    let card: [u8; 8] = bytes[CARD_AT..CARD_AT + 8].try_into().ok()?;
    (card[7] & 0x80 == 0).then(|| u64::from_le_bytes(card))
}

pub fn set_cached(bytes: &mut [u8], card: u64) {
    bytes[CARD_AT..CARD_AT + 8].copy_from_slice(&card.to_le_bytes());
}

pub fn invalidate_cache(bytes: &mut [u8]) {
    bytes[CARD_AT + 7] |= 0x80;
}

/// The register an element lands in and the length of its run of zeroes plus one.
pub fn register_and_count(element: &[u8]) -> (usize, u8) {
    let hash = murmur_hash64a(element, SEED);
    let index = (hash & (REGISTERS as u64 - 1)) as usize;
    // The bit above the Q hash bits stops the run at Q + 1.
    let rest = (hash >> P) | (1u64 << Q);
    (index, rest.trailing_zeros() as u8 + 1)
}

pub fn dense_get(registers: &[u8], i: usize) -> u8 {
    let (byte, fb) = (i * 6 / 8, (i * 6) & 7);
    let b0 = registers[byte] as u32;
    let b1 = registers.get(byte + 1).copied().unwrap_or(0) as u32;
    (((b0 >> fb) | (b1 << (8 - fb))) & REGISTER_MAX) as u8
}

pub fn dense_put(registers: &mut [u8], i: usize, value: u8) {
    let (byte, fb) = (i * 6 / 8, (i * 6) & 7);
    let v = value as u32;
    registers[byte] &= !((REGISTER_MAX << fb) as u8);
    registers[byte] |= (v << fb) as u8;
    if let Some(b1) = registers.get_mut(byte + 1) {
        *b1 &= !((REGISTER_MAX >> (8 - fb)) as u8);
        *b1 |= (v >> (8 - fb)) as u8;
    }
}

/// Raises register `i` of a dense HLL to `count`; true if it changed.
fn dense_raise(hll: &mut [u8], i: usize, count: u8) -> bool {
    let registers = &mut hll[HEADER_LEN..];
    if dense_get(registers, i) < count {
        dense_put(registers, i, count);
        true
    } else {
        false
    }
}

/// A sparse opcode at `p`: (registers covered, value, opcode length).
fn opcode(s: &[u8], p: usize) -> (usize, u8, usize) {
    let b = s[p];
    if b & 0xc0 == 0 {
        ((b & 0x3f) as usize + 1, 0, 1)
    } else if b & 0xc0 == 0x40 {
        // A truncated XZERO reads a zero second byte, as Redis reads the string's terminator.
        let low = s.get(p + 1).copied().unwrap_or(0) as usize;
        ((((b & 0x3f) as usize) << 8 | low) + 1, 0, 2)
    } else {
        ((b & 0x3) as usize + 1, ((b >> 2) & 0x1f) + 1, 1)
    }
}

fn is_val(b: u8) -> bool {
    b & 0x80 != 0
}

fn val_op(value: u8, len: usize) -> u8 {
    ((value - 1) << 2 | (len as u8 - 1)) | 0x80
}

fn push_zeros(seq: &mut Vec<u8>, len: usize) {
    if len > SPARSE_ZERO_MAX_LEN {
        push_xzero(seq, len);
    } else {
        seq.push(len as u8 - 1);
    }
}

fn push_xzero(seq: &mut Vec<u8>, len: usize) {
    let l = len - 1;
    seq.push((l >> 8) as u8 | 0x40);
    seq.push((l & 0xff) as u8);
}

/// Calls `f(first_register, run_length, value)` for each sparse opcode; false if the opcodes
/// do not cover exactly the registers (a VAL run past the end stops the walk).
fn walk_sparse(s: &[u8], mut f: impl FnMut(usize, usize, u8)) -> bool {
    let (mut p, mut idx) = (HEADER_LEN, 0usize);
    while p < s.len() {
        let (len, value, oplen) = opcode(s, p);
        if value > 0 && idx + len > REGISTERS {
            return false;
        }
        f(idx, len, value);
        idx += len;
        p += oplen;
    }
    idx == REGISTERS
}

/// Converts a sparse HLL to dense in place (the header, cache included, is kept).
pub fn sparse_to_dense(hll: &mut Vec<u8>) -> Result<(), HllError> {
    if is_dense(hll) {
        return Ok(());
    }
    let mut dense = vec![0u8; DENSE_LEN];
    dense[..HEADER_LEN].copy_from_slice(&hll[..HEADER_LEN]);
    dense[ENCODING_AT] = DENSE;
    let registers = &mut dense[HEADER_LEN..];
    let complete = walk_sparse(hll, |first, len, value| {
        if value > 0 {
            (first..first + len).for_each(|i| dense_put(registers, i, value));
        }
    });
    if !complete {
        return Err(HllError::Corrupt);
    }
    *hll = dense;
    Ok(())
}

/// Raises register `index` to `count` in a sparse HLL, rewriting the opcode that covers it
/// as Redis's `hllSparseSet` does (split, then merge equal neighbours), so the bytes come
/// out as redis-server's. Promotes to dense when the sparse form cannot hold the result.
fn sparse_raise(
    hll: &mut Vec<u8>,
    index: usize,
    count: u8,
    max_bytes: usize,
) -> Result<bool, HllError> {
    if count > SPARSE_VAL_MAX_VALUE {
        return promote_and_raise(hll, index, count);
    }
    // Find the opcode covering `index`, and the one before it.
    let (mut p, mut first, mut prev) = (HEADER_LEN, 0usize, None);
    let mut found = None;
    while p < hll.len() {
        let op = opcode(hll, p);
        if index < first + op.0 {
            found = Some(op);
            break;
        }
        prev = Some(p);
        p += op.2;
        first += op.0;
    }
    let Some((span, current, oplen)) = found else {
        return Err(HllError::Corrupt);
    };
    let val = is_val(hll[p]);
    if val && current >= count {
        return Ok(false);
    }
    if span == 1 && (val || oplen == 1) {
        // A single register: rewrite its opcode in place.
        hll[p] = val_op(count, 1);
    } else {
        let last = first + span - 1;
        let mut seq = Vec::with_capacity(5);
        if index != first {
            if val {
                seq.push(val_op(current, index - first));
            } else {
                push_zeros(&mut seq, index - first);
            }
        }
        seq.push(val_op(count, 1));
        if index != last {
            if val {
                seq.push(val_op(current, last - index));
            } else {
                push_zeros(&mut seq, last - index);
            }
        }
        if seq.len() > oplen && hll.len() + seq.len() - oplen > max_bytes {
            return promote_and_raise(hll, index, count);
        }
        let available = hll.len() - p;
        if available < oplen {
            // An XZERO cut short at the very end. Redis counts it as two bytes (its second
            // read from the string's terminator), so its length bookkeeping keeps one byte
            // less of the new sequence: mirrored, so both servers hold the same bytes.
            let keep = seq.len() - (oplen - available);
            hll.truncate(p);
            hll.extend_from_slice(&seq[..keep]);
        } else {
            hll.splice(p..p + oplen, seq);
        }
    }
    merge_neighbours(hll, prev.unwrap_or(HEADER_LEN));
    invalidate_cache(hll);
    Ok(true)
}

/// Merges adjacent VAL opcodes of equal value, scanning at most five opcodes from `p`.
fn merge_neighbours(hll: &mut Vec<u8>, mut p: usize) {
    let mut scans = 5;
    while p < hll.len() && scans > 0 {
        scans -= 1;
        let b = hll[p];
        if !is_val(b) {
            p += if b & 0xc0 == 0x40 { 2 } else { 1 };
            continue;
        }
        if p + 1 < hll.len() && is_val(hll[p + 1]) {
            let (l1, v1, _) = opcode(hll, p);
            let (l2, v2, _) = opcode(hll, p + 1);
            if v1 == v2 && l1 + l2 <= SPARSE_VAL_MAX_LEN {
                hll[p + 1] = val_op(v1, l1 + l2);
                hll.remove(p);
                // Try again from the merged opcode: it may merge with the next one too.
                continue;
            }
        }
        p += 1;
    }
}

fn promote_and_raise(hll: &mut Vec<u8>, index: usize, count: u8) -> Result<bool, HllError> {
    sparse_to_dense(hll)?;
    dense_raise(hll, index, count);
    Ok(true)
}

/// Raises register `index` to at least `count`, in either encoding; true if it changed.
pub fn raise(
    hll: &mut Vec<u8>,
    index: usize,
    count: u8,
    sparse_max_bytes: usize,
) -> Result<bool, HllError> {
    if is_dense(hll) {
        Ok(dense_raise(hll, index, count))
    } else {
        sparse_raise(hll, index, count, sparse_max_bytes)
    }
}

/// PFADD of one element; true if a register changed.
pub fn add(hll: &mut Vec<u8>, element: &[u8], sparse_max_bytes: usize) -> Result<bool, HllError> {
    let (index, count) = register_and_count(element);
    raise(hll, index, count, sparse_max_bytes)
}

/// Raises `max[i]` to each register of a valid HLL.
pub fn merge_into(max: &mut [u8; REGISTERS], hll: &[u8]) -> Result<(), HllError> {
    if is_dense(hll) {
        let registers = &hll[HEADER_LEN..];
        for (i, m) in max.iter_mut().enumerate() {
            *m = (*m).max(dense_get(registers, i));
        }
        return Ok(());
    }
    let complete = walk_sparse(hll, |first, len, value| {
        if value > 0 {
            for m in &mut max[first..first + len] {
                *m = (*m).max(value);
            }
        }
    });
    if complete {
        Ok(())
    } else {
        Err(HllError::Corrupt)
    }
}

/// The estimated cardinality of a valid HLL (not using the cache).
pub fn count(hll: &[u8]) -> Result<u64, HllError> {
    let mut histogram = [0u32; 64];
    if is_dense(hll) {
        let registers = &hll[HEADER_LEN..];
        (0..REGISTERS).for_each(|i| histogram[dense_get(registers, i) as usize] += 1);
    } else {
        // Like Redis, every run is counted before the coverage is judged.
        let mut idx = 0usize;
        let mut p = HEADER_LEN;
        while p < hll.len() {
            let (len, value, oplen) = opcode(hll, p);
            histogram[value as usize] += len as u32;
            idx += len;
            p += oplen;
        }
        if idx != REGISTERS {
            return Err(HllError::Corrupt);
        }
    }
    Ok(cardinality(&histogram))
}

/// The estimate for raw (one byte each) registers: multi-key PFCOUNT's union.
pub fn count_raw(registers: &[u8; REGISTERS]) -> u64 {
    let mut histogram = [0u32; 64];
    registers
        .iter()
        .for_each(|&r| histogram[(r as usize).min(63)] += 1);
    cardinality(&histogram)
}

/// PFDEBUG DECODE's text of a sparse HLL: `z:N`, `Z:N`, `v:value,len`, space-separated.
pub fn decode_sparse(hll: &[u8]) -> String {
    let mut parts = Vec::new();
    let mut p = HEADER_LEN;
    while p < hll.len() {
        let (len, value, oplen) = opcode(hll, p);
        parts.push(match (value, oplen) {
            (0, 1) => format!("z:{len}"),
            (0, _) => format!("Z:{len}"),
            _ => format!("v:{value},{len}"),
        });
        p += oplen;
    }
    parts.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_hll_is_sparse_and_valid() {
        let h = new_sparse();
        assert_eq!(h.len(), 18);
        assert_eq!(&h[16..], &[0x7f, 0xff]);
        assert_eq!(validate(&h), Ok(()));
        assert_eq!(count(&h), Ok(0));
        assert_eq!(cached(&h), Some(0));
    }

    #[test]
    fn dense_registers_round_trip_at_every_index() {
        let mut regs = vec![0u8; DENSE_LEN - HEADER_LEN];
        for i in 0..REGISTERS {
            dense_put(&mut regs, i, (i % 64) as u8);
        }
        for i in 0..REGISTERS {
            assert_eq!(dense_get(&regs, i), (i % 64) as u8);
        }
    }

    #[test]
    fn sparse_and_dense_agree() {
        let mut sparse = new_sparse();
        let mut dense = new_sparse();
        sparse_to_dense(&mut dense).unwrap();
        for i in 0..2000u32 {
            let e = i.to_string();
            let a = add(&mut sparse, e.as_bytes(), 1 << 20).unwrap();
            let b = add(&mut dense, e.as_bytes(), 1 << 20).unwrap();
            assert_eq!(a, b, "element {i}");
        }
        assert!(!is_dense(&sparse));
        assert_eq!(count(&sparse), count(&dense));
        let mut promoted = sparse.clone();
        sparse_to_dense(&mut promoted).unwrap();
        assert_eq!(promoted[HEADER_LEN..], dense[HEADER_LEN..]);
        let estimate = count(&dense).unwrap() as f64;
        assert!((estimate - 2000.0).abs() < 2000.0 * 0.05, "{estimate}");
    }

    #[test]
    fn a_cut_xzero_at_the_end_is_rewritten_without_panicking() {
        let mut h = new_sparse();
        h.truncate(17);
        // The lone byte reads as XZERO of 16129 registers (0x7f, then a zero byte).
        assert_eq!(sparse_raise(&mut h, 5, 3, 3000), Ok(true));
        assert_eq!(h.len(), 16 + 3);
        assert_eq!(count(&h), Err(HllError::Corrupt));
    }

    #[test]
    fn truncated_sparse_values_are_corrupt_not_panics() {
        let mut h = new_sparse();
        h.truncate(17);
        assert_eq!(count(&h), Err(HllError::Corrupt));
        let mut extra = new_sparse();
        extra.push(0x00);
        assert_eq!(count(&extra), Err(HllError::Corrupt));
        assert_eq!(sparse_to_dense(&mut extra), Err(HllError::Corrupt));
    }
}
