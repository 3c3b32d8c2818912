//! `--slots 0-999,2000,3000-3100` as slot ranges.

use proto::admin::v1::SlotRange;

pub fn parse(text: &str) -> anyhow::Result<Vec<SlotRange>> {
    text.split(',')
        .map(|part| {
            let part = part.trim();
            let (a, b) = part.split_once('-').unwrap_or((part, part));
            let slot = |s: &str| {
                s.trim()
                    .parse::<u32>()
                    .ok()
                    .filter(|n| *n < 16384)
                    .ok_or_else(|| anyhow::anyhow!("{s:?} is not a slot (0-16383)"))
            };
            let (start, end) = (slot(a)?, slot(b)?);
            if start > end {
                anyhow::bail!("slot range {part} runs backwards");
            }
            Ok(SlotRange { start, end })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_and_single_slots() {
        let r = parse("0-9, 12,16383").unwrap();
        let pairs: Vec<(u32, u32)> = r.iter().map(|r| (r.start, r.end)).collect();
        assert_eq!(pairs, [(0, 9), (12, 12), (16383, 16383)]);
        assert!(parse("9-0").is_err());
        assert!(parse("16384").is_err());
        assert!(parse("x").is_err());
    }
}
