/* A pre-forking server under the shim (service mode): the parent listens on
 * corestack (the wildcard, port PORT), makes the listener non-blocking and
 * forks NWORKERS workers. Each worker drops to uid/gid 65534 (before it
 * touches the listener), makes its own epoll, adds the inherited listener,
 * and serves: it accepts, reads one message, echoes it and closes; it prints
 * "served W PID" per connection. The parent never waits in accept: every
 * 50 ms it tries a non-blocking accept (a connection given to it is served
 * and printed as "served master PID") and reaps its workers. A worker exits
 * after IDLE_MS without a connection ("worker W exits served N").
 *
 * usage: prefork PORT */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NWORKERS 3
#define IDLE_MS 5000

/* Reads one message (up to 255 bytes), echoes it, closes. 0 on success. */
static int serve(int c) {
    char b[256];
    ssize_t n = recv(c, b, sizeof b, 0);
    int ok = n > 0 && send(c, b, (size_t)n, MSG_NOSIGNAL) == n;
    close(c);
    return ok ? 0 : -1;
}

static void worker(int w, int l) {
    if (setgid(65534) || setuid(65534)) {
        printf("worker %d cannot drop privileges: %s\n", w, strerrorname_np(errno));
        _exit(1);
    }
    int ep = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = l};
    if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, l, &ev)) {
        printf("worker %d epoll: %s\n", w, strerrorname_np(errno));
        _exit(1);
    }
    printf("worker %d pid %d uid %d ready\n", w, (int)getpid(), (int)getuid());
    int served = 0;
    for (;;) {
        struct epoll_event out;
        int n = epoll_wait(ep, &out, 1, IDLE_MS);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            printf("worker %d epoll_wait: %s\n", w, strerrorname_np(errno));
            _exit(1);
        }
        if (n == 0)
            break;
        for (;;) {
            int c = accept4(l, NULL, NULL, SOCK_CLOEXEC);
            if (c < 0) {
                if (errno != EAGAIN && errno != EWOULDBLOCK) {
                    printf("worker %d accept: %s\n", w, strerrorname_np(errno));
                    _exit(1);
                }
                break;
            }
            if (serve(c) == 0) {
                served++;
                printf("served %d %d\n", w, (int)getpid());
            } else {
                printf("worker %d echo failed\n", w);
            }
        }
    }
    printf("worker %d exits served %d\n", w, served);
    fflush(stdout);
    _exit(0);
}

int main(int argc, char **argv) {
    int port = argc == 2 ? atoi(argv[1]) : 0;
    if (port <= 0 || port > 65535) {
        fprintf(stderr, "usage: prefork PORT\n");
        return 2;
    }
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((unsigned short)port)};
    setvbuf(stdout, NULL, _IOLBF, 0);
    int l = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (l < 0 || bind(l, (void *)&a, sizeof a) || listen(l, 128)) {
        perror("listen");
        return 1;
    }
    fcntl(l, F_SETFL, fcntl(l, F_GETFL) | O_NONBLOCK);
    for (int w = 0; w < NWORKERS; w++) {
        pid_t p = fork();
        if (p < 0) {
            perror("fork");
            return 1;
        }
        if (p == 0)
            worker(w, l);
    }
    printf("master pid %d listening\n", (int)getpid());
    int left = NWORKERS;
    while (left > 0) {
        int c = accept4(l, NULL, NULL, SOCK_CLOEXEC);
        if (c >= 0 && serve(c) == 0)
            printf("served master %d\n", (int)getpid());
        int st;
        while (waitpid(-1, &st, WNOHANG) > 0)
            left--;
        struct timespec t = {.tv_nsec = 50 * 1000 * 1000};
        nanosleep(&t, NULL);
    }
    printf("master: every worker exited\n");
    return 0;
}
