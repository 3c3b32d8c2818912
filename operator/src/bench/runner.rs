//! Runs one test: opens every connection first, then each connection claims batches of `-P`
//! requests from the shared total, sends a batch in one write and reads its replies, recording
//! each reply's latency (from the batch's send to that reply, as redis-benchmark measures) in
//! its own HDR histogram; the histograms are merged at the end.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use rand::rngs::SmallRng;
use rand::SeedableRng;
use tokio::task::JoinSet;

use super::progress::{Counters, ProgressLine, PROGRESS_INTERVAL};
use super::summary::new_histogram;
use super::workload::Test;
use crate::client::{error_text, Client, ClientError, ConnectOptions};

/// How a test is driven.
#[derive(Clone, Debug)]
pub struct RunConfig {
    pub options: ConnectOptions,
    pub clients: usize,
    pub requests: u64,
    pub pipeline: usize,
    /// `-r`: randomize `__rand_int__` below this.
    pub keyspace: Option<u64>,
    pub progress: bool,
    /// `--server-cpu`: read the server's CPU time around the test (see `server_cpu`).
    pub server_cpu: bool,
}

/// What a test measured.
#[derive(Debug)]
pub struct TestOutcome {
    pub requests: u64,
    pub errors: u64,
    pub first_error: Option<String>,
    pub elapsed: Duration,
    pub histogram: Histogram<u64>,
    /// The server's CPU time during the test, with `--server-cpu`.
    pub server_cpu: Option<Duration>,
}

/// Runs `test` to completion. Any connection failing (to connect, or mid-run) fails the test.
pub async fn run_test(test: &Test, config: &RunConfig) -> Result<TestOutcome, ClientError> {
    let mut clients = Vec::with_capacity(config.clients);
    for _ in 0..config.clients {
        clients.push(Client::connect(&config.options).await?);
    }
    let mut probe = match config.server_cpu {
        true => Some(Client::connect(&config.options).await?),
        false => None,
    };
    let cpu_before = match probe.as_mut() {
        Some(p) => Some(super::server_cpu::read(p).await?),
        None => None,
    };
    let counters = Arc::new(Counters::default());
    let test = Arc::new(test.clone());
    let started = Instant::now();
    let mut tasks = JoinSet::new();
    for (index, client) in clients.into_iter().enumerate() {
        tasks.spawn(drive(
            client,
            Arc::clone(&test),
            Arc::clone(&counters),
            config.clone(),
            index as u64,
        ));
    }
    let mut progress = config.progress.then(|| ProgressLine::new(test.title));
    let mut ticker = tokio::time::interval(PROGRESS_INTERVAL);
    ticker.tick().await; // the first tick is immediate
    let mut histogram = new_histogram();
    let mut failure = None;
    while !tasks.is_empty() {
        tokio::select! {
            joined = tasks.join_next() => match joined {
                Some(Ok(Ok(h))) => histogram
                    .add(&h)
                    .expect("histograms with the same bounds merge"),
                Some(Ok(Err(e))) => {
                    failure = Some(e);
                    break;
                }
                Some(Err(join)) => {
                    failure = Some(ClientError::Io(std::io::Error::other(format!(
                        "a benchmark connection task failed: {join}"
                    ))));
                    break;
                }
                None => break,
            },
            _ = ticker.tick() => {
                if let Some(line) = progress.as_mut() {
                    line.draw(&counters);
                }
            }
        }
    }
    let elapsed = started.elapsed();
    if let Some(line) = &progress {
        line.clear();
    }
    let server_cpu = match (probe.as_mut(), cpu_before) {
        (Some(p), Some(before)) if failure.is_none() => {
            Some(super::server_cpu::read(p).await?.saturating_sub(before))
        }
        _ => None,
    };
    if let Some(e) = failure {
        tasks.abort_all();
        return Err(e);
    }
    let first_error = counters
        .first_error
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .take();
    Ok(TestOutcome {
        requests: counters.done.load(Ordering::Relaxed),
        errors: counters.errors.load(Ordering::Relaxed),
        first_error,
        elapsed,
        histogram,
        server_cpu,
    })
}

/// One connection's loop.
async fn drive(
    mut client: Client,
    test: Arc<Test>,
    counters: Arc<Counters>,
    config: RunConfig,
    seed: u64,
) -> Result<Histogram<u64>, ClientError> {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut histogram = new_histogram();
    let mut batch = Vec::with_capacity(test.request.len() * config.pipeline);
    loop {
        let granted = counters.claim(config.pipeline as u64, config.requests);
        if granted == 0 {
            return Ok(histogram);
        }
        batch.clear();
        for _ in 0..granted {
            test.request
                .append_to(&mut batch, config.keyspace, &mut rng);
        }
        client.queue_raw(&batch)?;
        let sent = Instant::now();
        client.flush().await?;
        for _ in 0..granted {
            let reply = client.read_reply().await?;
            let latency_us = u64::try_from(sent.elapsed().as_micros()).unwrap_or(u64::MAX);
            histogram.saturating_record(latency_us.max(1));
            counters.record_reply(latency_us, error_text(&reply));
        }
    }
}
