/* Threads sharing sockets.
 *  1. accept in the main thread, serve in worker threads (the fd handed
 *     over through a pipe, as memcached does): serves CONNS connections
 *     that a Linux client makes to LISTEN_PORT (each sends a line, gets it
 *     back upper-cased);
 *  2. one TCP connection written by four threads at once and read by a
 *     fifth: every record arrives whole;
 *  3. a thread closes (or shuts down) a socket another thread is blocked
 *     on: the blocked call ends as Linux ends it (close: the call goes on
 *     until its SO_RCVTIMEO; shutdown: it returns at once).
 * Prints one line per check (the part after ':' must be equal on the
 * kernel and under the shim); exit status 0 when all pass.
 *
 * usage: threads PEER PORT LISTEN_PORT CONNS   (PEER echoes TCP on PORT) */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

static struct sockaddr_in peer;

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static int dial(void) {
    int s = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(s, (struct sockaddr *)&peer, sizeof peer) != 0) {
        perror("connect");
        exit(1);
    }
    return s;
}

/* 1. accept here, serve there. */
static int handoff[2];
static int served;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static void *worker(void *arg) {
    (void)arg;
    int fd;
    while (read(handoff[0], &fd, sizeof fd) == sizeof fd) {
        if (fd < 0) break;
        char line[256];
        int n = 0;
        while (n < (int)sizeof line - 1) {
            int r = recv(fd, line + n, sizeof line - 1 - n, 0);
            if (r <= 0) break;
            n += r;
            if (line[n - 1] == '\n') break;
        }
        for (int i = 0; i < n; i++) line[i] = toupper((unsigned char)line[i]);
        int w = n > 0 ? send(fd, line, n, MSG_NOSIGNAL) : -1;
        close(fd);
        pthread_mutex_lock(&lock);
        if (w == n && n > 0) served++;
        pthread_mutex_unlock(&lock);
    }
    return NULL;
}

/* 2. four writers, one reader. */
#define RECORDS 2000
static int shared_fd;
static void *writer(void *arg) {
    char rec[16];
    long id = (long)arg;
    for (int i = 0; i < RECORDS; i++) {
        snprintf(rec, sizeof rec, "W%ld:%08d;", id, i); /* 12 bytes */
        if (send(shared_fd, rec, 12, 0) != 12) return (void *)1;
    }
    return NULL;
}

/* 3. a thread acts on a socket another thread blocks on. */
struct blocked { int fd; int shut; };
static void *closer(void *arg) {
    struct blocked *b = arg;
    usleep(200000);
    if (b->shut) shutdown(b->fd, b->shut == 1 ? SHUT_RDWR : SHUT_RD);
    else close(b->fd);
    return NULL;
}

static void blocked_call(const char *what, int fd, int shut, int kind) {
    struct timeval tv = {1, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    struct blocked b = {fd, shut};
    pthread_t t;
    int ep = -1;
    if (kind == 2) {
        ep = epoll_create1(0);
        struct epoll_event ev = {.events = EPOLLIN, .data.u64 = 1};
        epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
    }
    pthread_create(&t, NULL, closer, &b);
    double t0 = now_ms();
    char buf[8];
    long r;
    struct epoll_event ev;
    if (kind == 0) r = recv(fd, buf, sizeof buf, 0);
    else if (kind == 1) r = accept(fd, NULL, NULL);
    else r = epoll_wait(ep, &ev, 1, 1000);
    int e = errno;
    double dt = now_ms() - t0;
    pthread_join(t, NULL);
    const char *when = dt < 150 ? "early" : dt < 700 ? "at once" : "at its timeout";
    printf("INFO %s: returned %ld (%s) %s\n", what, r, r < 0 ? strerrorname_np(e) : "-", when);
    fflush(stdout);
    if (ep >= 0) close(ep);
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: threads PEER PORT LISTEN_PORT CONNS\n");
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    peer = (struct sockaddr_in){.sin_family = AF_INET, .sin_port = htons(atoi(argv[2]))};
    inet_pton(AF_INET, argv[1], &peer.sin_addr);
    int conns = atoi(argv[4]);

    /* 2 first (it needs no client). */
    shared_fd = dial();
    pthread_t w[4];
    for (long i = 0; i < 4; i++) pthread_create(&w[i], NULL, writer, (void *)i);
    static char got[4 * RECORDS * 12];
    size_t n = 0;
    while (n < sizeof got) {
        int r = recv(shared_fd, got + n, sizeof got - n, 0);
        if (r <= 0) break;
        n += r;
    }
    int bad = 0, next[4] = {0};
    for (size_t i = 0; i + 12 <= n; i += 12) {
        int id, seq;
        if (sscanf(got + i, "W%d:%8d;", &id, &seq) != 2 || id < 0 || id > 3 || seq != next[id]++) bad++;
    }
    void *wr;
    int wbad = 0;
    for (int i = 0; i < 4; i++) {
        pthread_join(w[i], &wr);
        if (wr) wbad++;
    }
    CHECK("one connection, four writer threads: every record whole and in order per writer",
          n == sizeof got && bad == 0 && wbad == 0, "%zu of %zu bytes, %d bad records, %d writers failed", n, sizeof got, bad, wbad);
    close(shared_fd);

    /* 3. */
    blocked_call("recv, another thread closes it", dial(), 0, 0);
    int s = dial();
    blocked_call("recv, another thread shuts it down", s, 1, 0);
    close(s);
    int l = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in any = {.sin_family = AF_INET, .sin_port = 0};
    bind(l, (struct sockaddr *)&any, sizeof any);
    listen(l, 4);
    blocked_call("accept, another thread shuts it down", l, 2, 1);
    close(l);
    blocked_call("epoll_wait, another thread closes the socket", dial(), 0, 2);

    /* 1. */
    pipe(handoff);
    pthread_t workers[2];
    for (int i = 0; i < 2; i++) pthread_create(&workers[i], NULL, worker, NULL);
    l = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    any.sin_port = htons(atoi(argv[3]));
    if (bind(l, (struct sockaddr *)&any, sizeof any) != 0 || listen(l, 64) != 0) {
        perror("listen");
        return 1;
    }
    printf("listening\n");
    fflush(stdout);
    for (int i = 0; i < conns; i++) {
        int fd = accept(l, NULL, NULL);
        if (fd < 0) {
            perror("accept");
            break;
        }
        (void)!write(handoff[1], &fd, sizeof fd);
    }
    int stop = -1;
    for (int i = 0; i < 2; i++) (void)!write(handoff[1], &stop, sizeof stop);
    for (int i = 0; i < 2; i++) pthread_join(workers[i], NULL);
    CHECK("accept in the main thread, serve in worker threads", served == conns, "served %d of %d", served, conns);
    printf("%s: %d failure(s)\n", failures ? "FAILED" : "ALL PASSED", failures);
    return failures ? 1 : 0;
}
