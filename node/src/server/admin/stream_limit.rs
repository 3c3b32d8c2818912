//! A bound on the server streams open at once (WatchCluster, WatchOperation): each holds a
//! task and a queue until its reader goes.

use std::sync::atomic::{AtomicUsize, Ordering};
use tonic::Status;

/// One open stream's place, given back when the stream's task ends.
pub struct StreamPermit(&'static AtomicUsize);

impl Drop for StreamPermit {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A place among `max` in `open`, or RESOURCE_EXHAUSTED naming `what`.
pub fn acquire(open: &'static AtomicUsize, max: usize, what: &str) -> Result<StreamPermit, Status> {
    if open.fetch_add(1, Ordering::AcqRel) >= max {
        open.fetch_sub(1, Ordering::AcqRel);
        return Err(Status::resource_exhausted(format!(
            "{max} {what} streams already open on this node"
        )));
    }
    Ok(StreamPermit(open))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn places_come_back_when_dropped() {
        static OPEN: AtomicUsize = AtomicUsize::new(0);
        let a = acquire(&OPEN, 2, "test").unwrap();
        let _b = acquire(&OPEN, 2, "test").unwrap();
        assert_eq!(
            acquire(&OPEN, 2, "test").err().unwrap().code(),
            tonic::Code::ResourceExhausted
        );
        drop(a);
        assert!(acquire(&OPEN, 2, "test").is_ok());
    }
}
