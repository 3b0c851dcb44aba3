/* SO_LINGER {1, 0} and the keepalive timing options on corestack connections
 * (run under the shim, in service mode and embedded mode). Against
 * linger_peer.py on PEER:PORT:
 * 1. a connection closed with SO_LINGER {1, 0}: the peer sees a reset;
 * 2. a connection closed normally: the peer sees end of file;
 * 3. a connection with SO_KEEPALIVE, TCP_KEEPIDLE 1, TCP_KEEPINTVL 1,
 *    TCP_KEEPCNT 2 waits in recv (SO_RCVTIMEO 15 s) after printing
 *    "keepalive ready"; the test then cuts the link, and the unanswered
 *    probes end the connection with ETIMEDOUT after about 3 s (Linux's
 *    default timing would wait two hours, and the recv would time out).
 *
 * usage: linger PEER PORT */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static int dial(struct sockaddr_in *a, const char *msg) {
    int c = socket(AF_INET, SOCK_STREAM, 0);
    if (c < 0 || connect(c, (void *)a, sizeof *a)) {
        printf("connect: %s\n", strerrorname_np(errno));
        exit(1);
    }
    if (send(c, msg, strlen(msg), 0) != (ssize_t)strlen(msg)) {
        printf("send: %s\n", strerrorname_np(errno));
        exit(1);
    }
    return c;
}

static long long now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000LL + t.tv_nsec / 1000000;
}

int main(int argc, char **argv) {
    struct sockaddr_in a = {.sin_family = AF_INET};
    if (argc != 3 || inet_pton(AF_INET, argv[1], &a.sin_addr) != 1 || atoi(argv[2]) <= 0) {
        fprintf(stderr, "usage: linger PEER PORT\n");
        return 2;
    }
    a.sin_port = htons(atoi(argv[2]));
    setvbuf(stdout, NULL, _IOLBF, 0);
    char b[16];

    int c = dial(&a, "reset me\n");
    /* The peer answers once it has read the message: nothing is left unread here. */
    if (recv(c, b, sizeof b, 0) <= 0) { printf("recv 1: %s\n", strerrorname_np(errno)); return 1; }
    struct linger lg = {1, 0};
    printf("linger set %d\n", setsockopt(c, SOL_SOCKET, SO_LINGER, &lg, sizeof lg));
    printf("close 1 %d\n", close(c));

    c = dial(&a, "fin me\n");
    if (recv(c, b, sizeof b, 0) <= 0) { printf("recv 2: %s\n", strerrorname_np(errno)); return 1; }
    printf("close 2 %d\n", close(c));

    c = dial(&a, "keep me\n");
    if (recv(c, b, sizeof b, 0) <= 0) { printf("recv 3: %s\n", strerrorname_np(errno)); return 1; }
    int one = 1, idle = 1, intvl = 1, cnt = 2;
    struct timeval tv = {.tv_sec = 15};
    if (setsockopt(c, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one) ||
        setsockopt(c, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle) ||
        setsockopt(c, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof intvl) ||
        setsockopt(c, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof cnt) ||
        setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv)) {
        printf("keepalive options: %s\n", strerrorname_np(errno));
        return 1;
    }
    printf("keepalive ready\n");
    long long t0 = now_ms();
    int r = recv(c, b, sizeof b, 0);
    printf("keepalive recv %d %s after %lld ms\n", r, r < 0 ? strerrorname_np(errno) : "",
           now_ms() - t0);
    close(c);
    return 0;
}
