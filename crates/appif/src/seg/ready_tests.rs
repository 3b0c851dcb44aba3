//! Tests of the ready rings: the engine's push reaches the waiter that
//! watches the slot, once until taken; a full ring overflows into a look
//! at every watched slot; an application writing garbage into its ring's
//! words or its slots' `queued` words never makes the engine panic or
//! write outside the ring.

use super::layout::SLOT_READY;
use super::*;
use crate::ready::ReadyList;

/// A daemon's segment of `nslots` slots and `engines` engines, engine 0's
/// view of it (its handles push to ready ring 0), and the application's.
fn pair(nslots: u32, engines: u32) -> (AppSegment, AppSegment) {
    let layout = Layout {
        nslots,
        ring_bytes: 4096,
        ring_max_bytes: 4096,
        cmd_slots: 16,
        engines,
    };
    let r = Arc::new(Region::anon(layout.total_len()).unwrap());
    let daemon = AppSegment::init(r, layout, 7).unwrap();
    let (app, _) = AppSegment::open(daemon.region().clone()).unwrap();
    (daemon.for_lane(0), app)
}

/// The application's handle of `slot`, watched by `list` under `token`.
fn watched(app: &AppSegment, slot: u32, list: &Arc<ReadyList>, token: u64) -> Arc<StatusHandle> {
    let h = app.shared(slot, false).unwrap();
    assert!(h.watch(list, token), "slot {slot} watched");
    h
}

fn tokens(list: &ReadyList) -> Vec<u64> {
    let mut v: Vec<u64> = core::iter::from_fn(|| list.pop()).collect();
    v.sort();
    v
}

#[test]
fn a_wake_reaches_the_watching_list_once_until_drained() {
    let (eng, app) = pair(64, 1);
    let list = ReadyList::new();
    let mine = watched(&app, 5, &list, 50);
    let other = app.shared(6, false).unwrap();
    let e5 = eng.shared(5, true).unwrap();
    let e6 = eng.shared(6, true).unwrap();
    // Not watched: pushed, drained, but no waiter gets it.
    e6.wake();
    e5.wake();
    e5.wake();
    let d = app.drain_ready();
    assert_eq!((d.slots, d.overflow), (2, false), "slot 5 pushed once");
    assert_eq!(tokens(&list), vec![50]);
    // The drain cleared slot 5's queued word: the next change pushes it.
    mine.rearm_watch(&list);
    e5.wake();
    assert_eq!(app.drain_ready().slots, 1);
    assert_eq!(tokens(&list), vec![50]);
    // Slot 6 nobody watches: it stays queued and is not pushed again.
    e6.wake();
    assert_eq!(app.drain_ready().slots, 0);
    // Watching it clears the word; its changes reach the list from then on.
    assert!(other.watch(&list, 60));
    e6.wake();
    app.drain_ready();
    assert_eq!(tokens(&list), vec![60]);
    // A stopped watch queues nothing.
    mine.unwatch(&list);
    mine.rearm_watch(&list);
    e5.wake();
    app.drain_ready();
    assert_eq!(tokens(&list), Vec::<u64>::new());
}

#[test]
fn more_changes_than_the_ring_holds_overflow_into_a_look_at_every_watched_slot() {
    let (eng, app) = pair(64, 1);
    let cap = app.layout().ready_cap() as usize;
    assert_eq!(cap, 16);
    let list = ReadyList::new();
    let n = 40;
    let mine: Vec<_> = (0..n)
        .map(|s| watched(&app, s, &list, 100 + u64::from(s)))
        .collect();
    let engine: Vec<_> = (0..n).map(|s| eng.shared(s, true).unwrap()).collect();
    for h in &engine {
        h.wake();
    }
    let d = app.drain_ready();
    assert!(d.overflow, "{n} changes in a ring of {cap}");
    assert_eq!(d.slots, cap);
    assert_eq!(tokens(&list), (100..100 + u64::from(n)).collect::<Vec<_>>());
    // After the overflow every slot is armed again: pushes resume.
    for h in &mine {
        h.rearm_watch(&list);
    }
    engine[33].wake();
    let d = app.drain_ready();
    assert_eq!((d.slots, d.overflow), (1, false));
    assert_eq!(tokens(&list), vec![133]);
}

#[test]
fn garbage_in_the_application_words_never_breaks_the_engine() {
    let (eng, app) = pair(64, 2);
    let eng1 = AppSegment::init(eng.region().clone(), eng.layout(), 7)
        .unwrap()
        .for_lane(1);
    let layout = app.layout();
    let lane = layout.ready_lane(0).unwrap();
    let engine: Vec<_> = (0..64).map(|s| eng.shared(s, true).unwrap()).collect();
    let head = app.word64(lane.head);
    for garbage in [u64::MAX, 1 << 40, 17, 3] {
        head.store(garbage, Ordering::SeqCst);
        for (s, h) in engine.iter().enumerate() {
            app.word32(layout.slot_offset(s as u32) + SLOT_READY)
                .store(0, Ordering::SeqCst);
            h.wake();
        }
        assert_eq!(
            app.word32(lane.overflow).swap(0, Ordering::SeqCst),
            1,
            "head {garbage}: full"
        );
    }
    // Nothing was written outside ring 0: ring 1 and its words are clean.
    let lane1 = layout.ready_lane(1).unwrap();
    assert_eq!(app.word64(lane1.tail).load(Ordering::SeqCst), 0);
    assert_eq!(app.word32(lane1.ring).load(Ordering::SeqCst), 0);
    // Ring 1 still works; ring 0 works again once its head is sane.
    let list = ReadyList::new();
    let h = watched(&app, 9, &list, 9);
    eng1.shared(9, true).unwrap().wake();
    app.drain_ready();
    assert_eq!(tokens(&list), vec![9]);
    // The drain trusts the engine's tail; restore a head it can follow.
    let tail = app.word64(lane.tail).load(Ordering::SeqCst);
    head.store(tail, Ordering::SeqCst);
    h.rearm_watch(&list);
    engine[9].wake();
    let d = app.drain_ready();
    assert!(!d.overflow);
    assert_eq!(tokens(&list), vec![9]);
}

#[test]
fn a_forked_childs_copy_takes_nothing_and_looks_at_every_watched_slot() {
    let (eng, app) = pair(64, 1);
    let list = ReadyList::new();
    let _h = watched(&app, 3, &list, 3);
    let _idle = watched(&app, 4, &list, 4);
    eng.shared(3, true).unwrap().wake();
    app.router.as_ref().unwrap().pretend_forked();
    let d = app.drain_ready();
    assert_eq!(d.slots, 0, "the parent's ring is left to the parent");
    assert_eq!(
        tokens(&list),
        vec![3, 4],
        "every watched slot, changed or not"
    );
    let lane = app.layout().ready_lane(0).unwrap();
    assert_eq!(app.word64(lane.head).load(Ordering::SeqCst), 0);
    // A new watch in the child cannot be served by the parent's rings.
    let other = app.shared(5, false).unwrap();
    assert!(!other.watch(&list, 5));
}
