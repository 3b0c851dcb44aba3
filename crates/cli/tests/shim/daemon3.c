/* A server that daemonizes with daemon(3) after it listens (glibc's daemon forks through
 * glibc's own internal fork, which the shim interposes daemon(3) to see): it listens on
 * corestack (the wildcard, port PORT), calls daemon(1, 1) (keeps the working directory and
 * stdio, so that it can still print), and the daemon serves: it accepts, reads one message,
 * echoes it and closes, printing "served PID" per connection, until SECONDS pass without a
 * connection. Prints "daemon PID ready" once it serves.
 *
 * usage: daemon3 PORT SECONDS */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int main(int argc, char **argv) {
    int port = argc == 3 ? atoi(argv[1]) : 0;
    int idle_ms = argc == 3 ? atoi(argv[2]) * 1000 : 0;
    if (port <= 0 || port > 65535 || idle_ms <= 0) {
        fprintf(stderr, "usage: daemon3 PORT SECONDS\n");
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((unsigned short)port)};
    int l = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (l < 0 || bind(l, (void *)&a, sizeof a) || listen(l, 128)) {
        perror("listen");
        return 1;
    }
    if (daemon(1, 1) != 0) {
        perror("daemon");
        return 1;
    }
    printf("daemon %d ready\n", (int)getpid());
    for (;;) {
        struct pollfd p = {.fd = l, .events = POLLIN};
        int r = poll(&p, 1, idle_ms);
        if (r == 0)
            break;
        if (r < 0) {
            if (errno == EINTR)
                continue;
            printf("poll: %s\n", strerrorname_np(errno));
            return 1;
        }
        int c = accept(l, NULL, NULL);
        if (c < 0) {
            printf("accept: %s\n", strerrorname_np(errno));
            return 1;
        }
        char b[256];
        ssize_t n = recv(c, b, sizeof b, 0);
        if (n > 0 && send(c, b, (size_t)n, MSG_NOSIGNAL) == n)
            printf("served %d\n", (int)getpid());
        close(c);
    }
    printf("daemon %d exits\n", (int)getpid());
    return 0;
}
