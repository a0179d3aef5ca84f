//! Interval sets and calendar periods against simple baselines, in the same run:
//! merging 1,000,000 random intervals (vs sort + scan of pairs), set operations on
//! 100,000-interval sets (vs concatenate + sort + scan, and a binary search per piece), and
//! periods per second for dates and zoned datetimes (vs jiff's own `until`).
//! `cargo bench -p slidewin --bench interval` (BENCHMARKS.md has the figures).

use std::hint::black_box;
use std::time::Duration;

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use jiff::civil::{Date, date};
use jiff::tz::TimeZone;
use jiff::{Span, Unit, ZonedDateTime};
use slidewin::interval::IntervalSet;
use slidewin::period::MonthEnd;
use slidewin::{Interval, Period};

/// xorshift64: the same "random" workload on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: u64) -> i64 {
        i64::try_from(self.next() % n).expect("below i64::MAX")
    }
}

/// `n` intervals with starts spread over `span` and lengths up to `max_len`, unsorted.
fn random_intervals(seed: u64, n: usize, span: u64, max_len: u64) -> Vec<(i64, i64)> {
    let mut rng = Rng(seed);
    (0..n)
        .map(|_| {
            let s = rng.below(span);
            (s, s + rng.below(max_len))
        })
        .collect()
}

fn to_intervals(pairs: &[(i64, i64)]) -> Vec<Interval<i64>> {
    pairs
        .iter()
        .map(|&(s, e)| Interval::new(s, e).expect("s <= e"))
        .collect()
}

/// The baseline merge: sort the pairs by start, then one scan (`mergeIntervals` of the
/// article that rewrites Facebook's `TimeInterval`).
fn sort_and_scan(mut pairs: Vec<(i64, i64)>) -> Vec<(i64, i64)> {
    pairs.retain(|&(s, e)| s < e);
    pairs.sort_unstable_by_key(|&(s, _)| s);
    let mut out: Vec<(i64, i64)> = Vec::with_capacity(pairs.len());
    for (s, e) in pairs {
        match out.last_mut() {
            Some(last) if s <= last.1 => last.1 = last.1.max(e),
            _ => out.push((s, e)),
        }
    }
    out
}

fn merge(c: &mut Criterion) {
    let mut group = c.benchmark_group("interval/merge_1M");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5))
        .throughput(Throughput::Elements(1_000_000));
    // Dense enough that many merge: 1M intervals of up to 2,000 over 10^9.
    let pairs = random_intervals(0x9E37_79B9_7F4A_7C15, 1_000_000, 1_000_000_000, 2_000);
    let intervals = to_intervals(&pairs);
    assert_eq!(
        IntervalSet::from_iter(intervals.iter().copied()).len(),
        sort_and_scan(pairs.clone()).len()
    );
    group.bench_function("slidewin_interval_set", |b| {
        b.iter_batched(
            || intervals.clone(),
            |v| black_box(IntervalSet::from_iter(v)),
            BatchSize::LargeInput,
        )
    });
    group.bench_function("baseline_sort_and_scan", |b| {
        b.iter_batched(
            || pairs.clone(),
            |v| black_box(sort_and_scan(v)),
            BatchSize::LargeInput,
        )
    });
    group.finish();
}

/// A set of about 100,000 disjoint pieces.
fn set_of(seed: u64) -> IntervalSet<i64> {
    let pairs = random_intervals(seed, 120_000, 1_000_000_000, 5_000);
    to_intervals(&pairs).into_iter().collect()
}

/// The baseline intersection: for each piece of `a`, binary-search `b` for the first piece
/// ending after its start and clip the pieces from there.
fn intersection_by_search(a: &[Interval<i64>], b: &[Interval<i64>]) -> Vec<Interval<i64>> {
    let mut out = Vec::new();
    for p in a {
        let first = b.partition_point(|q| q.end() <= p.start());
        for q in &b[first..] {
            if q.start() >= p.end() {
                break;
            }
            if let Some(i) = p.intersect(q).filter(|i| !i.is_empty()) {
                out.push(i);
            }
        }
    }
    out
}

fn set_operations(c: &mut Criterion) {
    let mut group = c.benchmark_group("interval/set_ops_100k");
    group
        .sample_size(20)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    let (a, b) = (set_of(1), set_of(2));
    group.throughput(Throughput::Elements((a.len() + b.len()) as u64));
    let union_baseline = |a: &IntervalSet<i64>, b: &IntervalSet<i64>| {
        let pairs: Vec<(i64, i64)> = a
            .iter()
            .chain(b.iter())
            .map(|p| (p.start(), p.end()))
            .collect();
        sort_and_scan(pairs)
    };
    assert_eq!(a.union(&b).len(), union_baseline(&a, &b).len());
    assert_eq!(
        a.intersection(&b).as_slice(),
        intersection_by_search(a.as_slice(), b.as_slice())
    );
    group.bench_function("union/slidewin", |bench| {
        bench.iter(|| black_box(a.union(&b)))
    });
    group.bench_function("union/baseline_concat_sort_scan", |bench| {
        bench.iter(|| black_box(union_baseline(&a, &b)))
    });
    group.bench_function("intersection/slidewin", |bench| {
        bench.iter(|| black_box(a.intersection(&b)))
    });
    group.bench_function("intersection/baseline_binary_search", |bench| {
        bench.iter(|| black_box(intersection_by_search(a.as_slice(), b.as_slice())))
    });
    group.bench_function("difference/slidewin", |bench| {
        bench.iter(|| black_box(a.difference(&b)))
    });
    let bounds = Interval::new(0, 1_000_010_000).expect("ordered");
    group.bench_function("complement/slidewin", |bench| {
        bench.iter(|| black_box(a.complement(bounds)))
    });
    group.finish();
}

const PAIRS: usize = 1_000;

/// Date pairs from 1950 to 2050, start before end, all days of month.
fn date_pairs() -> Vec<(Date, Date)> {
    let mut rng = Rng(42);
    let day = |rng: &mut Rng| {
        date(1950, 1, 1)
            .checked_add(Span::new().days(rng.below(36_500)))
            .expect("in range")
    };
    (0..PAIRS)
        .map(|_| {
            let (a, b) = (day(&mut rng), day(&mut rng));
            (a.min(b), a.max(b))
        })
        .collect()
}

fn zoned_pairs() -> Vec<(ZonedDateTime, ZonedDateTime)> {
    let tz = TimeZone::get("America/New_York").expect("the bundled tzdb has New York");
    let mut rng = Rng(7);
    date_pairs()
        .into_iter()
        .map(|(a, b)| {
            let at = |d: Date, rng: &mut Rng| {
                d.at(0, 0, 0, 0)
                    .checked_add(Span::new().seconds(rng.below(86_400)))
                    .expect("in range")
                    .to_zoned_datetime(tz.clone())
                    .expect("in range")
            };
            let (za, zb) = (at(a, &mut rng), at(b, &mut rng));
            if za <= zb { (za, zb) } else { (zb, za) }
        })
        .collect()
}

fn periods(c: &mut Criterion) {
    let mut group = c.benchmark_group("interval/periods");
    group
        .sample_size(20)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .throughput(Throughput::Elements(PAIRS as u64));
    let dates = date_pairs();
    for (name, m) in [("clamp", MonthEnd::Clamp), ("strict", MonthEnd::Strict)] {
        group.bench_function(format!("dates/slidewin_{name}"), |b| {
            b.iter(|| {
                for &(s, e) in &dates {
                    black_box(Period::between_dates(s, e, m).expect("in range"));
                }
            })
        });
    }
    group.bench_function("dates/baseline_jiff_until", |b| {
        b.iter(|| {
            for &(s, e) in &dates {
                black_box(s.until((Unit::Year, e)).expect("in range"));
            }
        })
    });
    let zoned = zoned_pairs();
    for (name, m) in [("clamp", MonthEnd::Clamp), ("strict", MonthEnd::Strict)] {
        group.bench_function(format!("zoned/slidewin_{name}"), |b| {
            b.iter(|| {
                for (s, e) in &zoned {
                    black_box(Period::between_zoned(s, e, m).expect("same zone"));
                }
            })
        });
    }
    group.bench_function("zoned/baseline_jiff_until", |b| {
        b.iter(|| {
            for (s, e) in &zoned {
                black_box(s.until((Unit::Year, e)).expect("same zone"));
            }
        })
    });
    group.finish();
}

criterion_group!(benches, merge, set_operations, periods);
criterion_main!(benches);
