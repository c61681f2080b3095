/* LD_PRELOAD shim: a bind() to the wildcard address binds to one address instead.
 *
 * Courier and Reverb servers (as shipped in launchpad 0.5.2 / dm-reverb 0.7.3) always listen on
 * "[::]:port", every interface, with no option to choose. The launcher preloads this into its
 * node processes so that each listens on one address only:
 *   - local runs: loopback (0.0.0.0 becomes 127.0.0.1, [::] becomes ::ffff:127.0.0.1, IPv4
 *     loopback through a dual-stack socket, which is what "localhost:port" clients reach);
 *   - cluster runs: the node's own host address, named by the NTB_BIND_ADDRESS environment
 *     variable (an IPv4 or IPv6 literal, set by launch/runtime/loopback.py's preload_env to
 *     the address launch/cluster/replica.py resolves from CLUSTER_SPEC). An IPv4
 *     address is used for both socket families (IPv4-mapped on dual-stack sockets); an IPv6
 *     address only for IPv6 sockets, and an IPv4 wildcard bind then fails rather than listening
 *     everywhere.
 * The variable is read at each bind, so a process may set it before its servers start. An
 * unparsable value falls back to loopback. Any non-wildcard address is passed through unchanged.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

typedef int (*bind_fn)(int, const struct sockaddr *, socklen_t);

/* The target: an IPv4 address (is_v6 == 0) or an IPv6 one. */
struct target {
  int is_v6;
  struct in_addr v4;
  struct in6_addr v6;
};

static struct target bind_target(void) {
  struct target t;
  memset(&t, 0, sizeof t);
  t.v4.s_addr = htonl(INADDR_LOOPBACK);
  const char *want = getenv("NTB_BIND_ADDRESS");
  if (want == NULL || *want == '\0') return t;
  struct in_addr v4;
  struct in6_addr v6;
  if (inet_pton(AF_INET, want, &v4) == 1) {
    t.v4 = v4;
  } else if (inet_pton(AF_INET6, want, &v6) == 1) {
    if (IN6_IS_ADDR_V4MAPPED(&v6)) {
      memcpy(&t.v4.s_addr, &v6.s6_addr[12], 4);
    } else {
      t.is_v6 = 1;
      t.v6 = v6;
    }
  }
  return t;
}

int bind(int fd, const struct sockaddr *addr, socklen_t len) {
  static bind_fn real_bind = NULL;
  if (real_bind == NULL) real_bind = (bind_fn)dlsym(RTLD_NEXT, "bind");
  if (addr != NULL && addr->sa_family == AF_INET && len >= sizeof(struct sockaddr_in)) {
    struct sockaddr_in a;
    memcpy(&a, addr, sizeof a);
    if (a.sin_addr.s_addr == htonl(INADDR_ANY)) {
      struct target t = bind_target();
      if (t.is_v6) {
        errno = EADDRNOTAVAIL;
        return -1;
      }
      a.sin_addr = t.v4;
      return real_bind(fd, (const struct sockaddr *)&a, sizeof a);
    }
  } else if (addr != NULL && addr->sa_family == AF_INET6 && len >= sizeof(struct sockaddr_in6)) {
    struct sockaddr_in6 a;
    memcpy(&a, addr, sizeof a);
    if (IN6_IS_ADDR_UNSPECIFIED(&a.sin6_addr)) {
      struct target t = bind_target();
      if (t.is_v6) {
        a.sin6_addr = t.v6;
      } else {
        int v6only = 0;
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &v6only, sizeof v6only);
        memset(&a.sin6_addr, 0, sizeof a.sin6_addr);
        a.sin6_addr.s6_addr[10] = 0xff;
        a.sin6_addr.s6_addr[11] = 0xff;
        memcpy(&a.sin6_addr.s6_addr[12], &t.v4.s_addr, 4);
      }
      return real_bind(fd, (const struct sockaddr *)&a, sizeof a);
    }
  }
  return real_bind(fd, addr, len);
}
