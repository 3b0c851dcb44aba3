/*
 * corestack.h: the C API of corestack, a user-space TCP/IP stack.
 *
 * Link with -lcorestack (libcorestack.so, built by
 * `cargo build -p corestack-capi --release` into target/release/).
 *
 * Socket-like calls on small integer descriptors, and an epoll-like
 * readiness API. IPv4 TCP and UDP only.
 *
 * Conventions, for every function:
 *   - On failure a function returns -1 and sets errno to one of the values
 *     its comment lists; cs_last_error() returns a one-line message on it
 *     (e.g. which environment variable cs_init missed).
 *   - A null pointer where one is needed is EFAULT; an unknown descriptor
 *     is EBADF; socket calls before cs_init are ENETDOWN.
 *   - Descriptors are small non-negative ints managed by the library (the
 *     lowest free one is reused first). They are NOT kernel file
 *     descriptors: never pass them to close(2), poll(2) or read(2).
 *   - Calls are thread-safe. Two threads may use one socket at once (one
 *     sending while the other receives). A blocked call returns EBADF when
 *     another thread closes its descriptor.
 *   - Signals do not interrupt calls (there is no EINTR): use timeouts
 *     (cs_poller_wait) or non-blocking descriptors to stay responsive.
 *   - The library never raises SIGPIPE.
 *
 * Environment read by cs_init:
 *   CORESTACK_SOCKET   path of a `corestack run` daemon's control socket:
 *                      service mode (the variables below are ignored)
 *   CORESTACK_IFACE    interface to drive (embedded mode; required)
 *   CORESTACK_IP       our address as ADDR/PREFIX, e.g. 10.0.0.2/24
 *                      (embedded mode; required)
 *   CORESTACK_DRIVER   af_xdp (default) or tap
 *   CORESTACK_GATEWAY  next hop for destinations outside the subnet
 *   CORESTACK_IP6      our IPv6 address as ADDR/PREFIX, e.g. fd00:1::2/64
 *                      (optional: turns IPv6 on)
 *   CORESTACK_GATEWAY6 IPv6 default router, usually its link-local address
 *   CORESTACK_INLINE   1: no engine thread, threads that wait run the
 *                      engine (default 0: an engine thread polls the NIC)
 *   CORESTACK_CORES    engines, one per NIC queue, 1..255 (default 1)
 *   CORESTACK_POLL     adaptive (default), busy or interrupt
 * They are the LD_PRELOAD shim's variables, read by one parser; a
 * malformed one makes cs_init fail with EINVAL, naming it.
 *
 * Minimal server:
 *
 *   if (cs_init() < 0) { fprintf(stderr, "%s\n", cs_last_error()); exit(1); }
 *   int l = cs_socket(CS_SOCK_STREAM);
 *   struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(7) };
 *   cs_bind(l, &a);
 *   cs_listen(l, 128);
 *   int s = cs_accept(l, NULL);
 *   char buf[4096];
 *   ssize_t n;
 *   while ((n = cs_recv(s, buf, sizeof buf, 0)) > 0) cs_send(s, buf, n, 0);
 *   cs_close(s);
 *   cs_fini();
 *
 * examples/c/echo.c is a complete poller-driven echo server.
 */
#ifndef CORESTACK_H
#define CORESTACK_H

#include <netinet/in.h> /* struct sockaddr_in */
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h> /* ssize_t */

#ifdef __cplusplus
extern "C" {
#endif

/* cs_socket types (equal to Linux SOCK_STREAM / SOCK_DGRAM). */
#define CS_SOCK_STREAM 1
#define CS_SOCK_DGRAM 2

/* Send/receive flags (equal to Linux MSG_DONTWAIT / MSG_NOSIGNAL). */
#define CS_MSG_DONTWAIT 0x40   /* do not wait: EAGAIN instead */
#define CS_MSG_NOSIGNAL 0x4000 /* accepted; SIGPIPE is never raised */

/* cs_shutdown (equal to SHUT_RD / SHUT_WR / SHUT_RDWR). */
#define CS_SHUT_RD 0
#define CS_SHUT_WR 1
#define CS_SHUT_RDWR 2

/* Readiness bits (equal to EPOLLIN / EPOLLOUT / EPOLLHUP). */
#define CS_POLLIN 0x001u  /* recv/accept/recvfrom will not wait */
#define CS_POLLOUT 0x004u /* send/sendto will not wait */
#define CS_POLLHUP 0x010u /* the connection is closed (reported only with IN or OUT) */

/* cs_poller_ctl operations (equal to EPOLL_CTL_ADD / DEL / MOD). */
#define CS_POLL_ADD 1
#define CS_POLL_DEL 2
#define CS_POLL_MOD 3

/* One ready socket, as cs_poller_wait reports it (16 bytes). */
struct cs_event {
    uint32_t events; /* CS_POLLIN | CS_POLLOUT | CS_POLLHUP */
    uint64_t data;   /* the value given to cs_poller_ctl for the socket */
};

/* ---- Starting and stopping ------------------------------------------- */

/* Starts the process's one stack as the environment says (see above).
 * Does nothing when it runs already. Returns 0.
 * Errors: EINVAL (a variable is missing or malformed), ENODEV (no such
 * interface), EPERM (needs root or CAP_NET_ADMIN), ENOENT / ECONNREFUSED
 * (no daemon at CORESTACK_SOCKET), others as the NIC driver reports. */
int cs_init(void);

/* Closes every descriptor and stops the stack. cs_init may start it again.
 * Calls still waiting in other threads return EBADF. */
void cs_fini(void);

/* A one-line message on this thread's last failed call ("" before any).
 * Owned by the library; valid until this thread's next failed call. */
const char *cs_last_error(void);

/* ---- Sockets ---------------------------------------------------------- */

/* Addresses: every `struct sockaddr_in *` below may instead point to a
 * `struct sockaddr_in6` (cast; RFC 3493 §3.3) whose sin6_family is AF_INET6
 * (flow information and scope id are ignored). IPv6 needs a stack with an
 * IPv6 address. A TCP socket bound to in6addr_any ("::") listens on IPv6 and
 * IPv4 (IPV6_V6ONLY off, as Linux's default), its IPv4 peers reported as
 * ::ffff:a.b.c.d. Where the library writes an address (cs_accept,
 * cs_recvfrom, cs_getsockname, cs_getpeername) a socket bound or connected
 * with AF_INET6 needs room for a struct sockaddr_in6 (or pass a
 * struct sockaddr_storage). */

/* A new blocking socket of type CS_SOCK_STREAM or CS_SOCK_DGRAM; returns
 * its descriptor.
 * Errors: EINVAL (type), ENETDOWN (before cs_init), EMFILE (65536 open). */
int cs_socket(int type);

/* Sets the local address: 0.0.0.0 or the stack's address; port 0 picks an
 * ephemeral port. UDP binds at once; TCP keeps the address for cs_listen
 * (which reports EADDRINUSE / EADDRNOTAVAIL). Returns 0.
 * Errors: EBADF, ENOTSOCK (a poller), EFAULT, EAFNOSUPPORT (neither AF_INET
 * nor AF_INET6), EINVAL (already bound, listening or connected); UDP also EADDRINUSE,
 * EADDRNOTAVAIL. */
int cs_bind(int sd, const struct sockaddr_in *addr);

/* Listens on the bound address (0.0.0.0 and an ephemeral port if unbound).
 * backlog is ignored (up to 128 connections wait). Returns 0.
 * Errors: EBADF, ENOTSOCK, EOPNOTSUPP (UDP), EINVAL (connected),
 * EADDRINUSE, EADDRNOTAVAIL. */
int cs_listen(int sd, int backlog);

/* Takes the next established connection, waiting unless sd is
 * non-blocking; writes the peer's address to *peer unless peer is NULL.
 * Returns the new descriptor (blocking, TCP_NODELAY as the listener).
 * Errors: EBADF, ENOTSOCK, EINVAL (not listening), EAGAIN (non-blocking,
 * none waiting), EMFILE. */
int cs_accept(int sd, struct sockaddr_in *peer);

/* Connects a TCP socket and waits for the handshake (also when
 * non-blocking: there is no EINPROGRESS). A prior cs_bind must use port 0.
 * Returns 0.
 * Errors: EBADF, ENOTSOCK, EFAULT, EAFNOSUPPORT, EOPNOTSUPP (UDP, or a
 * bound local port), EISCONN, EALREADY (another thread connects it),
 * EINVAL (listening), ECONNREFUSED, ETIMEDOUT, ENETUNREACH,
 * EADDRNOTAVAIL (no ephemeral port left). */
int cs_connect(int sd, const struct sockaddr_in *addr);

/* Sends up to len bytes on a connected TCP socket. Blocking: waits until
 * all are queued (fewer only if an error follows some). Non-blocking or
 * CS_MSG_DONTWAIT: queues what fits. Returns the number of bytes queued.
 * Errors: EBADF, ENOTSOCK, EFAULT, EOPNOTSUPP (flags), EDESTADDRREQ (UDP:
 * use cs_sendto), ENOTCONN, EAGAIN, EPIPE (after CS_SHUT_WR),
 * ECONNRESET, ETIMEDOUT. */
ssize_t cs_send(int sd, const void *buf, size_t len, int flags);

/* Receives up to len bytes from a connected TCP socket (or one datagram
 * from a bound UDP socket, truncated to len), waiting unless non-blocking
 * or CS_MSG_DONTWAIT. Returns the count; 0 at end of stream (or after
 * CS_SHUT_RD once the buffered bytes are read).
 * Errors: EBADF, ENOTSOCK, EFAULT, EOPNOTSUPP (flags), ENOTCONN, EINVAL
 * (unbound UDP), EAGAIN, ECONNRESET, ETIMEDOUT. */
ssize_t cs_recv(int sd, void *buf, size_t len, int flags);

/* Sends one datagram to *to on a UDP socket (binding it to 0.0.0.0 and an
 * ephemeral port first if unbound). On a TCP socket, to is ignored and
 * this is cs_send. Returns len.
 * Errors: as cs_send; EFAULT (to is NULL), EAFNOSUPPORT, EMSGSIZE (larger
 * than one frame: no fragmentation). */
ssize_t cs_sendto(int sd, const void *buf, size_t len, int flags,
                  const struct sockaddr_in *to);

/* cs_recv, writing the sender's address (TCP: the peer's) to *from unless
 * from is NULL. */
ssize_t cs_recvfrom(int sd, void *buf, size_t len, int flags, struct sockaddr_in *from);

/* CS_SHUT_WR: FIN after the queued bytes, later sends fail with EPIPE.
 * CS_SHUT_RD: receives return 0 instead of waiting. CS_SHUT_RDWR: both.
 * Returns 0. Errors: EBADF, ENOTSOCK, EINVAL (how), ENOTCONN. */
int cs_shutdown(int sd, int how);

/* Closes a socket or a poller and frees its number; a TCP connection sends
 * its queued bytes, then FIN. Returns 0. Errors: EBADF. */
int cs_close(int sd);

/* on != 0: calls return EAGAIN instead of waiting (except cs_connect).
 * Returns 0. Errors: EBADF. */
int cs_set_nonblocking(int sd, int on);

/* on != 0: TCP_NODELAY (Nagle off). Set on a listener, accepted
 * connections inherit it. Returns 0.
 * Errors: EBADF, ENOTSOCK, ENOPROTOOPT (UDP). */
int cs_set_nodelay(int sd, int on);

/* SO_RCVBUF / SO_SNDBUF in bytes (0 leaves one as it is): the receive
 * window grows no further than rcv (auto-tuning off), the send buffer is
 * snd. Before cs_connect/cs_listen: applied then; on a listener: for the
 * connections it accepts afterwards. Without it, windows and buffers grow
 * with the path (receive window up to 6 MiB). Returns 0.
 * Errors: EBADF, ENOTSOCK, ENOPROTOOPT (UDP). */
int cs_set_bufsizes(int sd, size_t rcv, size_t snd);

/* The local address (0.0.0.0:0 before binding). Returns 0.
 * Errors: EBADF, ENOTSOCK, EFAULT. */
int cs_getsockname(int sd, struct sockaddr_in *addr);

/* The peer's address of a connected TCP socket. Returns 0.
 * Errors: EBADF, ENOTSOCK, ENOTCONN, EFAULT. */
int cs_getpeername(int sd, struct sockaddr_in *addr);

/* ---- Readiness (epoll-like, level-triggered) -------------------------- */

/* A new poller; returns its descriptor (in the same number space as the
 * sockets). Errors: ENETDOWN (before cs_init), EMFILE. */
int cs_poller_create(void);

/* CS_POLL_ADD / CS_POLL_MOD / CS_POLL_DEL the watch of poller pd on socket
 * sd. events: CS_POLLIN and/or CS_POLLOUT. data comes back in each event
 * for sd (ignored by DEL). A socket must be listening, connected or bound
 * (UDP) to be watched. Closing sd removes it from every poller. Returns 0.
 * A ctl on a poller another thread waits on takes effect within 10 ms.
 * Errors: EBADF, EINVAL (pd not a poller, sd is a poller, unknown op or
 * events, socket with nothing to watch yet), EEXIST (ADD twice), ENOENT
 * (MOD/DEL of a socket not watched). */
int cs_poller_ctl(int pd, int op, int sd, uint32_t events, uint64_t data);

/* Waits until a watched socket is ready or timeout_ms milliseconds pass
 * (-1: without limit; 0: just look) and fills up to max records of evs.
 * Returns the number filled, 0 on timeout. Level-triggered: a socket is
 * reported on every wait while it stays ready.
 * Errors: EBADF (also when pd is closed meanwhile), EINVAL (not a poller,
 * max < 1), EFAULT (evs is NULL). */
int cs_poller_wait(int pd, struct cs_event *evs, int max, int timeout_ms);

/* Closes poller pd (the sockets stay open). Returns 0.
 * Errors: EBADF, EINVAL (not a poller: use cs_close). */
int cs_poller_close(int pd);

#ifdef __cplusplus
}
#endif

#endif /* CORESTACK_H */
