//! `SourceMigration::hold_pause` (`cluster-migration-debug-hold`): goal, a held batch stays
//! copied and streaming without ever pausing writes, a dead target still fails it, and the
//! release lets the pause come. Method: the machine stepped by hand with made-up times.

use super::ranges::SlotRanges;
use super::source::{Action, Applied, Input, SourceMigration};
use super::{MigrationId, MigrationSettings};

/// A machine whose only batch (slots 0-2) is copied, at time 10, with `hold` set first.
fn copied(hold: bool) -> SourceMigration {
    let settings = MigrationSettings::default();
    let ranges = SlotRanges::new(&[(0, 2)]).unwrap();
    let mut m = SourceMigration::new(MigrationId(1), &ranges, settings);
    m.hold_pause(hold);
    m.start(0);
    m.step(1, Input::Applied(Applied::Opened));
    m.step(2, Input::Applied(Applied::Begun { batch: 0 }));
    let mut last = Vec::new();
    for slot in 0..=2 {
        last = m.step(10, Input::SlotCopied { slot });
    }
    let paused = last.iter().any(|a| matches!(a, Action::PauseWrites { .. }));
    assert_eq!(paused, !hold, "the last copy's actions: {last:?}");
    m
}

fn pauses(actions: &[Action]) -> bool {
    actions
        .iter()
        .any(|a| matches!(a, Action::PauseWrites { .. }))
}

#[test]
fn a_held_batch_never_pauses_until_released() {
    let mut m = copied(true);
    // Caught up and long past any wait: still no pause while held.
    m.step(20, Input::Streamed { offset: 100 });
    m.step(30, Input::TargetApplied { offset: 100 });
    for t in (1_000..60_000).step_by(1_000) {
        assert!(!pauses(&m.step(t, Input::Tick)), "paused at {t}");
    }
    m.hold_pause(false);
    assert!(pauses(&m.step(60_001, Input::Tick)));
}

#[test]
fn a_held_batch_still_fails_when_the_target_goes_silent() {
    let mut m = copied(true);
    m.step(20, Input::Streamed { offset: 100 });
    let silence = MigrationSettings::default().link_silence_max_ms;
    let actions = m.step(20 + silence + 1, Input::Tick);
    assert!(
        actions
            .iter()
            .any(|a| matches!(a, Action::ProposeAbort { .. })),
        "{actions:?}"
    );
}
