/* TCP_CORK corks: bytes written while it is set do not leave (the echo
 * server sends nothing back) until it is cleared, then they all arrive.
 * And an option corestack does not honour, set before connect, is said
 * on stderr when the socket goes to corestack (the shim only).
 *
 * usage: cork PEER PORT   (PEER echoes TCP on PORT)
 * Prints one line per step; exit status 0 when the steps ran. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include "check.h"

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

int main(int argc, char **argv) {
    struct sockaddr_in peer = peer_args(argc, argv, 3, "cork PEER PORT");

    int c = socket(AF_INET, SOCK_STREAM, 0);
    /* SO_PRIORITY: the kernel takes it, corestack does not honour it. */
    int prio = 3;
    printf("SO_PRIORITY before connect %d\n", setsockopt(c, SOL_SOCKET, SO_PRIORITY, &prio, sizeof prio));
    if (connect(c, (struct sockaddr *)&peer, sizeof peer) < 0) {
        printf("connect failed %s\n", strerror(errno));
        return 1;
    }
    int one = 1, zero = 0;
    printf("TCP_CORK 1 %d\n", setsockopt(c, IPPROTO_TCP, TCP_CORK, &one, sizeof one));
    printf("send %zd\n", send(c, "ab", 2, 0));
    printf("send %zd\n", send(c, "cd", 2, 0));
    /* Linux holds corked bytes at most 200 ms; look for 100 ms. */
    struct pollfd p = {.fd = c, .events = POLLIN};
    int r = poll(&p, 1, 100);
    printf("corked: echo within 100 ms %s\n", r == 0 ? "none" : "came");
    fflush(stdout);
    double t0 = now_ms();
    printf("TCP_CORK 0 %d\n", setsockopt(c, IPPROTO_TCP, TCP_CORK, &zero, sizeof zero));
    char b[16] = {0};
    size_t got = 0;
    while (got < 4 && now_ms() - t0 < 3000) {
        if (poll(&p, 1, 3000) <= 0) break;
        ssize_t n = recv(c, b + got, sizeof b - 1 - got, 0);
        if (n <= 0) break;
        got += n;
    }
    double dt = now_ms() - t0;
    printf("uncorked: echo %s %s\n", b, dt < 100 ? "within 100 ms" : "late");
    fprintf(stderr, "uncork to echo %.1f ms\n", dt);
    close(c);
    printf("done\n");
    return 0;
}
