/* Signals into blocked socket calls. A helper thread (SIGTERM blocked in
 * it, so the signal goes to the main thread) sends SIGTERM to the process
 * while the main thread blocks, then (for the SA_RESTART cases) makes the
 * call complete. Prints one line per case: the case, the call's result and
 * errno. Run on the kernel stack and under the shim: the outputs must be
 * equal (and they are checked against Linux's documented behaviour).
 *
 * usage: signals PEER PORT LISTEN_PORT   (PEER echoes TCP on PORT) */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <unistd.h>

static volatile sig_atomic_t got;
static void on_term(int s) { (void)s; got++; }

static void handler(int restart) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_term;
    sa.sa_flags = restart ? SA_RESTART : 0;
    sigaction(SIGTERM, &sa, NULL);
}

enum action { NOTHING, SEND, CONNECT };
struct job { int fd; enum action then; int port; };

static void *helper(void *arg) {
    struct job *j = arg;
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);
    usleep(300000);
    kill(getpid(), SIGTERM);
    usleep(300000);
    if (j->then == SEND) {
        send(j->fd, "x", 1, 0);
    } else if (j->then == CONNECT) {
        int c = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(j->port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        if (connect(c, (struct sockaddr *)&a, sizeof a) != 0) perror("helper connect");
        usleep(300000);
        close(c);
    }
    return NULL;
}

static pthread_t start(int fd, enum action then, int port) {
    static struct job j;
    j = (struct job){fd, then, port};
    pthread_t t;
    pthread_create(&t, NULL, helper, &j);
    return t;
}

static void report(const char *what, long r, int e) {
    printf("%-44s -> %s (signals %d)\n", what, r >= 0 ? "ok" : strerrorname_np(e), (int)got);
    fflush(stdout);
    got = 0;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: signals PEER PORT LISTEN_PORT\n");
        return 2;
    }
    int lport = atoi(argv[3]);
    struct sockaddr_in peer = {.sin_family = AF_INET, .sin_port = htons(atoi(argv[2]))};
    inet_pton(AF_INET, argv[1], &peer.sin_addr);
    int c = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(c, (struct sockaddr *)&peer, sizeof peer) != 0) {
        perror("connect");
        return 1;
    }
    int l = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in any = {.sin_family = AF_INET, .sin_port = htons(lport)};
    if (bind(l, (struct sockaddr *)&any, sizeof any) != 0 || listen(l, 16) != 0) {
        perror("listen");
        return 1;
    }
    char b[16];
    pthread_t t;
    long r;

    handler(0);
    t = start(c, NOTHING, 0);
    r = accept(l, NULL, NULL);
    report("accept, handler without SA_RESTART", r, errno);
    pthread_join(t, NULL);

    t = start(c, NOTHING, 0);
    r = recv(c, b, sizeof b, 0);
    report("recv, handler without SA_RESTART", r, errno);
    pthread_join(t, NULL);

    int ep = epoll_create1(0);
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = 1};
    epoll_ctl(ep, EPOLL_CTL_ADD, l, &ev);
    ev.data.u64 = 2;
    epoll_ctl(ep, EPOLL_CTL_ADD, c, &ev);
    handler(1);
    t = start(c, NOTHING, 0);
    r = epoll_wait(ep, &ev, 1, -1);
    report("epoll_wait, handler with SA_RESTART", r, errno);
    pthread_join(t, NULL);

    t = start(c, NOTHING, 0);
    struct pollfd p = {.fd = c, .events = POLLIN};
    r = poll(&p, 1, -1);
    report("poll, handler with SA_RESTART", r, errno);
    pthread_join(t, NULL);

    t = start(c, NOTHING, 0);
    fd_set rs;
    FD_ZERO(&rs);
    FD_SET(c, &rs);
    r = select(c + 1, &rs, NULL, NULL, NULL);
    report("select, handler with SA_RESTART", r, errno);
    pthread_join(t, NULL);

    t = start(c, SEND, 0);
    r = recv(c, b, sizeof b, 0);
    report("recv, handler with SA_RESTART (restarts)", r, errno);
    pthread_join(t, NULL);

    t = start(c, CONNECT, lport);
    r = accept(l, NULL, NULL);
    report("accept, handler with SA_RESTART (restarts)", r, errno);
    if (r >= 0) close((int)r);
    pthread_join(t, NULL);

    struct timeval tv = {2, 0};
    setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    t = start(c, NOTHING, 0);
    r = recv(c, b, sizeof b, 0);
    report("recv with SO_RCVTIMEO, handler with SA_RESTART", r, errno);
    pthread_join(t, NULL);

    tv = (struct timeval){0, 200000};
    setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    r = recv(c, b, sizeof b, 0);
    report("recv with SO_RCVTIMEO 200 ms, no data", r, errno);

    /* SIGTERM's default action while blocked in epoll_wait ends the process. */
    signal(SIGTERM, SIG_DFL);
    printf("waiting for SIGTERM in epoll_wait\n");
    fflush(stdout);
    epoll_wait(ep, &ev, 1, 20000);
    printf("epoll_wait returned without SIGTERM\n");
    return 1;
}
