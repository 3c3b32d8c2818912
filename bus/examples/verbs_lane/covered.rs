//! Selective signaling on a real RC QP: WRITEs posted covered get no completion of their own;
//! later completions report them (`Completion::covers`), and a failed one is reported by
//! itself, with the flushed ones after it.

use std::time::Instant;

use bus::{Access, Completion, Connection, Region, RemoteRegion, RemoteSlice, WorkError};

use crate::{ensure, pair, pattern, provider, slice, R, WAIT};

const PORT: u16 = 20112;
const ERROR_PORT: u16 = 20113;
/// Bytes per WRITE: above any device's inline limit, so the device reads the source.
const WRITE_LEN: usize = 1000;

/// Polls until the completions read report `requests` work requests (each itself plus its
/// `covers`); fails if they report more.
fn reported(conn: &mut bus::verbs::VerbsConnection, requests: u32) -> R<Vec<Completion>> {
    let deadline = Instant::now() + WAIT;
    let mut out = Vec::new();
    let count = |out: &[Completion]| out.iter().map(|c| 1 + c.covers).sum::<u32>();
    while count(&out) < requests {
        if Instant::now() > deadline {
            return Err(format!("{} of {requests} reported: {out:?}", count(&out)).into());
        }
        if conn.poll(&mut out, 64)? == 0 {
            conn.wait(std::time::Duration::from_millis(100))?;
        }
    }
    ensure(count(&out) == requests, format!("over-reported: {out:?}"))?;
    Ok(out)
}

pub(crate) fn test_rc_covered_writes() -> R {
    let p = provider()?;
    let (server, mut client) = pair(&p, PORT)?;
    let writes = 100usize;
    let target = server.register(writes * WRITE_LEN, Access::REMOTE_WRITE)?;
    let src = client.register(writes * WRITE_LEN, Access::NONE)?;
    let data = pattern(writes * WRITE_LEN, 5);
    src.write(0, &data)?;
    let dst = |i: usize, region: RemoteRegion| RemoteSlice {
        region,
        offset: (i * WRITE_LEN) as u64,
        len: WRITE_LEN as u64,
    };
    let remote = target.remote()?;
    for i in 0..writes - 1 {
        client.post_write_covered(1, slice(&src, i * WRITE_LEN, WRITE_LEN), dst(i, remote))?;
    }
    let last = writes - 1;
    client.post_write(
        2,
        slice(&src, last * WRITE_LEN, WRITE_LEN),
        dst(last, remote),
        None,
    )?;
    let done = reported(&mut client, writes as u32)?;
    // 99 covered: the 32nd, 64th and 96th of the run signaled anyway, then the last one.
    ensure(
        done.len() == 4,
        format!("{} completions: {done:?}", done.len()),
    )?;
    ensure(
        done.iter().all(|c| c.status.is_ok()),
        format!("a failure: {done:?}"),
    )?;
    ensure(
        done.last().map(|c| (c.wr_id, c.covers)) == Some((2, 3)),
        format!("the last completion: {done:?}"),
    )?;
    let mut landed = vec![0; data.len()];
    target.read(0, &mut landed)?;
    ensure(landed == data, "written bytes differ")?;
    // Nothing more comes: no covered WRITE is reported twice.
    let mut more = Vec::new();
    client.poll(&mut more, 16)?;
    ensure(more.is_empty(), format!("late completions: {more:?}"))?;
    drop(server);
    covered_failure()
}

/// A covered WRITE with a wrong rkey: its failure is reported by itself (covering the ones
/// before it), the ones after it are flushed, each reported once.
fn covered_failure() -> R {
    let p = provider()?;
    let (server, mut client) = pair(&p, ERROR_PORT)?;
    let target = server.register(8 * WRITE_LEN, Access::REMOTE_WRITE)?;
    let src = client.register(8 * WRITE_LEN, Access::NONE)?;
    let good = target.remote()?;
    let bad = RemoteRegion {
        rkey: good.rkey ^ 0x5a5a,
        ..good
    };
    let at = |i: usize, region: RemoteRegion| RemoteSlice {
        region,
        offset: (i * WRITE_LEN) as u64,
        len: WRITE_LEN as u64,
    };
    for i in 0..6usize {
        let region = if i == 3 { bad } else { good };
        client.post_write_covered(
            10 + i as u64,
            slice(&src, i * WRITE_LEN, WRITE_LEN),
            at(i, region),
        )?;
    }
    client.post_write(20, slice(&src, 6 * WRITE_LEN, WRITE_LEN), at(6, good), None)?;
    let done = reported(&mut client, 7)?;
    let first_error = done.iter().find(|c| c.status.is_err());
    ensure(
        first_error.map(|c| (c.wr_id, c.covers, c.status.clone()))
            == Some((13, 3, Err(WorkError::RemoteAccess))),
        format!("the failure's completion: {done:?}"),
    )?;
    ensure(
        done.iter().filter(|c| c.status.is_ok()).count() == 0,
        format!("a success reported after the covered ones: {done:?}"),
    )
}
