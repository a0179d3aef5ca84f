//! The soak's verdict: the table of promises, each checked from the clients' records, the
//! reloads, the outages, the memory samples and the exit.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use crate::check::{Admission, Window, worst_window};
use crate::client::{Decision, Record, Via, key_entry};
use crate::flood::{self, FloodRun};
use crate::lease_check::check_leases;
use crate::leases::{LEASE, LeaseRecord};
use crate::server::Reload;
use crate::{Backend, COLD, DEADLINE, HOT, HOT_KEYS, SECOND};

pub(crate) struct Report<'a> {
    pub(crate) records: &'a [Record],
    /// The lease clients' exchanges (also in `records`, as checks).
    pub(crate) leases: &'a [LeaseRecord],
    pub(crate) outages: &'a [(u64, u64)],
    pub(crate) reloads: &'a [Reload],
    pub(crate) rss: &'a [(u64, u64)],
    pub(crate) sigterm_at: u64,
    pub(crate) exited_at: u64,
    pub(crate) exit_ok: bool,
    pub(crate) exit: String,
    pub(crate) policy: &'a str,
    pub(crate) flood: FloodRun,
    pub(crate) refusals: &'a str,
    pub(crate) backend: Backend,
}

pub(crate) fn secs(nanos: u64) -> String {
    format!("{:.3} s", Duration::from_nanos(nanos).as_secs_f64())
}

fn millis(nanos: u64) -> String {
    format!(
        "{:.0} ms",
        Duration::from_nanos(nanos).as_secs_f64() * 1000.0
    )
}

/// Whether a check's error says the check never reached the service, however close to the
/// SIGTERM it was sent (on two loaded cores the client's runtime may write a check's bytes
/// several milliseconds after taking its send time):
/// - refused at connect: HTTP/1's keep-alive race (the service closed the idle connection at
///   the SIGTERM, and hyper's pool connected anew);
/// - refused by the service's `GOAWAY` with no error (h2's "connection error received: not a
///   result of an error"): a stream above the `GOAWAY`'s last stream id, or one the client
///   would have opened after it, which the service did not process (RFC 9113, 6.8);
/// - cancelled with "connection closed": hyper's for a request still queued for its connection
///   when the connection ended, never written to it.
fn never_reached(said: &str) -> bool {
    said.contains("Connection refused")
        || said.contains("tcp connect error")
        || said.contains("connection error received: not a result of an error")
        || said.contains("operation was canceled: connection closed")
}

/// A promise: what it says, whether it held, and the figures that show it.
type Row = (&'static str, bool, String);

/// Prints the table; true when every promise held.
pub(crate) fn report(r: &Report<'_>) -> bool {
    let rows = [
        windows_row(r),
        lease_row(r),
        answers_row(r),
        policy_row(r),
        flood_row(r),
        stop_row(r),
        reloads_row(r),
    ];
    println!();
    println!("{:<70} {:<6} figures", "promise", "result");
    for (promise, ok, figures) in &rows {
        println!(
            "{promise:<70} {:<6} {figures}",
            if *ok { "PASS" } else { "FAIL" }
        );
    }
    print_totals(r);
    let ok = rows.iter().all(|row| row.1);
    println!(
        "\nslidewin-soak: {}",
        if ok {
            "every promise held"
        } else {
            "a promise was BROKEN"
        }
    );
    ok
}

/// The checks made by kind and outcome, the errors by kind, and the memory samples.
fn print_totals(r: &Report<'_>) {
    let count = |via: Via| r.records.iter().filter(|rec| rec.via == via).count();
    println!();
    println!(
        "checks made: {} ({} gRPC, {} HTTP, {} flood, {} leases), {} admitted, {} over limit",
        r.records.len(),
        count(Via::Grpc),
        count(Via::Http),
        count(Via::Flood),
        count(Via::Lease),
        r.records
            .iter()
            .filter(|rec| rec.decision == Decision::Ok)
            .count(),
        r.records
            .iter()
            .filter(|rec| rec.decision == Decision::Over)
            .count()
    );
    let mut kinds: BTreeMap<String, (usize, usize, &str)> = BTreeMap::new();
    for rec in r.records {
        let (kind, said) = match &rec.decision {
            Decision::Error(kind, said) => (kind.as_str(), said.as_str()),
            Decision::Timeout => ("timeout", ""),
            _ => continue,
        };
        let entry = kinds.entry(kind.to_owned()).or_insert((0, 0, said));
        if rec.send < r.sigterm_at {
            entry.0 += 1;
        } else {
            entry.1 += 1;
        }
    }
    if kinds.is_empty() {
        println!("errors: none");
    }
    for (kind, (before, after, said)) in &kinds {
        println!("errors: {kind}: {before} before SIGTERM, {after} after; e.g. {said:?}");
    }
    let peak = r.rss.iter().map(|s| s.1).max().unwrap_or(0);
    println!(
        "peak RSS: {:.1} MiB; samples (s:MiB): {}",
        peak as f64 / 1024.0,
        r.rss
            .iter()
            .map(|(t, k)| format!("{}:{}", t / SECOND, k / 1024))
            .collect::<Vec<_>>()
            .join(" ")
    );
}

/// Promise 1, windows: none admitted more than its limit. Admissions are the non-degraded OKs of
/// the hot and cold keys; each backend epoch (a Redis restart empties it; a failover may lose the
/// killed master's last writes, which its replica had not yet received) is checked apart, by answer
/// time.
fn windows_row(r: &Report<'_>) -> Row {
    let epoch_of = |answer: u64| r.outages.iter().filter(|o| o.1 <= answer).count();
    let mut logs: HashMap<(u32, usize), Vec<Admission>> = HashMap::new();
    for rec in r.records {
        let windowed = rec.via != Via::Flood && rec.via != Via::Lease;
        if windowed && rec.decision == Decision::Ok && !rec.degraded {
            logs.entry((rec.key, epoch_of(rec.answer)))
                .or_default()
                .push(Admission {
                    send: rec.send,
                    answer: rec.answer,
                });
        }
    }
    let mut worst: BTreeMap<&str, (usize, Window, u32)> = BTreeMap::new();
    for ((key, _), log) in &mut logs {
        let (rule, limit, span) = if *key < HOT_KEYS { HOT } else { COLD };
        let window = worst_window(log, span * SECOND);
        let entry = worst
            .entry(rule)
            .or_insert((limit, Window::default(), *key));
        if (window.certain, window.loose) > (entry.1.certain, entry.1.loose) {
            *entry = (limit, window, *key);
        }
    }
    let windows_ok = worst.values().all(|(limit, w, _)| w.certain <= *limit);
    let admitted: usize = logs.values().map(Vec::len).sum();
    (
        "no window admitted more than its limit",
        windows_ok,
        worst
            .iter()
            .map(|(rule, (limit, w, key))| {
                format!(
                    "{rule}: worst {}/{limit} certain ({} by answer times, key {}, at {})",
                    w.certain,
                    w.loose,
                    key_entry(*key).1,
                    secs(w.at)
                )
            })
            .chain(std::iter::once(format!("{admitted} admissions checked")))
            .collect::<Vec<_>>()
            .join("; "),
    )
}

/// Promise 2, answers: before the SIGTERM, every check got a decision or an error that says what
/// failed, none past the deadline.
fn answers_row(r: &Report<'_>) -> Row {
    let before_term = |rec: &&Record| rec.send < r.sigterm_at;
    let sent: Vec<&Record> = r.records.iter().filter(before_term).collect();
    let timeouts = sent
        .iter()
        .filter(|rec| rec.decision == Decision::Timeout)
        .count();
    let mute = sent
        .iter()
        .filter(|rec| matches!(&rec.decision, Decision::Error(_, said) if said.trim().is_empty()))
        .count();
    let slowest = sent
        .iter()
        .map(|rec| rec.answer - rec.send)
        .max()
        .unwrap_or(0);
    (
        "every check answered, none past its deadline",
        timeouts == 0 && mute == 0,
        format!(
            "{} checks before SIGTERM; {timeouts} past the {} s deadline; {mute} errors without a reason; slowest answer {}",
            sent.len(),
            DEADLINE.as_secs(),
            millis(slowest)
        ),
    )
}

/// Promise 3, the failure policy: checks sent and answered while Redis was down are degraded and
/// decided by the policy (open: admitted; closed: denied), and no degraded answer anywhere is other
/// than the policy's; after its return (a single Redis restarted, a cluster's replica serving the
/// lost master's slots), the last degraded answer is within a second. On memory, nothing is
/// degraded.
fn policy_row(r: &Report<'_>) -> Row {
    if r.backend == Backend::Memory {
        let degraded = r.records.iter().filter(|rec| rec.degraded).count();
        return (
            "nothing degraded (memory: no backend to lose)",
            degraded == 0,
            format!("{degraded} degraded answers"),
        );
    }
    let policy_code = if r.policy == "open" {
        Decision::Ok
    } else {
        Decision::Over
    };
    let Outages {
        down,
        by_policy,
        kept,
        wrong,
        wrong_leases,
        late,
        recoveries,
    } = outages(r, &policy_code);
    let recovery = recoveries.iter().copied().max().unwrap_or(0);
    let policy = if r.policy == "open" {
        "OK"
    } else {
        "OVER_LIMIT"
    };
    let outside = r
        .records
        .iter()
        .filter(|rec| rec.degraded && r.outages.first().is_none_or(|o| rec.answer < o.0))
        .count();
    let against = r
        .records
        .iter()
        .filter(|rec| rec.degraded && rec.decision != policy_code)
        .count();
    (
        "failure policy while Redis was down, exact within 1 s of its return",
        down > 0
            && by_policy > 0
            && wrong == 0
            && against == 0
            && recovery <= SECOND
            && late == 0
            && outside == 0,
        format!(
            "outages of {}; {by_policy}/{down} checks inside them degraded and {policy}, {kept} denials kept from before it, {wrong} none of those nor (cluster: a live master's) decision ({wrong_leases} of them the leases' clients'); {against} degraded answers not {policy} in the whole run; recovery {} (last degraded answer after each return); {late} degraded sent 1 s after a return; {outside} degraded before any kill",
            r.outages
                .iter()
                .map(|&(killed, ready)| millis(ready - killed))
                .collect::<Vec<_>>()
                .join(", "),
            recoveries
                .iter()
                .map(|&n| millis(n))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    )
}

/// What the checks made while the backend was down, and after each return, showed.
#[derive(Default)]
struct Outages {
    /// Checks sent and answered inside an outage.
    down: usize,
    /// Of those, degraded and decided by the policy.
    by_policy: usize,
    /// Of those, denials Redis gave before the outage, kept and answered as they were.
    kept: usize,
    /// Of those, none of the above nor (a cluster's live master's) decision.
    wrong: usize,
    /// The lease clients' share of `wrong`: a release the store could not take is answered
    /// UNAVAILABLE (503), not by the policy (see `lease_row`).
    wrong_leases: usize,
    /// Degraded answers to checks sent a second or more after a return.
    late: usize,
    /// After each return, when the last degraded answer came.
    recoveries: Vec<u64>,
}

/// The checks of each outage in `r` against the policy's answer, `policy_code`.
fn outages(r: &Report<'_>, policy_code: &Decision) -> Outages {
    // With a cluster, one master of three is down: only its slots' keys are degraded, the
    // others are decided as usual. Every check inside must still be a decision, and every
    // degraded one the policy's. A denial Redis gave before the outage is kept until its
    // wait ends (issue 32) and answered as it was, exact: OVER_LIMIT, not degraded, for a
    // key Redis had denied before the kill.
    let mut o = Outages::default();
    for (i, &(killed, ready)) in r.outages.iter().enumerate() {
        // Up from `ready` until the next kill: a check answered degraded in that time, sent
        // after the return, is the service not yet back.
        let next = r.outages.get(i + 1).map_or(r.sigterm_at, |o| o.0);
        let mut recovery = 0;
        let denied_before: std::collections::HashSet<u32> = r
            .records
            .iter()
            .filter(|rec| rec.answer < killed && !rec.degraded && rec.decision == Decision::Over)
            .map(|rec| rec.key)
            .collect();
        for rec in r.records {
            if rec.send >= killed && rec.answer <= ready {
                o.down += 1;
                if rec.degraded && rec.decision == *policy_code {
                    o.by_policy += 1;
                } else if !rec.degraded
                    && rec.decision == Decision::Over
                    && denied_before.contains(&rec.key)
                {
                    o.kept += 1;
                } else if rec.degraded
                    || r.backend == Backend::Redis
                    || !matches!(rec.decision, Decision::Ok | Decision::Over)
                {
                    o.wrong += 1;
                    o.wrong_leases += usize::from(rec.via == Via::Lease);
                }
            }
            if rec.send >= ready && rec.answer < next && rec.degraded {
                recovery = recovery.max(rec.answer - ready);
                if rec.send >= ready + SECOND {
                    o.late += 1;
                }
            }
        }
        o.recoveries.push(recovery);
    }
    o
}

/// Promise 4, memory under the flood: ten times the cap in keys, and resident memory as flat while
/// the keys from 5x to 10x the cap were decided as from 1x to 5x (see `flood`).
fn flood_row(r: &Report<'_>) -> Row {
    let peak = r.rss.iter().map(|s| s.1).max().unwrap_or(0);
    let (flood_ok, flood_figures) = flood::memory_row(&r.flood, r.refusals, peak);
    (
        "resident memory flat under the flood",
        flood_ok,
        flood_figures,
    )
}

/// Promise 5, shutdown: exit 0, every check in flight at the SIGTERM decided.
fn stop_row(r: &Report<'_>) -> Row {
    let in_flight: Vec<&Record> = r
        .records
        .iter()
        .filter(|rec| rec.send < r.sigterm_at && rec.answer >= r.sigterm_at)
        .collect();
    // A check whose error says it never reached the service was not in its hands, so not in
    // flight there (see `never_reached`).
    let refused =
        |rec: &&&Record| matches!(&rec.decision, Decision::Error(_, said) if never_reached(said));
    let never_reached = in_flight.iter().filter(refused).count();
    // The client's send time is before its bytes reach the service: on two loaded cores, its
    // runtime may write them a few milliseconds later, after the signal (kill(1) itself takes
    // about a millisecond). A check sent within `RACE` of the SIGTERM and refused with an error
    // that says so raced the signal; one sent earlier must have been decided.
    const RACE: u64 = 5_000_000;
    let undecided: Vec<&&Record> = in_flight
        .iter()
        .filter(|rec| !matches!(rec.decision, Decision::Ok | Decision::Over) && !refused(rec))
        .collect();
    let raced = undecided
        .iter()
        .filter(|rec| r.sigterm_at - rec.send <= RACE)
        .count();
    let earliest = undecided
        .iter()
        .map(|rec| r.sigterm_at - rec.send)
        .max()
        .unwrap_or(0);
    let mut said: Vec<&str> = undecided
        .iter()
        .filter_map(|rec| match &rec.decision {
            Decision::Error(_, said) => Some(said.as_str()),
            _ => None,
        })
        .collect();
    said.sort_unstable();
    said.dedup();
    said.truncate(3);
    let undecided = undecided.len() - raced;
    let after = r
        .records
        .iter()
        .filter(|rec| rec.send >= r.sigterm_at)
        .count();
    (
        "SIGTERM let in-flight checks finish, exit 0",
        r.exit_ok && undecided == 0,
        format!(
            "{}, {} after SIGTERM; {} checks sent before it and answered after, {undecided} undecided, {raced} refused within {} ms of it (raced the signal; earliest {:.2} ms before it: {said:?}), {never_reached} never reached it (refused at connect, past its GOAWAY, or never written); {after} sent after it",
            r.exit,
            millis(r.exited_at - r.sigterm_at),
            in_flight.len(),
            RACE / 1_000_000,
            Duration::from_nanos(earliest).as_secs_f64() * 1000.0
        ),
    )
}

/// Promise 6, reloads: the version moves on each valid one and only on those.
fn reloads_row(r: &Report<'_>) -> Row {
    let wrong: Vec<String> = r
        .reloads
        .iter()
        .filter(|l| (l.after > l.before) != l.valid)
        .map(|l| {
            format!(
                "{} at {}{}: version {} -> {}",
                if l.valid { "valid" } else { "invalid" },
                secs(l.at),
                if l.sighup { " (+SIGHUP)" } else { "" },
                l.before,
                l.after
            )
        })
        .collect();
    let valid = r.reloads.iter().filter(|l| l.valid).count();
    (
        "invalid reloads changed nothing, valid ones took",
        !r.reloads.is_empty() && wrong.is_empty(),
        format!(
            "{valid} valid, {} invalid ({} with SIGHUP); versions {}{}",
            r.reloads.len() - valid,
            r.reloads.iter().filter(|l| l.sighup).count(),
            r.reloads
                .iter()
                .map(|l| l.after.to_string())
                .collect::<Vec<_>>()
                .join(","),
            if wrong.is_empty() {
                String::new()
            } else {
                format!("; wrong: {}", wrong.join(", "))
            }
        ),
    )
}

/// Promise 1b, leases (issue 33): no key held more than its units, and no unit outlived its lease,
/// each bound computed as `lease_check` says. Dead holders must have been there to test expiry.
fn lease_row(r: &Report<'_>) -> (&'static str, bool, String) {
    let (_, limit, lease) = LEASE;
    let l = check_leases(r.leases, r.outages, limit, lease * SECOND);
    (
        "leases: in flight never passed N, none outlived its lease",
        l.admitted > 0 && l.dead > 0 && l.worst_certain <= limit && l.unexplained == 0,
        format!(
            "{limit} per key, lease {lease} s: {}/{} acquisitions admitted ({} retried exchanges), {} releases ({} late), {} holders died; worst in flight {}/{limit} certain ({} by answer times); {} refusals, {} explained only by units past their lease ({} with exactly {limit} possibly held: no room to spare); {} releases the store could not take, answered with an error",
            l.admitted,
            l.acquisitions,
            l.retried,
            l.releases,
            l.late,
            l.dead,
            l.worst_certain,
            l.worst_by_answer,
            l.refusals,
            l.unexplained,
            l.tight,
            l.unstored
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::never_reached;

    #[test]
    fn errors_that_say_the_service_never_took_the_check_are_not_in_flight() {
        // As the soak's clients wrote them (tonic and hyper's texts, their causes joined).
        for said in [
            "tcp connect error: transport error: tcp connect error: tcp connect error: Connection refused (os error 111)",
            "client error (Connect): tcp connect error: Connection refused (os error 111)",
            "h2 protocol error: http2 error: transport error: http2 error: connection error received: not a result of an error",
            "operation was canceled: transport error: operation was canceled: connection closed",
        ] {
            assert!(never_reached(said), "{said}");
        }
        // A check cut after it was sent, or whose fate the error does not say, may have been
        // in the service's hands.
        for said in [
            "client error (SendRequest): connection closed before message completed",
            "h2 protocol error: http2 error: stream error received: unexpected internal error encountered",
            "h2 protocol error: http2 error: connection error received: protocol error",
            "error reading a body from connection: Connection reset by peer (os error 104)",
            "timeout",
        ] {
            assert!(!never_reached(said), "{said}");
        }
    }
}
