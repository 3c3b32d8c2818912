//! The cardinality estimate from a histogram of register values: Otmar Ertl's improved
//! estimator ("New cardinality estimation algorithms for HyperLogLog sketches",
//! arXiv:1702.01284), the one Redis 7 uses, so PFCOUNT answers the same numbers.

use super::sketch::{Q, REGISTERS};

/// 0.5 / ln(2): the bias constant of the estimator for an infinite number of registers.
const ALPHA_INF: f64 = 0.721_347_520_444_481_7;

fn sigma(mut x: f64) -> f64 {
    if x == 1.0 {
        return f64::INFINITY;
    }
    let mut y = 1.0;
    let mut z = x;
    // The series converges: it ends when adding a term no longer changes the sum.
    loop {
        x *= x;
        let before = z;
        z += x * y;
        y += y;
        if z == before {
            return z;
        }
    }
}

fn tau(mut x: f64) -> f64 {
    if x == 0.0 || x == 1.0 {
        return 0.0;
    }
    let mut y = 1.0;
    let mut z = 1.0 - x;
    loop {
        x = x.sqrt();
        let before = z;
        y *= 0.5;
        z -= (1.0 - x) * (1.0 - x) * y;
        if z == before {
            return z / 3.0;
        }
    }
}

/// The estimate for `histogram[v]` registers holding value `v`.
pub fn cardinality(histogram: &[u32; 64]) -> u64 {
    let m = REGISTERS as f64;
    let mut z = m * tau((m - histogram[Q + 1] as f64) / m);
    for j in (1..=Q).rev() {
        z += histogram[j] as f64;
        z *= 0.5;
    }
    z += m * sigma(histogram[0] as f64 / m);
    (ALPHA_INF * m * m / z).round() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_registers_estimate_zero() {
        let mut h = [0u32; 64];
        h[0] = REGISTERS as u32;
        assert_eq!(cardinality(&h), 0);
    }

    #[test]
    fn one_register_set_estimates_one() {
        let mut h = [0u32; 64];
        h[0] = REGISTERS as u32 - 1;
        h[1] = 1;
        assert_eq!(cardinality(&h), 1);
    }
}
