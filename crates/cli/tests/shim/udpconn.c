/* UDP connect and sendto across both sides (review finding 6), as on Linux:
 * a socket bound to 0.0.0.0 connects to a peer corestack routes and to a
 * loopback peer, send/recv going through the side that reaches each; an
 * auto-bound socket (first sendto to the corestack peer) can sendto
 * loopback too; a socket connected first, unbound, can connect again to
 * loopback.
 *
 * usage: udpconn PEER PORT   (PEER echoes UDP on PORT; a loopback echo on
 * 127.0.0.1:LPORT runs in a thread of this program)
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
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "check.h"

#define LPORT 9917
static int echo_fd;

/* The loopback echo: at most 100 datagrams, at most 10 s idle. */
static void *loop_echo(void *arg) {
    (void)arg;
    char b[256];
    for (int i = 0; i < 100; i++) {
        struct sockaddr_in from;
        socklen_t fl = sizeof from;
        ssize_t n = recvfrom(echo_fd, b, sizeof b, 0, (struct sockaddr *)&from, &fl);
        if (n < 0) break;
        sendto(echo_fd, b, n, 0, (struct sockaddr *)&from, fl);
    }
    return NULL;
}

/* Sends `msg` (connected when to is NULL) and waits at most 2 s for its
 * echo; returns 1 when the echo came back, from `want` when given. */
static int echo_ok(int s, const char *msg, struct sockaddr_in *to, struct sockaddr_in *want,
                   char *why, size_t whylen) {
    ssize_t r = to ? sendto(s, msg, strlen(msg), 0, (struct sockaddr *)to, sizeof *to)
                   : send(s, msg, strlen(msg), 0);
    if (r < 0) {
        snprintf(why, whylen, "send: %s", strerror(errno));
        return 0;
    }
    struct pollfd p = {.fd = s, .events = POLLIN};
    if (poll(&p, 1, 2000) != 1) {
        snprintf(why, whylen, "no echo within 2 s");
        return 0;
    }
    char b[64];
    struct sockaddr_in from;
    socklen_t fl = sizeof from;
    ssize_t n = recvfrom(s, b, sizeof b, MSG_DONTWAIT, (struct sockaddr *)&from, &fl);
    if (n != (ssize_t)strlen(msg) || memcmp(b, msg, n) != 0) {
        snprintf(why, whylen, "recv %zd (%s)", n, n < 0 ? strerror(errno) : "wrong bytes");
        return 0;
    }
    if (want && (from.sin_addr.s_addr != want->sin_addr.s_addr || from.sin_port != want->sin_port)) {
        snprintf(why, whylen, "echo from %s:%d", inet_ntoa(from.sin_addr), ntohs(from.sin_port));
        return 0;
    }
    return 1;
}

int main(int argc, char **argv) {
    struct sockaddr_in peer = peer_args(argc, argv, 3, "udpconn PEER PORT");
    struct sockaddr_in lo = {.sin_family = AF_INET, .sin_port = htons(LPORT)};
    inet_pton(AF_INET, "127.0.0.1", &lo.sin_addr);
    struct sockaddr_in any = {.sin_family = AF_INET};
    struct sockaddr unspec = {.sa_family = AF_UNSPEC};

    echo_fd = socket(AF_INET, SOCK_DGRAM, 0);
    struct timeval tv = {.tv_sec = 10};
    setsockopt(echo_fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    if (bind(echo_fd, (struct sockaddr *)&lo, sizeof lo) < 0) {
        printf("FAIL loopback echo bind: %s\n", strerror(errno));
        return 1;
    }
    pthread_t t;
    pthread_create(&t, NULL, loop_echo, NULL);
    char why[128] = "";

    /* 1. Wildcard-bound socket: connect to the corestack peer. */
    int s = socket(AF_INET, SOCK_DGRAM, 0);
    bind(s, (struct sockaddr *)&any, sizeof any);
    int r = connect(s, (struct sockaddr *)&peer, sizeof peer);
    CHECK("wildcard-bound: connect to the peer", r == 0, "%s", strerror(errno));
    CHECK("wildcard-bound, connected to the peer: send/recv", echo_ok(s, "a1", NULL, NULL, why, sizeof why), "%s", why);
    struct sockaddr_in got;
    socklen_t gl = sizeof got;
    r = getpeername(s, (struct sockaddr *)&got, &gl);
    CHECK("getpeername says the peer", r == 0 && got.sin_addr.s_addr == peer.sin_addr.s_addr && got.sin_port == peer.sin_port,
          "r %d %s", r, strerror(errno));

    /* 2. The same socket connects to loopback. */
    r = connect(s, (struct sockaddr *)&lo, sizeof lo);
    CHECK("wildcard-bound: connect again, to loopback", r == 0, "%s", strerror(errno));
    CHECK("wildcard-bound, connected to loopback: send/recv", echo_ok(s, "a2", NULL, &lo, why, sizeof why), "%s", why);
    gl = sizeof got;
    r = getpeername(s, (struct sockaddr *)&got, &gl);
    CHECK("getpeername says loopback", r == 0 && got.sin_port == lo.sin_port, "r %d %s", r, strerror(errno));

    /* 3. Dissolved: sendto either side. */
    r = connect(s, &unspec, sizeof unspec);
    CHECK("connect AF_UNSPEC", r == 0, "%s", strerror(errno));
    CHECK("unconnected: sendto the peer", echo_ok(s, "a3", &peer, &peer, why, sizeof why), "%s", why);
    CHECK("unconnected: sendto loopback", echo_ok(s, "a4", &lo, &lo, why, sizeof why), "%s", why);
    close(s);

    /* 4. Auto-bound by a sendto to the peer, then sendto loopback. */
    s = socket(AF_INET, SOCK_DGRAM, 0);
    CHECK("auto-bound: sendto the peer", echo_ok(s, "b1", &peer, &peer, why, sizeof why), "%s", why);
    CHECK("auto-bound: sendto loopback", echo_ok(s, "b2", &lo, &lo, why, sizeof why), "%s", why);
    close(s);

    /* 5. Unbound, connected to the peer, then to loopback. */
    s = socket(AF_INET, SOCK_DGRAM, 0);
    r = connect(s, (struct sockaddr *)&peer, sizeof peer);
    CHECK("unbound: connect to the peer", r == 0, "%s", strerror(errno));
    CHECK("unbound, connected to the peer: send/recv", echo_ok(s, "c1", NULL, NULL, why, sizeof why), "%s", why);
    r = connect(s, (struct sockaddr *)&lo, sizeof lo);
    CHECK("auto-bound: connect again, to loopback", r == 0, "%s", strerror(errno));
    CHECK("auto-bound, connected to loopback: send/recv", echo_ok(s, "c2", NULL, &lo, why, sizeof why), "%s", why);
    close(s);

    shutdown(echo_fd, SHUT_RDWR);
    close(echo_fd);
    printf(failures ? "SOME FAILED\n" : "ALL PASSED\n");
    return failures ? 1 : 0;
}
