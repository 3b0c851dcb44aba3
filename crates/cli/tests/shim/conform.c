/* Conformance script: a fixed sequence of socket calls whose return
 * values, errno and readiness are printed one line per call, with fds,
 * addresses and ports normalised. Run once on the kernel stack and once
 * under the shim; the two outputs must be equal line by line.
 *
 * usage: conform PEER PORT LISTEN_PORT   (PEER echoes TCP and UDP on
 * PORT; nothing listens on PEER port 9) */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/select.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

static struct sockaddr_in peer, closed;
static int port;

/* A call's outcome: its value (or "fd" for a descriptor), else -1 and the errno's name. */
static void out(const char *what, long r, int fd_like) {
    if (r < 0) printf("%-58s -1 %s\n", what, strerrorname_np(errno));
    else if (fd_like) printf("%-58s fd\n", what);
    else printf("%-58s %ld\n", what, r);
    fflush(stdout);
}

static void note(const char *what, const char *v) { printf("%-58s %s\n", what, v); fflush(stdout); }

static const char *bits(int ev) {
    static char b[128];
    b[0] = 0;
    const struct { int bit; const char *n; } t[] = {
        {POLLIN, "IN"}, {POLLPRI, "PRI"}, {POLLOUT, "OUT"}, {POLLERR, "ERR"}, {POLLHUP, "HUP"},
        {POLLNVAL, "NVAL"}, {POLLRDNORM, "RDNORM"}, {POLLWRNORM, "WRNORM"}, {POLLRDHUP, "RDHUP"}};
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        if (ev & t[i].bit) {
            strcat(b, b[0] ? "|" : "");
            strcat(b, t[i].n);
        }
    return b[0] ? b : "0";
}

static void pollshow(const char *what, int fd, short events, int timeout) {
    struct pollfd p = {.fd = fd, .events = events};
    int r = poll(&p, 1, timeout);
    char w[128];
    snprintf(w, sizeof w, "%s (revents)", what);
    if (r < 0) out(w, r, 0);
    else note(w, r ? bits(p.revents) : "none");
}

static int geti(int fd, int level, int name) {
    int v = -1;
    socklen_t l = sizeof v;
    if (getsockopt(fd, level, name, &v, &l) < 0) return -errno;
    return v;
}

static void opt(const char *what, int fd, int level, int name) {
    int v = geti(fd, level, name);
    if (v < 0 && v > -200) {
        errno = -v;
        out(what, -1, 0);
    } else {
        out(what, v, 0);
    }
}

static int seti(int fd, int level, int name, int v) { return setsockopt(fd, level, name, &v, sizeof v); }

static int sigpipes;
static void on_pipe(int s) { (void)s; sigpipes++; }

static long wait_in(int fd) {
    struct pollfd p = {.fd = fd, .events = POLLIN};
    return poll(&p, 1, 3000);
}

static int peer_port(int fd, int local) {
    struct sockaddr_in a;
    socklen_t l = sizeof a;
    int r = local ? getsockname(fd, (struct sockaddr *)&a, &l) : getpeername(fd, (struct sockaddr *)&a, &l);
    if (r < 0) return -errno;
    return ntohs(a.sin_port);
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: conform PEER PORT LISTEN_PORT\n");
        return 2;
    }
    port = atoi(argv[2]);
    int lport = atoi(argv[3]);
    peer = (struct sockaddr_in){.sin_family = AF_INET, .sin_port = htons(port)};
    inet_pton(AF_INET, argv[1], &peer.sin_addr);
    closed = peer;
    closed.sin_port = htons(9);
    signal(SIGPIPE, on_pipe);
    char b[256];
    long r;

    /* A. A non-blocking connect to a closed port. */
    int s = socket(AF_INET, SOCK_STREAM, 0);
    out("socket(AF_INET, SOCK_STREAM)", s, 1);
    opt("SO_TYPE", s, SOL_SOCKET, SO_TYPE);
    opt("SO_DOMAIN", s, SOL_SOCKET, SO_DOMAIN);
    opt("SO_PROTOCOL", s, SOL_SOCKET, SO_PROTOCOL);
    opt("SO_ACCEPTCONN (fresh)", s, SOL_SOCKET, SO_ACCEPTCONN);
    opt("SO_ERROR (fresh)", s, SOL_SOCKET, SO_ERROR);
    out("F_GETFL & O_NONBLOCK (fresh)", fcntl(s, F_GETFL) & O_NONBLOCK ? 1 : 0, 0);
    out("F_SETFL O_NONBLOCK", fcntl(s, F_SETFL, fcntl(s, F_GETFL) | O_NONBLOCK), 0);
    out("F_GETFL & O_NONBLOCK", fcntl(s, F_GETFL) & O_NONBLOCK ? 1 : 0, 0);
    out("connect to a closed port (non-blocking)", connect(s, (struct sockaddr *)&closed, sizeof closed), 0);
    struct pollfd pf = {.fd = s, .events = POLLOUT};
    r = poll(&pf, 1, 3000);
    note("poll POLLOUT after the refused connect", r == 1 ? bits(pf.revents) : "none");
    opt("SO_ERROR after the refused connect", s, SOL_SOCKET, SO_ERROR);
    opt("SO_ERROR again", s, SOL_SOCKET, SO_ERROR);
    out("close", close(s), 0);

    /* A2. The same socket connects again after a refusal: readiness is the new connection's. */
    s = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    out("connect to a closed port (non-blocking, A2)", connect(s, (struct sockaddr *)&closed, sizeof closed), 0);
    pollshow("poll POLLOUT after the refusal (A2)", s, POLLOUT, 3000);
    out("connect again: the refusal", connect(s, (struct sockaddr *)&closed, sizeof closed), 0);
    out("connect to the echo server on the same socket", connect(s, (struct sockaddr *)&peer, sizeof peer), 0);
    pollshow("poll POLLOUT of the new connection", s, POLLOUT, 3000);
    opt("SO_ERROR of the new connection", s, SOL_SOCKET, SO_ERROR);
    out("send on the new connection", send(s, "re", 2, MSG_NOSIGNAL), 0);
    out("poll POLLIN for the echo", wait_in(s), 0);
    out("recv the echo", recv(s, b, sizeof b, 0), 0);
    out("close", close(s), 0);

    /* B. A blocking connection to the echo server. */
    int fr = socket(AF_INET, SOCK_STREAM, 0);
    out("getpeername before connect", peer_port(fr, 0), 0);
    out("recv before connect", recv(fr, b, 1, MSG_DONTWAIT), 0);
    out("send before connect", send(fr, b, 1, MSG_NOSIGNAL), 0);
    out("shutdown before connect", shutdown(fr, SHUT_RDWR), 0);
    close(fr);
    int c = socket(AF_INET, SOCK_STREAM, 0);
    out("connect to the echo server", connect(c, (struct sockaddr *)&peer, sizeof peer), 0);
    out("connect again", connect(c, (struct sockaddr *)&peer, sizeof peer), 0);
    out("getpeername port == PORT", peer_port(c, 0) == port, 0);
    out("getsockname port != 0", peer_port(c, 1) > 0, 0);
    pollshow("poll IN|OUT, nothing received", c, POLLIN | POLLOUT, 0);
    out("send 5 bytes", send(c, "hello", 5, 0), 0);
    out("poll POLLIN until the echo", wait_in(c), 0);
    out("recv MSG_PEEK", recv(c, b, sizeof b, MSG_PEEK), 0);
    out("recv 2", recv(c, b, 2, 0), 0);
    out("recv the rest", recv(c, b, sizeof b, 0), 0);
    out("recv MSG_DONTWAIT, nothing there", recv(c, b, sizeof b, MSG_DONTWAIT), 0);
    int avail = -1;
    out("ioctl FIONREAD", ioctl(c, FIONREAD, &avail), 0);
    out("  bytes", avail, 0);
    out("send 3 bytes", send(c, "abc", 3, 0), 0);
    wait_in(c);
    usleep(20000);
    out("ioctl FIONREAD", ioctl(c, FIONREAD, &avail), 0);
    out("  bytes", avail, 0);
    out("recv MSG_WAITALL 3", recv(c, b, 3, MSG_WAITALL), 0);
    struct iovec iov[3] = {{"wr", 2}, {"it", 2}, {"ev", 2}};
    out("writev 3 iovecs", writev(c, iov, 3), 0);
    wait_in(c);
    usleep(20000);
    char x1[3] = {0}, x2[8] = {0};
    struct iovec riov[2] = {{x1, 3}, {x2, 8}};
    out("readv into 3 + 8", readv(c, riov, 2), 0);
    note("  data", (memcmp(x1, "wri", 3) == 0 && strcmp(x2, "tev") == 0) ? "wri|tev" : "wrong");
    struct msghdr mh = {.msg_iov = iov, .msg_iovlen = 2};
    out("sendmsg 2 iovecs", sendmsg(c, &mh, 0), 0);
    wait_in(c);
    usleep(20000);
    struct msghdr rh = {.msg_iov = riov, .msg_iovlen = 2};
    out("recvmsg", recvmsg(c, &rh, 0), 0);
    out("  msg_flags", rh.msg_flags, 0);
    FILE *f = tmpfile();
    for (int i = 0; i < 100; i++) fputc('a' + i % 26, f);
    fflush(f);
    off_t off = 10;
    out("sendfile 50 bytes from offset 10", sendfile(c, fileno(f), &off, 50), 0);
    out("  offset after", off, 0);
    out("recv MSG_WAITALL 50", recv(c, b, 50, MSG_WAITALL), 0);
    note("  data", memcmp(b, "klmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefgh", 50) == 0 ? "file bytes" : "wrong");
    fclose(f);

    out("TCP_NODELAY 1", seti(c, IPPROTO_TCP, TCP_NODELAY, 1), 0);
    opt("TCP_NODELAY", c, IPPROTO_TCP, TCP_NODELAY);
    out("SO_KEEPALIVE 1", seti(c, SOL_SOCKET, SO_KEEPALIVE, 1), 0);
    opt("SO_KEEPALIVE", c, SOL_SOCKET, SO_KEEPALIVE);
    out("TCP_KEEPIDLE 0 (invalid)", seti(c, IPPROTO_TCP, TCP_KEEPIDLE, 0), 0);
    out("TCP_KEEPIDLE 60", seti(c, IPPROTO_TCP, TCP_KEEPIDLE, 60), 0);
    opt("TCP_KEEPIDLE", c, IPPROTO_TCP, TCP_KEEPIDLE);
    out("IP_TOS 0x10", seti(c, IPPROTO_IP, IP_TOS, 0x10), 0);
    opt("IP_TOS", c, IPPROTO_IP, IP_TOS);
    struct linger lg = {1, 0};
    out("SO_LINGER {1, 0}", setsockopt(c, SOL_SOCKET, SO_LINGER, &lg, sizeof lg), 0);
    socklen_t ll = sizeof lg;
    memset(&lg, 0xff, sizeof lg);
    out("getsockopt SO_LINGER", getsockopt(c, SOL_SOCKET, SO_LINGER, &lg, &ll), 0);
    out("  l_onoff, l_linger", lg.l_onoff * 100 + lg.l_linger, 0);
    lg = (struct linger){0, 0};
    setsockopt(c, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    char cc[16] = "reno";
    out("TCP_CONGESTION reno", setsockopt(c, IPPROTO_TCP, TCP_CONGESTION, cc, 4), 0);
    socklen_t cl = sizeof cc;
    memset(cc, 0, sizeof cc);
    getsockopt(c, IPPROTO_TCP, TCP_CONGESTION, cc, &cl);
    note("TCP_CONGESTION", cc);
    out("TCP_CONGESTION nosuch", setsockopt(c, IPPROTO_TCP, TCP_CONGESTION, "nosuch", 6), 0);
    out("TCP_CORK 1", seti(c, IPPROTO_TCP, TCP_CORK, 1), 0);
    opt("TCP_CORK", c, IPPROTO_TCP, TCP_CORK);
    out("TCP_CORK 0", seti(c, IPPROTO_TCP, TCP_CORK, 0), 0);
    opt("TCP_CORK after clearing", c, IPPROTO_TCP, TCP_CORK);
    out("TCP_QUICKACK 0", seti(c, IPPROTO_TCP, TCP_QUICKACK, 0), 0);
    opt("TCP_QUICKACK", c, IPPROTO_TCP, TCP_QUICKACK);
    out("TCP_QUICKACK 1", seti(c, IPPROTO_TCP, TCP_QUICKACK, 1), 0);
    opt("TCP_QUICKACK after setting", c, IPPROTO_TCP, TCP_QUICKACK);
    out("TCP_USER_TIMEOUT -1 (invalid)", seti(c, IPPROTO_TCP, TCP_USER_TIMEOUT, -1), 0);
    out("TCP_USER_TIMEOUT 30000", seti(c, IPPROTO_TCP, TCP_USER_TIMEOUT, 30000), 0);
    opt("TCP_USER_TIMEOUT", c, IPPROTO_TCP, TCP_USER_TIMEOUT);
    struct tcp_info ti;
    socklen_t tl = sizeof ti;
    out("TCP_INFO", getsockopt(c, IPPROTO_TCP, TCP_INFO, &ti, &tl), 0);
    out("  tcpi_state (1 = ESTABLISHED)", ti.tcpi_state, 0);
    struct timeval tv = {0, 100000};
    out("SO_RCVTIMEO 100 ms", setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv), 0);
    out("recv, nothing arrives", recv(c, b, sizeof b, 0), 0);
    socklen_t tvl = sizeof tv;
    memset(&tv, 0, sizeof tv);
    getsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, &tvl);
    out("  SO_RCVTIMEO back (us)", tv.tv_sec * 1000000 + tv.tv_usec, 0);
    tv = (struct timeval){0, 2000000};
    out("SO_RCVTIMEO with tv_usec 2000000", setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv), 0);
    tv = (struct timeval){3, 0};
    setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);

    int ep = epoll_create1(0);
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = 42};
    out("epoll_ctl ADD", epoll_ctl(ep, EPOLL_CTL_ADD, c, &ev), 0);
    out("epoll_ctl ADD again", epoll_ctl(ep, EPOLL_CTL_ADD, c, &ev), 0);
    ev.events = EPOLLIN | EPOLLEXCLUSIVE;
    out("epoll_ctl MOD with EPOLLEXCLUSIVE", epoll_ctl(ep, EPOLL_CTL_MOD, c, &ev), 0);
    ev.events = EPOLLOUT;
    out("epoll_ctl MOD EPOLLOUT", epoll_ctl(ep, EPOLL_CTL_MOD, c, &ev), 0);
    memset(&ev, 0, sizeof ev);
    out("epoll_wait", epoll_wait(ep, &ev, 1, 1000), 0);
    note("  events", bits(ev.events));
    out("  data", (long)ev.data.u64, 0);
    out("epoll_ctl DEL", epoll_ctl(ep, EPOLL_CTL_DEL, c, NULL), 0);
    out("epoll_ctl DEL again", epoll_ctl(ep, EPOLL_CTL_DEL, c, NULL), 0);
    out("epoll_ctl MOD unknown", epoll_ctl(ep, EPOLL_CTL_MOD, c, &ev), 0);
    out("epoll_ctl ADD itself", epoll_ctl(ep, EPOLL_CTL_ADD, ep, &ev), 0);
    ev = (struct epoll_event){.events = EPOLLIN | EPOLLRDHUP, .data.u64 = 7};
    epoll_ctl(ep, EPOLL_CTL_ADD, c, &ev);

    fd_set ws;
    FD_ZERO(&ws);
    FD_SET(c, &ws);
    struct timeval z = {0, 0};
    out("select writable, timeout 0", select(c + 1, NULL, &ws, NULL, &z), 0);

    int d = fcntl(c, F_DUPFD_CLOEXEC, 50);
    out("F_DUPFD_CLOEXEC >= 50", d >= 50, 0);
    out("  F_GETFD", fcntl(d, F_GETFD), 0);
    out("send on the duplicate", send(d, "dup", 3, 0), 0);
    out("recv MSG_WAITALL 3 on the original", recv(c, b, 3, MSG_WAITALL), 0);
    out("close the duplicate", close(d), 0);

    out("shutdown SHUT_WR", shutdown(c, SHUT_WR), 0);
    out("send MSG_NOSIGNAL after SHUT_WR", send(c, "x", 1, MSG_NOSIGNAL), 0);
    out("  SIGPIPEs", sigpipes, 0);
    out("send after SHUT_WR", send(c, "x", 1, 0), 0);
    out("  SIGPIPEs", sigpipes, 0);
    out("recv: the echo server closes too", recv(c, b, sizeof b, 0), 0);
    usleep(50000);
    memset(&ev, 0, sizeof ev);
    out("epoll_wait (EPOLLIN|EPOLLRDHUP) after both FINs", epoll_wait(ep, &ev, 1, 1000), 0);
    note("  events", bits(ev.events));
    pollshow("poll IN|OUT|RDHUP after both FINs", c, POLLIN | POLLOUT | POLLRDHUP, 0);
    out("shutdown how=7", shutdown(c, 7), 0);
    out("close", close(c), 0);
    out("close again", close(c), 0);
    close(ep);

    /* C. A listener. */
    int l = socket(AF_INET, SOCK_STREAM, 0);
    seti(l, SOL_SOCKET, SO_REUSEADDR, 1);
    opt("SO_REUSEADDR", l, SOL_SOCKET, SO_REUSEADDR);
    struct sockaddr_in any = {.sin_family = AF_INET, .sin_port = htons(lport)};
    out("bind 0.0.0.0:LISTEN_PORT", bind(l, (struct sockaddr *)&any, sizeof any), 0);
    out("bind again", bind(l, (struct sockaddr *)&any, sizeof any), 0);
    out("listen", listen(l, 8), 0);
    out("listen again", listen(l, 16), 0);
    opt("SO_ACCEPTCONN", l, SOL_SOCKET, SO_ACCEPTCONN);
    opt("TCP_QUICKACK of a listener", l, IPPROTO_TCP, TCP_QUICKACK);
    opt("TCP_DEFER_ACCEPT unset", l, IPPROTO_TCP, TCP_DEFER_ACCEPT);
    out("TCP_DEFER_ACCEPT 5", seti(l, IPPROTO_TCP, TCP_DEFER_ACCEPT, 5), 0);
    opt("TCP_DEFER_ACCEPT (rounded up as Linux does)", l, IPPROTO_TCP, TCP_DEFER_ACCEPT);
    out("TCP_DEFER_ACCEPT 30", seti(l, IPPROTO_TCP, TCP_DEFER_ACCEPT, 30), 0);
    opt("TCP_DEFER_ACCEPT", l, IPPROTO_TCP, TCP_DEFER_ACCEPT);
    out("getsockname port == LISTEN_PORT", peer_port(l, 1) == lport, 0);
    fcntl(l, F_SETFL, O_NONBLOCK);
    out("accept, nobody waiting (non-blocking)", accept(l, NULL, NULL), 0);
    out("accept4 with unknown flags", accept4(l, NULL, NULL, 0x40000000), 0);
    pollshow("poll POLLIN, nobody waiting", l, POLLIN, 0);
    out("connect on a listener", connect(l, (struct sockaddr *)&peer, sizeof peer), 0);
    out("send on a listener", send(l, "x", 1, MSG_NOSIGNAL), 0);
    out("shutdown SHUT_RD", shutdown(l, SHUT_RD), 0);
    out("accept after SHUT_RD", accept(l, NULL, NULL), 0);
    out("close", close(l), 0);

    /* D. UDP. */
    int u = socket(AF_INET, SOCK_DGRAM, 0);
    out("socket(AF_INET, SOCK_DGRAM)", u, 1);
    opt("SO_TYPE", u, SOL_SOCKET, SO_TYPE);
    opt("SO_PROTOCOL", u, SOL_SOCKET, SO_PROTOCOL);
    struct sockaddr_in z0 = {.sin_family = AF_INET};
    out("bind 0.0.0.0:0", bind(u, (struct sockaddr *)&z0, sizeof z0), 0);
    out("getsockname port != 0", peer_port(u, 1) > 0, 0);
    out("SO_BROADCAST 1 (bound to 0.0.0.0)", seti(u, SOL_SOCKET, SO_BROADCAST, 1), 0);
    opt("SO_BROADCAST", u, SOL_SOCKET, SO_BROADCAST);
    out("listen", listen(u, 1), 0);
    out("send without a destination", send(u, "x", 1, 0), 0);
    out("getpeername unconnected", peer_port(u, 0), 0);
    out("sendto the echo server", sendto(u, "ping", 4, 0, (struct sockaddr *)&peer, sizeof peer), 0);
    out("poll POLLIN until the echo", wait_in(u), 0);
    struct sockaddr_in from;
    socklen_t fl = sizeof from;
    out("recvfrom", recvfrom(u, b, sizeof b, 0, (struct sockaddr *)&from, &fl), 0);
    out("  from port == PORT", ntohs(from.sin_port) == port && fl == sizeof from, 0);
    out("recv MSG_DONTWAIT, nothing there", recv(u, b, sizeof b, MSG_DONTWAIT), 0);
    out("connect to the echo server", connect(u, (struct sockaddr *)&peer, sizeof peer), 0);
    out("getpeername port == PORT", peer_port(u, 0) == port, 0);
    out("send 8 bytes", send(u, "pongpong", 8, 0), 0);
    wait_in(u);
    out("ioctl FIONREAD", ioctl(u, FIONREAD, &avail), 0);
    out("  bytes (next datagram)", avail, 0);
    char small[4];
    struct iovec siov = {small, 4};
    struct msghdr sm = {.msg_iov = &siov, .msg_iovlen = 1};
    out("recvmsg into 4 bytes", recvmsg(u, &sm, 0), 0);
    out("  MSG_TRUNC in msg_flags", (sm.msg_flags & MSG_TRUNC) != 0, 0);
    out("send 6 bytes", send(u, "abcdef", 6, 0), 0);
    wait_in(u);
    out("recv 2 with MSG_TRUNC", recv(u, b, 2, MSG_TRUNC), 0);
    pollshow("poll IN|OUT, nothing received", u, POLLIN | POLLOUT, 0);
    struct mmsghdr mm[2];
    struct iovec m1 = {"one", 3}, m2 = {"three", 5};
    memset(mm, 0, sizeof mm);
    mm[0].msg_hdr.msg_iov = &m1;
    mm[0].msg_hdr.msg_iovlen = 1;
    mm[1].msg_hdr.msg_iov = &m2;
    mm[1].msg_hdr.msg_iovlen = 1;
    out("sendmmsg 2", sendmmsg(u, mm, 2, 0), 0);
    out("  lengths", mm[0].msg_len * 10 + mm[1].msg_len, 0);
    wait_in(u);
    usleep(50000);
    char r1[8], r2[8];
    struct iovec q1 = {r1, 8}, q2 = {r2, 8};
    memset(mm, 0, sizeof mm);
    mm[0].msg_hdr.msg_iov = &q1;
    mm[0].msg_hdr.msg_iovlen = 1;
    mm[1].msg_hdr.msg_iov = &q2;
    mm[1].msg_hdr.msg_iovlen = 1;
    out("recvmmsg 2", recvmmsg(u, mm, 2, 0, NULL), 0);
    out("  lengths", mm[0].msg_len * 10 + mm[1].msg_len, 0);
    out("shutdown SHUT_RD (connected UDP)", shutdown(u, SHUT_RD), 0);
    out("close", close(u), 0);

    /* E. AF_UNIX and a pipe pass through untouched. */
    int sv[2];
    out("socketpair AF_UNIX", socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    out("write", write(sv[0], "u", 1), 0);
    out("read", read(sv[1], b, 1), 0);
    close(sv[0]);
    close(sv[1]);
    printf("done\n");
    return 0;
}
