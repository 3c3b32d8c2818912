//! Goal: the writer's accounting holds when its record WRITEs are reported by later
//! completions (`Completion::covers`, verbs' selective signaling): every record arrives, the
//! writer ends with nothing in flight, and completions were in fact folded.
//! Method: the sim connection wrapped in `Folding`, which reports covered WRITEs the way verbs
//! does (none of their own, counted in the next send-side completion); the sim without
//! faults completes a connection's WRITEs in post order, as an RC send queue does.

use std::net::SocketAddr;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::*;
use crate::access::Access;
use crate::config::EndpointConfig;
use crate::error::BusError;
use crate::provider::{Completion, Connection, Listener, LocalSlice, Op, Provider, RemoteSlice};
use crate::sim::{Faults, SimConnection, SimFabric};

/// Marks a covered WRITE's id on the inner connection.
const COVERED_TAG: u64 = 1 << 63;

#[derive(Debug)]
struct Folding {
    inner: SimConnection,
    /// Covered WRITEs completed and not yet reported.
    pending: u32,
    covered_posts: usize,
    /// Covered WRITEs reported by later completions.
    folded: u32,
}

impl Connection for Folding {
    type Region = crate::sim::SimRegion;

    fn register(&self, len: usize, access: Access) -> crate::Result<Self::Region> {
        self.inner.register(len, access)
    }
    fn post_send(&mut self, wr_id: u64, src: LocalSlice<Self::Region>) -> crate::Result<()> {
        self.inner.post_send(wr_id, src)
    }
    fn post_recv(&mut self, wr_id: u64, dst: LocalSlice<Self::Region>) -> crate::Result<()> {
        self.inner.post_recv(wr_id, dst)
    }
    fn post_write(
        &mut self,
        wr_id: u64,
        src: LocalSlice<Self::Region>,
        dst: RemoteSlice,
        imm: Option<u32>,
    ) -> crate::Result<()> {
        self.inner.post_write(wr_id, src, dst, imm)
    }
    fn post_write_covered(
        &mut self,
        wr_id: u64,
        src: LocalSlice<Self::Region>,
        dst: RemoteSlice,
    ) -> crate::Result<()> {
        self.inner.post_write(wr_id | COVERED_TAG, src, dst, None)?;
        self.covered_posts += 1;
        Ok(())
    }
    fn post_read(
        &mut self,
        wr_id: u64,
        dst: LocalSlice<Self::Region>,
        src: RemoteSlice,
    ) -> crate::Result<()> {
        self.inner.post_read(wr_id, dst, src)
    }
    fn poll(&mut self, out: &mut Vec<Completion>, max: usize) -> crate::Result<usize> {
        let mut got = Vec::new();
        self.inner.poll(&mut got, max)?;
        let before = out.len();
        for mut c in got {
            if c.wr_id & COVERED_TAG != 0 {
                c.wr_id &= !COVERED_TAG;
                if c.status.is_ok() {
                    self.pending += 1;
                    continue;
                }
            }
            if matches!(c.op, Op::Write | Op::Send | Op::Read) {
                c.covers = std::mem::take(&mut self.pending);
                self.folded += c.covers;
            }
            out.push(c);
        }
        Ok(out.len() - before)
    }
    fn wait(&mut self, timeout: Duration) -> crate::Result<()> {
        self.inner.wait(timeout)
    }
    fn peer(&self) -> &crate::EndpointAddr {
        self.inner.peer()
    }
    fn local(&self) -> &crate::EndpointAddr {
        self.inner.local()
    }
}

#[test]
fn records_reported_by_a_later_completion_all_arrive_and_nothing_stays_in_flight() {
    let fabric = SimFabric::new(23, Faults::default()).unwrap();
    let w = fabric.add_host().unwrap();
    let r = fabric.add_host().unwrap();
    let cfg = EndpointConfig::default();
    let at = SocketAddr::from(([10, 0, 0, 23], 9000));
    let mut l = r.listen(at, &cfg).unwrap();
    let cw = Folding {
        inner: w.connect(at, &cfg, Duration::ZERO).unwrap(),
        pending: 0,
        covered_posts: 0,
        folded: 0,
    };
    let cr = l.accept(Duration::ZERO).unwrap().unwrap();
    let mut reader = RingReader::create(cr, 8192).unwrap();
    let mut writer = RingWriter::create(cw, reader.advert().unwrap(), &cfg).unwrap();
    reader.set_writer_ack(writer.ack_advert().unwrap()).unwrap();
    let mut rng = StdRng::seed_from_u64(23);
    let records: Vec<Vec<u8>> = (0..600usize)
        .map(|i| vec![i as u8; rng.gen_range(0..300)])
        .collect();
    let (mut next, mut got, mut buf) = (0, Vec::new(), Vec::new());
    // Bound: far more rounds than the records need; each moves the sim's time.
    for _ in 0..100_000 {
        if got.len() == records.len() && writer.is_drained() && !writer.in_flight() {
            break;
        }
        for _ in 0..rng.gen_range(0..6) {
            if next == records.len() {
                break;
            }
            match writer.append(&records[next]) {
                Ok(_) => next += 1,
                Err(BusError::Full { .. }) => break,
                Err(e) => panic!("append: {e}"),
            }
        }
        writer.poll(fabric.now()).unwrap();
        fabric.advance(Duration::from_micros(rng.gen_range(0..20)));
        while reader.next(&mut buf, fabric.now()).unwrap().is_some() {
            got.push(buf.clone());
        }
        reader.poll(fabric.now()).unwrap();
    }
    assert!(got == records, "{} of {} records", got.len(), records.len());
    assert!(writer.is_drained());
    assert!(
        !writer.in_flight(),
        "the writer still counts WRITEs in flight"
    );
    let conn = writer.conn();
    assert_eq!(conn.pending, 0, "covered WRITEs never reported");
    assert!(conn.covered_posts >= 100, "{} covered", conn.covered_posts);
    // Every covered WRITE was reported by a later completion, none by its own.
    assert_eq!(conn.folded as usize, conn.covered_posts);
}
