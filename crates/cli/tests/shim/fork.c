/* fork under the shim (embedded mode): the child has no engine, so its
 * inherited corestack socket answers ENETDOWN (poll reports it ready with
 * POLLERR|POLLHUP so that the next call says so) and closes cleanly; its
 * new sockets stay in the kernel; a forked helper that only execs costs the
 * parent nothing; the parent's connection keeps working throughout; a child
 * that outlives the parent (3 s) does not hold its association (service
 * mode: the daemon sees the parent leave when it exits).
 *
 * usage: fork PEER PORT   (PEER echoes TCP on PORT) */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: fork PEER PORT\n");
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(atoi(argv[2]))};
    inet_pton(AF_INET, argv[1], &a.sin_addr);
    int c = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(c, (void *)&a, sizeof a)) { perror("connect"); return 1; }
    send(c, "hi", 2, 0);
    pid_t p = fork();
    if (p == 0) {
        char b[8];
        int r = recv(c, b, 8, 0);
        printf("child recv %d %s\n", r, r < 0 ? strerrorname_np(errno) : "");
        r = send(c, "x", 1, MSG_NOSIGNAL);
        printf("child send %d %s\n", r, r < 0 ? strerrorname_np(errno) : "");
        struct pollfd pf = {.fd = c, .events = POLLIN};
        r = poll(&pf, 1, 1000);
        printf("child poll %d revents %#x\n", r, pf.revents);
        printf("child close %d\n", close(c));
        int k = socket(AF_INET, SOCK_STREAM, 0);
        r = connect(k, (void *)&a, sizeof a);
        printf("child new socket connect %d %s\n", r, r < 0 ? strerrorname_np(errno) : "");
        fflush(stdout);
        _exit(0);
    }
    int st;
    waitpid(p, &st, 0);
    char b[8];
    int r = recv(c, b, 8, 0);
    printf("parent recv %d\n", r);
    pid_t q = fork();
    if (q == 0) execlp("true", "true", NULL);
    waitpid(q, &st, 0);
    printf("helper exec exit %d\n", WEXITSTATUS(st));
    send(c, "ok", 2, 0);
    r = recv(c, b, 8, 0);
    printf("parent still works %d\n", r);
    /* A child that outlives its parent (a background job): it must not keep
     * the parent's corestack association alive. It lets go of stdout and
     * stderr so that whoever reads them sees the parent's end. */
    if (fork() == 0) {
        int null = open("/dev/null", O_WRONLY);
        dup2(null, 1);
        dup2(null, 2);
        sleep(3);
        _exit(0);
    }
    return 0;
}
