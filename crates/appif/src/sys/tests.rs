//! Tests of the system calls: descriptor passing, memfd seals, eventfd,
//! epoll and peer credentials.

use super::*;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::time::Instant;

use crate::ctl::Welcome;

#[test]
fn fds_survive_a_socketpair_round_trip() {
    let (a, b) = UnixStream::pair().unwrap();
    let mem = memfd("ctl-test", 8192).unwrap();
    let bell = eventfd().unwrap();
    let welcome = Welcome {
        status: 0,
        assoc: 7,
        nslots: 16,
        ring_bytes: 4096,
        cmd_slots: 64,
        seg_len: 8192,
    };
    send_msg(&a, &welcome.encode(), &[mem.as_fd(), bell.as_fd()]).unwrap();

    let mut buf = [0u8; 128];
    let mut fds = Vec::new();
    let n = recv_msg(&b, &mut buf, &mut fds).unwrap();
    assert_eq!(Welcome::decode(&buf[..n]).unwrap(), welcome);
    assert_eq!(fds.len(), 2);

    // Write through a mapping of the received memfd, read the original.
    let got = File::from(fds.remove(0));
    assert_eq!(got.metadata().unwrap().len(), 8192);
    // SAFETY: the memfd is sealed against shrinking, so the mapping stays
    // backed; only this test touches it.
    let mut map = unsafe { memmap2::MmapMut::map_mut(&got) }.unwrap();
    map[4000..4005].copy_from_slice(b"hello");
    let orig = File::from(mem);
    let mut back = [0u8; 5];
    orig.read_exact_at(&mut back, 4000).unwrap();
    assert_eq!(&back, b"hello");

    // The received eventfd is the same doorbell.
    eventfd_signal(fds[0].as_fd());
    assert_eq!(eventfd_drain(bell.as_fd()), 1);

    // Received fds are close-on-exec.
    // SAFETY: F_GETFD on an fd we own; no pointers.
    let flags = unsafe { libc::fcntl(fds[0].as_raw_fd(), libc::F_GETFD) };
    assert_ne!(flags & libc::FD_CLOEXEC, 0);
}

#[test]
fn received_memfd_cannot_be_shrunk_or_grown() {
    let (a, b) = UnixStream::pair().unwrap();
    let mem = memfd("ctl-seal", 4096).unwrap();
    send_msg(&a, b"x", &[mem.as_fd()]).unwrap();
    let mut fds = Vec::new();
    let mut buf = [0u8; 8];
    assert_eq!(recv_msg(&b, &mut buf, &mut fds).unwrap(), 1);
    let f = File::from(fds.pop().unwrap());
    assert_eq!(f.set_len(0).unwrap_err().raw_os_error(), Some(libc::EPERM));
    assert_eq!(
        f.set_len(1 << 20).unwrap_err().raw_os_error(),
        Some(libc::EPERM)
    );
    assert_eq!(f.metadata().unwrap().len(), 4096);
}

#[test]
fn message_without_fds_clears_the_vector_and_peer_close_reads_zero() {
    let (a, b) = UnixStream::pair().unwrap();
    let mut fds = vec![eventfd().unwrap()];
    send_msg(&a, &Welcome::refused(libc::EACCES).encode(), &[]).unwrap();
    let mut buf = [0u8; 64];
    let n = recv_msg(&b, &mut buf, &mut fds).unwrap();
    assert!(fds.is_empty());
    assert_eq!(Welcome::decode(&buf[..n]).unwrap().status, libc::EACCES);
    drop(a);
    assert_eq!(recv_msg(&b, &mut buf, &mut fds).unwrap(), 0);
}

#[test]
fn send_refuses_too_many_fds_and_fds_without_bytes() {
    let (a, b) = UnixStream::pair().unwrap();
    let bells: Vec<OwnedFd> = (0..MAX_FDS + 1).map(|_| eventfd().unwrap()).collect();
    let borrowed: Vec<BorrowedFd> = bells.iter().map(|f| f.as_fd()).collect();
    let e = send_msg(&a, b"x", &borrowed).unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
    let e = send_msg(&a, b"", &borrowed[..1]).unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
    let e = recv_msg(&b, &mut [], &mut Vec::new()).unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
    // Exactly MAX_FDS is fine.
    send_msg(&a, b"x", &borrowed[..MAX_FDS]).unwrap();
    let mut fds = Vec::new();
    recv_msg(&b, &mut [0u8; 4], &mut fds).unwrap();
    assert_eq!(fds.len(), MAX_FDS);
}

#[test]
fn more_fds_than_max_is_a_truncation_error_and_closes_them() {
    let (a, b) = UnixStream::pair().unwrap();
    let bells: Vec<OwnedFd> = (0..MAX_FDS + 2).map(|_| eventfd().unwrap()).collect();
    let raws: Vec<RawFd> = bells.iter().map(|f| f.as_raw_fd()).collect();
    let data_len = std::mem::size_of_val(raws.as_slice());
    // SAFETY: CMSG_SPACE is arithmetic.
    let space = unsafe { libc::CMSG_SPACE(data_len as u32) } as usize;
    let mut cbuf = vec![0u64; space.div_ceil(8)];
    let byte = [7u8];
    let mut iov = libc::iovec {
        iov_base: byte.as_ptr() as *mut libc::c_void,
        iov_len: 1,
    };
    // SAFETY: all-zero msghdr is valid; it then points to live locals
    // (`iov`, `cbuf` of `space` bytes, 8-aligned) for the sendmsg call;
    // the cmsg header and payload fit in `cbuf`.
    let sent = unsafe {
        let mut msg: libc::msghdr = MaybeUninit::zeroed().assume_init();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = cbuf.as_mut_ptr().cast();
        msg.msg_controllen = space as _;
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        (*cmsg).cmsg_level = libc::SOL_SOCKET;
        (*cmsg).cmsg_type = libc::SCM_RIGHTS;
        (*cmsg).cmsg_len = libc::CMSG_LEN(data_len as u32) as _;
        std::ptr::copy_nonoverlapping(raws.as_ptr().cast::<u8>(), libc::CMSG_DATA(cmsg), data_len);
        libc::sendmsg(a.as_raw_fd(), &msg, 0)
    };
    assert_eq!(sent, 1);
    let mut fds = Vec::new();
    let e = recv_msg(&b, &mut [0u8; 4], &mut fds).unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::InvalidData);
    assert!(fds.is_empty());
}

#[test]
fn eventfd_signal_then_drain_counts_and_resets() {
    let e = eventfd().unwrap();
    assert_eq!(eventfd_drain(e.as_fd()), 0);
    eventfd_signal(e.as_fd());
    eventfd_signal(e.as_fd());
    eventfd_signal(e.as_fd());
    assert_eq!(eventfd_drain(e.as_fd()), 3);
    assert_eq!(eventfd_drain(e.as_fd()), 0);
}

#[test]
fn epoll_reports_a_signalled_eventfd_and_times_out_otherwise() {
    let mut ep = Epoll::new().unwrap();
    let quiet = eventfd().unwrap();
    let bell = eventfd().unwrap();
    ep.add(quiet.as_fd(), 1).unwrap();
    ep.add(bell.as_fd(), 42).unwrap();
    let mut events = vec![99];

    let start = Instant::now();
    assert_eq!(
        ep.wait(&mut events, Some(Duration::from_millis(20)))
            .unwrap(),
        0
    );
    assert!(events.is_empty());
    assert!(start.elapsed() >= Duration::from_millis(19));

    eventfd_signal(bell.as_fd());
    assert_eq!(ep.wait(&mut events, Some(Duration::ZERO)).unwrap(), 1);
    assert_eq!(events, [42]);
    // Level-triggered: still ready until drained.
    assert_eq!(ep.wait(&mut events, None).unwrap(), 1);
    eventfd_drain(bell.as_fd());
    assert_eq!(ep.wait(&mut events, Some(Duration::ZERO)).unwrap(), 0);

    // Deleted fds are no longer reported; deleting twice is ENOENT.
    eventfd_signal(bell.as_fd());
    ep.delete(bell.as_fd()).unwrap();
    assert_eq!(ep.wait(&mut events, Some(Duration::ZERO)).unwrap(), 0);
    assert_eq!(
        ep.delete(bell.as_fd()).unwrap_err().raw_os_error(),
        Some(libc::ENOENT)
    );
    assert_eq!(
        ep.add(quiet.as_fd(), 2).unwrap_err().raw_os_error(),
        Some(libc::EEXIST)
    );
}

#[test]
fn epoll_reports_a_closed_peer_socket() {
    let mut ep = Epoll::new().unwrap();
    let (a, b) = UnixStream::pair().unwrap();
    ep.add(b.as_fd(), 5).unwrap();
    drop(a);
    let mut events = Vec::new();
    assert_eq!(
        ep.wait(&mut events, Some(Duration::from_secs(5))).unwrap(),
        1
    );
    assert_eq!(events, [5]);
}

#[test]
fn timeout_rounds_up_to_whole_ms_but_zero_polls() {
    assert_eq!(timeout_ms(None), -1);
    assert_eq!(timeout_ms(Some(Duration::ZERO)), 0);
    assert_eq!(timeout_ms(Some(Duration::from_nanos(1))), 1);
    assert_eq!(timeout_ms(Some(Duration::from_micros(1500))), 2);
    assert_eq!(timeout_ms(Some(Duration::from_millis(7))), 7);
    assert_eq!(timeout_ms(Some(Duration::from_secs(u64::MAX))), i32::MAX);
}

#[test]
fn peer_cred_of_a_socketpair_is_ourselves() {
    let (a, _b) = UnixStream::pair().unwrap();
    let c = peer_cred(&a).unwrap();
    assert_eq!(c.pid, std::process::id() as i32);
    // SAFETY: geteuid/getegid take no arguments and cannot fail.
    let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
    assert_eq!((c.uid, c.gid), (uid, gid));
}

#[test]
fn supplementary_gids_parse_proc_status() {
    let status = "Name:\tx\nUid:\t0 0 0 0\nGroups:\t4 24 27 1000 \nNgid:\t0\n";
    assert_eq!(parse_groups(status), [4, 24, 27, 1000]);
    assert_eq!(parse_groups("Groups:\n"), Vec::<u32>::new());
    assert_eq!(parse_groups("garbage"), Vec::<u32>::new());
    assert!(supplementary_gids(-1).is_empty());
    // Our own groups, as the kernel reports them.
    // SAFETY: size 0 with a null list only asks for the count.
    let n = unsafe { libc::getgroups(0, std::ptr::null_mut()) };
    let mut own = vec![0 as libc::gid_t; n.max(0) as usize];
    // SAFETY: `own` has room for `n` gids.
    let n = unsafe { libc::getgroups(n.max(0), own.as_mut_ptr()) };
    own.truncate(n.max(0) as usize);
    let mut got = supplementary_gids(std::process::id() as i32);
    got.sort_unstable();
    own.sort_unstable();
    own.dedup();
    assert_eq!(got, own);
}

#[test]
fn keep_eventfds_drops_other_fds_and_makes_eventfds_nonblocking() {
    // SAFETY: eventfd takes no pointers; the result is checked by `owned`.
    let blocking = owned(unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) }).unwrap();
    let (a, _b) = UnixStream::pair().unwrap();
    let memfd = memfd("keep-test", 4096).unwrap();
    let raw = blocking.as_raw_fd();
    let kept = keep_eventfds(vec![OwnedFd::from(a), blocking, memfd]);
    assert_eq!(kept.len(), 1, "only the eventfd is kept");
    assert_eq!(kept[0].as_raw_fd(), raw);
    // SAFETY: F_GETFL on an fd we own.
    let fl = unsafe { libc::fcntl(raw, libc::F_GETFL) };
    assert_ne!(fl & libc::O_NONBLOCK, 0, "made non-blocking");
}
