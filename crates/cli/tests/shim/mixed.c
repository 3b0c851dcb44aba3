/* Readiness over mixed sets: a pipe, a kernel UDP socket on loopback, and
 * a TCP and a UDP socket to PEER (corestack under the shim). Each of
 * epoll, poll and select must report exactly what is ready, all of it at
 * once, and (epoll with maxevents 1) every ready fd in turn; then EPOLLET,
 * EPOLLONESHOT and dup/dup2 over a corestack fd.
 *
 * usage: mixed PEER PORT   (PEER echoes TCP and UDP on PORT)
 * Prints one line per check (PASS/FAIL); exit status 0 when all pass. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

enum { PIPE, KUDP, TCP, UDP, N };
static const char *names[N] = {"pipe", "kernel-udp", "tcp", "udp"};
static int fds[N];
static int pipe_w;
static struct sockaddr_in kaddr;

static void make_ready(int i) {
    switch (i) {
    case PIPE: (void)!write(pipe_w, "p", 1); break;
    case KUDP: sendto(fds[KUDP], "k", 1, 0, (struct sockaddr *)&kaddr, sizeof kaddr); break;
    case TCP: send(fds[TCP], "t", 1, 0); break;
    case UDP: send(fds[UDP], "u", 1, 0); break;
    }
}

static void drain(int i) {
    char b[256];
    while (recv(fds[i], b, sizeof b, MSG_DONTWAIT) > 0 || (i == PIPE && read(fds[i], b, 0) > 0))
        ;
    if (i == PIPE) {
        int fl = fcntl(fds[PIPE], F_GETFL);
        fcntl(fds[PIPE], F_SETFL, fl | O_NONBLOCK);
        while (read(fds[PIPE], b, sizeof b) > 0)
            ;
        fcntl(fds[PIPE], F_SETFL, fl);
    }
}

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* One wait with mechanism m ("epoll", "poll", "select"): returns a bit mask
 * of the ready indexes (-1 on error). */
static int epfd;
static int wait_mask(const char *m, int timeout_ms, int maxevents) {
    int mask = 0;
    if (!strcmp(m, "epoll")) {
        struct epoll_event ev[8];
        int n = epoll_wait(epfd, ev, maxevents, timeout_ms);
        if (n < 0) return -1;
        for (int k = 0; k < n; k++) {
            if ((ev[k].data.u64 >> 8) != 0xc5) return -2; /* epoll_data must come back */
            mask |= 1 << (ev[k].data.u64 & 0xff);
        }
    } else if (!strcmp(m, "poll")) {
        struct pollfd p[N];
        for (int i = 0; i < N; i++) p[i] = (struct pollfd){.fd = fds[i], .events = POLLIN};
        int n = poll(p, N, timeout_ms);
        if (n < 0) return -1;
        for (int i = 0; i < N; i++)
            if (p[i].revents & POLLIN) mask |= 1 << i;
    } else {
        fd_set r;
        FD_ZERO(&r);
        int maxfd = 0;
        for (int i = 0; i < N; i++) {
            FD_SET(fds[i], &r);
            if (fds[i] > maxfd) maxfd = fds[i];
        }
        struct timeval tv = {timeout_ms / 1000, (timeout_ms % 1000) * 1000};
        int n = select(maxfd + 1, &r, NULL, NULL, &tv);
        if (n < 0) return -1;
        for (int i = 0; i < N; i++)
            if (FD_ISSET(fds[i], &r)) mask |= 1 << i;
    }
    return mask;
}

/* Waits (up to 3 s) until everything in `want` is ready; returns the last mask. */
static int wait_for(const char *m, int want) {
    double end = now_ms() + 3000;
    int mask = 0;
    while (now_ms() < end) {
        mask = wait_mask(m, 500, 8);
        if (mask < 0 || (mask & want) == want) break;
    }
    return mask;
}

static void mechanism(const char *m) {
    char name[128];
    snprintf(name, sizeof name, "%s: nothing ready times out", m);
    double t0 = now_ms();
    int mask = wait_mask(m, 50, 8);
    double dt = now_ms() - t0;
    CHECK(name, mask == 0 && dt >= 40, "mask %#x after %.1f ms", mask, dt);
    for (int i = 0; i < N; i++) {
        make_ready(i);
        mask = wait_for(m, 1 << i);
        snprintf(name, sizeof name, "%s: only %s ready", m, names[i]);
        CHECK(name, mask == 1 << i, "mask %#x, want %#x", mask, 1 << i);
        drain(i);
    }
    for (int i = 0; i < N; i++) make_ready(i);
    mask = wait_for(m, (1 << N) - 1);
    snprintf(name, sizeof name, "%s: all four ready in one call", m);
    CHECK(name, mask == (1 << N) - 1, "mask %#x", mask);
    if (!strcmp(m, "epoll")) {
        int seen = 0;
        for (int k = 0; k < 2 * N; k++) {
            int one = wait_mask(m, 1000, 1);
            if (one > 0) seen |= one;
        }
        CHECK("epoll: maxevents 1 reports every ready fd in turn", seen == (1 << N) - 1, "seen %#x", seen);
    }
    for (int i = 0; i < N; i++) drain(i);
    mask = wait_mask(m, 50, 8);
    snprintf(name, sizeof name, "%s: nothing ready after draining", m);
    CHECK(name, mask == 0, "mask %#x", mask);
}

static int connect_to(int type, const char *peer, int port) {
    int s = socket(AF_INET, type, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    inet_pton(AF_INET, peer, &a.sin_addr);
    if (connect(s, (struct sockaddr *)&a, sizeof a) != 0) {
        printf("FAIL connect %s: %s\n", type == SOCK_STREAM ? "tcp" : "udp", strerror(errno));
        exit(1);
    }
    return s;
}

static int recv_wait(int fd, char *b, int n) {
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, 3000) != 1) return -1;
    return recv(fd, b, n, 0);
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: mixed PEER PORT\n");
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    int p[2];
    if (pipe(p) != 0) return 1;
    fds[PIPE] = p[0];
    pipe_w = p[1];
    fds[KUDP] = socket(AF_INET, SOCK_DGRAM, 0);
    kaddr = (struct sockaddr_in){.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    bind(fds[KUDP], (struct sockaddr *)&kaddr, sizeof kaddr);
    socklen_t kl = sizeof kaddr;
    getsockname(fds[KUDP], (struct sockaddr *)&kaddr, &kl);
    fds[TCP] = connect_to(SOCK_STREAM, argv[1], atoi(argv[2]));
    fds[UDP] = connect_to(SOCK_DGRAM, argv[1], atoi(argv[2]));

    epfd = epoll_create1(EPOLL_CLOEXEC);
    for (int i = 0; i < N; i++) {
        struct epoll_event ev = {.events = EPOLLIN, .data.u64 = (0xc5 << 8) | i};
        epoll_ctl(epfd, EPOLL_CTL_ADD, fds[i], &ev);
    }
    mechanism("epoll");
    mechanism("poll");
    mechanism("select");

    /* EPOLLET on the TCP socket: one report per arrival, none while unread data just sits. */
    int et = epoll_create1(0);
    struct epoll_event ev = {.events = EPOLLIN | EPOLLET, .data.u64 = 7};
    epoll_ctl(et, EPOLL_CTL_ADD, fds[TCP], &ev);
    struct epoll_event out[4];
    send(fds[TCP], "a", 1, 0);
    int n1 = epoll_wait(et, out, 4, 3000);
    int n2 = epoll_wait(et, out, 4, 100);
    send(fds[TCP], "b", 1, 0);
    int n3 = epoll_wait(et, out, 4, 3000);
    usleep(20000);
    drain(TCP);
    int n4 = epoll_wait(et, out, 4, 100);
    CHECK("EPOLLET: reported once per arrival, not again while data sits", n1 == 1 && n2 == 0 && n3 == 1 && n4 == 0,
          "%d %d %d %d", n1, n2, n3, n4);
    close(et);

    /* EPOLLONESHOT on the UDP socket: disabled after one report until EPOLL_CTL_MOD. */
    int os = epoll_create1(0);
    ev = (struct epoll_event){.events = EPOLLIN | EPOLLONESHOT, .data.u64 = 9};
    epoll_ctl(os, EPOLL_CTL_ADD, fds[UDP], &ev);
    send(fds[UDP], "u", 1, 0);
    int o1 = epoll_wait(os, out, 4, 3000);
    send(fds[UDP], "v", 1, 0);
    usleep(20000);
    int o2 = epoll_wait(os, out, 4, 100);
    ev.events = EPOLLIN | EPOLLONESHOT;
    int mod = epoll_ctl(os, EPOLL_CTL_MOD, fds[UDP], &ev);
    int o3 = epoll_wait(os, out, 4, 3000);
    int o4 = epoll_wait(os, out, 4, 100);
    CHECK("EPOLLONESHOT: one report, then none until EPOLL_CTL_MOD", o1 == 1 && o2 == 0 && mod == 0 && o3 == 1 && o4 == 0,
          "%d %d %d %d %d", o1, o2, mod, o3, o4);
    drain(UDP);
    close(os);

    /* dup and dup2 over corestack fds. */
    char b[16];
    int d = dup(fds[TCP]);
    send(d, "d", 1, 0);
    int r = recv_wait(fds[TCP], b, sizeof b);
    CHECK("dup: the copy sends on the same connection", r == 1 && b[0] == 'd', "recv %d", r);
    close(fds[TCP]);
    send(d, "e", 1, 0);
    r = recv_wait(d, b, sizeof b);
    CHECK("dup: the connection lives on after closing the original", r == 1 && b[0] == 'e', "recv %d", r);
    int u2 = dup2(fds[UDP], 100);
    send(u2, "w", 1, 0);
    r = recv_wait(fds[UDP], b, sizeof b);
    CHECK("dup2 onto a free number: the same UDP socket", u2 == 100 && r == 1 && b[0] == 'w', "fd %d recv %d", u2, r);
    int over = dup2(fds[PIPE], d);
    (void)!write(pipe_w, "z", 1);
    r = read(d, b, sizeof b);
    CHECK("dup2 over a corestack fd: it now reads the pipe", over == d && r == 1 && b[0] == 'z', "fd %d read %d", over, r);
    int c1 = close(100), c2 = close(100);
    CHECK("close twice: the second is EBADF", c1 == 0 && c2 == -1 && errno == EBADF, "%d %d", c1, c2);
    printf("%s: %d failure(s)\n", failures ? "FAILED" : "ALL PASSED", failures);
    return failures ? 1 : 0;
}
