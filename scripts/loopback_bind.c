/* Loaded with LD_PRELOAD in front of a server that can only bind every interface (0.0.0.0 / ::):
 * its wildcard binds become loopback binds (127.0.0.1 / ::1), so a test or local judge server is
 * never reachable from the network. retbench still checks the bound address after start-up and
 * refuses to use a server that listens anywhere else. Built by scripts/setup.sh. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>

int bind(int fd, const struct sockaddr *addr, socklen_t len) {
    static int (*real_bind)(int, const struct sockaddr *, socklen_t);
    if (!real_bind) real_bind = (int (*)(int, const struct sockaddr *, socklen_t))dlsym(RTLD_NEXT, "bind");
    if (addr && addr->sa_family == AF_INET && len >= (socklen_t)sizeof(struct sockaddr_in)) {
        struct sockaddr_in a;
        memcpy(&a, addr, sizeof a);
        if (a.sin_addr.s_addr == htonl(INADDR_ANY)) a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        return real_bind(fd, (const struct sockaddr *)&a, sizeof a);
    }
    if (addr && addr->sa_family == AF_INET6 && len >= (socklen_t)sizeof(struct sockaddr_in6)) {
        struct sockaddr_in6 a;
        memcpy(&a, addr, sizeof a);
        if (!memcmp(&a.sin6_addr, &in6addr_any, sizeof a.sin6_addr)) a.sin6_addr = in6addr_loopback;
        return real_bind(fd, (const struct sockaddr *)&a, sizeof a);
    }
    return real_bind(fd, addr, len);
}
