/* LD_PRELOAD shim for local launches: a bind() to the wildcard address binds to loopback.
 *
 * Courier and Reverb servers (as shipped in launchpad 0.5.2 / dm-reverb 0.7.3) always listen on
 * "[::]:port", every interface, with no option to choose. A local run needs none of them, so
 * the launcher preloads this into its node processes: 0.0.0.0 becomes 127.0.0.1 and [::]
 * becomes ::ffff:127.0.0.1 (IPv4 loopback through a dual-stack socket, which is what
 * "localhost:port" clients reach). Any other address is passed through unchanged.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dlfcn.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>

typedef int (*bind_fn)(int, const struct sockaddr *, socklen_t);

int bind(int fd, const struct sockaddr *addr, socklen_t len) {
  static bind_fn real_bind = NULL;
  if (real_bind == NULL) real_bind = (bind_fn)dlsym(RTLD_NEXT, "bind");
  if (addr != NULL && addr->sa_family == AF_INET && len >= sizeof(struct sockaddr_in)) {
    struct sockaddr_in a;
    memcpy(&a, addr, sizeof a);
    if (a.sin_addr.s_addr == htonl(INADDR_ANY)) {
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      return real_bind(fd, (const struct sockaddr *)&a, sizeof a);
    }
  } else if (addr != NULL && addr->sa_family == AF_INET6 && len >= sizeof(struct sockaddr_in6)) {
    struct sockaddr_in6 a;
    memcpy(&a, addr, sizeof a);
    if (IN6_IS_ADDR_UNSPECIFIED(&a.sin6_addr)) {
      int v6only = 0;
      setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &v6only, sizeof v6only);
      memset(&a.sin6_addr, 0, sizeof a.sin6_addr);
      a.sin6_addr.s6_addr[10] = 0xff;
      a.sin6_addr.s6_addr[11] = 0xff;
      a.sin6_addr.s6_addr[12] = 127;
      a.sin6_addr.s6_addr[15] = 1;
      return real_bind(fd, (const struct sockaddr *)&a, sizeof a);
    }
  }
  return real_bind(fd, addr, len);
}
