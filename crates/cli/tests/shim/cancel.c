/* pthread_cancel of a thread blocked in a call on a corestack socket: recv,
 * poll, epoll_wait on a connection, accept on a listener. On Linux each is
 * a cancellation point: the thread ends and pthread_join returns
 * PTHREAD_CANCELED; the sockets stay usable by the other threads. A thread
 * that disabled cancellation keeps waiting, and the cancel acts at its next
 * cancellation point once enabled again. A cancel pending when a send
 * begins acts there; epoll_ctl (no cancellation point) with one pending does
 * its work and returns.
 *
 * usage: cancel PEER PORT LPORT   (PEER echoes TCP on PORT; LPORT is free
 * here; run under the shim) Prints one line per check (PASS/FAIL); exit
 * status 0 when all pass. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

static int conn, ep, lsn, conn2, kconn;

static void *in_recv(void *arg) {
    (void)arg;
    char b[16];
    recv(conn, b, sizeof b, 0); /* nothing comes: blocks */
    return NULL;
}

static void *in_poll(void *arg) {
    (void)arg;
    struct pollfd p = {.fd = conn, .events = POLLIN};
    poll(&p, 1, -1);
    return NULL;
}

static void *in_epoll_wait(void *arg) {
    (void)arg;
    struct epoll_event ev;
    epoll_wait(ep, &ev, 1, -1);
    return NULL;
}

static void *in_kernel_recv(void *arg) {
    (void)arg;
    char b[16];
    recv(kconn, b, sizeof b, 0); /* a loopback connection: the kernel's */
    return NULL;
}

static void *in_accept(void *arg) {
    (void)arg;
    accept(lsn, NULL, NULL); /* nobody connects: blocks */
    return NULL;
}

/* Cancellation disabled while blocked in recv: not cancelled until the
 * data comes, then cancelled at the next cancellation point. */
static void *disabled_in_recv(void *arg) {
    (void)arg;
    int old;
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &old);
    char b[16];
    ssize_t n = recv(conn2, b, sizeof b, 0);
    pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, &old);
    pthread_testcancel();
    return (void *)n; /* not reached when the cancel acts */
}

/* A cancel that is pending when a send on a corestack socket begins acts
 * there (send is a cancellation point), though the send would not block. */
static void *pending_then_send(void *arg) {
    (void)arg;
    int old;
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &old);
    pthread_cancel(pthread_self());
    pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, &old); /* deferred: nothing yet */
    send(conn2, "x", 1, MSG_NOSIGNAL);
    return NULL;
}

/* epoll_ctl is no cancellation point: with a cancel pending it adds a
 * corestack socket (waking a thread asleep in that epoll) and returns; the
 * cancel acts at the next cancellation point. */
static int ep2, ctl_rc = -2;
static void *sleeps_in_ep2(void *arg) {
    (void)arg;
    struct epoll_event ev;
    return (void *)(long)epoll_wait(ep2, &ev, 1, 1500);
}
static void *pending_then_epoll_ctl(void *arg) {
    (void)arg;
    int old;
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &old);
    pthread_cancel(pthread_self());
    pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, &old);
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = lsn};
    ctl_rc = epoll_ctl(ep2, EPOLL_CTL_ADD, lsn, &ev);
    pthread_testcancel();
    return NULL;
}

/* Joins `t` within `ms`: 0 and its result, or the error (ETIMEDOUT). */
static int join_within(pthread_t t, long ms, void **ret) {
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += ms / 1000;
    until.tv_nsec += (ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    return pthread_timedjoin_np(t, ret, &until);
}

/* Starts `fn` as *t, lets it block (200 ms), cancels it and joins it within `ms`
 * milliseconds: join_within's result, the thread's return value in *ret. */
static int cancel_blocked(pthread_t *t, void *(*fn)(void *), long ms, void **ret) {
    pthread_create(t, NULL, fn, NULL);
    usleep(200 * 1000);
    pthread_cancel(*t);
    return join_within(*t, ms, ret);
}

/* Starts `fn`, lets it block, cancels it, and checks it ends cancelled. */
static void cancelled(const char *name, void *(*fn)(void *)) {
    pthread_t t;
    void *ret = NULL;
    int r = cancel_blocked(&t, fn, 3000, &ret);
    CHECK(name, r == 0 && ret == PTHREAD_CANCELED, "join %s",
          r ? strerror(r) : "returned, not cancelled");
    if (r) {
        printf("SOME FAILED\n");
        fflush(stdout);
        _exit(1); /* the thread still holds the socket: stop here */
    }
}

static int echoes(int fd) {
    if (send(fd, "ping", 4, 0) != 4)
        return -1;
    char b[16];
    return (int)recv(fd, b, sizeof b, 0);
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: cancel PEER PORT LPORT\n");
        return 2;
    }
    struct sockaddr_in peer = peer_args(3, argv, 3, "cancel PEER PORT LPORT");
    conn = socket(AF_INET, SOCK_STREAM, 0);
    conn2 = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(conn, (struct sockaddr *)&peer, sizeof peer) < 0 ||
        connect(conn2, (struct sockaddr *)&peer, sizeof peer) < 0) {
        printf("FAIL connect: %s\n", strerror(errno));
        return 1;
    }
    ep = epoll_create1(0);
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = conn};
    if (epoll_ctl(ep, EPOLL_CTL_ADD, conn, &ev) < 0) {
        printf("FAIL epoll_ctl: %s\n", strerror(errno));
        return 1;
    }
    lsn = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in any = {.sin_family = AF_INET, .sin_port = htons(atoi(argv[3]))};
    if (bind(lsn, (struct sockaddr *)&any, sizeof any) < 0 || listen(lsn, 8) < 0) {
        printf("FAIL listen: %s\n", strerror(errno));
        return 1;
    }

    /* A loopback connection stays on the kernel (the shim still knows it). */
    int kl = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in lo = {.sin_family = AF_INET, .sin_port = htons(atoi(argv[3]) + 1),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    kconn = socket(AF_INET, SOCK_STREAM, 0);
    if (bind(kl, (struct sockaddr *)&lo, sizeof lo) < 0 || listen(kl, 8) < 0 ||
        connect(kconn, (struct sockaddr *)&lo, sizeof lo) < 0) {
        printf("FAIL loopback: %s\n", strerror(errno));
        return 1;
    }

    cancelled("a thread blocked in recv is cancelled", in_recv);
    cancelled("a thread blocked in recv on a kernel socket is cancelled", in_kernel_recv);
    cancelled("a thread blocked in poll is cancelled", in_poll);
    cancelled("a thread blocked in epoll_wait is cancelled", in_epoll_wait);
    cancelled("a thread blocked in accept is cancelled", in_accept);

    int n = echoes(conn);
    CHECK("the connection still echoes", n == 4, "got %d (%s)", n, strerror(errno));
    struct epoll_event got;
    int e = epoll_wait(ep, &got, 1, 0);
    CHECK("the epoll still works", e == 0, "epoll_wait gave %d (%s)", e, strerror(errno));
    fcntl(lsn, F_SETFL, fcntl(lsn, F_GETFL) | O_NONBLOCK);
    int a = accept(lsn, NULL, NULL);
    CHECK("the listener still answers", a < 0 && (errno == EAGAIN || errno == EWOULDBLOCK),
          "accept4 gave %d (%s)", a, strerror(errno));

    pthread_t t;
    void *ret = NULL;
    int r = cancel_blocked(&t, disabled_in_recv, 500, &ret);
    CHECK("with cancellation disabled, recv keeps waiting", r == ETIMEDOUT, "join %s",
          r ? strerror(r) : "returned");
    if (r == ETIMEDOUT) {
        send(conn2, "ping", 4, 0);
        r = join_within(t, 3000, &ret);
        CHECK("enabled again, the cancel acts", r == 0 && ret == PTHREAD_CANCELED, "join %s",
              r ? strerror(r) : "returned, not cancelled");
    }
    pthread_create(&t, NULL, pending_then_send, NULL);
    r = join_within(t, 3000, &ret);
    CHECK("a cancel pending before send acts at the send", r == 0 && ret == PTHREAD_CANCELED,
          "join %s", r ? strerror(r) : "returned, not cancelled");
    ep2 = epoll_create1(0);
    pthread_t sleeper;
    pthread_create(&sleeper, NULL, sleeps_in_ep2, NULL);
    usleep(200 * 1000);
    pthread_create(&t, NULL, pending_then_epoll_ctl, NULL);
    r = join_within(t, 3000, &ret);
    CHECK("epoll_ctl with a cancel pending adds, and the cancel acts after",
          r == 0 && ret == PTHREAD_CANCELED && ctl_rc == 0, "join %s, epoll_ctl %d",
          r ? strerror(r) : (ret == PTHREAD_CANCELED ? "cancelled" : "returned"), ctl_rc);
    r = join_within(sleeper, 3000, &ret);
    CHECK("the thread asleep in that epoll_wait times out", r == 0 && ret == (void *)0L,
          "join %s, epoll_wait %ld", r ? strerror(r) : "ok", (long)ret);
    printf(failures ? "SOME FAILED\n" : "ALL PASSED\n");
    fflush(stdout);
    _exit(failures ? 1 : 0);
}
