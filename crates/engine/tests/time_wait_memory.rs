//! What a connection in TIME-WAIT costs (issue 23): two engines on the
//! `mem` wire, A opens [`N`] connections to B, each carries one 64-byte
//! round trip, then A's application closes them all first (A is the
//! active closer, its side ends in TIME-WAIT), B's closes, and both
//! applications drop their ends. A first such batch, expired, sets the
//! baseline (the wire's frames touched, the tables sized); for the second
//! the live heap (counted by the allocator)
//! and the resident anonymous memory (RssAnon) the TIME-WAIT connections
//! hold, per connection, over that baseline.
//! With the compact record it is the record and its table entries (about
//! 100 B of heap); a whole `Conn` held about 2.5 KB.

mod common;

use appif::command::Command;
use common::echo::Echo;
use common::memory::{live_heap, rss_anon};

/// Connections.
const N: usize = 20_000;
/// Heap bytes a TIME-WAIT connection may hold.
const BOUND: i64 = 256;

#[global_allocator]
static GLOBAL: common::memory::Counting = common::memory::Counting;

/// Closes every end of A (`a_side`) or B, letting the engines take
/// the commands (their ring holds 1024).
fn close_all(e: &mut Echo, a_side: bool) {
    let ids: Vec<u64> = if a_side { &e.ends_a } else { &e.ends_b }
        .iter()
        .map(|x| x.id)
        .collect();
    for (i, id) in ids.into_iter().enumerate() {
        let mut cmd = Some(Command::Close { id });
        while let Some(c) = cmd.take() {
            let cmds = if a_side { &mut e.ca } else { &mut e.cb };
            if let Err(c) = cmds.push(c) {
                cmd = Some(c);
                e.step();
            }
        }
        if i % 256 == 255 {
            e.step();
        }
    }
    e.settle();
}

/// N connections opened, one round trip each, closed by A first then by
/// B, their application ends dropped.
fn batch(e: &mut Echo) {
    e.connect(N);
    e.round();
    close_all(e, true);
    close_all(e, false);
    e.ends_a.clear();
    e.ends_b.clear();
    e.settle();
}

#[test]
fn a_time_wait_connection_costs_a_compact_record() {
    let mut e = Echo::new(N, 2 * N);
    // A first batch turns the wire's rings of frames and sizes the
    // engines' tables; its TIME-WAITs end before the baseline.
    batch(&mut e);
    e.t += 61_000_000_000;
    e.settle();
    assert_eq!(e.a.engine.time_wait_records(), 0);
    let (rss0, heap0) = (rss_anon(), live_heap());
    batch(&mut e);
    let (rss1, heap1) = (rss_anon(), live_heap());
    let mut conns = 0;
    e.a.engine.for_each_tcb(|t| {
        assert_eq!(t.state(), engine::tcp::State::TimeWait);
        conns += 1;
    });
    e.b.engine.for_each_tcb(|_| conns += 1);
    let in_time_wait = conns + e.a.engine.time_wait_records();
    assert_eq!(in_time_wait, N, "every connection of A in TIME-WAIT");
    let n = N as i64;
    let (heap, rss) = ((heap1 - heap0) / n, (rss1 - rss0) / n);
    eprintln!(
        "{N} connections in TIME-WAIT ({} records, {conns} whole connections; B holds {}): \
         {heap} B of heap and {rss} B resident each",
        e.a.engine.time_wait_records(),
        e.b.engine.time_wait_records()
    );
    assert!(
        heap <= BOUND,
        "a TIME-WAIT connection holds {heap} B of heap"
    );
}
