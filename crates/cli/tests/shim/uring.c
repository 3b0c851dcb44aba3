/* io_uring under the shim (issue 21): `uring ring` expects rings to be made
 * (no shim, or a shim that does not serve the process), `uring refused`
 * expects every way of making one to fail with ENOSYS, as on a kernel
 * without io_uring.
 *
 * Always: glibc's syscall(SYS_io_uring_setup, 4, &params). Built with
 * -DWITH_LIBURING (and liburing linked): also liburing's
 * io_uring_queue_init, io_uring_queue_init_params, io_uring_setup (these
 * return -errno) and io_uring_get_probe (NULL when no ring can be made).
 *
 * In `ring` mode a kernel that refuses io_uring (kernel.io_uring_disabled,
 * a seccomp filter) makes it print "SKIP <why>" and exit 0. Ends with
 * "ALL PASSED" or "FAILED"; exit status 1 on a failure, 2 on bad usage. */
#define _GNU_SOURCE
#include "check.h"
#include <errno.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#ifdef WITH_LIBURING
#include <liburing.h>
#else
#include <linux/io_uring.h>
#endif

#ifdef WITH_LIBURING
/* Checks what liburing's `call` returned (r, 0 or -errno): a ring when `want_ring`, else
 * -ENOSYS; a ring it made is torn down. */
static void check_queue_init(const char *call, int want_ring, int r, struct io_uring *ring) {
    char name[96];
    if (want_ring) {
        snprintf(name, sizeof name, "%s makes a ring", call);
        CHECK(name, r == 0, "got %d (%s)", r, strerror(-r));
    } else {
        snprintf(name, sizeof name, "%s fails with -ENOSYS", call);
        CHECK(name, r == -ENOSYS, "got %d", r);
    }
    if (r == 0)
        io_uring_queue_exit(ring);
}
#endif

int main(int argc, char **argv) {
    if (argc != 2 || (strcmp(argv[1], "ring") != 0 && strcmp(argv[1], "refused") != 0)) {
        fprintf(stderr, "usage: uring ring|refused\n");
        return 2;
    }
    int want_ring = strcmp(argv[1], "ring") == 0;

    struct io_uring_params p;
    memset(&p, 0, sizeof p);
    errno = 0;
    long fd = syscall(SYS_io_uring_setup, 4, &p);
    int err = errno;
    if (want_ring) {
        if (fd < 0) {
            printf("SKIP the kernel refuses io_uring_setup: %s\n", strerror(err));
            return 0;
        }
        CHECK("syscall(SYS_io_uring_setup) makes a ring", p.sq_entries >= 4,
              "fd %ld, sq_entries %u", fd, p.sq_entries);
        close((int)fd);
    } else {
        CHECK("syscall(SYS_io_uring_setup) fails with ENOSYS", fd == -1 && err == ENOSYS,
              "got %ld, errno %d (%s)", fd, err, strerror(err));
        if (fd >= 0)
            close((int)fd);
    }
    /* Other numbers still pass through the interposed syscall(). */
    CHECK("syscall(SYS_getpid) passes through", syscall(SYS_getpid) == getpid(), "pid differs");

#ifdef WITH_LIBURING
    struct io_uring ring;
    int r = io_uring_queue_init(4, &ring, 0);
    check_queue_init("io_uring_queue_init", want_ring, r, &ring);

    memset(&p, 0, sizeof p);
    r = io_uring_queue_init_params(4, &ring, &p);
    check_queue_init("io_uring_queue_init_params", want_ring, r, &ring);

    memset(&p, 0, sizeof p);
    r = io_uring_setup(4, &p);
    if (want_ring) {
        CHECK("io_uring_setup (liburing) makes a ring", r >= 0, "got %d (%s)", r, strerror(-r));
    } else {
        CHECK("io_uring_setup (liburing) fails with -ENOSYS", r == -ENOSYS, "got %d", r);
    }
    if (r >= 0)
        close(r);

    struct io_uring_probe *probe = io_uring_get_probe();
    if (want_ring) {
        CHECK("io_uring_get_probe gives a probe", probe != NULL, "got NULL");
    } else {
        CHECK("io_uring_get_probe gives NULL", probe == NULL, "got a probe");
    }
    if (probe != NULL)
        io_uring_free_probe(probe);
#endif

    printf(failures ? "FAILED\n" : "ALL PASSED\n");
    return failures != 0;
}
