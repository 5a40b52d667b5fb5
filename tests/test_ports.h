/*
 * test_ports.h - TCP ports for 127.0.0.1 that no other test of this
 * user's runs was given: the C side of tap.sh's ccs_ports, sharing its
 * counter ($TMPDIR/ccshim-test-ports-UID, under flock on the same name +
 * .lock; per user, so that another user's files in /tmp do not stop it).
 * Ports derived from the process id collided when make -j started two tests
 * whose pids were one or two apart.
 */
#ifndef CCS_TEST_PORTS_H
#define CCS_TEST_PORTS_H

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <unistd.h>

/* Whether a listening socket could be bound to 127.0.0.1:PORT now. */
static inline int ccs_test_port_free(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1, ok;
    if (fd < 0)
        return 0;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ok = bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0;
    close(fd);
    return ok;
}

/* The first of N consecutive free ports in 20000-31999 (below the kernel's
 * ephemeral range), or -1 when the counter cannot be locked. */
static inline int ccs_test_ports(int n)
{
    const char *tmp = getenv("TMPDIR");
    char path[512], lock[520];
    snprintf(path, sizeof path, "%s/ccshim-test-ports-%u", tmp && *tmp ? tmp : "/tmp", (unsigned)getuid());
    snprintf(lock, sizeof lock, "%s.lock", path);
    int lk = open(lock, O_CREAT | O_WRONLY | O_APPEND | O_CLOEXEC, 0666);
    if (lk < 0 || flock(lk, LOCK_EX) != 0) {
        if (lk >= 0)
            close(lk);
        return -1;
    }
    int p = -1;
    FILE *f = fopen(path, "r");
    if (!f || fscanf(f, "%d", &p) != 1 || p < 20000)
        p = 20000 + (int)(getpid() % 12000);
    if (f)
        fclose(f);
    for (int tries = 0; tries < 1000; tries++) {
        if (p + n > 32000)
            p = 20000;
        int i = 0;
        while (i < n && ccs_test_port_free(p + i))
            i++;
        if (i == n)
            break;
        p += i + 1;
    }
    f = fopen(path, "w");
    if (f) {
        fprintf(f, "%d\n", p + n);
        fclose(f);
    }
    close(lk); /* releases the lock */
    return p;
}

#endif /* CCS_TEST_PORTS_H */
