//! The read budget (`--max-read-rate`): bytes a second over every thread, kept by a
//! virtual clock. Each read of a node file is charged after it is made: the clock moves on
//! by what the bytes cost at the rate, and the reader sleeps until the clock is no more
//! than [`BURST`] ahead of the wall clock. What the scheduler does not bound (`--nice`'s
//! idle class is honoured only by BFQ and in part by mq-deadline), this bounds on any disk.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// A read budget: bytes a second (0: none) and when the bytes charged so far are paid
/// for.
struct Budget {
    rate: AtomicU64,
    paid_until: Mutex<Option<Instant>>,
}

/// The run's budget.
static BUDGET: Budget = Budget { rate: AtomicU64::new(0), paid_until: Mutex::new(None) };

/// How far reads may run ahead of the budget (a short burst, then the rate).
const BURST: Duration = Duration::from_millis(100);

impl Budget {
    fn set(&self, bytes_per_second: u64) {
        self.rate.store(bytes_per_second, Ordering::Relaxed);
        *self.paid_until.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }

    fn charge(&self, n: usize) {
        let rate = self.rate.load(Ordering::Relaxed);
        if rate == 0 || n == 0 {
            return;
        }
        let cost = Duration::from_secs_f64(n as f64 / rate as f64);
        let now = Instant::now();
        let until = {
            let mut paid = self.paid_until.lock().unwrap_or_else(|e| e.into_inner());
            let until = paid.map_or(now, |p| p.max(now)) + cost;
            *paid = Some(until);
            until
        };
        if let Some(wait) = until.checked_duration_since(now + BURST) {
            std::thread::sleep(wait);
        }
    }
}

/// Sets the budget for the rest of the run: `bytes_per_second`, or none (0).
pub fn set_max_read_rate(bytes_per_second: u64) {
    BUDGET.set(bytes_per_second);
}

/// Charges `n` bytes just read, sleeping until they fit the budget.
pub fn charge(n: usize) {
    BUDGET.charge(n);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 3 MB charged from two threads at 4 MB/s take 0.75 s less the burst, at least.
    #[test]
    fn charges_hold_the_rate() {
        let b = Budget { rate: AtomicU64::new(0), paid_until: Mutex::new(None) };
        b.set(4_000_000);
        let started = Instant::now();
        std::thread::scope(|s| {
            for _ in 0..2 {
                s.spawn(|| {
                    for _ in 0..15 {
                        b.charge(100_000);
                    }
                });
            }
        });
        let took = started.elapsed();
        assert!(took >= Duration::from_millis(640), "{took:?}");
    }
}
