/* An epoll_wait already asleep wakes when another thread adds a ready
 * corestack socket (EPOLL_CTL_ADD) to a set that held none, or re-arms one
 * (EPOLL_CTL_MOD after EPOLLONESHOT); and the shim's own fds (its wake
 * eventfd, the NIC's fd in inline mode) never come out of epoll_wait,
 * also after the last corestack socket left the set.
 *
 * usage: wake PEER PORT   (PEER echoes TCP on PORT)
 * Prints one line per check (PASS/FAIL); exit status 0 when all pass. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
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

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static int ep;
struct waited {
    int n;
    struct epoll_event ev[8];
    double ms;
};

/* Thread A: one epoll_wait of up to 5 s. */
static void *waiter(void *arg) {
    struct waited *w = arg;
    double t0 = now_ms();
    w->n = epoll_wait(ep, w->ev, 8, 5000);
    w->ms = now_ms() - t0;
    return NULL;
}

/* Starts thread A, lets it fall asleep (200 ms), runs `op`, and joins A. */
static struct waited wait_across(int (*op)(void *), void *arg) {
    static struct waited w;
    memset(&w, 0, sizeof w);
    pthread_t t;
    pthread_create(&t, NULL, waiter, &w);
    usleep(200000);
    if (op(arg) < 0) printf("epoll_ctl failed: %s\n", strerror(errno));
    pthread_join(t, NULL);
    return w;
}

static int c;
static int add_c(void *arg) {
    struct epoll_event ev = {.events = EPOLLIN | EPOLLONESHOT, .data.u64 = (unsigned long)arg};
    return epoll_ctl(ep, EPOLL_CTL_ADD, c, &ev);
}
static int mod_c(void *arg) {
    struct epoll_event ev = {.events = EPOLLIN | EPOLLONESHOT, .data.u64 = (unsigned long)arg};
    return epoll_ctl(ep, EPOLL_CTL_MOD, c, &ev);
}

/* Only the application's data: 77, 78 (the socket) or 5 (the pipe). */
static int foreign(struct waited *w) {
    for (int i = 0; i < w->n; i++) {
        unsigned long d = w->ev[i].data.u64;
        if (d != 77 && d != 78 && d != 5) return 1;
    }
    return 0;
}

int main(int argc, char **argv) {
    struct sockaddr_in peer = peer_args(argc, argv, 3, "wake PEER PORT");
    c = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(c, (struct sockaddr *)&peer, sizeof peer) < 0) {
        printf("FAIL connect: %s\n", strerror(errno));
        return 1;
    }
    /* c readable: the echo of "x" is waiting. */
    send(c, "x", 1, 0);
    struct pollfd p = {.fd = c, .events = POLLIN};
    CHECK("the echo arrived", poll(&p, 1, 3000) == 1, "poll timed out");

    int pfd[2];
    if (pipe(pfd) < 0) return 1;
    ep = epoll_create1(0);
    struct epoll_event pe = {.events = EPOLLIN, .data.u64 = 5};
    epoll_ctl(ep, EPOLL_CTL_ADD, pfd[0], &pe);

    /* 1. A sleeps on a set of only a pipe; B adds the ready socket. */
    struct waited w = wait_across(add_c, (void *)77);
    CHECK("ADD of a ready socket wakes a waiter that saw none",
          w.n == 1 && w.ev[0].data.u64 == 77 && (w.ev[0].events & EPOLLIN) && w.ms < 1500,
          "n %d data %lu after %.0f ms", w.n, w.n > 0 ? (unsigned long)w.ev[0].data.u64 : 0UL, w.ms);

    /* 2. The ONESHOT registration is disabled now (a look without waiting
     * takes what step 1 may have left); A sleeps; B re-arms it. */
    epoll_wait(ep, w.ev, 8, 0);
    w = wait_across(mod_c, (void *)78);
    CHECK("MOD re-arming a ready socket wakes a sleeping waiter",
          w.n == 1 && w.ev[0].data.u64 == 78 && w.ms < 1500,
          "n %d data %lu after %.0f ms", w.n, w.n > 0 ? (unsigned long)w.ev[0].data.u64 : 0UL, w.ms);

    /* 3. The socket leaves the set; traffic on it (the NIC's fd readable in
     * inline mode) and the shim's wake-ups must not come out. */
    CHECK("DEL", epoll_ctl(ep, EPOLL_CTL_DEL, c, NULL) == 0, "%s", strerror(errno));
    char b[64];
    recv(c, b, sizeof b, MSG_DONTWAIT);
    int leaked = 0, got = 0;
    for (int i = 0; i < 5; i++) {
        send(c, "y", 1, 0);
        struct waited x;
        x.n = epoll_wait(ep, x.ev, 8, 100);
        if (x.n > 0 && foreign(&x)) leaked++;
        if (x.n != 0) got++;
        poll(&p, 1, 1000);
        recv(c, b, sizeof b, MSG_DONTWAIT);
    }
    CHECK("after DEL, epoll_wait returns nothing of the shim's", leaked == 0 && got == 0,
          "%d waits returned events, %d with data the application never registered", got, leaked);
    (void)!write(pfd[1], "p", 1);
    struct waited y;
    y.n = epoll_wait(ep, y.ev, 8, 1000);
    CHECK("the pipe is still reported", y.n == 1 && y.ev[0].data.u64 == 5, "n %d", y.n);

    /* 4. Back to an empty-of-corestack set: ADD wakes again. */
    read(pfd[0], b, 1);
    send(c, "z", 1, 0);
    poll(&p, 1, 3000);
    w = wait_across(add_c, (void *)77);
    CHECK("ADD after DEL wakes again", w.n == 1 && w.ev[0].data.u64 == 77 && w.ms < 1500,
          "n %d after %.0f ms", w.n, w.ms);

    printf(failures ? "%d FAILED\n" : "ALL PASSED\n", failures);
    return failures != 0;
}
