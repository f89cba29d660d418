/* cycle.c: ADDJOB -> GETJOB -> ACKJOB cycles against a Disque server.
 *
 *     cycle HOST PORT CONNECTIONS WARMUP_S SECONDS
 *
 * Opens CONNECTIONS non-blocking TCP connections, all served by one epoll
 * loop. Connection i loops
 *
 *     ADDJOB q<i> <100-byte body> 0  ->  GETJOB FROM q<i>  ->  ACKJOB <id>
 *
 * sending each command only once the previous reply has arrived; the job ID
 * is read from the GETJOB reply. After WARMUP_S seconds it prints the line
 * "measuring"; SECONDS later it prints
 *
 *     cycles=N seconds=S cycles_per_s=R cpu_percent=C user_percent=U
 *
 * where C is this process's own CPU time (user + system) over the measured
 * window in percent of one core, U its user-space part, and exits. Near 100%
 * would mean the loader is the limit; most of C is the kernel sending on
 * loopback (each write delivers to the server's socket), U is this code.
 * An error reply or a lost connection ends it with status 1.
 * Built by benchmarks/bench_engine.py with `cc -O2`.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <fcntl.h>

#define BODY_SIZE 100
#define MAX_CONNECTIONS 1024
#define BUFFER_SIZE 4096   /* one reply at a time: a GETJOB reply is ~200 bytes */

enum step { ADD, GET, ACK };

struct conn {
    int fd;
    int index;
    enum step step;
    size_t used;                 /* bytes of the pending reply in buf */
    char buf[BUFFER_SIZE];
};

static char body[BODY_SIZE + 1];
static long long cycles;

static void die(const char *what) {
    fprintf(stderr, "cycle: %s\n", what);
    exit(1);
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* This process's CPU seconds so far: user, and user + system. */
static void cpu_times(double *user, double *total) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    *user = ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6;
    *total = *user + ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
}

/* Bytes up to and including the first '\n' in p[0..n), or 0 if there is none. */
static size_t line_len(const char *p, size_t n) {
    const char *nl = memchr(p, '\n', n);
    return nl ? (size_t)(nl - p) + 1 : 0;
}

/* Length of the complete RESP reply at p[0..n), or 0 if more bytes are needed. */
static size_t reply_len(const char *p, size_t n) {
    size_t head = line_len(p, n);
    if (head == 0) return 0;
    long count = atol(p + 1);
    switch (p[0]) {
    case '+': case '-': case ':':
        return head;
    case '$':
        if (count < 0) return head;
        return n >= head + count + 2 ? head + count + 2 : 0;
    case '*': {
        size_t used = head;
        for (long i = 0; i < count; i++) {
            size_t len = reply_len(p + used, n - used);
            if (len == 0) return 0;
            used += len;
        }
        return used;
    }
    }
    die("unexpected reply type");
    return 0;
}

/* The job ID in a complete GETJOB reply: [[queue, id, body]]. */
static const char *job_id(const char *r, size_t n, long *id_len) {
    if (r[0] != '*' || atol(r + 1) < 1) die("GETJOB returned no job");
    const char *p = r + line_len(r, n);           /* at "*3": the first job */
    p += line_len(p, n - (p - r));                /* at "$len": the queue */
    p += reply_len(p, n - (p - r));               /* at "$len": the ID */
    *id_len = atol(p + 1);
    return p + line_len(p, n - (p - r));
}

static void send_all(struct conn *c, const char *cmd, int len) {
    /* One short command on an idle connection always fits in the socket buffer. */
    if (write(c->fd, cmd, len) != len) die("short write");
}

static void send_addjob(struct conn *c) {
    char cmd[512], queue[32];
    int qlen = snprintf(queue, sizeof queue, "q%d", c->index);
    int len = snprintf(cmd, sizeof cmd,
                       "*4\r\n$6\r\nADDJOB\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n$1\r\n0\r\n",
                       qlen, queue, BODY_SIZE, body);
    c->step = ADD;
    send_all(c, cmd, len);
}

static void send_getjob(struct conn *c) {
    char cmd[128], queue[32];
    int qlen = snprintf(queue, sizeof queue, "q%d", c->index);
    int len = snprintf(cmd, sizeof cmd, "*3\r\n$6\r\nGETJOB\r\n$4\r\nFROM\r\n$%d\r\n%s\r\n",
                       qlen, queue);
    c->step = GET;
    send_all(c, cmd, len);
}

static void send_ackjob(struct conn *c, const char *id, long id_len) {
    char cmd[256];
    int len = snprintf(cmd, sizeof cmd, "*2\r\n$6\r\nACKJOB\r\n$%ld\r\n%.*s\r\n",
                       id_len, (int)id_len, id);
    c->step = ACK;
    send_all(c, cmd, len);
}

/* A whole reply to the connection's last command is in c->buf: send the next one. */
static void on_reply(struct conn *c, size_t len) {
    if (c->buf[0] == '-') {
        fprintf(stderr, "cycle: error reply: %.*s", (int)len, c->buf);
        exit(1);
    }
    long id_len;
    const char *id;
    switch (c->step) {
    case ADD: send_getjob(c); break;
    case GET: id = job_id(c->buf, len, &id_len); send_ackjob(c, id, id_len); break;
    case ACK: cycles++; send_addjob(c); break;
    }
}

/* Read until the reply to the connection's last command is whole, then answer it. */
static void on_readable(struct conn *c) {
    for (;;) {
        ssize_t got = read(c->fd, c->buf + c->used, BUFFER_SIZE - c->used);
        if (got == 0) die("connection closed by the server");
        if (got < 0) {
            if (errno == EAGAIN) return;
            die(strerror(errno));
        }
        c->used += got;
        size_t len = reply_len(c->buf, c->used);
        if (len == 0) {
            if (c->used == BUFFER_SIZE) die("reply larger than the buffer");
            continue;
        }
        if (len != c->used) die("more than one reply pending");
        c->used = 0;
        on_reply(c, len);
        return;   /* nothing more can arrive before the next command's reply */
    }
}

static int connect_to(const char *host, int port) {
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons(port)};
    if (inet_pton(AF_INET, host, &addr.sin_addr) != 1) die("bad host address");
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&addr, sizeof addr) < 0) die(strerror(errno));
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    return fd;
}

/* Run the event loop until `deadline` (seconds on now()'s clock). */
static void run_until(int ep, double deadline) {
    struct epoll_event events[64];
    double left;
    while ((left = deadline - now()) > 0) {
        int n = epoll_wait(ep, events, 64, (int)(left * 1000) + 1);
        if (n < 0 && errno != EINTR) die(strerror(errno));
        for (int i = 0; i < n; i++) on_readable(events[i].data.ptr);
    }
}

int main(int argc, char **argv) {
    if (argc != 6) die("usage: cycle HOST PORT CONNECTIONS WARMUP_S SECONDS");
    int connections = atoi(argv[3]);
    double warmup = atof(argv[4]), seconds = atof(argv[5]);
    if (connections < 1 || connections > MAX_CONNECTIONS) die("bad CONNECTIONS");
    memset(body, 'x', BODY_SIZE);

    static struct conn conns[MAX_CONNECTIONS];
    int ep = epoll_create1(0);
    for (int i = 0; i < connections; i++) {
        conns[i].fd = connect_to(argv[1], atoi(argv[2]));
        conns[i].index = i;
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &conns[i]};
        if (epoll_ctl(ep, EPOLL_CTL_ADD, conns[i].fd, &ev) < 0) die(strerror(errno));
        send_addjob(&conns[i]);
    }

    run_until(ep, now() + warmup);
    printf("measuring\n");
    fflush(stdout);
    long long cycles0 = cycles;
    double wall0 = now(), user0, cpu0, user1, cpu1;
    cpu_times(&user0, &cpu0);
    run_until(ep, wall0 + seconds);
    double wall = now() - wall0;
    cpu_times(&user1, &cpu1);
    printf("cycles=%lld seconds=%.3f cycles_per_s=%.1f cpu_percent=%.1f user_percent=%.1f\n",
           cycles - cycles0, wall, (cycles - cycles0) / wall, 100.0 * (cpu1 - cpu0) / wall,
           100.0 * (user1 - user0) / wall);
    return 0;
}
